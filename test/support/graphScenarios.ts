/**
 * The cluster configs the graph tests build (test/unit/graph.test.ts and test/unit/clusterPlan.test.ts
 * on the plan alone, test/mocked/materialize.test.ts a few of them on Pulumi's mocks), and what a
 * mocked step reports of the node it ran on: like the lab, a `*-probe` step (ibdev2netdev) reports the Spark's twins Up (nothing on a
 * node named thor-*, which has no RoCE), the PFC step reports `status=enabled`.
 */
import { deriveSecret } from "../../components/clusterSecrets";
import { sparkPair } from "./fixtures";

/** ibdev2netdev on a lab Spark: both twins, linked up. */
export const LAB_IBDEV2NETDEV = "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)\nroceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)\n";

/** The host key a mocked SSH step reports. */
export const MOCK_HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGraphTestHostKeyGraphTestHostKeyGraphTest";

/** One cluster config: its SparkCluster's name, its stack config values and which keys are secret. */
export interface Scenario {
    /** The SparkCluster's name (the stack name in index.ts). */
    clusterName: string;
    /** Stack config values below the spark-cluster: namespace. */
    values: Record<string, unknown>;
    /** Keys set with --secret. */
    secretKeys: string[];
    /**
     * What each node's mocked SSH step reports of its host key, by node name: "presented" (the
     * default) the key its handshake presented (`presentedHostKey`) and printed, as this provider
     * records it; "printed" only the printed one (a step last run before the provider recorded
     * keys); "none" neither.
     */
    hostKeys?: Record<string, "presented" | "printed" | "none">;
}

/** The key and value Pulumi marks a serialized secret with (runtime/rpc.ts); a recorded graph marks its secrets so too. */
export const SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d";
export const SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270";

/** The value the mocks give a RandomSecret (`spark-remote:index:RandomSecret`) of this name and generation. */
export function mockRandomSecret(name: string, generation: string): string {
    return `mock random secret of ${name}, generation ${generation}`;
}

/** A secret the program derives from the mocked root secret of stack `dev` (generation "1", the default, unless given). */
export function mockDerivedSecret(purpose: string, generation = "1"): string {
    return deriveSecret(mockRandomSecret("dev-root-secret", generation), purpose);
}

/** The image ID a mocked engine probe reports on a node of the docker runtime (as docker prints one: sha256 and 64 hex digits). */
export const MOCK_IMAGE_ID = `sha256:${"5c".repeat(32)}`;

/** How the node of an SSH step `name` reports its host key in `scenario`. */
export function sshHostKey(scenario: Scenario, name: string): "presented" | "printed" | "none" {
    return scenario.hostKeys?.[name.replace(/-ssh$/, "")] ?? "presented";
}

/** The `stdout` a mocked step reports. */
export function mockStdout(scenario: Scenario, name: string): string {
    if (name.endsWith("-ssh")) {
        const printed = sshHostKey(scenario, name) === "none" ? "" : `host-key=${MOCK_HOST_KEY}\n`;
        return `ssh ok: ${name.replace(/-ssh$/, "")}\n${printed}`;
    }
    if (name.endsWith("-vllm-probe")) {
        // What the default image (and a venv of the same vLLM) reports: every node agrees.
        // (An SGLang probe, model.engine sglang, reads its own line.)
        return `vllm-version=0.31.0\nsglang-version=0.5.23\n${name.startsWith("thor-") ? "" : `image-id=${MOCK_IMAGE_ID}\n`}`;
    }
    if (name.endsWith("-lldp-probe")) {
        // As on the lab's nodes: no lldpd.
        return "lldp=absent\n";
    }
    if (name.endsWith("-probe")) {
        return name.startsWith("thor-") ? "" : LAB_IBDEV2NETDEV;
    }
    if (name.endsWith("-roce-apply")) {
        return "[spark-cluster] PFC 0,0,0,1,0,0,0,0 set\nstatus=enabled: test";
    }
    return "";
}

export const API_KEY = "graph-test-api-key-0123456789abcdef";
export const HF_TOKEN = "hf_graphTestToken0123456789";
export const SSH_KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAAgraphtestkeybody";
export const SSH_KEY = `-----BEGIN OPENSSH PRIVATE KEY-----\n${SSH_KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----`;
export const SECRET_KEYS = ["sshPrivateKey", "apiKey", "hfToken"];
export const RAY_TOKEN = "0123456789abcdef0123456789abcdef-rotated";
export const OPEN_WEBUI_PASSWORD = "graph-test-open-webui-admin-password";

/** A Thor on a venv, cabled to spark-a by its one interface `iface`. */
function thorNode(iface: Record<string, string>): Record<string, unknown> {
    return { name: "thor-1", kind: "thor", ssh: { host: "10.0.0.27" }, runtime: { kind: "venv", path: "/opt/vllm-venv" }, interconnect: [iface] };
}

/** spark-a cabled to a Thor: one link, so one interface. */
export function sparkForThor(): Record<string, unknown> {
    return { ...sparkPair()[0], interconnect: [{ name: "enp1s0f1np1", address: "192.168.100.11/24" }] };
}

export function baseValues(): Record<string, unknown> {
    return {
        nodes: sparkPair(),
        interconnect: { topology: "pair", mtu: 9000 },
        nccl: { debug: "WARN" },
        model: { source: "Qwen/Qwen2.5-7B-Instruct", servedName: "qwen2.5-7b", gpuMemoryUtilization: 0.85, executor: "ray" },
        sshPrivateKey: SSH_KEY,
        apiKey: API_KEY,
        hfToken: HF_TOKEN,
        // As in the lab stack; the "withCheck" scenario turns the NCCL check on.
        check: { enabled: false },
    };
}

/** The base config with one key changed. */
export function withChange(change: (values: Record<string, unknown>) => void): Record<string, unknown> {
    const values = baseValues();
    change(values);
    return values;
}

export type ModelValues = Record<string, unknown>;

export const RING = ["spark-a", "spark-b", "spark-c", "spark-d"];
/** Four Sparks in a ring (lab ring-4): node i's port 0 to node i+1's port 1, one /31 per cable; mp executor, the NCCL check on. */
export function ringValues(): Record<string, unknown> {
    const values = baseValues();
    values.nodes = RING.map((name, i) => ({
        name,
        kind: "spark",
        ...(i === 0 ? { head: true } : {}),
        ssh: { host: `10.0.0.${11 + i}` },
        interconnect: [
            { name: "enp1s0f0np0", address: `192.168.200.${2 * i}/31` },
            { name: "enp1s0f1np1", address: `192.168.200.${2 * ((i + 3) % 4) + 1}/31` },
        ],
    }));
    values.interconnect = {
        topology: "ring",
        mtu: 9000,
        cables: RING.map((name, i) => ({ a: { node: name, port: "enp1s0f0np0" }, b: { node: RING[(i + 1) % 4], port: "enp1s0f1np1" } })),
    };
    (values.model as ModelValues).executor = "mp";
    values.check = { enabled: true };
    return values;
}

/** Both nodes on one venv, the mp executor, and `engine` (SGLang needs a runtime named on every node). */
export function withVenvMp(engine: "vllm" | "sglang"): Record<string, unknown> {
    return withChange((v) => {
        v.nodes = (v.nodes as Record<string, unknown>[]).map((n) => ({ ...n, runtime: { kind: "venv", path: "/opt/serving-venv" } }));
        (v.model as ModelValues).executor = "mp";
        (v.model as ModelValues).engine = engine;
    });
}

export const SCENARIOS: Readonly<Record<string, Scenario>> = {
    base: { clusterName: "dev", values: baseValues(), secretKeys: SECRET_KEYS },
    baseAgain: { clusterName: "dev", values: baseValues(), secretKeys: SECRET_KEYS },
    modelSource: {
        clusterName: "dev",
        values: withChange((v) => ((v.model as ModelValues).source = "Qwen/Qwen2.5-14B-Instruct")),
        secretKeys: SECRET_KEYS,
    },
    servedName: {
        clusterName: "dev",
        values: withChange((v) => ((v.model as ModelValues).servedName = "qwen")),
        secretKeys: SECRET_KEYS,
    },
    modelEnv: {
        clusterName: "dev",
        values: withChange((v) => ((v.model as ModelValues).env = { VLLM_USE_FLASHINFER_MOE_FP4: "1" })),
        secretKeys: SECRET_KEYS,
    },
    dockerOptions: {
        clusterName: "dev",
        values: withChange((v) => {
            const [a] = v.nodes as Record<string, unknown>[];
            a.runtime = { kind: "docker", extraOptions: ["--ulimit=nofile=1048576:1048576", "--cap-add=IPC_LOCK"] };
        }),
        secretKeys: SECRET_KEYS,
    },
    readyTimeout: {
        clusterName: "dev",
        values: withChange((v) => ((v.model as ModelValues).readyTimeoutSeconds = 1800)),
        secretKeys: SECRET_KEYS,
    },
    mtu: { clusterName: "dev", values: withChange((v) => (v.interconnect = { topology: "pair", mtu: 1500 })), secretKeys: SECRET_KEYS },
    ncclDebug: { clusterName: "dev", values: withChange((v) => (v.nccl = { debug: "INFO" })), secretKeys: SECRET_KEYS },
    apiKey: {
        clusterName: "dev",
        values: withChange((v) => (v.apiKey = "graph-test-rotated-key-fedcba9876543210")),
        secretKeys: SECRET_KEYS,
    },
    withCheck: { clusterName: "dev", values: withChange((v) => (v.check = { enabled: true })), secretKeys: SECRET_KEYS },
    withRdmaBandwidth: {
        clusterName: "dev",
        values: withChange((v) => {
            v.check = { enabled: true };
            v.interconnect = { topology: "pair", mtu: 9000, linkCheck: { rdmaBandwidth: { enabled: true, minGbps: 80 } } };
        }),
        secretKeys: SECRET_KEYS,
    },
    withCheckDebug: {
        clusterName: "dev",
        values: withChange((v) => {
            v.check = { enabled: true };
            v.nccl = { debug: "INFO" };
        }),
        secretKeys: SECRET_KEYS,
    },
    pinnedHostKey: {
        clusterName: "dev",
        values: withChange((v) => {
            const nodes = v.nodes as Record<string, Record<string, unknown>>[];
            nodes[0].ssh = { ...nodes[0].ssh, hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIConfiguredConfiguredConfiguredConfigured" };
        }),
        secretKeys: SECRET_KEYS,
    },
    // spark-a's SSH step last ran before the provider recorded the key it presented (it printed it);
    // spark-b's neither recorded nor printed one.
    hostKeyUnknown: { clusterName: "dev", values: withChange(() => undefined), secretKeys: SECRET_KEYS, hostKeys: { "spark-a": "printed", "spark-b": "none" } },
    secretsGeneration: { clusterName: "dev", values: withChange((v) => (v.secretsGeneration = "2")), secretKeys: SECRET_KEYS },
    rayToken: {
        clusterName: "dev",
        values: withChange((v) => (v.rayAuthToken = RAY_TOKEN)),
        secretKeys: [...SECRET_KEYS, "rayAuthToken"],
    },
    sparkThor: {
        clusterName: "dev",
        values: {
            nodes: [sparkForThor(), thorNode({ name: "mgbe0_0", address: "192.168.100.27/24" })],
            interconnect: { topology: "pair" },
            model: { source: "Qwen/Qwen2.5-7B-Instruct", tensorParallel: 1, pipelineParallel: 2, executor: "ray" },
            sshPrivateKey: SSH_KEY,
            apiKey: API_KEY,
        },
        secretKeys: SECRET_KEYS,
    },
    thorUnnamed: {
        clusterName: "dev",
        values: {
            nodes: [sparkForThor(), thorNode({ address: "192.168.100.27/24" })],
            model: { source: "Qwen/Qwen2.5-7B-Instruct", tensorParallel: 1, pipelineParallel: 2 },
            sshPrivateKey: SSH_KEY,
            apiKey: API_KEY,
        },
        secretKeys: SECRET_KEYS,
    },
    mp: {
        clusterName: "dev",
        values: withChange((v) => ((v.model as ModelValues).executor = "mp")),
        secretKeys: SECRET_KEYS,
    },
    // The engine switch (issue 21): the same venv nodes, mp executor, vLLM then SGLang.
    mpVenv: { clusterName: "dev", values: withVenvMp("vllm"), secretKeys: SECRET_KEYS },
    mpVenvSglang: { clusterName: "dev", values: withVenvMp("sglang"), secretKeys: SECRET_KEYS },
    localModel: {
        clusterName: "dev",
        // With the mp executor: the ray executor refuses a local path outside the HF cache on docker nodes.
        values: withChange((v) => {
            (v.model as ModelValues).source = "/models/qwen2.5-7b";
            (v.model as ModelValues).executor = "mp";
        }),
        secretKeys: SECRET_KEYS,
    },
    removeCache: {
        clusterName: "dev",
        values: withChange((v) => ((v.model as ModelValues).removeCacheOnDestroy = true)),
        secretKeys: SECRET_KEYS,
    },
    paused: {
        clusterName: "dev",
        values: withChange((v) => ((v.model as ModelValues).paused = true)),
        secretKeys: SECRET_KEYS,
    },
    mpPaused: {
        clusterName: "dev",
        values: withChange((v) => {
            (v.model as ModelValues).executor = "mp";
            (v.model as ModelValues).paused = true;
        }),
        secretKeys: SECRET_KEYS,
    },
    unpaused: {
        clusterName: "dev",
        values: withChange((v) => ((v.model as ModelValues).paused = false)),
        secretKeys: SECRET_KEYS,
    },
    openWebui: {
        clusterName: "dev",
        values: withChange((v) => {
            v.frontend = { openWebui: { enabled: true, adminEmail: "admin@example.com", runtime: { kind: "venv", wheelhouse: "/srv/wheels" } } };
            v.openWebuiAdminPassword = OPEN_WEBUI_PASSWORD;
        }),
        secretKeys: [...SECRET_KEYS, "openWebuiAdminPassword"],
    },
    openWebuiOff: {
        clusterName: "dev",
        values: withChange((v) => (v.frontend = { openWebui: { enabled: false } })),
        secretKeys: SECRET_KEYS,
    },
    ring4: { clusterName: "dev", values: ringValues(), secretKeys: SECRET_KEYS },
    metrics: { clusterName: "dev", values: withChange((v) => (v.metrics = { enabled: true })), secretKeys: SECRET_KEYS },
    firewallOff: { clusterName: "dev", values: withChange((v) => (v.firewall = { enabled: false })), secretKeys: SECRET_KEYS },
    apiAllowed: { clusterName: "dev", values: withChange((v) => (v.firewall = { apiAllowFrom: ["192.168.1.0/24"] })), secretKeys: SECRET_KEYS },
};
