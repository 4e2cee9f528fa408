/**
 * The renderers (components/render/): every file and argv the project puts on a node, pinned by
 * readable snapshots in test/unit/__snapshots__/render.*.snap, rendered from typed specs shaped like
 * the lab's two Sparks (twin interfaces, RoCE on both twins) and like a Spark + Thor cluster on
 * sockets. Table tests cover the pure logic around them, and every rendered bash script goes
 * through `bash -n`.
 *
 * Snapshots: a missing one fails; `UPDATE_SNAPSHOTS=1` (re)writes them (see test/support/snapshot.ts).
 */
import { describe, it, mock, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { ConfigError, DockerRuntime, RaySchema, Runtime, parseConfig } from "../../config";
import { compareVersions, hcasFor, rayAuthStatus, resolveInterfaceNames } from "../../components/nodeFacts";
import { hardwareProbe, rayProbe } from "../../components/render/probe";
import { HOST_KEY_PREFIX, SSH_READY_SCRIPT, hostKeyFingerprint, hostKeyToPin, noHostKeyMessage, recordedHostKey } from "../../components/hostKey";
import { installFileFromStdinScript, installFilesScript, installUnitScript, removeFilesScript, removeUnitScript } from "../../components/render/host/files";
import { journalTailLine } from "../../components/render/host/journal";
import { gateDir } from "../../components/render/watchdog";
import { HOST_LIB } from "../../components/render/host/lib";
import { dockerRunArgv, execBeside, runtimeStrategy } from "../../components/render/host/runtime";
import { ncclCheckCommand } from "../../components/render/check";
import {
    HEREDOC_DELIMITER,
    HEREDOC_FALLBACK_PREFIX,
    bashScript,
    contentHash,
    heredoc,
    remoteCommand,
    shellJoin,
    shellQuote,
} from "../../components/render/host/shell";
import { systemdJoin } from "../../components/render/host/systemd";
import { NcclSpec, ncclVariables, renderNcclConf, renderRuntimeEnv } from "../../components/render/nccl";
import { NETPLAN_APPLY_LIB, NetplanSpec, netplanApplyScript, netplanDeleteScript, renderNetplan } from "../../components/render/netplan";
import {
    CONFIG_DIR,
    CONTAINER_NAMES,
    FIREWALLED_UNITS,
    MANAGED_MARKER,
    NCCL_CONF_PATH,
    NETPLAN_PATH,
    RAY_ENV_PATH,
    RUNTIME_ENV_PATH,
    UNITS as UNIT_NAMES,
    VLLM_SECRETS_PATH,
    firewallDropInPath,
    unitPath,
} from "../../config/hostPaths";
import {
    FirewallSpec,
    firewallApplyScript,
    firewallReadScript,
    firewallRemoveScript,
    renderFirewallDropIn,
    renderFirewallRules,
    renderFirewallUnit,
} from "../../components/render/firewall";
import { PfcSpec, pfcApplyScript, pfcRestoreScript, pfcVector, renderPeermemConf, renderPfcUnit } from "../../components/render/pfc";
import {
    RAY_WORKER_GCS_WAIT_SECONDS,
    RayPorts,
    RayStartSpec,
    rayProbeArgv,
    rayReadyScript,
    rayStartArgv,
    rayPlan,
    renderRayEnv,
    renderRayUnit,
} from "../../components/render/ray";
import {
    VllmServeSpec,
    chatReadyScript,
    readinessTimeout,
    renderVllmFollowUnit,
    renderVllmSecrets,
    renderVllmUnit,
    vllmFollowArgv,
    vllmMemoryStepArgv,
    vllmPlan,
    vllmServeArgv,
} from "../../components/render/vllm";
import { PROJECT_ENV } from "../../config/hostPaths";
import { DOCKER_DEFAULT, VENV, VLLM_MP_BASE, runProbeInFakeVenv } from "../support/fixtures";
import { bashCheck, systemdSplit } from "../support/unitText";
import { argvText, matchSnapshot, unusedSnapshots } from "../support/snapshot";

// ---------------------------------------------------------------------------------------------
// Specs: the lab's two Sparks (spark-a head, spark-b), and a Spark + Thor cluster on sockets
// ---------------------------------------------------------------------------------------------

const RAY_UNIT = UNIT_NAMES.ray;
const VLLM_UNIT = UNIT_NAMES.vllm;
/** Stand-ins for the content hashes the components compute. */
const ENV_HASH = "0123456789abcdef";

const DOCKER_UNPRIVILEGED: DockerRuntime = {
    kind: "docker",
    image: "registry.example.com/vllm:custom",
    privileged: false,
    memlockUnlimited: false,
    infiniband: false,
    shmSize: "32g",
};

const SPARK_A_NETPLAN: NetplanSpec = {
    node: "spark-a",
    mtu: 9000,
    interfaces: [
        { name: "enp1s0f1np1", address: "192.168.100.11/24" },
        { name: "enP2p1s0f1np1", address: "192.168.101.11/24" },
    ],
    peers: [
        { node: "spark-b", ip: "192.168.100.12", via: "enp1s0f1np1" },
        { node: "spark-b", ip: "192.168.101.12", via: "enP2p1s0f1np1" },
    ],
    linkCheck: { minSpeedMbps: 200000, lowSpeed: "refuse" },
};
const THOR_NETPLAN: NetplanSpec = {
    node: "thor-1",
    mtu: 1500,
    interfaces: [{ name: "mgbe0_0", address: "192.168.100.27/24" }],
    peers: [{ node: "spark-a", ip: "192.168.100.11", via: "mgbe0_0" }],
    linkCheck: { lowSpeed: "warn" },
};

const NCCL_ROCE: NcclSpec = {
    transport: "roce",
    socketIfname: "enp1s0f1np1",
    interfaceName: "enp1s0f1np1",
    ibHca: ["rocep1s0f1", "roceP2p1s0f1"],
    heterogeneous: false,
    ibTrafficClass: 106,
    debug: "WARN",
    overrides: {},
};
const NCCL_SOCKET: NcclSpec = {
    transport: "socket",
    // NCCL's selector syntax; Gloo and torch TP still get the plain interface.
    socketIfname: "^lo,docker",
    interfaceName: "enp1s0f1np1",
    ibHca: [],
    heterogeneous: false,
    debug: "INFO",
    overrides: {},
};
const NCCL_SOCKET_THOR: NcclSpec = {
    transport: "socket",
    socketIfname: "mgbe0_0",
    interfaceName: "mgbe0_0",
    ibHca: [],
    heterogeneous: true,
    debug: "WARN",
    // NCCL_PROTO replaces the rendered Simple in place; NCCL_BUFFSIZE is appended.
    overrides: { NCCL_PROTO: "LL", NCCL_BUFFSIZE: "8388608" },
};
const NCCL_CASES: readonly { name: string; spec: NcclSpec; nodeIp: string }[] = [
    { name: "roce-two-hcas", spec: NCCL_ROCE, nodeIp: "192.168.100.11" },
    { name: "socket-homogeneous", spec: NCCL_SOCKET, nodeIp: "192.168.100.11" },
    { name: "socket-heterogeneous-overrides", spec: NCCL_SOCKET_THOR, nodeIp: "192.168.100.27" },
];

/** Ray's pinned ports as config defaults them. */
const RAY_PORTS: RayPorts = RaySchema.parse({});
const RAY_HEAD: RayStartSpec = {
    role: "head",
    nodeIp: "192.168.100.11",
    headIp: "192.168.100.11",
    port: 6379,
    gpus: 1,
    dashboardHost: "127.0.0.1",
    dashboardPort: 8265,
    ports: RAY_PORTS,
};
const RAY_WORKER: RayStartSpec = {
    role: "worker",
    nodeIp: "192.168.100.12",
    headIp: "192.168.100.11",
    port: 6379,
    gpus: 1,
    numCpus: 20,
    objectStoreMemoryMb: 100,
    dashboardHost: "127.0.0.1",
    dashboardPort: 8265,
    ports: RAY_PORTS,
};

const VLLM_RAY_FULL: VllmServeSpec = {
    source: "Qwen/Qwen2.5-72B-Instruct",
    servedName: "qwen2.5-72b",
    tensorParallel: 2,
    pipelineParallel: 1,
    executor: "ray",
    apiHost: "0.0.0.0",
    apiPort: 8000,
    gpuMemoryUtilization: 0.85,
    maxModelLen: 16384,
    maxNumSeqs: 64,
    quantization: "fp8",
    kvCacheDtype: "fp8",
    enforceEager: true,
    attentionBackend: "TRITON_ATTN",
    trustRemoteCode: true,
    extraArgs: ["--max-num-batched-tokens=8192", "--disable-custom-all-reduce"],
    env: {},
    readyTimeoutSeconds: 600,
};
const VLLM_MP_RANK0: VllmServeSpec = {
    ...VLLM_MP_BASE,
    multiNode: { nnodes: 2, rank: 0, masterAddr: "192.168.100.11", masterPort: 29500 },
};
const VLLM_MP_RANK1: VllmServeSpec = {
    ...VLLM_MP_BASE,
    multiNode: { nnodes: 2, rank: 1, masterAddr: "192.168.100.11", masterPort: 29500 },
};
/** Rank 0 on a Spark (unified memory) with a fixed KV budget of 8 GiB. */
const VLLM_MP_RANK0_UMA: VllmServeSpec = { ...VLLM_MP_RANK0, unifiedMemory: true, gpuMemoryUtilization: 0.18, kvCacheMemoryBytes: 8 * 2 ** 30 };

/** The ID of the image a node's engine probe found (docker), which the serving units start instead of the tag. */
const IMAGE_ID = `sha256:${"4e".repeat(32)}`;

/**
 * The units as the components render them (renderRayUnit, renderVllmUnit), with the argv each runs;
 * two docker units through their plans with the probed image's ID (components/plan/clusterPlan.ts
 * makes them so), one docker unit without an ID (the tag).
 */
const UNITS: readonly { name: string; unit: string; argv: string[]; runtime: Runtime; preStart?: string[][] }[] = [
    {
        name: "ray-head.docker-privileged",
        unit: rayPlan(RAY_HEAD, DOCKER_DEFAULT).unit(ENV_HASH, IMAGE_ID),
        argv: rayStartArgv(RAY_HEAD),
        runtime: DOCKER_DEFAULT,
    },
    {
        name: "ray-worker.venv",
        unit: renderRayUnit(RAY_WORKER, VENV, ENV_HASH),
        argv: rayStartArgv(RAY_WORKER),
        runtime: VENV,
    },
    {
        name: "vllm-ray.docker-unprivileged",
        unit: renderVllmUnit(VLLM_RAY_FULL, DOCKER_UNPRIVILEGED, ENV_HASH, "192.168.100.11:6379"),
        argv: vllmServeArgv(VLLM_RAY_FULL),
        runtime: DOCKER_UNPRIVILEGED,
    },
    { name: "vllm-mp-rank1.venv", unit: renderVllmUnit(VLLM_MP_RANK1, VENV, ENV_HASH), argv: vllmServeArgv(VLLM_MP_RANK1), runtime: VENV },
    {
        name: "vllm-mp-rank0.docker-unified-memory",
        unit: vllmPlan(VLLM_MP_RANK0_UMA, DOCKER_DEFAULT).unit(ENV_HASH, [], IMAGE_ID),
        argv: vllmServeArgv(VLLM_MP_RANK0_UMA),
        runtime: DOCKER_DEFAULT,
        preStart: [vllmMemoryStepArgv(VLLM_MP_RANK0_UMA.source)],
    },
    {
        name: "vllm-local-model.venv-unified-memory",
        unit: renderVllmUnit({ ...VLLM_MP_BASE, source: "/models/my model", unifiedMemory: true }, VENV, ENV_HASH),
        argv: vllmServeArgv({ ...VLLM_MP_BASE, source: "/models/my model" }),
        runtime: VENV,
        preStart: [vllmMemoryStepArgv("/models/my model")],
    },
];

const PFC_TWINS: PfcSpec = {
    interfaces: ["enp1s0f1np1", "enP2p1s0f1np1"],
    pfcVector: pfcVector(3),
    trustDscp: true,
    priority: 3,
    dscp: 26,
    peermem: true,
    unitContent: renderPfcUnit(["enp1s0f1np1", "enP2p1s0f1np1"], 3, true, 26),
    peermemConf: renderPeermemConf(),
};
const PFC_NO_INTERFACES: PfcSpec = {
    interfaces: [],
    pfcVector: pfcVector(3),
    trustDscp: true,
    priority: 3,
    dscp: 26,
    peermem: true,
    unitContent: renderPfcUnit([], 3, true, 26),
    peermemConf: renderPeermemConf(),
};
const PFC_ONE_LOSSY_TRUST: PfcSpec = {
    interfaces: ["enp1s0f0np0"],
    pfcVector: pfcVector(5),
    trustDscp: false,
    priority: 5,
    dscp: 26,
    peermem: false,
    unitContent: renderPfcUnit(["enp1s0f0np0"], 5, false, 26),
    peermemConf: renderPeermemConf(),
};

const NCCL_FILES = [
    { path: NCCL_CONF_PATH, mode: "644" as const, content: renderNcclConf(NCCL_ROCE) },
    { path: RUNTIME_ENV_PATH, mode: "644" as const, content: renderRuntimeEnv({ nccl: NCCL_ROCE, nodeIp: "192.168.100.11", reader: "docker" }) },
];
const RAY_STATUS = execBeside(DOCKER_DEFAULT, CONTAINER_NAMES.ray, ["ray", "status", "--address=192.168.100.11:6379"]);
const RAY_PROBE = execBeside(DOCKER_DEFAULT, CONTAINER_NAMES.ray, rayProbeArgv("192.168.100.11:6379", 2, 2));
const RAY_AWAIT = runtimeStrategy(DOCKER_DEFAULT).awaitContainer(CONTAINER_NAMES.ray, RAY_UNIT, 60);

/** Every bash script the renderers produce, by snapshot name. */
const SCRIPTS: readonly { name: string; script: string }[] = [
    { name: "netplan-apply.spark-a.sh", script: netplanApplyScript(SPARK_A_NETPLAN) },
    { name: "netplan-apply.thor-1.sh", script: netplanApplyScript(THOR_NETPLAN) },
    { name: "netplan-delete.spark-a.sh", script: netplanDeleteScript(SPARK_A_NETPLAN) },
    { name: "pfc-apply.twins.sh", script: pfcApplyScript(PFC_TWINS) },
    { name: "pfc-apply.no-interfaces.sh", script: pfcApplyScript(PFC_NO_INTERFACES) },
    { name: "pfc-apply.one-no-trust-no-peermem.sh", script: pfcApplyScript(PFC_ONE_LOSSY_TRUST) },
    { name: "pfc-restore.twins.sh", script: pfcRestoreScript(PFC_TWINS) },
    { name: "install-unit.vllm.sh", script: installUnitScript(VLLM_UNIT, UNITS[2].unit) },
    { name: "remove-unit.ray.sh", script: removeUnitScript(RAY_UNIT) },
    { name: "ray-ready.docker.sh", script: rayReadyScript(RAY_PROBE, RAY_STATUS, RAY_ENV_PATH, RAY_AWAIT) },
    {
        name: "chat-ready.sh",
        script: chatReadyScript({ port: 8000, model: "qwen2.5-72b", envFile: VLLM_SECRETS_PATH, reader: "docker", unit: VLLM_UNIT }),
    },
    { name: "install-files.nccl.sh", script: installFilesScript(NCCL_FILES) },
    { name: "remove-files.nccl.sh", script: removeFilesScript([NCCL_CONF_PATH, RUNTIME_ENV_PATH], [CONFIG_DIR]) },
    { name: "install-file-from-stdin.vllm-secrets.sh", script: installFileFromStdinScript(VLLM_SECRETS_PATH, "600") },
    {
        name: "install-file-from-stdin.vllm-secrets-restart.sh",
        script: installFileFromStdinScript(VLLM_SECRETS_PATH, "600", VLLM_UNIT, "now", [gateDir(VLLM_UNIT)]),
    },
];

// ---------------------------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------------------------

describe("netplan", () => {
    it("renders the lab Spark's twins and a Thor's single interface", () => {
        matchSnapshot("render.netplan.spark-a.yaml", renderNetplan(SPARK_A_NETPLAN));
        matchSnapshot("render.netplan.thor-1.yaml", renderNetplan(THOR_NETPLAN));
    });

    it("is valid YAML that names only the interconnect interfaces, static, with the MTU", () => {
        for (const spec of [SPARK_A_NETPLAN, THOR_NETPLAN]) {
            const text = renderNetplan(spec);
            assert.ok(text.startsWith(`# ${MANAGED_MARKER}\n`), "the marker is on the first line");
            const doc = yaml.load(text) as { network: { version: number; renderer: string; ethernets: Record<string, Record<string, unknown>> } };
            assert.equal(doc.network.version, 2);
            assert.equal(doc.network.renderer, "networkd");
            assert.deepEqual(Object.keys(doc.network), ["version", "renderer", "ethernets"], "no bonds, bridges, vlans or routes");
            assert.deepEqual(
                Object.keys(doc.network.ethernets),
                spec.interfaces.map((i) => i.name),
            );
            for (const iface of spec.interfaces) {
                assert.deepEqual(doc.network.ethernets[iface.name], {
                    dhcp4: false,
                    dhcp6: false,
                    "link-local": [],
                    addresses: [iface.address],
                    mtu: spec.mtu,
                    optional: true,
                });
            }
        }
    });

    it("apply and delete scripts", () => {
        matchSnapshot("render.netplan-apply.spark-a.sh", netplanApplyScript(SPARK_A_NETPLAN));
        matchSnapshot("render.netplan-apply.thor-1.sh", netplanApplyScript(THOR_NETPLAN));
        matchSnapshot("render.netplan-delete.spark-a.sh", netplanDeleteScript(SPARK_A_NETPLAN));
    });

    it("the apply script pings every peer over its own link and installs the rendered file", () => {
        const script = netplanApplyScript(SPARK_A_NETPLAN);
        assert.ok(script.includes("ping -c 1 -W 1 -I enp1s0f1np1 192.168.100.12"));
        assert.ok(script.includes("ping -c 1 -W 1 -I enP2p1s0f1np1 192.168.101.12"));
        assert.ok(script.includes(renderNetplan(SPARK_A_NETPLAN)), "the file content is in the script verbatim");
        assert.ok(script.includes(`sc_install_file ${NETPLAN_PATH} 600`), "netplan files are root-only");
    });
});

describe("nccl.conf and runtime.env", () => {
    for (const { name, spec, nodeIp } of NCCL_CASES) {
        it(name, () => {
            matchSnapshot(`render.nccl.${name}.conf`, renderNcclConf(spec));
            matchSnapshot(`render.runtime-env.${name}.env`, renderRuntimeEnv({ nccl: spec, nodeIp, reader: "docker" }));
        });
    }

    it("runtime.env is KEY=value lines for docker's --env-file, and KEY=\"quoted\" for systemd's EnvironmentFile", () => {
        for (const { spec, nodeIp } of NCCL_CASES) {
            const docker = renderRuntimeEnv({ nccl: spec, nodeIp, reader: "docker" }).trimEnd().split("\n");
            const systemd = renderRuntimeEnv({ nccl: spec, nodeIp, reader: "systemd" }).trimEnd().split("\n");
            assert.equal(docker[0], `# ${MANAGED_MARKER}`);
            assert.equal(systemd[0], `# ${MANAGED_MARKER}`);
            assert.ok(docker.includes(`VLLM_HOST_IP=${nodeIp}`));
            assert.ok(systemd.includes(`VLLM_HOST_IP="${nodeIp}"`));
            for (const line of docker.slice(1)) {
                assert.match(line, /^[A-Z][A-Z0-9_]*=[^\n]*$/);
            }
        }
    });
});

describe("ray start and vllm serve argv", () => {
    it("ray start: head and worker", () => {
        matchSnapshot("render.ray-start.head.argv", argvText(rayStartArgv(RAY_HEAD)));
        matchSnapshot("render.ray-start.worker.argv", argvText(rayStartArgv(RAY_WORKER)));
    });

    it("vllm serve: ray executor with every option, mp rank 0 and headless rank 1", () => {
        matchSnapshot("render.vllm-serve.ray-full.argv", argvText(vllmServeArgv(VLLM_RAY_FULL)));
        matchSnapshot("render.vllm-serve.mp-rank0.argv", argvText(vllmServeArgv(VLLM_MP_RANK0)));
        matchSnapshot("render.vllm-serve.mp-rank1-headless.argv", argvText(vllmServeArgv(VLLM_MP_RANK1)));
    });

    it("only rank 0 listens; a headless rank has no --host/--port", () => {
        const rank0 = vllmServeArgv(VLLM_MP_RANK0);
        const rank1 = vllmServeArgv(VLLM_MP_RANK1);
        assert.ok(rank0.includes("--port") && !rank0.includes("--headless"));
        assert.ok(rank1.includes("--headless") && !rank1.includes("--port") && !rank1.includes("--host"));
        assert.ok(!vllmServeArgv(VLLM_RAY_FULL).includes("--nnodes"), "the ray executor has no multi-node flags");
    });

    it("the worker joins the head's GCS on the interconnect, the head binds the dashboard to loopback", () => {
        assert.ok(rayStartArgv(RAY_WORKER).includes("--address=192.168.100.11:6379"));
        assert.ok(!rayStartArgv(RAY_WORKER).includes("--head"));
        assert.ok(rayStartArgv(RAY_HEAD).includes("--dashboard-host=127.0.0.1"));
        assert.ok(rayStartArgv(RAY_WORKER).includes(`--object-store-memory=${100 * 1024 * 1024}`), "MiB are converted to bytes");
    });
});

describe("unified memory (spark, thor): the model's pages leave the page cache before vLLM starts", () => {
    it("the unit of a unified-memory node runs the memory step before vLLM, on every start; other nodes' units do not", () => {
        const uma = UNITS.find((u) => u.name === "vllm-mp-rank0.docker-unified-memory")!.unit;
        const pre = uma.split("\n").filter((l) => l.startsWith("ExecStartPre="));
        assert.equal(pre.length, 2);
        assert.match(pre[0], /^ExecStartPre=-\/usr\/bin\/docker rm -f /);
        assert.match(pre[1], /^ExecStartPre=\/bin\/bash -c .* unified-memory \/models\/qwen2\.5-7b-instruct$/);
        assert.ok(uma.indexOf("ExecStartPre=/bin/bash") < uma.indexOf("ExecStart=/usr/bin/docker"));
        for (const other of UNITS.filter((u) => u.name.startsWith("vllm") && !u.name.includes("unified-memory"))) {
            assert.doesNotMatch(other.unit, /unified-memory/);
        }
    });

    it("the step's directories: the hub cache's repository directory, or the local model directory", () => {
        assert.deepEqual(vllmMemoryStepArgv("Qwen/Qwen2.5-7B-Instruct").slice(3), [
            "unified-memory",
            "/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-7B-Instruct",
        ]);
        assert.deepEqual(vllmMemoryStepArgv("/models/my model").slice(3), ["unified-memory", "/models/my model"]);
    });

    it("the step evicts the model's files (and only them) from the page cache, logs MemFree and MemAvailable before and after, and exits 0", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "uma-step-"));
        try {
            const model = path.join(dir, "model dir");
            fs.mkdirSync(path.join(model, "snapshots"), { recursive: true });
            fs.writeFileSync(path.join(model, "weights.bin"), crypto.randomBytes(8 << 20));
            fs.symlinkSync("../weights.bin", path.join(model, "snapshots", "w.bin"));
            const other = path.join(dir, "other.bin");
            fs.writeFileSync(other, crypto.randomBytes(4 << 20));
            const resident = (file: string) => {
                const r = spawnSync("fincore", ["--bytes", "--noheadings", "--raw", "-o", "RES", file], { encoding: "utf8" });
                assert.equal(r.status, 0, r.stderr);
                return Number(r.stdout.trim());
            };
            fs.readFileSync(path.join(model, "weights.bin"));
            fs.readFileSync(other);
            assert.ok(resident(path.join(model, "weights.bin")) > 0, "the model file is in the page cache to begin with");
            const [bash, ...args] = vllmMemoryStepArgv(model);
            const r = spawnSync(bash, [...args, path.join(dir, "missing")], { encoding: "utf8", timeout: 60_000 });
            assert.equal(r.status, 0, r.stderr);
            assert.match(
                r.stdout,
                /^unified memory: MemFree \d+\.\d\d GiB, MemAvailable \d+\.\d\d GiB before evicting the model's files from the page cache$/m,
            );
            assert.match(r.stdout, /^unified memory: evicted 2 file\(s\) under .*model dir$/m);
            assert.match(r.stdout, /^unified memory: .*missing is not there, nothing to evict$/m);
            assert.match(r.stdout, /^unified memory: MemFree \d+\.\d\d GiB, MemAvailable \d+\.\d\d GiB after$/m);
            assert.equal(resident(path.join(model, "weights.bin")), 0);
            assert.ok(resident(other) > 0, "a file outside the model's directory stays cached");
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("--kv-cache-memory-bytes is rendered only when model.kvCacheMemoryBytes is set, beside the start-up check's utilization", () => {
        const argv = vllmServeArgv(VLLM_MP_RANK0_UMA);
        assert.deepEqual(argv.slice(argv.indexOf("--gpu-memory-utilization"), argv.indexOf("--gpu-memory-utilization") + 4), [
            "--gpu-memory-utilization",
            "0.18",
            "--kv-cache-memory-bytes",
            String(8 * 2 ** 30),
        ]);
        assert.ok(!vllmServeArgv(VLLM_MP_RANK0).includes("--kv-cache-memory-bytes"));
    });
});

describe("systemd units", () => {
    for (const { name, unit } of UNITS) {
        it(name, () => {
            matchSnapshot(`render.unit.${name}.service`, unit);
        });
    }

    it("docker flags follow the runtime: privileged and memlock on, then off", () => {
        const privileged = UNITS[0].unit;
        const unprivileged = UNITS[2].unit;
        assert.match(privileged, /^ExecStart=\/usr\/bin\/docker run .* --privileged --ulimit memlock=-1 /m);
        assert.match(privileged, /^Requires=docker\.service$/m);
        assert.doesNotMatch(unprivileged, /--privileged|memlock/);
        assert.match(unprivileged, /--shm-size=32g .* registry\.example\.com\/vllm:custom vllm serve /);
    });

    it("runtime.extraOptions reach the Ray and vLLM units' docker run, one token each, after the project's flags; not the NCCL check", () => {
        const options = ["--ulimit=nofile=1048576:1048576", "--mount=type=bind,source=/data/templates,target=/templates,readonly", "--cap-add=IPC_LOCK"];
        const runtime: DockerRuntime = { ...DOCKER_DEFAULT, extraOptions: options };
        for (const unit of [renderRayUnit(RAY_HEAD, runtime, ENV_HASH), renderVllmUnit(VLLM_RAY_FULL, runtime, ENV_HASH, "192.168.100.11:6379")]) {
            const execStart = unit.split("\n").find((line) => line.startsWith("ExecStart=")) ?? "";
            assert.ok(execStart.includes(` -v /tmp/ray:/tmp/ray ${options.join(" ")} --env-file `), execStart);
        }
        const check = ncclCheckCommand({ node: "spark-a", runtime, rank: 0, worldSize: 2, masterAddr: "192.168.100.11" });
        assert.match(check, /docker run -i --rm /);
        for (const option of options) assert.ok(!check.includes(option), `the NCCL check got ${option}`);
        // Without the key the units are as before.
        assert.equal(rayPlan(RAY_HEAD, { ...DOCKER_DEFAULT, extraOptions: [] }).unit(ENV_HASH, IMAGE_ID), UNITS[0].unit);
    });

    it("a docker unit starts the image by the ID its node's probe found, never the tag; without a valid ID, the tag; a venv has none", () => {
        for (const unit of [UNITS[0].unit, UNITS[4].unit]) {
            assert.match(unit, new RegExp(`^ExecStart=/usr/bin/docker run .* -- ${IMAGE_ID} `, "m"));
            assert.doesNotMatch(unit, /nvcr\.io/);
        }
        assert.equal(rayPlan(RAY_HEAD, DOCKER_DEFAULT).unit(ENV_HASH), renderRayUnit(RAY_HEAD, DOCKER_DEFAULT, ENV_HASH));
        assert.match(rayPlan(RAY_HEAD, DOCKER_DEFAULT).unit(ENV_HASH), / -- nvcr\.io\/nvidia\/vllm:26\.10-py3 ray start /);
        // Only what docker prints as an ID is started by ID (a probe's odd line falls back to the tag).
        for (const odd of ["sha256:mock", "sha256:4E4E", `${IMAGE_ID} x`, "nvcr.io/other:1", ""]) {
            assert.deepEqual(runtimeStrategy(DOCKER_DEFAULT).pinned(odd), DOCKER_DEFAULT, odd);
        }
        assert.deepEqual(runtimeStrategy(DOCKER_DEFAULT).pinned(IMAGE_ID), { ...DOCKER_DEFAULT, image: IMAGE_ID });
        assert.deepEqual(runtimeStrategy(VENV).pinned(IMAGE_ID), VENV);
        assert.equal(vllmPlan(VLLM_MP_RANK1, VENV).unit(ENV_HASH, [], IMAGE_ID), renderVllmUnit(VLLM_MP_RANK1, VENV, ENV_HASH));
    });

    it("a venv unit runs the venv's binaries, without docker", () => {
        const venv = UNITS[1].unit;
        assert.match(venv, /^ExecStart=\/opt\/vllm-venv\/bin\/ray start --block /m);
        assert.doesNotMatch(venv, /docker/);
    });

    it("every Exec line parses back, the way systemd reads it, to the argv it was built from", () => {
        for (const spec of UNITS) {
            const unit = spec.unit;
            const execStart = unit.split("\n").find((line) => line.startsWith("ExecStart="));
            assert.ok(execStart);
            const parsed = systemdSplit(execStart.slice("ExecStart=".length)).slice(-spec.argv.length);
            // A venv unit runs the venv's copy of the program: /opt/vllm-venv/bin/ray for ray.
            const program = spec.runtime.kind === "venv" ? `${spec.runtime.path}/bin/${spec.argv[0]}` : spec.argv[0];
            assert.deepEqual(parsed, [program, ...spec.argv.slice(1)]);
            for (const [i, preStart] of (spec.preStart ?? []).entries()) {
                const lines = unit.split("\n").filter((line) => line.startsWith("ExecStartPre=") && !line.startsWith("ExecStartPre=-"));
                assert.deepEqual(systemdSplit(lines[i].slice("ExecStartPre=".length)), preStart);
            }
        }
    });
});

describe("systemdJoin", () => {
    const cases: readonly { argv: string[]; line: string }[] = [
        {
            argv: ["/usr/bin/env", "mlnx_qos", "-i", "enp1s0f1np1", "--pfc", "0,0,0,1,0,0,0,0"],
            line: "/usr/bin/env mlnx_qos -i enp1s0f1np1 --pfc 0,0,0,1,0,0,0,0",
        },
        { argv: ["echo", "$HOME"], line: 'echo "$$HOME"' },
        { argv: ["echo", "${PATH}"], line: 'echo "$${PATH}"' },
        { argv: ["echo", "100%"], line: 'echo "100%%"' },
        { argv: ["echo", "%n"], line: 'echo "%%n"' },
        { argv: ["echo", 'say "hi"'], line: 'echo "say \\"hi\\""' },
        { argv: ["echo", "it's"], line: `echo "it's"` },
        { argv: ["echo", "two words"], line: 'echo "two words"' },
        { argv: ["echo", "back\\slash"], line: 'echo "back\\\\slash"' },
        { argv: ["echo", ""], line: 'echo ""' },
        { argv: ["echo", ";"], line: 'echo ";"' },
        { argv: ["--flag=a b$c%d"], line: '"--flag=a b$$c%%d"' },
    ];
    for (const { argv, line } of cases) {
        it(`${JSON.stringify(argv)} → ${line}`, () => {
            assert.equal(systemdJoin(argv), line);
            assert.deepEqual(systemdSplit(systemdJoin(argv)), argv, "systemd reads back the same argv");
        });
    }
});

describe("PFC", () => {
    it("unit: twins on priority 3 with trust dscp; one interface on priority 5 without", () => {
        matchSnapshot("render.pfc-unit.twins-p3-dscp.service", renderPfcUnit(["enp1s0f1np1", "enP2p1s0f1np1"], 3, true, 26));
        matchSnapshot("render.pfc-unit.one-p5.service", renderPfcUnit(["enp1s0f0np0"], 5, false, 26));
        matchSnapshot("render.peermem.conf", renderPeermemConf());
    });

    it("apply (with interfaces; with none; without trust and peermem) and restore", () => {
        matchSnapshot("render.pfc-apply.twins.sh", pfcApplyScript(PFC_TWINS));
        matchSnapshot("render.pfc-apply.no-interfaces.sh", pfcApplyScript(PFC_NO_INTERFACES));
        matchSnapshot("render.pfc-apply.one-no-trust-no-peermem.sh", pfcApplyScript(PFC_ONE_LOSSY_TRUST));
        matchSnapshot("render.pfc-restore.twins.sh", pfcRestoreScript(PFC_TWINS));
    });

    it("with no RoCE interface the apply script reports skipped and touches nothing", () => {
        const script = pfcApplyScript(PFC_NO_INTERFACES);
        const body = script.slice(script.indexOf("status=skipped"));
        assert.match(body, /^status=skipped: [^\n]*"\nexit 0\n/);
        const stdout = execFileSync("/bin/bash", ["-c", script], { encoding: "utf8", env: { PATH: "/nonexistent" } });
        assert.equal(stdout, "status=skipped: ibdev2netdev shows no RoCE device on the interconnect\n");
    });

    const vectors: readonly [number, string][] = [
        [0, "1,0,0,0,0,0,0,0"],
        [3, "0,0,0,1,0,0,0,0"],
        [7, "0,0,0,0,0,0,0,1"],
    ];
    for (const [priority, vector] of vectors) {
        it(`pfcVector(${priority}) = ${vector}`, () => {
            assert.equal(pfcVector(priority), vector);
        });
    }
});

describe("host scripts", () => {
    it("unit install and removal", () => {
        matchSnapshot("render.install-unit.vllm.sh", installUnitScript(VLLM_UNIT, UNITS[2].unit));
        matchSnapshot("render.remove-unit.ray.sh", removeUnitScript(RAY_UNIT));
        assert.ok(installUnitScript(VLLM_UNIT, "x\n").includes(`sc_install_file ${unitPath(VLLM_UNIT)} 644`));
    });

    it("readiness: ray status and a real chat completion", () => {
        matchSnapshot("render.ray-ready.docker.sh", rayReadyScript(RAY_PROBE, RAY_STATUS, RAY_ENV_PATH, RAY_AWAIT));
        matchSnapshot(
            "render.chat-ready.sh",
            chatReadyScript({ port: 8000, model: "qwen2.5-72b", envFile: VLLM_SECRETS_PATH, reader: "docker", unit: VLLM_UNIT }),
        );
    });

    it("managed files: install from the script, install from stdin, remove", () => {
        matchSnapshot("render.install-files.nccl.sh", installFilesScript(NCCL_FILES));
        matchSnapshot("render.install-file-from-stdin.vllm-secrets.sh", installFileFromStdinScript(VLLM_SECRETS_PATH, "600"));
        matchSnapshot("render.remove-files.nccl.sh", removeFilesScript([NCCL_CONF_PATH, RUNTIME_ENV_PATH], [CONFIG_DIR]));
    });

    it("RDMA's devices: the guides' bind mount when privileged, each device and IPC_LOCK without", () => {
        const base = { kind: "docker" as const, image: "nvcr.io/nvidia/vllm:26.10-py3", memlockUnlimited: true, shmSize: "16g" };
        const privileged = dockerRunArgv({ ...base, privileged: true, infiniband: true }, "x", []);
        assert.ok(privileged.includes("--privileged") && privileged.join(" ").includes("-v /dev/infiniband:/dev/infiniband"));
        const confined = dockerRunArgv({ ...base, privileged: false, infiniband: true }, "x", []);
        assert.ok(!confined.includes("--privileged"));
        // A bind mount of /dev/infiniband gives no access to its devices without privilege (the device cgroup).
        assert.ok(!confined.join(" ").includes("/dev/infiniband:/dev/infiniband"));
        assert.ok(confined.includes("--device=/dev/infiniband") && confined.includes("--cap-add=IPC_LOCK"));
        const none = dockerRunArgv({ ...base, privileged: false, infiniband: false }, "x", []);
        assert.ok(!none.join(" ").includes("infiniband") && !none.includes("--cap-add=IPC_LOCK"));
    });

    it("a new secrets file restarts its unit as a new series of the gate, and fails when the unit does not come back", () => {
        // The CI of 6a1b363: an API key change restarted vLLM, systemd failed to spawn its gate
        // ("Failed at step CGROUP", exit 219, read as the condition skipping the start), and the
        // readiness check waited its 600 s for a unit that was inactive. Now the gate's state goes
        // first, a skipped start is tried once more, and a second one fails the step.
        const script = installFileFromStdinScript(VLLM_SECRETS_PATH, "600", VLLM_UNIT, "now", [gateDir(VLLM_UNIT)]);
        const clear = script.indexOf(`rm -rf ${shellQuote(gateDir(VLLM_UNIT))}`);
        const restart = script.indexOf(`systemctl restart ${VLLM_UNIT}.service`);
        const active = script.indexOf(`systemctl is-active --quiet ${VLLM_UNIT}.service; then`, restart);
        assert.ok(clear > 0 && clear < restart, "the gate's state is removed before the restart");
        assert.ok(active > restart, "the unit must be active after the restart");
        assert.ok(script.indexOf(`systemctl start ${VLLM_UNIT}.service`, active) > active, "else it is started once more");
        const tail = journalTailLine(VLLM_UNIT, 40);
        assert.ok(script.slice(active).includes(`${tail}\n      exit 1\n`), "else the step prints the unit's log and fails");
        // The rank of a multi-node engine restarts with its head: nothing cleared or restarted here.
        const rank = installFileFromStdinScript(VLLM_SECRETS_PATH, "600", VLLM_UNIT, "with-head", [gateDir(VLLM_UNIT)]);
        assert.ok(!rank.includes("rm -rf") && !rank.includes("systemctl restart"));
    });

    it("ray readiness counts ALIVE nodes and their GPUs in the GCS node table, and gives up when bounded", () => {
        // A stand-in for the few names of Ray's Python API the probe uses (Ray 2.60:
        // ray._raylet.GcsClient.get_all_node_info, gcs_pb2.GcsNodeInfo.GcsNodeState.ALIVE).
        const dir = fakeRayPackage(
            "ray-ready-",
            [
                "import os, types",
                "class GcsClient:",
                "    def __init__(self, address):",
                "        assert address == '192.168.100.11:6379', address",
                "        assert os.environ.get('RAY_AUTH_TOKEN'), 'the token reaches the probe'",
                "    def get_all_node_info(self, timeout, state_filter):",
                "        assert state_filter == 0",
                "        return {i: types.SimpleNamespace(resources_total={'CPU': 20.0, 'GPU': 1.0}) for i in range(2)}",
                "",
            ].join("\n"),
        );
        try {
            const envFile = path.join(dir, "ray.env");
            fs.writeFileSync(envFile, renderRayEnv("systemd", "0123456789abcdef0123456789abcdef"));
            const run = (nodes: number, gpus: number) =>
                spawnSync("bash", ["-c", rayReadyScript(shellJoin(rayProbeArgv("192.168.100.11:6379", nodes, gpus, 0.5)), "echo ray status here", envFile)], {
                    encoding: "utf8",
                    env: { ...process.env, PYTHONPATH: dir },
                });
            const ready = run(2, 2);
            assert.equal(ready.status, 0, ready.stdout + ready.stderr);
            assert.match(ready.stdout, /ray: 2 node\(s\), 2 GPU\(s\) after [0-9.]+ s/);
            const missingNode = run(3, 2);
            assert.notEqual(missingNode.status, 0, "a missing node is not ready");
            assert.match(
                missingNode.stdout,
                /gave up after 0 s waiting for Ray at 192\.168\.100\.11:6379 to show 3 nodes and 2 GPUs; last seen: 2 node\(s\), 2 GPU\(s\)/,
            );
            assert.match(missingNode.stdout, /^ray status here$/m, "ray status, for diagnosis, when it gives up");
            assert.notEqual(run(2, 3).status, 0, "a missing GPU is not ready");
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("the head's ray readiness removes a node that is not a member (it left nodes, its Ray still runs); status's probe removes nothing", () => {
        // Ray 2.60's names the probe uses for it: NodeInfo.node_id and node_manager_address, and
        // GcsClient.drain_nodes(node_ids, timeout), which returns the IDs it drained (the GCS marks
        // each dead at once and shuts its raylet down: NodeInfoGcsService.DrainNode).
        const dir = fakeRayPackage(
            "ray-members-",
            [
                "import os, types",
                "DRAINED = os.path.join(os.environ['STUB_DIR'], 'drained')",
                "def drained():",
                "    return open(DRAINED).read().split() if os.path.exists(DRAINED) else []",
                "class GcsClient:",
                "    def __init__(self, address):",
                "        pass",
                "    def get_all_node_info(self, timeout, state_filter):",
                "        ips = ['192.168.100.21', '192.168.100.22', '192.168.100.24']",
                "        nodes = [types.SimpleNamespace(node_id=ip.encode(), node_manager_address=ip, resources_total={'GPU': 1.0}) for ip in ips]",
                "        return {n.node_id: n for n in nodes if n.node_manager_address not in drained()}",
                "    def drain_nodes(self, node_ids, timeout):",
                "        with open(DRAINED, 'a') as f:",
                "            f.write(' '.join(i.decode() for i in node_ids) + '\\n')",
                "        return list(node_ids)",
                "",
            ].join("\n"),
        );
        try {
            const envFile = path.join(dir, "ray.env");
            fs.writeFileSync(envFile, renderRayEnv("systemd", "0123456789abcdef0123456789abcdef"));
            const run = (members?: string[]) => {
                fs.rmSync(path.join(dir, "drained"), { force: true });
                const r = spawnSync(
                    "bash",
                    ["-c", rayReadyScript(shellJoin(rayProbeArgv("192.168.100.21:6379", 2, 2, 5, members)), "echo ray status here", envFile)],
                    {
                        encoding: "utf8",
                        env: { ...process.env, PYTHONPATH: dir, STUB_DIR: dir },
                    },
                );
                const drained = fs.existsSync(path.join(dir, "drained")) ? fs.readFileSync(path.join(dir, "drained"), "utf8").split(/\s+/).filter(Boolean) : [];
                return { ...r, drained };
            };
            const head = run(["192.168.100.21", "192.168.100.22"]);
            assert.equal(head.status, 0, head.stdout + head.stderr);
            assert.deepEqual(head.drained, ["192.168.100.24"], "the node that left, once");
            assert.match(head.stdout, /^\[spark-cluster\] ray: 192\.168\.100\.24 is not a member of the cluster \(no longer in nodes\): removed it$/m);
            assert.match(head.stdout, /^ray: 2 node\(s\), 2 GPU\(s\) after [0-9.]+ s$/m);
            // status's probe (no members) reads and says, and removes nothing.
            const status = run();
            assert.equal(status.status, 0, status.stdout + status.stderr);
            assert.deepEqual(status.drained, []);
            assert.match(status.stdout, /^ray: 3 node\(s\), 3 GPU\(s\) after/m);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("ray readiness in a container waits for the Ray unit's container to run before going into it", () => {
        // A docker stand-in on PATH: `inspect` says the container runs from its `runsAt`-th call
        // on; `exec` into it fails as docker's does until then ("is not running"), and runs the
        // command after.
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ray-await-"));
        try {
            const bin = path.join(dir, "bin");
            fs.mkdirSync(bin);
            const stub = (name: string, body: string) => fs.writeFileSync(path.join(bin, name), `#!/bin/bash\n${body}\n`, { mode: 0o755 });
            stub(
                "docker",
                [
                    'calls=$(( $(cat "$STUB_DIR/inspects" 2>/dev/null || echo 0) ))',
                    'case "$1" in',
                    '  inspect) echo $(( calls + 1 )) > "$STUB_DIR/inspects"; [ $(( calls + 1 )) -ge "$RUNS_AT" ] && echo true || echo false ;;',
                    '  exec) [ "$calls" -ge "$RUNS_AT" ] || { echo "Error response from daemon: container $2 is not running" >&2; exit 1; }',
                    '        echo "exec $2: ${*:3}"; echo x >> "$STUB_DIR/execs" ;;',
                    "esac",
                ].join("\n"),
            );
            stub("journalctl", 'echo "journal of $2"');
            const envFile = path.join(dir, "ray.env");
            fs.writeFileSync(envFile, "RAY_AUTH_MODE=token\n");
            const run = (runsAt: number, seconds: number) => {
                fs.rmSync(path.join(dir, "inspects"), { force: true });
                fs.rmSync(path.join(dir, "execs"), { force: true });
                const docker = runtimeStrategy(DOCKER_DEFAULT);
                const script = rayReadyScript(
                    docker.execBeside(CONTAINER_NAMES.ray, ["probe"]),
                    docker.execBeside(CONTAINER_NAMES.ray, ["ray", "status"]),
                    envFile,
                    docker.awaitContainer(CONTAINER_NAMES.ray, RAY_UNIT, seconds),
                );
                const r = spawnSync("bash", ["-c", script], {
                    encoding: "utf8",
                    env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, STUB_DIR: dir, RUNS_AT: String(runsAt) },
                    timeout: 30_000,
                });
                const execs = fs.existsSync(path.join(dir, "execs")) ? fs.readFileSync(path.join(dir, "execs"), "utf8").split("\n").filter(Boolean).length : 0;
                return { ...r, execs };
            };
            // Running from the third look on (sc_wait looks every second): the probe runs once, then.
            const late = run(3, 60);
            assert.equal(late.status, 0, late.stdout + late.stderr);
            assert.match(late.stdout, new RegExp(`^exec ${CONTAINER_NAMES.ray}: probe$`, "m"));
            assert.equal(late.execs, 1);
            // Never running within the bound (1 s): no exec at all, the unit's log, and a non-zero exit.
            const never = run(1000, 1);
            assert.notEqual(never.status, 0);
            assert.equal(never.execs, 0);
            assert.match(
                never.stdout + never.stderr,
                new RegExp(`gave up after 1 s waiting for ${RAY_UNIT}\\.service to run its container ${CONTAINER_NAMES.ray}`),
            );
            assert.match(never.stdout, new RegExp(`^journal of ${RAY_UNIT}\\.service$`, "m"));
            // Nothing to wait for in a venv: the probe runs as the unit's own process does, on the host.
            assert.deepEqual(runtimeStrategy(VENV).awaitContainer(CONTAINER_NAMES.ray, RAY_UNIT, 60), []);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("a worker starts beside the head: no wait for the head's port, Ray's own bounded retry instead", () => {
        const worker = UNITS[1].unit;
        assert.doesNotMatch(worker, /^ExecStartPre=/m);
        assert.match(worker, new RegExp(`^Environment="RAY_gcs_server_port_wait_time_s=${RAY_WORKER_GCS_WAIT_SECONDS}"$`, "m"));
        assert.doesNotMatch(UNITS[0].unit, /RAY_gcs_server_port_wait_time_s/, "the head does not change its own GCS wait");
    });

    it("a stop does not wait for Ray's drain (Ray 2.60 waits up to 30 s, as long as systemd's stop timeout)", () => {
        const [dockerHead, venvWorker] = [UNITS[0].unit, UNITS[1].unit];
        assert.match(venvWorker, /^Environment="RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0"$/m);
        assert.match(dockerHead, /^ExecStart=\/usr\/bin\/docker run .* -e RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0 /m, "inside the container");
    });
});

// ---------------------------------------------------------------------------------------------
// Every rendered bash script parses
// ---------------------------------------------------------------------------------------------

describe("the headless rank's follower unit", () => {
    const unit = renderVllmFollowUnit(VLLM_MP_RANK1, VENV);
    const argv = vllmFollowArgv("spark-cluster-vllm", VLLM_MP_RANK1.multiNode!.masterAddr, VLLM_MP_RANK1.multiNode!.masterPort);

    it("snapshot; only a headless rank has one", () => {
        assert.ok(unit);
        matchSnapshot("render.unit.vllm-follow-rank1.service", unit);
        assert.equal(renderVllmFollowUnit({ ...VLLM_MP_RANK1, multiNode: { ...VLLM_MP_RANK1.multiNode!, rank: 0 } }, VENV), undefined);
        assert.equal(renderVllmFollowUnit({ ...VLLM_MP_RANK1, multiNode: undefined }, VENV), undefined);
        assert.match(unit, /^PartOf=spark-cluster-vllm\.service$/m);
    });

    it("its ExecStart parses back to the loop's argv, and the loop passes bash -n", () => {
        const execStart = unit!.split("\n").find((line) => line.startsWith("ExecStart="));
        assert.deepEqual(systemdSplit(execStart!.slice("ExecStart=".length)), argv);
        const check = bashCheck(argv[2]);
        assert.equal(check.status, 0, check.stderr);
        assert.equal(check.stderr, "");
    });

    // The loop against stand-ins for sleep, ss, timeout and systemctl on PATH: each check reads the
    // next letter of a script (1 = a connection to the master port and the port answers, x = the
    // connection is still there but the port does not answer, 0 = no connection), `systemctl show`
    // the next MainPID, and `systemctl restart` is recorded with the check it came at.
    function follow(connections: string, pids: string, grace = 1000): string[] {
        const argv = vllmFollowArgv("spark-cluster-vllm", VLLM_MP_RANK1.multiNode!.masterAddr, VLLM_MP_RANK1.multiNode!.masterPort, grace);
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "follow-"));
        try {
            fs.writeFileSync(path.join(dir, "conn"), connections.split("").join("\n") + "\n");
            fs.writeFileSync(path.join(dir, "pids"), pids.split(" ").join("\n") + "\n");
            const next = (file: string) =>
                `n=$(( $(cat ${dir}/${file}.n 2>/dev/null || echo 0) + 1 )); echo $n > ${dir}/${file}.n; line=$(sed -n "\${n}p" ${dir}/${file})`;
            const stub = (name: string, body: string) => fs.writeFileSync(path.join(dir, name), `#!/bin/bash\n${body}\n`, { mode: 0o755 });
            // The loop ends when the connection script runs out (`sleep` fails).
            stub("sleep", `[ "$(cat ${dir}/conn.n 2>/dev/null || echo 0)" -lt "$(wc -l < ${dir}/conn)" ]`);
            stub("ss", `${next("conn")}; [ "$line" != 0 ] && echo "ESTAB 0 0 10.0.0.2:40000 $5:$8" || true`);
            // The probe of the head's port (timeout 2 bash -c 'exec 3<>/dev/tcp/…'): answers on "1", not on "x".
            stub("timeout", `[ "$(sed -n "$(cat ${dir}/conn.n)p" ${dir}/conn)" = 1 ]`);
            // The clock: each check is 2 s.
            stub("date", `echo $(( 1000 + 2 * $(cat ${dir}/conn.n 2>/dev/null || echo 0) ))`);
            stub(
                "systemctl",
                `if [ "$1" = show ]; then ${next("pids")}; echo "\${line:-$(tail -n 1 ${dir}/pids)}"; else echo "$* at $(cat ${dir}/conn.n)" >> ${dir}/log; fi`,
            );
            const run = spawnSync(argv[0], argv.slice(1), { encoding: "utf8", timeout: 20_000, env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } });
            assert.equal(run.error, undefined);
            return fs.existsSync(path.join(dir, "log")) ? fs.readFileSync(path.join(dir, "log"), "utf8").trim().split("\n") : [];
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }

    it("restarts the vLLM unit once the connection it had is gone for three checks in a row", () => {
        assert.deepEqual(follow("0001110000", "100"), ["restart --no-block spark-cluster-vllm.service at 9"]);
    });

    it("restarts it when the head's port stops answering though the connection looks open (the head's node went down)", () => {
        assert.deepEqual(follow("0111xxx11", "100"), ["restart --no-block spark-cluster-vllm.service at 7"]);
        assert.deepEqual(follow("111xx1x1", "100"), []);
    });

    it("restarts a rank it never saw in an engine once the grace has passed, and again a grace later", () => {
        // Grace 6 s = the first three checks; then three checks in a row without an engine.
        assert.deepEqual(follow("0000000", "100", 6), ["restart --no-block spark-cluster-vllm.service at 5"]);
        assert.deepEqual(follow("00000000000", "100", 6), [
            "restart --no-block spark-cluster-vllm.service at 5",
            "restart --no-block spark-cluster-vllm.service at 10",
        ]);
    });

    it("never restarts a rank that has not joined yet within the grace, nor on a gap shorter than three checks", () => {
        assert.deepEqual(follow("0000000", "100"), []);
        assert.deepEqual(follow("1100110011", "100"), []);
    });

    it("starts the watch over when the vLLM unit has a new MainPID (it restarted for another reason)", () => {
        // The connection goes away as the unit restarts (MainPID 100 -> 0 -> 200): no restart of ours.
        assert.deepEqual(follow("110000000", "100 100 100 0 200"), []);
        // Then the new process joins and loses its head again: restarted.
        assert.deepEqual(follow("1100011000", "100 100 0 200"), ["restart --no-block spark-cluster-vllm.service at 10"]);
    });
});

describe("bash -n on every rendered script", () => {
    for (const { name, script } of SCRIPTS) {
        it(name, () => {
            assert.ok(script.startsWith("set -euo pipefail\n"), "strict mode first");
            const { status, stderr } = bashCheck(script);
            assert.equal(status, 0, `bash -n failed:\n${stderr}`);
            const wrapped = bashCheck(remoteCommand(script, "ubuntu"));
            assert.equal(wrapped.status, 0, `bash -n failed on the remote command line:\n${wrapped.stderr}`);
        });
    }

    // Known product defect (reported, not fixed here): `heredoc(...) + ")"` closes the command
    // substitution on the delimiter's line (`SPARK_CLUSTER_EOF)`), so bash never sees the
    // delimiter alone on a line. bash 5.2 still ends the here-document at the `)` but warns
    // "here-document ... delimited by end-of-file" on every run; dash refuses it outright.
    test("bash -n prints no warning for any rendered script", () => {
        const warnings = SCRIPTS.map(({ name, script }) => ({ name, stderr: bashCheck(script).stderr })).filter((r) => r.stderr !== "");
        assert.deepEqual(warnings, []);
    });
});

// ---------------------------------------------------------------------------------------------
// Pure logic: table tests
// ---------------------------------------------------------------------------------------------

describe("shellQuote", () => {
    const cases: readonly [string, string][] = [
        ["enp1s0f1np1", "enp1s0f1np1"],
        ["192.168.100.11/24", "192.168.100.11/24"],
        ["--flag=a,b:c@d%e+f", "--flag=a,b:c@d%e+f"],
        ["", "''"],
        ["two words", "'two words'"],
        ["it's", `'it'"'"'s'`],
        ["$HOME", "'$HOME'"],
        ["`id`", "'`id`'"],
        ["a\nb", "'a\nb'"],
        ["'", `''"'"''`],
        ["*", "'*'"],
        ["~root", "'~root'"],
    ];
    for (const [word, quoted] of cases) {
        it(`${JSON.stringify(word)} → ${quoted}`, () => {
            assert.equal(shellQuote(word), quoted);
            const echoed = execFileSync("bash", ["-c", `printf '%s' ${shellQuote(word)}`], { encoding: "utf8" });
            assert.equal(echoed, word, "bash reads back the same word");
        });
    }

    it("shellJoin and remoteCommand keep every word intact, as root and through sudo", () => {
        const words = ["a b", "it's", "$x", "\\", ""];
        const script = bashScript([`printf '[%s]' ${shellJoin(words)}`]);
        assert.equal(remoteCommand(script, "root"), `bash -c ${shellQuote(script)}`);
        assert.equal(remoteCommand(script, "ubuntu"), `sudo -n bash -c ${shellQuote(script)}`);
        const out = execFileSync("bash", ["-c", remoteCommand(script, "root")], { encoding: "utf8" });
        assert.equal(out, words.map((w) => `[${w}]`).join(""));
    });
});

/**
 * A clock of its own in `dir`, for scripts that wait (sc_wait): `sleep` moves it on a second, `date` prints it.
 * Real time would make the waits' counts depend on the machine's load (a loaded CI runner skipped the 10 s line).
 */
function fakeClock(dir: string): void {
    fs.writeFileSync(path.join(dir, "sleep"), `#!/bin/bash\necho $(( $(cat ${dir}/clock 2>/dev/null || echo 0) + 1 )) > ${dir}/clock\n`, {
        mode: 0o755,
    });
    fs.writeFileSync(path.join(dir, "date"), `#!/bin/bash\ncat ${dir}/clock 2>/dev/null || echo 0\n`, { mode: 0o755 });
}

/**
 * A stand-in for the few names of Ray's Python API the readiness probe imports, in a temporary
 * directory to put on PYTHONPATH: gcs_pb2.GcsNodeInfo.GcsNodeState.ALIVE, and ray/_raylet.py as given.
 */
function fakeRayPackage(prefix: string, raylet: string): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    const write = (file: string, text: string) => {
        fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
        fs.writeFileSync(path.join(dir, file), text);
    };
    write("ray/__init__.py", "");
    write("ray/core/__init__.py", "");
    write("ray/core/generated/__init__.py", "");
    write("ray/core/generated/gcs_pb2.py", "class GcsNodeInfo:\n    class GcsNodeState:\n        ALIVE = 0\n");
    write("ray/_raylet.py", raylet);
    return dir;
}

describe("sc_wait", () => {
    it("retries every second, says what it waits for every 10 s, and gives up at its bound", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sc-wait-"));
        try {
            fakeClock(dir);
            const r = spawnSync(
                "bash",
                [
                    "-c",
                    bashScript([
                        HOST_LIB,
                        `n=0; ready() { n=$((n + 1)); [ "$n" -ge 3 ]; }`,
                        `sc_wait 5 "three tries" ready && echo "tries: $n at $(date)"`,
                        `n=0; never() { n=$((n + 1)); false; }`,
                        `sc_wait 11 "the thing" never || echo "status $? after $n tries"`,
                    ]),
                ],
                { encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH}` } },
            );
            assert.equal(r.status, 0, r.stderr);
            assert.match(r.stdout, /^tries: 3 at 2$/m, "polls every second: the third try, two sleeps in");
            assert.match(r.stdout, /^\[spark-cluster\] waiting for the thing \(10 s of at most 11 s\)$/m);
            assert.match(r.stdout, /^\[spark-cluster\] gave up after 11 s waiting for the thing$/m);
            assert.match(r.stdout, /^status 1 after 12 tries$/m, "one try a second, 0 s to 11 s");
            assert.equal((r.stdout.match(/^\[spark-cluster\] waiting for/gm) ?? []).length, 1, "said once in 11 s");
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

describe("sc_netplan_apply", () => {
    /** The netplan.io 0.106 traceback of the race (its last lines), as the lab's DGX OS-like node printed it. */
    const RACE = [
        `  File "/usr/share/netplan/netplan/cli/utils.py", line 70, in nm_interfaces`,
        `    with open(path, 'r') as f:`,
        `FileNotFoundError: [Errno 2] No such file or directory: '/run/NetworkManager/system-connections/netplan-NM-f306d08a-6afe-44c7-8afe-1ffb8f85efe5.nmconnection'`,
    ].join("\n");

    /** Runs sc_netplan_apply with a fake `netplan` that fails its first `failures` calls with `error`; returns its status, output and the calls. */
    function apply(failures: number, error: string) {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "netplan-apply-"));
        try {
            fs.writeFileSync(path.join(dir, "error"), error);
            fs.writeFileSync(
                path.join(dir, "netplan"),
                `#!/bin/bash\nn=$(( $(cat ${dir}/n 2>/dev/null || echo 0) + 1 )); echo $n > ${dir}/n\nif [ $n -le ${failures} ]; then cat ${dir}/error >&2; exit 1; fi\necho applied\n`,
                { mode: 0o755 },
            );
            fakeClock(dir);
            const r = spawnSync("bash", ["-c", bashScript([HOST_LIB, ...NETPLAN_APPLY_LIB, "sc_netplan_apply"])], {
                encoding: "utf8",
                env: { ...process.env, PATH: `${dir}:${process.env.PATH}` },
            });
            return { status: r.status, stdout: r.stdout, stderr: r.stderr, calls: Number(fs.readFileSync(path.join(dir, "n"), "utf8")) };
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }

    it("applies again when a NetworkManager runtime profile went away while netplan read it, for at most 10 s", () => {
        const once = apply(1, RACE);
        assert.equal(once.status, 0, once.stderr);
        assert.equal(once.calls, 2);
        assert.match(
            once.stdout,
            /^\[spark-cluster\] netplan apply: a NetworkManager runtime profile went away while it read it \(a daemon-reload at the same time\); again$/m,
        );
        assert.match(once.stdout, /^applied$/m);
        const always = apply(1000, RACE);
        assert.equal(always.status, 1);
        assert.ok(always.calls >= 10 && always.calls <= 12, `one try a second for 10 s (${always.calls})`);
        assert.match(always.stdout, /gave up after 10 s waiting for netplan apply without a daemon-reload beside it/);
        assert.match(always.stderr, /FileNotFoundError: .*netplan-NM-/, "the last failure's output is shown");
    });

    it("any other failure of netplan apply fails at once with its output", () => {
        const other = apply(9, "Error in network definition: /etc/netplan/60-spark-cluster.yaml: invalid boolean value");
        assert.equal(other.status, 1);
        assert.equal(other.calls, 1);
        assert.match(other.stderr, /invalid boolean value/);
        assert.doesNotMatch(other.stdout, /again/);
    });
});

describe("heredoc", () => {
    it("feeds tricky content verbatim (no expansion) and ends it with a newline", () => {
        const content = "a $HOME `id` \\n 'q' \"d\"\nEOF\nSPARK_CLUSTER_EOF_\n$(echo no)";
        const out = execFileSync("bash", ["-c", heredoc("cat", content)], { encoding: "utf8" });
        assert.equal(out, `${content}\n`);
        assert.equal(execFileSync("bash", ["-c", heredoc("cat", "x\n")], { encoding: "utf8" }), "x\n", "no second newline");
    });

    it("the delimiter is fixed, so a changed file diffs as its changed lines; content holding it gets the hashed one", () => {
        assert.ok(heredoc("cat", "a\n").startsWith(`cat <<'${HEREDOC_DELIMITER}'\n`));
        assert.ok(heredoc("cat", "b\n").endsWith(`\n${HEREDOC_DELIMITER}`), "the same delimiter for any content");
        const holding = `before\n${HEREDOC_DELIMITER}\nafter\n`;
        assert.ok(heredoc("cat", holding).startsWith(`cat <<'${HEREDOC_FALLBACK_PREFIX}${contentHash(holding)}'`));
        assert.equal(execFileSync("bash", ["-c", heredoc("cat", holding)], { encoding: "utf8" }), holding);
        const foreign = `${HEREDOC_FALLBACK_PREFIX}${contentHash("other")}`;
        const both = `${HEREDOC_DELIMITER}\n${foreign}\nafter\n`;
        assert.equal(execFileSync("bash", ["-c", heredoc("cat", both)], { encoding: "utf8" }), both);
    });

    it("throws when the content holds both delimiter lines", () => {
        // Content with the fixed delimiter line gets SPARK_CLUSTER_HEREDOC_<sha256(content)>: real
        // content holding that too needs a SHA-256 fixed point. Pin the hash (shell.ts calls
        // crypto.createHash through the module object) to reach the guard.
        const fixed = "00000000000000000000000000000000";
        const pinned = mock.method(crypto, "createHash", () => ({ update: () => ({ digest: () => fixed }) }));
        try {
            const delimiter = `${HEREDOC_FALLBACK_PREFIX}${fixed.slice(0, 16)}`;
            assert.throws(() => heredoc("cat", `${HEREDOC_DELIMITER}\n${delimiter}\nafter\n`), {
                message: `content contains its heredoc delimiter ${delimiter}`,
            });
            assert.doesNotThrow(() => heredoc("cat", `${HEREDOC_DELIMITER}\n${delimiter}-not-alone\n`), "only a whole line ends a heredoc");
        } finally {
            pinned.mock.restore();
        }
    });

    it("a file installed through `$(sc_install_file … <<DELIM … DELIM)` gets the exact content, once", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sc-install-"));
        try {
            const file = path.join(dir, "etc", "nccl.conf");
            const content = renderNcclConf(NCCL_SOCKET_THOR);
            const script = bashScript([HOST_LIB, heredoc(`result=$(sc_install_file ${shellQuote(file)} 644`, content) + ")", `echo "$result"`]);
            const first = spawnSync("bash", ["-c", script], { encoding: "utf8" });
            assert.equal(first.status, 0, first.stderr);
            assert.equal(first.stdout, `changed ${file}\n`);
            assert.equal(fs.readFileSync(file, "utf8"), content);
            assert.equal((fs.statSync(file).mode & 0o777).toString(8), "644");
            const second = spawnSync("bash", ["-c", script], { encoding: "utf8" });
            assert.equal(second.stdout, `unchanged ${file}\n`, "a second run changes nothing");
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

// What ibdev2netdev prints and what the hardware probe reads of it: test/unit/probes.test.ts (fixtures/probes/hardware/).
describe("interface names and HCAs from ibdev2netdev", () => {
    const LAB = ["rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)", "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)"].join("\n");
    const MIXED = [
        "rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)",
        "  rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)  ",
        "not a device line",
        "",
        "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)",
    ].join("\n");

    const resolveCases: readonly { name: string; configured: (string | undefined)[]; output: string; names: string[] }[] = [
        { name: "configured names are kept", configured: ["enp1s0f1np1", "enP2p1s0f1np1"], output: "", names: ["enp1s0f1np1", "enP2p1s0f1np1"] },
        { name: "both detected, in ibdev2netdev order", configured: [undefined, undefined], output: LAB, names: ["enp1s0f1np1", "enP2p1s0f1np1"] },
        { name: "Down interfaces are skipped", configured: [undefined, undefined], output: MIXED, names: ["enp1s0f1np1", "enP2p1s0f1np1"] },
        {
            name: "a configured name is not handed out again",
            configured: [undefined, "enp1s0f1np1"],
            output: LAB,
            names: ["enP2p1s0f1np1", "enp1s0f1np1"],
        },
    ];
    for (const { name, configured, output, names } of resolveCases) {
        it(`resolveInterfaceNames: ${name}`, () => {
            assert.deepEqual(resolveInterfaceNames("spark-b", configured, hardwareProbe.parse(output)), names);
        });
    }

    it("resolveInterfaceNames: nothing left to detect names the node and the key to set", () => {
        assert.throws(
            () => resolveInterfaceNames("thor-1", [undefined], hardwareProbe.parse("")),
            (err: Error) => {
                assert.match(err.message, /thor-1/);
                assert.match(err.message, /interconnect\[0\]\.name/);
                assert.match(err.message, /Set it, e\.g\. name: /);
                return true;
            },
        );
        assert.throws(
            () => resolveInterfaceNames("spark-b", [undefined, undefined], hardwareProbe.parse(LAB.split("\n")[0])),
            /spark-b.*interconnect\[1\]\.name: not set and not detected/,
        );
    });

    it("hcasFor maps interfaces to their RDMA devices, in interface order", () => {
        const devices = hardwareProbe.parse(MIXED);
        assert.deepEqual(hcasFor(["enp1s0f1np1", "enP2p1s0f1np1"], devices), ["rocep1s0f1", "roceP2p1s0f1"]);
        assert.deepEqual(hcasFor(["enP2p1s0f1np1"], devices), ["roceP2p1s0f1"]);
        assert.deepEqual(hcasFor(["mgbe0_0"], devices), [], "an interface without RoCE has no HCA");
    });
});

describe("ncclVariables", () => {
    const names = (spec: NcclSpec) => ncclVariables(spec).map(([k]) => k);
    const value = (spec: NcclSpec, key: string) => ncclVariables(spec).find(([k]) => k === key)?.[1];

    it("roce: both HCAs, NET/IB on, RoCE v2, cross-NIC for twins", () => {
        assert.deepEqual(ncclVariables(NCCL_ROCE), [
            ["NCCL_SOCKET_IFNAME", "enp1s0f1np1"],
            ["NCCL_IB_DISABLE", "0"],
            ["NCCL_IB_HCA", "rocep1s0f1,roceP2p1s0f1"],
            ["NCCL_IB_ROCE_VERSION_NUM", "2"],
            ["NCCL_IB_TC", "106"],
            ["NCCL_CROSS_NIC", "1"],
            ["NCCL_DEBUG", "WARN"],
        ]);
        assert.ok(!names({ ...NCCL_ROCE, ibHca: ["rocep1s0f1"] }).includes("NCCL_CROSS_NIC"), "one HCA: no cross-NIC");
    });

    it("socket: NET/IB off; the Spark + Thor settings only with a Thor", () => {
        assert.equal(value(NCCL_SOCKET, "NCCL_IB_DISABLE"), "1");
        assert.ok(!names(NCCL_SOCKET).includes("NCCL_P2P_DISABLE"));
        assert.ok(!names(NCCL_SOCKET).includes("NCCL_IB_HCA"));
        const thor = { ...NCCL_SOCKET_THOR, overrides: {} };
        assert.equal(value(thor, "NCCL_P2P_DISABLE"), "1");
        assert.equal(value(thor, "NCCL_SHM_DISABLE"), "1");
        assert.equal(value(thor, "NCCL_PROTO"), "Simple");
    });

    it("an override replaces the rendered value in place; new ones come last, sorted", () => {
        const keys = names(NCCL_SOCKET_THOR);
        assert.equal(value(NCCL_SOCKET_THOR, "NCCL_PROTO"), "LL");
        assert.equal(keys.filter((k) => k === "NCCL_PROTO").length, 1, "no duplicate key");
        assert.equal(keys.indexOf("NCCL_PROTO"), names({ ...NCCL_SOCKET_THOR, overrides: {} }).indexOf("NCCL_PROTO"));
        assert.deepEqual(keys.slice(-1), ["NCCL_BUFFSIZE"]);
        const many = { ...NCCL_ROCE, overrides: { NCCL_NET_GDR_LEVEL: "5", NCCL_ALGO: "Ring", NCCL_CROSS_NIC: "0" } };
        assert.deepEqual(ncclVariables(many).slice(-2), [
            ["NCCL_ALGO", "Ring"],
            ["NCCL_NET_GDR_LEVEL", "5"],
        ]);
        assert.equal(value(many, "NCCL_CROSS_NIC"), "0");
    });

    it("the GID index is never rendered, and the config refuses to pin it", () => {
        for (const { spec, nodeIp } of NCCL_CASES) {
            assert.ok(!names(spec).includes("NCCL_IB_GID_INDEX"));
            assert.doesNotMatch(renderNcclConf(spec) + renderRuntimeEnv({ nccl: spec, nodeIp, reader: "systemd" }), /GID_INDEX/);
        }
        assert.throws(
            () => parseConfig(rawConfig({ nccl: { overrides: { NCCL_IB_GID_INDEX: "3" } } })),
            (err: Error) => err instanceof ConfigError && /nccl\.overrides\.NCCL_IB_GID_INDEX: must not be pinned/.test(err.message),
        );
    });

    it("roce without an RDMA device is an error, not a silent socket fallback", () => {
        assert.throws(() => ncclVariables({ ...NCCL_ROCE, ibHca: [] }), /RoCE transport needs at least one RDMA device/);
    });
});

// ---------------------------------------------------------------------------------------------
// The API key stays out of every file and argv
// ---------------------------------------------------------------------------------------------

const API_KEY = "render-test-api-key-0123456789abcdef";

/** A minimal valid stack config with the fake API key, merged with `extra` at the top level. */
function rawConfig(extra: Record<string, unknown>) {
    return {
        values: {
            nodes: [
                { name: "spark-a", kind: "spark", head: true, ssh: { host: "10.0.0.11" }, interconnect: [{ address: "192.168.100.11/24" }] },
                { name: "spark-b", kind: "spark", ssh: { host: "10.0.0.12" }, interconnect: [{ address: "192.168.100.12/24" }] },
            ],
            model: { source: "Qwen/Qwen2.5-7B-Instruct" },
            sshPrivateKeyPath: "/home/you/.ssh/id_ed25519",
            apiKey: API_KEY,
            ...extra,
        },
        secretKeys: new Set(["apiKey"]),
    };
}

describe("the API key", () => {
    it("vllm serve never gets --api-key: vLLM reads VLLM_API_KEY from the root-only env file", () => {
        for (const spec of [VLLM_RAY_FULL, VLLM_MP_RANK0, VLLM_MP_RANK1]) {
            assert.ok(!vllmServeArgv(spec).some((arg) => /^--api[-_]key/.test(arg)));
        }
        for (const unit of UNITS.filter((u) => u.name.startsWith("vllm"))) {
            // systemd reads the file for a venv unit, docker (--env-file) for a container unit.
            assert.match(
                unit.unit,
                unit.runtime.kind === "venv" ? /^EnvironmentFile=\/etc\/spark-cluster\/vllm\.env$/m : / --env-file \/etc\/spark-cluster\/vllm\.env /,
            );
        }
    });

    it("the config refuses --api-key in model.extraArgs, in either spelling", () => {
        for (const arg of ["--api-key=abc", "--api_key=abc", "--API-KEY"]) {
            assert.throws(
                () => parseConfig(rawConfig({ model: { source: "Qwen/Qwen2.5-7B-Instruct", extraArgs: [arg] } })),
                /model\.extraArgs\[0\]: sets --api-key, which the project renders itself/,
            );
        }
    });

    it("appears in no rendered file, argv or script (the readiness probe reads it on the node)", () => {
        const config = parseConfig(rawConfig({}));
        assert.equal(config.apiKey.reveal(), API_KEY);
        const everything = [
            ...SCRIPTS.map((s) => s.script),
            ...UNITS.map((u) => u.unit),
            ...NCCL_CASES.map((c) => renderNcclConf(c.spec) + renderRuntimeEnv({ nccl: c.spec, nodeIp: c.nodeIp, reader: "docker" })),
            renderNetplan(SPARK_A_NETPLAN),
            vllmServeArgv(VLLM_RAY_FULL).join(" "),
        ].join("\n");
        assert.ok(!everything.includes(API_KEY));
        assert.equal(`${config.apiKey}`, "[secret]", "the parsed key prints redacted if it ever reaches a template");
        const chat = chatReadyScript({ port: 8000, model: "m", envFile: VLLM_SECRETS_PATH, reader: "docker", unit: VLLM_UNIT });
        assert.match(chat, /key = read_env_value\("\/etc\/spark-cluster\/vllm\.env", "VLLM_API_KEY"\)/);
        assert.doesNotMatch(chat, /curl|Authorization: Bearer [A-Za-z0-9]/, "no key on a command line");
    });
});

describe("the node probes", () => {
    /** Runs the Ray probe against a fake venv whose python prints `version` (or fails when undefined). */
    function rayProbeWith(version: string | undefined) {
        const python = version === undefined ? "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'ray'\" >&2\nexit 1\n" : `#!/bin/sh\necho ${version}\n`;
        return runProbeInFakeVenv(python, (runtime) => rayProbe.script({ node: "thor-1", runtime }));
    }

    it("the Ray probe reports the runtime's Ray version", () => {
        const r = rayProbeWith("2.60.0");
        assert.equal(r.status, 0, r.stderr);
        assert.equal(rayProbe.parse(r.stdout), "2.60.0");
    });

    it("the Ray probe fails, naming model.executor and the fix, when the runtime has no Ray", () => {
        const r = rayProbeWith(undefined);
        assert.equal(r.status, 1);
        assert.match(r.stderr, /^spark-cluster:model\.executor is ray, but the venv \S+ on thor-1 has no Ray .*Fix: set model\.executor: mp/m);
        assert.equal(rayProbe.parse(r.stdout), "none");
    });

    it("the hardware probe does not look for Ray, and is one script whatever the runtime or executor", () => {
        const script = hardwareProbe.script();
        assert.doesNotMatch(script, /ray/);
        assert.equal(spawnSync("bash", ["-n", "-c", script]).status, 0);
    });

    it("the Ray probe asks a docker runtime through a throwaway container of the same image, no network, image after --", () => {
        const script = rayProbe.script({ node: "spark-a", runtime: DOCKER_DEFAULT });
        assert.match(script, /docker run --rm --network none --entrypoint python3 -- nvcr\.io\/nvidia\/vllm:\S+ -c 'import ray; print\(ray.__version__\)'/);
        assert.equal(spawnSync("bash", ["-n", "-c", script]).status, 0);
    });

    it("the ray output says whether token authentication is on", () => {
        assert.equal(rayAuthStatus("2.60.0"), "Ray 2.60.0, token authentication on");
        assert.equal(rayAuthStatus("2.52.0"), "Ray 2.52.0, token authentication on");
        assert.match(rayAuthStatus("2.49.2"), /^Ray 2\.49\.2 is older than 2\.52\.0: it has no token authentication/);
        assert.equal(compareVersions("2.60.0", "2.9.1") > 0, true);
    });
});

describe("the firewall", () => {
    const HEAD: FirewallSpec = {
        node: "spark-a",
        members: ["192.168.100.11", "192.168.101.11", "192.168.100.12", "192.168.101.12"],
        openTcp: [22, 2222, 8080],
        openUdp: [5353],
        api: { port: 8000, allowFrom: ["192.168.1.0/24", "10.0.0.0/8"] },
    };
    const WORKER: FirewallSpec = { node: "spark-b", members: HEAD.members, openTcp: [22], openUdp: [] };

    it("rules: members reach everything; SSH, the API (from its ranges) and the user's ports are open; the rest is refused", () => {
        matchSnapshot("render.firewall.head.nft", renderFirewallRules(HEAD));
        matchSnapshot("render.firewall.worker.nft", renderFirewallRules(WORKER));
        matchSnapshot("render.firewall.unit.service", renderFirewallUnit());
        assert.doesNotMatch(renderFirewallRules(WORKER), /dport 8000/, "a worker does not serve the API");
    });

    it("nft itself accepts the rules and loads only our table, in a network namespace of its own", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nft-"));
        try {
            const file = path.join(dir, "rules.nft");
            fs.writeFileSync(file, renderFirewallRules(HEAD));
            // Someone else's table exists before: ours must neither flush nor replace it.
            const script = [
                "set -euo pipefail",
                "nft add table inet users_own",
                "nft add chain inet users_own input '{ type filter hook input priority 0; policy accept; }'",
                "nft add rule inet users_own input tcp dport 9999 accept",
                "before=$(nft list table inet users_own)",
                `nft -f ${file}`,
                `nft -f ${file}`, // twice: it replaces our table, it does not stack
                "nft list table inet spark_cluster | grep -c 'reject with tcp reset'",
                '[ "$(nft list table inet users_own)" = "$before" ] && echo users-table-unchanged',
            ].join("\n");
            // A minimal system may have no /etc/protocols (no netbase): the rules must not need it.
            const protocols = path.join(dir, "protocols");
            fs.writeFileSync(protocols, "");
            const r = spawnSync("unshare", ["--net", "--mount", "bash", "-c", `mount --bind ${protocols} /etc/protocols\n${script}`], { encoding: "utf8" });
            assert.equal(r.status, 0, r.stderr);
            assert.equal(r.stdout, "1\nusers-table-unchanged\n");
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("apply and remove scripts pass bash -n and touch only our table", () => {
        for (const script of [firewallApplyScript(HEAD), firewallRemoveScript()]) {
            assert.equal(spawnSync("bash", ["-n", "-c", script]).status, 0);
            assert.doesNotMatch(script, /nft flush ruleset|nft delete table (?!inet spark_cluster)/);
        }
        matchSnapshot("render.firewall-apply.head.sh", firewallApplyScript(HEAD));
    });

    it("the units that listen require the firewall (a drop-in each), installed with it and removed before it stops; a changed rule set reloads it", () => {
        const apply = firewallApplyScript(HEAD);
        const remove = firewallRemoveScript();
        assert.equal(
            renderFirewallDropIn(),
            `# ${MANAGED_MARKER}\n# firewall.enabled: this unit starts only with spark-cluster's firewall loaded, and after it.\n[Unit]\nRequires=spark-cluster-firewall.service\nAfter=spark-cluster-firewall.service\n`,
        );
        for (const unit of FIREWALLED_UNITS) {
            const path = firewallDropInPath(unit);
            assert.ok(
                apply.indexOf(path) >= 0 && apply.indexOf(path) < apply.indexOf("systemctl daemon-reload"),
                `${unit}: installed before the daemon reload`,
            );
            assert.ok(
                remove.indexOf(`sc_remove_file ${path}`) < remove.indexOf(`systemctl disable --now ${UNIT_NAMES.firewall}`),
                `${unit}: removed before the firewall stops`,
            );
            assert.match(firewallReadScript(HEAD), new RegExp(`sc_file_drift ${path.replace(/[.]/g, "\\.")} 644 `));
        }
        assert.deepEqual(
            [...FIREWALLED_UNITS],
            [UNIT_NAMES.ray, UNIT_NAMES.vllm, UNIT_NAMES.sglang, UNIT_NAMES.openWebui, UNIT_NAMES.nodeExporter, UNIT_NAMES.prometheus],
        );
        assert.match(renderFirewallUnit(), /^ExecReload=\/usr\/sbin\/nft -f \/etc\/spark-cluster\/firewall\.nft$/m);
        assert.match(apply, /then action=reload; else action=start; fi/);
        assert.doesNotMatch(apply, new RegExp(`systemctl restart ${UNIT_NAMES.firewall}`), "a restart would restart every unit that requires it");
    });
});

describe("SSH host keys", () => {
    it("the fingerprint is ssh-keygen's, and the SSH step's output gives the key to pin", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "hostkey-"));
        try {
            execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", path.join(dir, "key")]);
            const publicKey = fs.readFileSync(path.join(dir, "key.pub"), "utf8").trim();
            const expected = execFileSync("ssh-keygen", ["-lf", path.join(dir, "key.pub")], { encoding: "utf8" }).split(" ")[1];
            assert.equal(hostKeyFingerprint(publicKey), expected);
            const keyLine = publicKey.split(" ").slice(0, 2).join(" ");
            assert.equal(recordedHostKey(`ssh ok: spark-a\n${HOST_KEY_PREFIX}${keyLine}\n${HOST_KEY_PREFIX}ssh-rsa AAAAB3\n`), keyLine);
            assert.equal(recordedHostKey("ssh ok: spark-a\n"), undefined);
            assert.equal(spawnSync("bash", ["-n", "-c", SSH_READY_SCRIPT]).status, 0);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("a node's later steps are pinned to the configured key, else the presented one, else the printed one; never to an empty one", () => {
        const configured = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIConfigured root@spark-a";
        const presented = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPresented";
        const printed = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPrinted";
        const sshOutput = `ssh ok: spark-a\n${HOST_KEY_PREFIX}${printed}\n${HOST_KEY_PREFIX}ssh-rsa AAAAB3\n`;
        const cases: [string, Parameters<typeof hostKeyToPin>[0], string | undefined][] = [
            ["configured wins over what the node presented", { configured, presented, sshOutput }, configured],
            ["the key the SSH step's handshake presented", { presented, sshOutput }, presented],
            // A stack deployed before the provider recorded keys, whose SSH step has not run since: the pin it had.
            ["no presented key: the first one the SSH step printed", { sshOutput }, printed],
            ["an empty presented key is not a key", { presented: " ", sshOutput }, printed],
            ["an empty configured key is not a key", { configured: "", presented }, presented],
            ["nothing known", { sshOutput: "ssh ok: spark-a\n" }, undefined],
            ["nothing at all", {}, undefined],
        ];
        for (const [what, known, want] of cases) assert.equal(hostKeyToPin(known), want, what);
        const message = noHostKeyMessage("spark-b");
        for (const part of ["node spark-b", "nodes[].ssh.hostKey", "cat /etc/ssh/ssh_host_ed25519_key.pub"]) assert.ok(message.includes(part), part);
    });
});

// Last: every describe above has matched its snapshots by now.
describe("model.env and model.readyTimeoutSeconds", () => {
    const envNames = (file: string) =>
        file
            .split("\n")
            .filter((line) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(line))
            .map((line) => line.slice(0, line.indexOf("=")));
    const unitEnvNames = (unit: string) =>
        unit
            .split("\n")
            .filter((line) => line.startsWith('Environment="'))
            .map((line) => line.slice('Environment="'.length, line.indexOf("=", 'Environment="'.length)));

    it("PROJECT_ENV (what model.env refuses) is exactly what the renderers write, and HF_TOKEN (the download's only)", () => {
        const written = new Set([
            ...envNames(renderRuntimeEnv({ nccl: NCCL_ROCE, reader: "systemd", nodeIp: "192.168.100.11" })),
            ...envNames(renderRuntimeEnv({ nccl: { ...NCCL_ROCE, routed: true }, reader: "systemd", nodeIp: "192.168.100.11" })),
            ...envNames(renderRuntimeEnv({ nccl: { ...NCCL_SOCKET_THOR, overrides: {} }, reader: "systemd", nodeIp: "192.168.100.11" })),
            ...envNames(renderVllmSecrets("systemd", "k".repeat(20))),
            ...envNames(renderRayEnv("systemd", "0123456789abcdef0123456789abcdef")),
            ...unitEnvNames(renderVllmUnit({ ...VLLM_MP_BASE, executor: "ray" }, VENV, "h", "192.168.100.11:6379")),
        ]);
        assert.ok(!written.has("HF_TOKEN"), "vLLM never gets the HF token: it serves offline");
        assert.deepEqual([...written, "HF_TOKEN"].sort(), [...PROJECT_ENV.keys()].sort());
    });

    const spec: VllmServeSpec = { ...VLLM_MP_BASE, env: { VLLM_USE_FLASHINFER_MOE_FP4: "1", NCCL_NVLS_ENABLE: 'a "b" $c %d \\e' } };

    it("venv: each variable is an Environment= line after the unit's own", () => {
        const unit = renderVllmUnit(spec, VENV, "h");
        assert.deepEqual(unitEnvNames(unit), ["HF_HUB_OFFLINE", "VLLM_USE_FLASHINFER_MOE_FP4", "NCCL_NVLS_ENABLE"]);
        assert.match(unit, /^Environment="NCCL_NVLS_ENABLE=a \\"b\\" \$c %%d \\\\e"$/m);
    });

    it("docker: each variable is a -e NAME=value of docker run, as it is", () => {
        const unit = renderVllmUnit(spec, DOCKER_DEFAULT, "h");
        const execStart = unit.split("\n").find((line) => line.startsWith("ExecStart=")) ?? "";
        const argv = systemdSplit(execStart.slice("ExecStart=".length));
        const env = argv.filter((_, i) => argv[i - 1] === "-e");
        assert.deepEqual(env, ["HF_HUB_OFFLINE=1", "VLLM_USE_FLASHINFER_MOE_FP4=1", 'NCCL_NVLS_ENABLE=a "b" $c %d \\e']);
    });

    it("an empty model.env renders the unit as before", () => {
        assert.equal(renderVllmUnit({ ...VLLM_MP_BASE, env: {} }, VENV, "h"), renderVllmUnit(VLLM_MP_BASE, VENV, "h"));
        assert.doesNotMatch(renderVllmUnit(VLLM_MP_BASE, DOCKER_DEFAULT, "h"), /VLLM_USE/);
    });

    it("the readiness wait is model.readyTimeoutSeconds; 600 renders the probe of the fixed wait", () => {
        const opts = { port: 8000, model: "m", envFile: "/etc/spark-cluster/vllm.env", reader: "systemd" as const, unit: "spark-cluster-vllm" };
        assert.equal(chatReadyScript({ ...opts, seconds: 600 }), chatReadyScript(opts));
        assert.equal(vllmPlan(VLLM_MP_BASE, VENV).ready, chatReadyScript({ ...opts, model: VLLM_MP_BASE.servedName }));
        const long = vllmPlan({ ...VLLM_MP_BASE, readyTimeoutSeconds: 1800 }, VENV);
        assert.match(long.ready ?? "", /^if ! sc_wait 1800 /m);
        assert.equal(long.readyTimeout, "40m");
    });

    it("the Pulumi timeout covers the wait and 10 minutes: 20m for 600 s as before", () => {
        assert.equal(readinessTimeout(600), "20m");
        assert.equal(readinessTimeout(60), "11m");
        assert.equal(readinessTimeout(7200), "130m");
        assert.equal(readinessTimeout(601), "21m");
    });
});

test("no snapshot file under test/unit/__snapshots__/render.* is left unused", () => {
    assert.deepEqual(unusedSnapshots("render."), []);
});
