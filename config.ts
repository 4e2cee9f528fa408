/**
 * What a user may write in a stack's config, and the one function that turns it into a
 * validated, defaulted {@link Config}.
 *
 * Everything lives under the `spark-cluster:` namespace of the stack config. {@link parseConfig}
 * is pure (no Pulumi imports): index.ts reads the raw values and the set of secret keys from
 * Pulumi and hands them over. Validation runs in two phases:
 *
 * 1. per field: the zod schema (types, ranges, formats, unknown keys), plus the secret rules
 *    (secrets must be set with `--secret`; exactly one SSH key source);
 * 2. across fields: the exported `check…` functions below (one head, unique names and addresses,
 *    subnets, parallelism vs GPUs, transport vs Thor, ports, topology), run only when phase 1
 *    found nothing, because they assume well-typed input.
 *
 * Every problem of a phase is collected and thrown at once in a {@link ConfigError}, one line per
 * issue: `spark-cluster:<path>: <what is wrong> (got <value>). Example: <right value>`.
 * Secret values never appear in an issue, and the parsed config carries them as
 * {@link SecretString}, which prints as `[secret]`.
 */
import { inspect } from "node:util";
import { z } from "zod";

/** The stack-config namespace every key of this project lives under. */
export const CONFIG_NAMESPACE = "spark-cluster";

/** The container image used when a node's docker runtime names none (seeds 000, 001, 003). */
export const DEFAULT_VLLM_IMAGE = "nvcr.io/nvidia/vllm:25.09-py3";

// ---------------------------------------------------------------------------------------------
// Secrets
// ---------------------------------------------------------------------------------------------

/** Top-level keys whose values are secrets: they must be set with `pulumi config set --secret`. */
export const SECRET_KEYS = ["sshPrivateKey", "apiKey", "hfToken"] as const;
export type SecretKey = (typeof SECRET_KEYS)[number];

const REDACTED = "[secret]";

/**
 * A secret string. It prints as `[secret]` everywhere (string conversion, JSON, `console.log`,
 * `util.inspect`); the plaintext is only reachable through {@link SecretString.reveal}, so a
 * call site that needs it is easy to find and review.
 */
export class SecretString {
    readonly #value: string;

    constructor(value: string) {
        this.#value = value;
    }

    /** The plaintext. Pass it on only to something that keeps it secret (e.g. `pulumi.secret`). */
    reveal(): string {
        return this.#value;
    }

    toString(): string {
        return REDACTED;
    }

    toJSON(): string {
        return REDACTED;
    }

    [inspect.custom](): string {
        return REDACTED;
    }
}

// ---------------------------------------------------------------------------------------------
// Issues and the error
// ---------------------------------------------------------------------------------------------

/** One problem in the stack config. */
export interface ConfigIssue {
    /** The key path below the namespace, e.g. `nodes[1].ssh.port` or `model.tensorParallel`. */
    path: string;
    /** What is wrong, in words a person can act on. */
    message: string;
    /** The offending value as it may be shown: never the plaintext of a secret. */
    got: string;
    /** A right value (or the command that sets one). */
    example: string;
}

/** Renders an issue as the one line the user sees. */
export function renderIssue(issue: ConfigIssue): string {
    return `${CONFIG_NAMESPACE}:${issue.path}: ${issue.message} (got ${issue.got}). Example: ${issue.example}`;
}

/** Thrown by {@link parseConfig}; lists every problem found, one line per issue. */
export class ConfigError extends Error {
    readonly issues: ConfigIssue[];

    constructor(issues: ConfigIssue[]) {
        super(issues.map(renderIssue).join("\n"));
        this.name = "ConfigError";
        this.issues = issues;
    }
}

/** Describes a plain value for an issue: JSON, shortened to one readable fragment. */
export function describeValue(value: unknown): string {
    if (value === undefined) {
        return "nothing";
    }
    const text = JSON.stringify(value) ?? String(value);
    return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** Describes a secret value for an issue without revealing it: only its type or its length. */
export function describeSecret(value: unknown): string {
    if (value === undefined) {
        return "nothing";
    }
    if (typeof value === "string") {
        return `a value of ${value.length} characters`;
    }
    if (value === null) {
        return "null";
    }
    return Array.isArray(value) ? "a list" : `a ${typeof value}`;
}

/** Formats a key path: `nodes[1].ssh.port`. */
export function formatPath(path: readonly PropertyKey[]): string {
    let out = "";
    for (const segment of path) {
        if (typeof segment === "number") {
            out += `[${segment}]`;
        } else {
            const key = String(segment);
            out += /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${out === "" ? "" : "."}${key}` : `[${JSON.stringify(key)}]`;
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Field formats
// ---------------------------------------------------------------------------------------------

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const HOSTNAME_LABEL = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const IFNAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$/;
const HF_MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;
const NCCL_VARIABLE = /^NCCL_[A-Z0-9_]+$/;
const PRIVATE_KEY_TEXT = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/;

/** Parses a dotted-quad IPv4 address (no leading zeros) into a 32-bit number. */
export function parseIpv4(text: string): number | undefined {
    const parts = text.split(".");
    if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255)) {
        return undefined;
    }
    return parts.reduce((acc, p) => acc * 256 + Number(p), 0);
}

/** Formats a 32-bit number as a dotted-quad IPv4 address. */
export function formatIpv4(ip: number): string {
    return [24, 16, 8, 0].map((shift) => Math.floor(ip / 2 ** shift) % 256).join(".");
}

/** True for an IPv4 address or a DNS hostname. */
export function isHostOrIpv4(text: string): boolean {
    if (/^[0-9.]+$/.test(text)) {
        return parseIpv4(text) !== undefined;
    }
    return text.length <= 253 && text.split(".").every((label) => HOSTNAME_LABEL.test(label));
}

/** An interface address with its prefix length, and the subnet it lies in. */
export interface Cidr {
    /** The address as a 32-bit number. */
    ip: number;
    /** The prefix length, 1..31. */
    prefixLength: number;
    /** The subnet's network address as a 32-bit number. */
    network: number;
    /** The subnet's broadcast address as a 32-bit number. */
    broadcast: number;
}

/**
 * Why `text` is not a usable interconnect interface address (`a.b.c.d/prefix`), or undefined when
 * it is one: IPv4 only, prefix 1..31 (a /32 has no peer; a /31 is a point-to-point link), not a
 * loopback, multicast, reserved or "this network" address, and for prefixes up to /30 neither
 * the network nor the broadcast address of its subnet.
 */
export function interfaceAddressProblem(text: string): string | undefined {
    const match = /^([^/]*)\/([0-9]{1,2})$/.exec(text);
    if (!match) {
        return "must be an IPv4 address with its prefix length, a.b.c.d/prefix";
    }
    const ip = parseIpv4(match[1]);
    if (ip === undefined) {
        return `has ${JSON.stringify(match[1])}, which is not an IPv4 address (four numbers 0-255, no leading zeros)`;
    }
    const prefixLength = Number(match[2]);
    if (prefixLength === 32) {
        return "has prefix /32, which leaves no room for a peer on the link; use the link's prefix";
    }
    if (prefixLength < 1 || prefixLength > 32) {
        return `has prefix /${prefixLength}; the prefix length must be 1-31`;
    }
    const firstOctet = Math.floor(ip / 2 ** 24);
    if (firstOctet === 0 || firstOctet === 127 || firstOctet >= 224) {
        return "is a loopback, multicast, reserved or 'this network' address, not one an interface can use";
    }
    const cidr = parseCidr(text);
    const subnet = formatSubnet(cidr);
    if (prefixLength <= 30 && ip === cidr.network) {
        return `is the network address of ${subnet}; use a host address inside it`;
    }
    if (prefixLength <= 30 && ip === cidr.broadcast) {
        return `is the broadcast address of ${subnet}; use a host address inside it`;
    }
    return undefined;
}

/** Parses `a.b.c.d/prefix`; throws on text that {@link interfaceAddressProblem} would reject as malformed. */
export function parseCidr(text: string): Cidr {
    const [address, prefix] = text.split("/");
    const ip = parseIpv4(address);
    const prefixLength = Number(prefix);
    if (ip === undefined || !Number.isInteger(prefixLength) || prefixLength < 0 || prefixLength > 32) {
        throw new Error(`not an IPv4 address with prefix: ${text}`);
    }
    const size = 2 ** (32 - prefixLength);
    const network = Math.floor(ip / size) * size;
    return { ip, prefixLength, network, broadcast: network + size - 1 };
}

/** Formats the subnet of a {@link Cidr}: `192.168.100.0/24`. */
export function formatSubnet(cidr: Cidr): string {
    return `${formatIpv4(cidr.network)}/${cidr.prefixLength}`;
}

/** True when two subnets share at least one address. */
export function subnetsOverlap(a: Cidr, b: Cidr): boolean {
    return a.network <= b.broadcast && b.network <= a.broadcast;
}

/** Why `text` is not a usable model source (HF id `org/name` or absolute local path), or undefined. */
export function modelSourceProblem(text: string): string | undefined {
    if (text.startsWith("/")) {
        if (/\s/.test(text) || text.split("/").every((segment) => segment === "")) {
            return "must be an absolute path to the model's directory, without spaces";
        }
        return undefined;
    }
    return HF_MODEL_ID.test(text)
        ? undefined
        : "must be a Hugging Face model id (org/name) or an absolute path to a local model directory";
}

/** The vLLM flags this project renders itself, with the key to set instead and an example. */
const RENDERED_VLLM_FLAGS: Readonly<Record<string, { key: string; example: string }>> = {
    "--model": { key: "model.source", example: "model: { source: Qwen/Qwen2.5-7B-Instruct }" },
    "--tensor-parallel-size": { key: "model.tensorParallel", example: "model: { tensorParallel: 2 }" },
    "--pipeline-parallel-size": { key: "model.pipelineParallel", example: "model: { pipelineParallel: 2 }" },
    "--distributed-executor-backend": { key: "model.executor", example: "model: { executor: ray }" },
    "--gpu-memory-utilization": { key: "model.gpuMemoryUtilization", example: "model: { gpuMemoryUtilization: 0.85 }" },
    "--max-model-len": { key: "model.maxModelLen", example: "model: { maxModelLen: 32768 }" },
    "--max-num-seqs": { key: "model.maxNumSeqs", example: "model: { maxNumSeqs: 64 }" },
    "--quantization": { key: "model.quantization", example: "model: { quantization: fp8 }" },
    "--kv-cache-dtype": { key: "model.kvCacheDtype", example: "model: { kvCacheDtype: fp8 }" },
    "--served-model-name": { key: "model.servedName", example: "model: { servedName: qwen }" },
    "--port": { key: "model.apiPort", example: "model: { apiPort: 8000 }" },
    "--host": { key: "model.apiHost", example: "model: { apiHost: 0.0.0.0 }" },
    "--api-key": {
        key: "the apiKey secret",
        example: `pulumi config set --secret ${CONFIG_NAMESPACE}:apiKey "$(openssl rand -hex 24)"`,
    },
    "--hf-token": { key: "the hfToken secret", example: `pulumi config set --secret ${CONFIG_NAMESPACE}:hfToken hf_...` },
    "--enforce-eager": { key: "model.enforceEager", example: "model: { enforceEager: true }" },
    "--trust-remote-code": { key: "model.trustRemoteCode", example: "model: { trustRemoteCode: true }" },
    "--attention-backend": { key: "model.attentionBackend", example: "model: { attentionBackend: TRITON_ATTN }" },
    "--master-port": { key: "model.masterPort", example: "model: { masterPort: 29500 }" },
    "--nnodes": { key: "nodes (rendered per node for the mp executor)", example: "model: { executor: mp }" },
    "--node-rank": { key: "nodes (rendered per node for the mp executor)", example: "model: { executor: mp }" },
    "--master-addr": { key: "nodes (rendered per node for the mp executor)", example: "model: { executor: mp }" },
    "--headless": { key: "nodes (rendered per node for the mp executor)", example: "model: { executor: mp }" },
};

/**
 * Why one element of `model.extraArgs` is rejected, or undefined: it must be one `--flag` or
 * `--flag=value` token, and not a flag the project renders from its own key. vLLM reads `_` and
 * `-` alike, and boolean flags also come as `--no-<flag>`; both spellings are caught.
 */
export function extraArgProblem(arg: string): { message: string; example: string } | undefined {
    if (!/^--[A-Za-z0-9]/.test(arg)) {
        return {
            message: "must be one token starting with --; give a flag's value after =",
            example: "--swap-space=16",
        };
    }
    if (/[\r\n\0]/.test(arg)) {
        return { message: "must not contain line breaks", example: "--swap-space=16" };
    }
    const flag = arg.split("=")[0].replace(/_/g, "-").toLowerCase();
    const rendered = RENDERED_VLLM_FLAGS[flag] ?? RENDERED_VLLM_FLAGS[flag.replace(/^--no-/, "--")];
    if (rendered) {
        return {
            message: `sets ${flag}, which the project renders itself; use ${rendered.key} instead`,
            example: rendered.example,
        };
    }
    return undefined;
}

/** NCCL variables that have their own key, or that must not be set at all. */
const RESERVED_NCCL_VARIABLES: Readonly<Record<string, { message: string; example: string }>> = {
    NCCL_IB_GID_INDEX: {
        message:
            "must not be pinned: the RoCE GID index moves at run time (3 to 4 within 30 minutes on one Spark) and NCCL >= 2.21 picks it itself",
        example: "remove it; set NCCL_IB_ROCE_VERSION_NUM: \"2\" if you need RoCE v2",
    },
    NCCL_IB_DISABLE: { message: "is rendered from nccl.transport; set that instead", example: "nccl: { transport: socket }" },
    NCCL_SOCKET_IFNAME: { message: "is rendered from nccl.socketIfname; set that instead", example: "nccl: { socketIfname: enp1s0f1np1 }" },
    NCCL_IB_HCA: { message: "is rendered from nccl.ibHca; set that instead", example: "nccl: { ibHca: [rocep1s0f1, roceP2p1s0f1] }" },
    NCCL_DEBUG: { message: "is rendered from nccl.debug; set that instead", example: "nccl: { debug: INFO }" },
};

function overrideKeyProblem(key: string): { message: string; example: string } | undefined {
    if (!NCCL_VARIABLE.test(key)) {
        return {
            message: "is not an NCCL variable; keys must match ^NCCL_[A-Z0-9_]+$",
            example: 'NCCL_IB_MERGE_NICS: "1"',
        };
    }
    return RESERVED_NCCL_VARIABLES[key];
}

// zod helpers: each returns a fresh schema so defaults and refinements never leak between keys.
const port = () => z.int().min(1).max(65535);
const hostOrIpv4 = () =>
    z.string().refine(isHostOrIpv4, {
        error: "must be an IPv4 address or a hostname (no user@, no :port, no scheme)",
    });
const keyFilePath = () =>
    z
        .string()
        .min(1)
        .refine((p) => !p.startsWith("~"), {
            error: "starts with ~, which is not expanded; write the full path",
        })
        .refine((p) => !PRIVATE_KEY_TEXT.test(p), {
            error: `holds key text, not a path; put key text in ${CONFIG_NAMESPACE}:sshPrivateKey, as a secret`,
        });

// ---------------------------------------------------------------------------------------------
// The schema
// ---------------------------------------------------------------------------------------------

/** How to reach a node over SSH (the management network, not the interconnect). */
export const SshSchema = z.strictObject({
    /** IPv4 address or hostname of the node's management interface. Required. */
    host: hostOrIpv4(),
    /** SSH port. Defaults to 22. */
    port: port().default(22),
    /** Login user; it needs root rights (netplan, systemd). Defaults to "root". */
    user: z
        .string()
        .regex(/^[a-z_][a-z0-9_-]{0,31}$/, { error: "must be a Linux user name (lowercase letters, digits, _ and -)" })
        .default("root"),
    /**
     * Path to the private key for this node, on the machine that runs pulumi; overrides the
     * cluster-wide `sshPrivateKey`/`sshPrivateKeyPath`. `~` is not expanded. Defaults to the
     * cluster-wide key.
     */
    privateKeyPath: keyFilePath().optional(),
});

/** Runs vLLM and Ray in a container driven by a systemd unit (Spark and workstation). */
export const DockerRuntimeSchema = z.strictObject({
    /** Selects this runtime. Required when `runtime` is given. */
    kind: z.literal("docker"),
    /** Image with vLLM and Ray; the same multi-arch tag serves Spark and workstation. Defaults to "nvcr.io/nvidia/vllm:25.09-py3". */
    image: z
        .string()
        .regex(/^[^\s]+$/, { error: "must be an image reference without spaces" })
        .default(DEFAULT_VLLM_IMAGE),
    /** Run the container with `--privileged` (RDMA devices). Defaults to true. */
    privileged: z.boolean().default(true),
    /** Run the container with `--ulimit memlock=-1` (RDMA memory registration). Defaults to true. */
    memlockUnlimited: z.boolean().default(true),
    /** Mount the host's /dev/infiniband (RDMA devices) into the container. Defaults to true. */
    infiniband: z.boolean().default(true),
    /** Size of /dev/shm in the container, as docker reads it. Defaults to "16g". */
    shmSize: z
        .string()
        .regex(/^[1-9][0-9]*([bkmg]|[kmg]b)?$/i, { error: "must be a size like 16g or 10240m" })
        .default("16g"),
});

/** Runs vLLM and Ray from a Python venv on the host (Jetson Thor: a source build, seed 004). */
export const VenvRuntimeSchema = z.strictObject({
    /** Selects this runtime. Required when `runtime` is given. */
    kind: z.literal("venv"),
    /** Absolute path of the venv (the directory holding bin/vllm and bin/ray). Required. */
    path: z.string().regex(/^\/[^\s]*$/, { error: "must be an absolute path without spaces" }),
});

/** How a node runs vLLM and Ray. */
export const RuntimeSchema = z.discriminatedUnion("kind", [DockerRuntimeSchema, VenvRuntimeSchema]);

/** One interconnect interface of a node. */
export const InterfaceSchema = z.strictObject({
    /**
     * Linux interface name, e.g. enp1s0f1np1. Defaults to detection on the node at deploy time
     * (the next linked-up RoCE interface `ibdev2netdev` reports); required on a thor, which has none.
     */
    name: z
        .string()
        .regex(IFNAME, { error: "must be a Linux interface name: up to 15 letters, digits, _ . -" })
        .optional(),
    /** Static address with prefix length, a.b.c.d/prefix. Required. */
    address: z.string().superRefine((text, ctx) => {
        const problem = interfaceAddressProblem(text);
        if (problem) {
            ctx.addIssue({ code: "custom", message: problem });
        }
    }),
});

/** One machine of the cluster. */
export const NodeSchema = z.strictObject({
    /** Name used in resource names and /etc/hosts: a DNS label. Required. */
    name: z.string().regex(DNS_LABEL, {
        error: "must be a DNS label: 1-63 lowercase letters, digits and -, not starting or ending with -",
    }),
    /** What the machine is: a DGX Spark, a Jetson Thor or an x86 workstation. Required. */
    kind: z.enum(["spark", "thor", "workstation"]),
    /** Whether this node runs the Ray head and serves the API; exactly one node is the head. Defaults to false. */
    head: z.boolean().default(false),
    /** How to reach the node over SSH. Required (at least `host`). */
    ssh: SshSchema,
    /** GPUs on this node (a Spark and a Thor have one). Defaults to 1. */
    gpus: z.int().min(1).default(1),
    /**
     * How vLLM runs here. Defaults to `{ kind: docker }` with its defaults on a spark or a
     * workstation; required, and a venv, on a thor.
     */
    runtime: RuntimeSchema.optional(),
    /** The interconnect interfaces: one, or a Spark's two twins (each in its own subnet). Required. */
    interconnect: z.array(InterfaceSchema).min(1).max(2),
});

/** How the nodes are cabled. */
export const InterconnectSchema = z.strictObject({
    /** `pair`: two nodes cabled back to back; `switch`: any number of nodes on a switch. Defaults to "pair". */
    topology: z.enum(["pair", "switch"]).default("pair"),
    /** MTU of the interconnect interfaces (a switch must carry it too). Defaults to 9000. */
    mtu: z.int().min(1280).max(9216).default(9000),
});

/** RoCE host settings on nodes that have RoCE (Spark, workstation with ConnectX). */
export const RoceSchema = z.strictObject({
    /** Configure PFC (lossless RoCE) on the interconnect; off or unavailable means lossy RoCE. Defaults to true. */
    enabled: z.boolean().default(true),
    /** The priority PFC is enabled on (`mlnx_qos --pfc`). Defaults to 3. */
    priority: z.int().min(0).max(7).default(3),
    /** Trust DSCP marks (`mlnx_qos --trust dscp`). Defaults to true. */
    trustDscp: z.boolean().default(true),
    /** Load nvidia-peermem for GPUDirect RDMA, persisted across reboot. Defaults to true. */
    peermem: z.boolean().default(true),
});

/** NCCL settings, rendered to /etc/nccl.conf and the runtime's env file. */
export const NcclSchema = z.strictObject({
    /**
     * `roce` (NET/IB), `socket` (NET/Socket, `NCCL_IB_DISABLE=1`) or `auto`: socket when any node
     * is a Thor (it has no RoCE), else roce. The choice is cluster-wide. Defaults to "auto".
     */
    transport: z.enum(["auto", "roce", "socket"]).default("auto"),
    /** RDMA devices for NCCL_IB_HCA, e.g. both twins `[rocep1s0f1, roceP2p1s0f1]`. Defaults to detection from the interconnect interfaces. */
    ibHca: z
        .array(z.string().regex(/^[^\s,]+$/, { error: "must be one RDMA device name, without spaces or commas" }))
        .min(1)
        .optional(),
    /** NCCL_SOCKET_IFNAME (NCCL's syntax: a name, a prefix, ^exclusions). Defaults to the interconnect interface. */
    socketIfname: z.string().regex(/^[^\s]+$/, { error: "must not be empty or contain spaces" }).optional(),
    /** NCCL_DEBUG level (INFO shows NET/IB vs NET/Socket at start). Defaults to "WARN". */
    debug: z.enum(["WARN", "INFO", "TRACE"]).default("WARN"),
    /**
     * Further NCCL variables, name to string value, e.g. `NCCL_IB_MERGE_NICS: "1"`. Variables with
     * their own key are rejected, and so is NCCL_IB_GID_INDEX (it moves at run time). Defaults to {}.
     */
    overrides: z
        .record(
            z.string().superRefine((key, ctx) => {
                const problem = overrideKeyProblem(key);
                if (problem) {
                    ctx.addIssue({ code: "custom", message: problem.message });
                }
            }),
            z.string().regex(/^[^\r\n\0]*$/, { error: "must be a single line" }),
        )
        .default({}),
});

/** Ray cluster settings (used when model.executor is ray). */
export const RaySchema = z.strictObject({
    /** GCS port on the head. Defaults to 6379. */
    port: port().default(6379),
    /**
     * Address the dashboard binds to. The dashboard accepts jobs without auth (ShadowRay,
     * CVE-2023-48022): keep it on loopback and reach it through an SSH tunnel. Defaults to "127.0.0.1".
     */
    dashboardHost: hostOrIpv4().default("127.0.0.1"),
    /** Dashboard port on the head. Defaults to 8265. */
    dashboardPort: port().default(8265),
    /** Object store size per node in MiB. Defaults to Ray's own choice. */
    objectStoreMemoryMb: z.int().min(64).optional(),
    /** Logical CPUs each node offers to Ray (`ray start --num-cpus`). Defaults to Ray's own count. */
    numCpus: z.int().min(1).optional(),
});

/** What vLLM serves and how. */
export const ModelSchema = z.strictObject({
    /** Hugging Face id `org/name`, or an absolute path to a model directory on the nodes. Required. */
    source: z.string().superRefine((text, ctx) => {
        const problem = modelSourceProblem(text);
        if (problem) {
            ctx.addIssue({ code: "custom", message: problem });
        }
    }),
    /** Name clients put in requests. Defaults to the last path segment of `source`. */
    servedName: z.string().regex(/^[^\s]+$/, { error: "must not be empty or contain spaces" }).optional(),
    /**
     * Tensor-parallel size. When neither parallelism is given, the default is tensor parallelism
     * over every GPU: on two Sparks TP=2 measured 2.09x one Spark while PP=2 gave 1.08x
     * (community PR), although seed 002 recommends PP across single-GPU nodes — the choice is
     * yours. Defaults to the cluster's total GPUs, or 1 when only pipelineParallel is given.
     */
    tensorParallel: z.int().min(1).optional(),
    /**
     * Pipeline-parallel size (seed 004 uses PP=4 over 2 Sparks + 2 Thors on sockets). Defaults to 1.
     */
    pipelineParallel: z.int().min(1).optional(),
    /** `ray` (Ray cluster, as in the seeds) or `mp` (vLLM's own multi-node mode, --headless peers). Defaults to "ray". */
    executor: z.enum(["ray", "mp"]).default("ray"),
    /** Fraction of GPU memory vLLM may use, in (0, 1]. Defaults to 0.9. */
    gpuMemoryUtilization: z.number().gt(0).lte(1).default(0.9),
    /** Context length (--max-model-len). Defaults to the model's own. */
    maxModelLen: z.int().min(1).optional(),
    /** Concurrent sequences (--max-num-seqs). Defaults to vLLM's own. */
    maxNumSeqs: z.int().min(1).optional(),
    /** Quantization method (--quantization), e.g. fp8. Defaults to none (from the model's config). */
    quantization: z.string().regex(/^[a-z0-9_]+$/, { error: "must be a vLLM quantization name like fp8 or awq" }).optional(),
    /** KV cache dtype (--kv-cache-dtype), e.g. fp8. Defaults to vLLM's "auto". */
    kvCacheDtype: z.string().regex(/^[a-z0-9_]+$/, { error: "must be a vLLM kv-cache dtype like auto or fp8" }).optional(),
    /** Disable CUDA graphs (--enforce-eager). Defaults to true when any node is a thor, else false. */
    enforceEager: z.boolean().optional(),
    /** Attention backend (--attention-backend), e.g. TRITON_ATTN (seed 004 on Thor). Defaults to vLLM's choice. */
    attentionBackend: z
        .string()
        .regex(/^[A-Za-z0-9_]+$/, { error: "must be a backend name like TRITON_ATTN or FLASH_ATTN" })
        .optional(),
    /** Allow the model repository's own Python code (--trust-remote-code). Defaults to false. */
    trustRemoteCode: z.boolean().default(false),
    /** Further `vllm serve` flags, one `--flag` or `--flag=value` per element. Defaults to []. */
    extraArgs: z
        .array(
            z.string().superRefine((arg, ctx) => {
                const problem = extraArgProblem(arg);
                if (problem) {
                    ctx.addIssue({ code: "custom", message: problem.message });
                }
            }),
        )
        .default([]),
    /** Port of the OpenAI-compatible API on the head. Defaults to 8000. */
    apiPort: port().default(8000),
    /** Address the API binds to on the head. Defaults to "0.0.0.0". */
    apiHost: hostOrIpv4().default("0.0.0.0"),
    /** torch.distributed master port for the mp executor. Defaults to 29500. */
    masterPort: port().default(29500),
});

/** Every key under the `spark-cluster:` namespace. */
export const ClusterConfigSchema = z.strictObject({
    /** The machines, at least two. Required. */
    nodes: z.array(NodeSchema).min(2),
    /** Cabling. Defaults to `{ topology: pair, mtu: 9000 }`. */
    interconnect: InterconnectSchema.prefault({}),
    /** RoCE host settings. Defaults to PFC on priority 3, trust DSCP, nvidia-peermem. */
    roce: RoceSchema.prefault({}),
    /** NCCL settings. Defaults to transport auto, debug WARN. */
    nccl: NcclSchema.prefault({}),
    /** Ray settings. Defaults to ports 6379/8265, dashboard on 127.0.0.1. */
    ray: RaySchema.prefault({}),
    /** The model and vLLM settings. Required (at least `source`). */
    model: ModelSchema,
    /**
     * SECRET. Private key text (OpenSSH or PEM) for every node. Exactly one of this and
     * `sshPrivateKeyPath` unless every node sets ssh.privateKeyPath.
     */
    sshPrivateKey: z
        .string()
        .regex(PRIVATE_KEY_TEXT, {
            error: "must be the text of a private key (-----BEGIN ... PRIVATE KEY-----), not a path or a public key",
        })
        .optional(),
    /** Path of the private key file on the machine that runs pulumi; `~` is not expanded. Alternative to sshPrivateKey. */
    sshPrivateKeyPath: keyFilePath().optional(),
    /** SECRET. Key clients must send to the OpenAI-compatible endpoint, at least 16 characters. Required. */
    apiKey: z
        .string()
        .min(16)
        .regex(/^[^\s]+$/, { error: "must not contain spaces or line breaks" }),
    /** SECRET. Hugging Face token for gated models. Defaults to none. */
    hfToken: z
        .string()
        .regex(/^[^\s]+$/, { error: "must not be empty or contain spaces or line breaks" })
        .optional(),
});

/** The stack config as the schema outputs it, before cross-field defaults. */
export type ParsedConfig = z.output<typeof ClusterConfigSchema>;
/** One node as the schema outputs it. */
export type ParsedNode = z.output<typeof NodeSchema>;
/** One interconnect interface as the schema outputs it. */
export type ParsedInterface = z.output<typeof InterfaceSchema>;
/** The model section as the schema outputs it. */
export type ParsedModel = z.output<typeof ModelSchema>;

// ---------------------------------------------------------------------------------------------
// The resolved config
// ---------------------------------------------------------------------------------------------

export type NodeKind = ParsedNode["kind"];
export type DockerRuntime = z.output<typeof DockerRuntimeSchema>;
export type VenvRuntime = z.output<typeof VenvRuntimeSchema>;
export type Runtime = DockerRuntime | VenvRuntime;
/** The NCCL transport every node uses. */
export type Transport = "roce" | "socket";

/** Where a node's SSH private key comes from. */
export type SshKey =
    | { kind: "secret"; /** The key text. */ text: SecretString }
    | { kind: "path"; /** The key file on the machine that runs pulumi. */ path: string };

/** An interconnect interface with its address taken apart. */
export interface InterconnectInterface {
    /** Linux interface name; undefined means detect it on the node by its address's link. */
    name?: string;
    /** The address with prefix, as configured: `192.168.100.11/24`. */
    address: string;
    /** The address alone: `192.168.100.11`. */
    ip: string;
    /** The prefix length: 24. */
    prefixLength: number;
    /** The subnet: `192.168.100.0/24`. */
    subnet: string;
}

/** A node with every default resolved. */
export interface NodeConfig {
    name: string;
    kind: NodeKind;
    head: boolean;
    ssh: { host: string; port: number; user: string; privateKey: SshKey };
    gpus: number;
    runtime: Runtime;
    interconnect: InterconnectInterface[];
}

/** The model section with parallelism, served name and eager mode resolved. */
export interface ModelConfig extends Omit<ParsedModel, "tensorParallel" | "pipelineParallel" | "servedName" | "enforceEager"> {
    tensorParallel: number;
    pipelineParallel: number;
    servedName: string;
    enforceEager: boolean;
}

/** The validated cluster config: plain data, every default resolved, secrets wrapped. */
export interface Config {
    nodes: NodeConfig[];
    /** Name of the head node. */
    headNode: string;
    /** Sum of the nodes' GPUs. */
    totalGpus: number;
    /** The NCCL transport of the whole cluster (nccl.transport with `auto` resolved). */
    transport: Transport;
    interconnect: z.output<typeof InterconnectSchema>;
    roce: z.output<typeof RoceSchema>;
    nccl: Omit<z.output<typeof NcclSchema>, "transport">;
    ray: z.output<typeof RaySchema>;
    model: ModelConfig;
    apiKey: SecretString;
    hfToken?: SecretString;
}

// ---------------------------------------------------------------------------------------------
// Phase 1: zod issues → ConfigIssues, plus the secret rules
// ---------------------------------------------------------------------------------------------

const EXPECTED_TYPE_WORDS: Readonly<Record<string, string>> = {
    string: "must be a string",
    number: "must be a number",
    int: "must be a whole number",
    boolean: "must be true or false",
    object: "must be a mapping of keys to values",
    record: "must be a mapping of keys to values",
    array: "must be a list",
};

/** The per-parse zod error map: messages a person can act on, never containing the input. */
const zodMessage: z.core.$ZodErrorMap = (issue) => {
    switch (issue.code) {
        case "invalid_type":
            if (issue.input === undefined) {
                return "is required";
            }
            return EXPECTED_TYPE_WORDS[issue.expected] ?? `must be of type ${issue.expected}`;
        case "too_small": {
            const min = Number(issue.minimum);
            if (issue.origin === "string") {
                return min <= 1 ? "must not be empty" : `must be at least ${min} characters long`;
            }
            if (issue.origin === "array") {
                return `must list at least ${min} item${min === 1 ? "" : "s"}`;
            }
            return issue.inclusive ? `must be at least ${min}` : `must be greater than ${min}`;
        }
        case "too_big": {
            const max = Number(issue.maximum);
            if (issue.origin === "string") {
                return `must be at most ${max} characters long`;
            }
            if (issue.origin === "array") {
                return `must list at most ${max} item${max === 1 ? "" : "s"}`;
            }
            return issue.inclusive ? `must be at most ${max}` : `must be less than ${max}`;
        }
        case "invalid_value":
            return issue.values.length === 1
                ? `must be ${String(issue.values[0])}`
                : `must be one of ${issue.values.map(String).join(", ")}`;
        case "invalid_union":
            return "options" in issue && Array.isArray(issue.options)
                ? `must be one of ${issue.options.map(String).join(", ")}`
                : "matches none of the allowed forms";
        case "unrecognized_keys":
            return "is not a known key";
        default:
            return undefined;
    }
};

/** Examples of right values, by normalized path (`[]` for any index, `*` for any map key). */
const EXAMPLES: Readonly<Record<string, string>> = {
    nodes: "[{ name: spark-a, kind: spark, head: true, ssh: { host: 10.0.0.11 }, interconnect: [{ address: 192.168.100.11/24 }] }, { name: spark-b, ... }]",
    "nodes[]": "{ name: spark-a, kind: spark, ssh: { host: 10.0.0.11 }, interconnect: [{ address: 192.168.100.11/24 }] }",
    "nodes[].name": "spark-a",
    "nodes[].kind": "spark (or thor, workstation)",
    "nodes[].head": "true",
    "nodes[].ssh": "{ host: 10.0.0.11, port: 22, user: root }",
    "nodes[].ssh.host": "10.0.0.11",
    "nodes[].ssh.port": "22",
    "nodes[].ssh.user": "root",
    "nodes[].ssh.privateKeyPath": "/home/you/.ssh/id_ed25519",
    "nodes[].gpus": "1",
    "nodes[].runtime": `{ kind: docker, image: ${DEFAULT_VLLM_IMAGE} } (or { kind: venv, path: /opt/vllm-venv })`,
    "nodes[].runtime.kind": "docker (or venv)",
    "nodes[].runtime.image": DEFAULT_VLLM_IMAGE,
    "nodes[].runtime.privileged": "true",
    "nodes[].runtime.memlockUnlimited": "true",
    "nodes[].runtime.shmSize": "16g",
    "nodes[].runtime.path": "/opt/vllm-venv",
    "nodes[].interconnect": "[{ name: enp1s0f1np1, address: 192.168.100.11/24 }, { name: enP2p1s0f1np1, address: 192.168.101.11/24 }]",
    "nodes[].interconnect[]": "{ name: enp1s0f1np1, address: 192.168.100.11/24 }",
    "nodes[].interconnect[].name": "enp1s0f1np1",
    "nodes[].interconnect[].address": "192.168.100.11/24",
    interconnect: "{ topology: pair, mtu: 9000 }",
    "interconnect.topology": "pair (or switch)",
    "interconnect.mtu": "9000",
    roce: "{ enabled: true, priority: 3 }",
    "roce.enabled": "true",
    "roce.priority": "3",
    "roce.trustDscp": "true",
    "roce.peermem": "true",
    nccl: "{ transport: auto, debug: WARN }",
    "nccl.transport": "auto (or roce, socket)",
    "nccl.ibHca": "[rocep1s0f1, roceP2p1s0f1]",
    "nccl.ibHca[]": "rocep1s0f1",
    "nccl.socketIfname": "enp1s0f1np1",
    "nccl.debug": "INFO",
    "nccl.overrides": '{ NCCL_IB_MERGE_NICS: "1" }',
    "nccl.overrides.*": 'NCCL_IB_MERGE_NICS: "1"',
    ray: "{ port: 6379, dashboardHost: 127.0.0.1, dashboardPort: 8265 }",
    "ray.port": "6379",
    "ray.dashboardHost": "127.0.0.1",
    "ray.dashboardPort": "8265",
    "ray.objectStoreMemoryMb": "8192",
    model: "{ source: Qwen/Qwen2.5-7B-Instruct }",
    "model.source": "Qwen/Qwen2.5-7B-Instruct (or /models/qwen2.5-7b-instruct)",
    "model.servedName": "qwen2.5-7b",
    "model.tensorParallel": "2",
    "model.pipelineParallel": "1",
    "model.executor": "ray (or mp)",
    "model.gpuMemoryUtilization": "0.85",
    "model.maxModelLen": "32768",
    "model.maxNumSeqs": "64",
    "model.quantization": "fp8",
    "model.kvCacheDtype": "fp8",
    "model.enforceEager": "true",
    "model.attentionBackend": "TRITON_ATTN",
    "model.trustRemoteCode": "false",
    "model.extraArgs": "[--swap-space=16, --disable-custom-all-reduce]",
    "model.extraArgs[]": "--swap-space=16",
    "model.apiPort": "8000",
    "model.apiHost": "0.0.0.0",
    "model.masterPort": "29500",
    sshPrivateKey: `pulumi config set --secret ${CONFIG_NAMESPACE}:sshPrivateKey "$(cat ~/.ssh/id_ed25519)"`,
    sshPrivateKeyPath: `pulumi config set ${CONFIG_NAMESPACE}:sshPrivateKeyPath /home/you/.ssh/id_ed25519`,
    apiKey: `pulumi config set --secret ${CONFIG_NAMESPACE}:apiKey "$(openssl rand -hex 24)"`,
    hfToken: `pulumi config set --secret ${CONFIG_NAMESPACE}:hfToken hf_...`,
};

/** The known keys of each object, by normalized path, for unknown-key messages. */
function knownKeys(normalizedPath: string, objectValue: unknown): readonly string[] {
    const runtimeKind = isRecord(objectValue) ? objectValue["kind"] : undefined;
    const tables: Readonly<Record<string, readonly string[]>> = {
        "": Object.keys(ClusterConfigSchema.shape),
        "nodes[]": Object.keys(NodeSchema.shape),
        "nodes[].ssh": Object.keys(SshSchema.shape),
        "nodes[].runtime": Object.keys(
            runtimeKind === "venv" ? VenvRuntimeSchema.shape : DockerRuntimeSchema.shape,
        ),
        "nodes[].interconnect[]": Object.keys(InterfaceSchema.shape),
        interconnect: Object.keys(InterconnectSchema.shape),
        roce: Object.keys(RoceSchema.shape),
        nccl: Object.keys(NcclSchema.shape),
        ray: Object.keys(RaySchema.shape),
        model: Object.keys(ModelSchema.shape),
    };
    return tables[normalizedPath] ?? [];
}

function isRecord(value: unknown): value is Record<string, unknown> {
    return typeof value === "object" && value !== null && !Array.isArray(value);
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
    let current = root;
    for (const segment of path) {
        if (Array.isArray(current) && typeof segment === "number") {
            current = current[segment];
        } else if (isRecord(current) && typeof segment === "string" && Object.hasOwn(current, segment)) {
            current = current[segment];
        } else {
            return undefined;
        }
    }
    return current;
}

function normalizePath(path: readonly PropertyKey[]): string {
    const normalized = path.map((segment, i) =>
        typeof segment === "number" ? "[]" : i === 2 && path[0] === "nccl" && path[1] === "overrides" ? "*" : String(segment),
    );
    return normalized.reduce((out, segment) => (segment === "[]" ? `${out}[]` : out === "" ? segment : `${out}.${segment}`), "");
}

function exampleFor(path: readonly PropertyKey[]): string {
    return EXAMPLES[normalizePath(path)] ?? "see the TSDoc of this key in config.ts";
}

/** The edit distance between two short strings, a swap of neighbours counting as one edit (for "did you mean"). */
function editDistance(a: string, b: string): number {
    const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
        Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
    );
    for (let i = 1; i <= a.length; i++) {
        for (let j = 1; j <= b.length; j++) {
            const cost = a[i - 1] === b[j - 1] ? 0 : 1;
            d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
                d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
            }
        }
    }
    return d[a.length][b.length];
}

function closestKey(key: string, candidates: readonly string[]): string | undefined {
    let best: string | undefined;
    let bestDistance = Infinity;
    for (const candidate of candidates) {
        const distance = candidate.toLowerCase() === key.toLowerCase() ? 0 : editDistance(key, candidate);
        if (distance < bestDistance) {
            best = candidate;
            bestDistance = distance;
        }
    }
    return bestDistance <= Math.max(1, Math.floor(key.length / 3)) ? best : undefined;
}

const SECRET_LOOKING_KEY = /key|token|secret|passw|credential/i;

/** True when the value at this path must not be shown: a secret key, or a key that looks like one. */
function isSecretPath(path: readonly PropertyKey[], secretKeys: ReadonlySet<string>): boolean {
    const top = String(path[0] ?? "");
    if ((SECRET_KEYS as readonly string[]).includes(top) || secretKeys.has(top)) {
        return true;
    }
    const last = path[path.length - 1];
    return typeof last === "string" && SECRET_LOOKING_KEY.test(last) && !/path$/i.test(last);
}

function describeAt(raw: RawConfig, path: readonly PropertyKey[]): string {
    const value = valueAt(raw.values, path);
    const looksSecret = typeof value === "string" && PRIVATE_KEY_TEXT.test(value);
    return isSecretPath(path, raw.secretKeys) || looksSecret ? describeSecret(value) : describeValue(value);
}

function fromZodIssue(issue: z.core.$ZodIssue, raw: RawConfig): ConfigIssue[] {
    const path = issue.path;
    if (issue.code === "unrecognized_keys") {
        const parent = valueAt(raw.values, path);
        const known = knownKeys(normalizePath(path), parent);
        return issue.keys.map((key) => {
            const suggestion = closestKey(key, known);
            return {
                path: formatPath([...path, key]),
                message: suggestion ? `is not a known key; did you mean "${suggestion}"?` : "is not a known key",
                got: describeAt(raw, [...path, key]),
                example: suggestion
                    ? `${suggestion}: ${exampleFor([...path, suggestion])}`
                    : `remove it; the keys here are ${known.join(", ")}`,
            };
        });
    }
    if (issue.code === "invalid_key") {
        const key = String(path[path.length - 1]);
        const problem = overrideKeyProblem(key);
        return [
            {
                path: formatPath(path),
                message: problem?.message ?? issue.issues.map((inner) => inner.message).join("; "),
                got: describeValue(key),
                example: problem?.example ?? exampleFor(path),
            },
        ];
    }
    let example = exampleFor(path);
    if (issue.code === "custom" && normalizePath(path) === "model.extraArgs[]") {
        const value = valueAt(raw.values, path);
        example = (typeof value === "string" ? extraArgProblem(value)?.example : undefined) ?? example;
    }
    return [{ path: formatPath(path), message: issue.message, got: describeAt(raw, path), example }];
}

/**
 * Secrets must be set with `--secret`: a secret key present in the config but missing from
 * `secretKeys` sits in plaintext in the stack file.
 */
export function checkSecretsAreSecret(
    values: Readonly<Record<string, unknown>>,
    secretKeys: ReadonlySet<string>,
): ConfigIssue[] {
    return SECRET_KEYS.filter((key) => values[key] !== undefined && !secretKeys.has(key)).map((key) => ({
        path: key,
        message:
            "was set without --secret, so it sits in plaintext in the stack file; set it again as a secret (and rotate it if that file was shared)",
        got: describeSecret(values[key]),
        example: EXAMPLES[key],
    }));
}

/**
 * Exactly one cluster-wide SSH key source: `sshPrivateKey` (secret text) or `sshPrivateKeyPath`
 * (a file). Neither is needed when every node names its own ssh.privateKeyPath.
 */
export function checkSshKeySource(values: Readonly<Record<string, unknown>>): ConfigIssue[] {
    const hasText = values["sshPrivateKey"] !== undefined;
    const hasPath = values["sshPrivateKeyPath"] !== undefined;
    if (hasText && hasPath) {
        return [
            {
                path: "sshPrivateKeyPath",
                message: `and ${CONFIG_NAMESPACE}:sshPrivateKey are both set; give exactly one of them`,
                got: describeValue(values["sshPrivateKeyPath"]),
                example: `pulumi config rm ${CONFIG_NAMESPACE}:sshPrivateKeyPath`,
            },
        ];
    }
    const nodes = values["nodes"];
    const everyNodeHasKey =
        Array.isArray(nodes) &&
        nodes.length > 0 &&
        nodes.every((node) => typeof valueAt(node, ["ssh", "privateKeyPath"]) === "string");
    if (!hasText && !hasPath && !everyNodeHasKey) {
        return [
            {
                path: "sshPrivateKey",
                message: `is missing: set exactly one of ${CONFIG_NAMESPACE}:sshPrivateKey (the key text, as a secret) or ${CONFIG_NAMESPACE}:sshPrivateKeyPath (a key file)`,
                got: "nothing",
                example: EXAMPLES["sshPrivateKey"],
            },
        ];
    }
    return [];
}

// ---------------------------------------------------------------------------------------------
// Phase 2: cross-field rules (each pure, each exported, each table-tested)
// ---------------------------------------------------------------------------------------------

function nodeLabel(index: number, nodes: readonly { name: string }[]): string {
    return `nodes[${index}] (${nodes[index].name})`;
}

/** A Thor needs a venv runtime (pip wheels lack sm_110; seed 004); only a Spark has twin interfaces. */
export function checkNodeKinds(
    nodes: readonly Pick<ParsedNode, "name" | "kind" | "runtime" | "interconnect">[],
): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        if (node.kind === "thor" && node.runtime === undefined) {
            issues.push({
                path: `nodes[${i}].runtime`,
                message:
                    "is required on a thor: vLLM's pip wheels lack sm_110 kernels, so a Jetson Thor runs vLLM from a source-built venv (seed 004)",
                got: "nothing",
                example: "{ kind: venv, path: /opt/vllm-venv }",
            });
        } else if (node.kind === "thor" && node.runtime?.kind === "docker") {
            issues.push({
                path: `nodes[${i}].runtime.kind`,
                message:
                    "must be venv on a thor: vLLM's pip wheels lack sm_110 kernels, so a Jetson Thor runs vLLM from a source-built venv (seed 004)",
                got: describeValue(node.runtime.kind),
                example: "{ kind: venv, path: /opt/vllm-venv }",
            });
        }
        if (node.kind === "thor") {
            node.interconnect.forEach((iface, j) => {
                if (iface.name === undefined) {
                    issues.push({
                        path: `nodes[${i}].interconnect[${j}].name`,
                        message:
                            "is required on a thor: interfaces are detected through ibdev2netdev, and a Jetson Thor has no RoCE device to report (`ip -br link` on the Thor shows the name)",
                        got: "nothing",
                        example: "name: mgbe0_0",
                    });
                }
            });
        }
        if (node.kind !== "spark" && node.interconnect.length > 1) {
            issues.push({
                path: `nodes[${i}].interconnect`,
                message: `lists ${node.interconnect.length} interfaces, but only a spark has twin interfaces; a ${node.kind} has one`,
                got: `${node.interconnect.length} interfaces`,
                example: "[{ address: 192.168.100.31/24 }]",
            });
        }
    });
    return issues;
}

/** Exactly one node has `head: true`. */
export function checkExactlyOneHead(nodes: readonly Pick<ParsedNode, "name" | "head">[]): ConfigIssue[] {
    const heads = nodes.flatMap((node, i) => (node.head ? [i] : []));
    if (heads.length === 0) {
        return [
            {
                path: "nodes",
                message: "has no head: exactly one node must have head: true (it runs the Ray head and serves the API)",
                got: `${nodes.length} nodes, none with head: true`,
                example: nodes.length > 0 ? `head: true on ${nodeLabel(0, nodes)}` : "head: true on one node",
            },
        ];
    }
    return heads.slice(1).map((i) => ({
        path: `nodes[${i}].head`,
        message: `is true, but ${nodeLabel(heads[0], nodes)} is already the head; exactly one node may be the head`,
        got: "true",
        example: "false (or leave head out)",
    }));
}

/** Node names are unique (they name resources and /etc/hosts entries). */
export function checkUniqueNodeNames(nodes: readonly Pick<ParsedNode, "name">[]): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        const first = nodes.findIndex((other) => other.name === node.name);
        if (first < i) {
            issues.push({
                path: `nodes[${i}].name`,
                message: `repeats the name of nodes[${first}]; node names must be unique`,
                got: describeValue(node.name),
                example: `${node.name}-2`,
            });
        }
    });
    return issues;
}

/** No two nodes share an SSH endpoint (host:port); host names compare case-insensitively. */
export function checkUniqueSshEndpoints(nodes: readonly (Pick<ParsedNode, "name"> & { ssh: { host: string; port: number } })[]): ConfigIssue[] {
    const endpoint = (node: { ssh: { host: string; port: number } }) => `${node.ssh.host.toLowerCase()}:${node.ssh.port}`;
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        const first = nodes.findIndex((other) => endpoint(other) === endpoint(node));
        if (first < i) {
            issues.push({
                path: `nodes[${i}].ssh.host`,
                message: `with port ${node.ssh.port} is also the SSH endpoint of ${nodeLabel(first, nodes)}; each node needs its own`,
                got: describeValue(node.ssh.host),
                example: "10.0.0.12",
            });
        }
    });
    return issues;
}

/** Every interconnect IP address is used once in the whole cluster. */
export function checkUniqueAddresses(nodes: readonly Pick<ParsedNode, "name" | "interconnect">[]): ConfigIssue[] {
    const seen = new Map<number, string>();
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        node.interconnect.forEach((iface, k) => {
            const ip = parseCidr(iface.address).ip;
            const owner = seen.get(ip);
            if (owner !== undefined) {
                issues.push({
                    path: `nodes[${i}].interconnect[${k}].address`,
                    message: `uses ${formatIpv4(ip)}, which ${owner} already has; every interconnect address must be unique`,
                    got: describeValue(iface.address),
                    example: "192.168.100.12/24",
                });
            } else {
                seen.set(ip, `nodes[${i}].interconnect[${k}] (${node.name})`);
            }
        });
    });
    return issues;
}

/**
 * Each link is one subnet: for every interface index i, each node's i-th interface lies in the
 * subnet (same prefix length) of the first node that has an i-th interface, and that subnet has
 * at least two members ("no peer on this link" otherwise).
 */
export function checkAddressesInSubnets(nodes: readonly Pick<ParsedNode, "name" | "interconnect">[]): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    const maxInterfaces = Math.max(0, ...nodes.map((node) => node.interconnect.length));
    for (let k = 0; k < maxInterfaces; k++) {
        const members = nodes.flatMap((node, i) => (node.interconnect[k] ? [i] : []));
        const refIndex = members[0];
        const ref = parseCidr(nodes[refIndex].interconnect[k].address);
        const refLabel = `nodes[${refIndex}].interconnect[${k}] (${nodes[refIndex].name})`;
        if (members.length < 2) {
            issues.push({
                path: `nodes[${refIndex}].interconnect[${k}].address`,
                message: `has no peer on this link: no other node has an interconnect[${k}] in ${formatSubnet(ref)}`,
                got: describeValue(nodes[refIndex].interconnect[k].address),
                example: `remove this interface, or give another node an interconnect[${k}] in ${formatSubnet(ref)}`,
            });
            continue;
        }
        for (const i of members.slice(1)) {
            const address = nodes[i].interconnect[k].address;
            const cidr = parseCidr(address);
            if (cidr.prefixLength !== ref.prefixLength) {
                issues.push({
                    path: `nodes[${i}].interconnect[${k}].address`,
                    message: `has prefix /${cidr.prefixLength}, but ${refLabel} uses /${ref.prefixLength}; every address on one link needs the same prefix`,
                    got: describeValue(address),
                    example: `${formatIpv4(cidr.ip)}/${ref.prefixLength}`,
                });
            } else if (cidr.network !== ref.network) {
                issues.push({
                    path: `nodes[${i}].interconnect[${k}].address`,
                    message: `is not inside ${formatSubnet(ref)}, the subnet of ${refLabel}`,
                    got: describeValue(address),
                    example: `${formatIpv4(ref.network + ((cidr.ip - cidr.network) % (ref.broadcast - ref.network)))}/${ref.prefixLength}`,
                });
            }
        }
    }
    return issues;
}

/** A Spark's twin interfaces never share (or overlap) a subnet (NVIDIA's playbook). */
export function checkTwinSubnets(nodes: readonly Pick<ParsedNode, "name" | "interconnect">[]): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        const [first, second] = node.interconnect;
        if (first && second && subnetsOverlap(parseCidr(first.address), parseCidr(second.address))) {
            issues.push({
                path: `nodes[${i}].interconnect[1].address`,
                message: `overlaps the subnet of its twin interconnect[0] (${first.address}); twin interfaces must never share a subnet`,
                got: describeValue(second.address),
                example: "192.168.101.11/24 next to 192.168.100.11/24",
            });
        }
    });
    return issues;
}

/** Interface names on one node are unique. */
export function checkInterfaceNames(nodes: readonly Pick<ParsedNode, "name" | "interconnect">[]): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) => {
        node.interconnect.forEach((iface, k) => {
            if (iface.name !== undefined && node.interconnect.findIndex((other) => other.name === iface.name) < k) {
                issues.push({
                    path: `nodes[${i}].interconnect[${k}].name`,
                    message: "names the same interface as another interconnect entry of this node",
                    got: describeValue(iface.name),
                    example: "enP2p1s0f1np1 next to enp1s0f1np1",
                });
            }
        });
    });
    return issues;
}

/**
 * The parallelism vLLM runs with. Neither given: tensor parallelism over every GPU (TP=2
 * measured 2.09x one Spark vs PP=2 1.08x on two Sparks; seed 002 recommends PP instead, so set
 * it explicitly if you follow the seed). One given: the other is 1.
 */
export function resolveParallelism(
    model: Pick<ParsedModel, "tensorParallel" | "pipelineParallel">,
    totalGpus: number,
): { tensorParallel: number; pipelineParallel: number } {
    if (model.tensorParallel === undefined && model.pipelineParallel === undefined) {
        return { tensorParallel: totalGpus, pipelineParallel: 1 };
    }
    return { tensorParallel: model.tensorParallel ?? 1, pipelineParallel: model.pipelineParallel ?? 1 };
}

/** tensorParallel × pipelineParallel fits in the cluster's GPUs. */
export function checkParallelismFitsGpus(
    model: Pick<ParsedModel, "tensorParallel" | "pipelineParallel">,
    totalGpus: number,
): ConfigIssue[] {
    const { tensorParallel, pipelineParallel } = resolveParallelism(model, totalGpus);
    const product = tensorParallel * pipelineParallel;
    if (product <= totalGpus) {
        return [];
    }
    const key = model.tensorParallel !== undefined ? "tensorParallel" : "pipelineParallel";
    return [
        {
            path: `model.${key}`,
            message: `asks for tensorParallel x pipelineParallel = ${tensorParallel} x ${pipelineParallel} = ${product} GPUs, but the cluster has ${totalGpus} GPUs (the sum of nodes[].gpus)`,
            got: describeValue(model[key]),
            example: `tensorParallel: ${totalGpus}, pipelineParallel: 1 (or tensorParallel: 1, pipelineParallel: ${totalGpus})`,
        },
    ];
}

/** The cluster's NCCL transport: `auto` is socket when any node is a Thor, else roce. */
export function resolveTransport(
    requested: z.output<typeof NcclSchema>["transport"],
    nodes: readonly Pick<ParsedNode, "kind">[],
): Transport {
    if (requested !== "auto") {
        return requested;
    }
    return nodes.some((node) => node.kind === "thor") ? "socket" : "roce";
}

/** A cluster with a Thor runs NCCL over sockets everywhere (seed 004). */
export function checkTransport(
    requested: z.output<typeof NcclSchema>["transport"],
    nodes: readonly Pick<ParsedNode, "name" | "kind">[],
): ConfigIssue[] {
    const thor = nodes.findIndex((node) => node.kind === "thor");
    if (requested !== "roce" || thor < 0) {
        return [];
    }
    return [
        {
            path: "nccl.transport",
            message: `cannot be roce: ${nodeLabel(thor, nodes)} is a thor, and Thor has no RoCE; NCCL fails with 'wrong type 3 != 4'. A cluster with a Thor runs NCCL over sockets on every node`,
            got: describeValue(requested),
            example: "auto (socket when a Thor is present) or socket",
        },
    ];
}

/** The service ports differ from each other and from every node's SSH port. */
export function checkPorts(
    ray: Pick<z.output<typeof RaySchema>, "port" | "dashboardPort">,
    model: Pick<ParsedModel, "apiPort" | "masterPort">,
    nodes: readonly (Pick<ParsedNode, "name"> & { ssh: { port: number } })[],
): ConfigIssue[] {
    const services: [string, number][] = [
        ["ray.port", ray.port],
        ["ray.dashboardPort", ray.dashboardPort],
        ["model.apiPort", model.apiPort],
        ["model.masterPort", model.masterPort],
    ];
    const issues: ConfigIssue[] = [];
    services.forEach(([key, value], s) => {
        const earlier = services.slice(0, s).find(([, other]) => other === value);
        const sshNode = nodes.findIndex((node) => node.ssh.port === value);
        const clash = earlier ? earlier[0] : sshNode >= 0 ? `nodes[${sshNode}].ssh.port (${nodes[sshNode].name})` : undefined;
        if (clash) {
            issues.push({
                path: key,
                message: `collides with ${clash}; ray.port, ray.dashboardPort, model.apiPort, model.masterPort and the SSH ports must all differ`,
                got: describeValue(value),
                example: EXAMPLES[key],
            });
        }
    });
    return issues;
}

/** `pair` is two nodes cabled back to back; `switch` is two or more. */
export function checkTopology(topology: z.output<typeof InterconnectSchema>["topology"], nodeCount: number): ConfigIssue[] {
    if (topology === "pair" && nodeCount !== 2) {
        return [
            {
                path: "interconnect.topology",
                message: `is pair (two nodes cabled back to back), but nodes lists ${nodeCount}`,
                got: describeValue(topology),
                example: "switch",
            },
        ];
    }
    if (topology === "switch" && nodeCount < 2) {
        return [
            {
                path: "interconnect.topology",
                message: `is switch, but nodes lists ${nodeCount}; a cluster needs at least 2 nodes`,
                got: describeValue(topology),
                example: "switch, with two or more nodes",
            },
        ];
    }
    return [];
}

/** Every cross-field rule, in the order their issues are reported. */
export function checkCrossFieldRules(config: ParsedConfig): ConfigIssue[] {
    const totalGpus = config.nodes.reduce((sum, node) => sum + node.gpus, 0);
    return [
        ...checkNodeKinds(config.nodes),
        ...checkExactlyOneHead(config.nodes),
        ...checkUniqueNodeNames(config.nodes),
        ...checkUniqueSshEndpoints(config.nodes),
        ...checkUniqueAddresses(config.nodes),
        ...checkAddressesInSubnets(config.nodes),
        ...checkTwinSubnets(config.nodes),
        ...checkInterfaceNames(config.nodes),
        ...checkParallelismFitsGpus(config.model, totalGpus),
        ...checkTransport(config.nccl.transport, config.nodes),
        ...checkPorts(config.ray, config.model, config.nodes),
        ...checkTopology(config.interconnect.topology, config.nodes.length),
    ];
}

// ---------------------------------------------------------------------------------------------
// Phase 3: resolve
// ---------------------------------------------------------------------------------------------

function resolveInterface(iface: ParsedInterface): InterconnectInterface {
    const cidr = parseCidr(iface.address);
    return {
        ...(iface.name !== undefined ? { name: iface.name } : {}),
        address: iface.address,
        ip: formatIpv4(cidr.ip),
        prefixLength: cidr.prefixLength,
        subnet: formatSubnet(cidr),
    };
}

function resolveConfig(parsed: ParsedConfig): Config {
    const totalGpus = parsed.nodes.reduce((sum, node) => sum + node.gpus, 0);
    const clusterKey: SshKey | undefined =
        parsed.sshPrivateKey !== undefined
            ? { kind: "secret", text: new SecretString(parsed.sshPrivateKey) }
            : parsed.sshPrivateKeyPath !== undefined
              ? { kind: "path", path: parsed.sshPrivateKeyPath }
              : undefined;
    const sshKeyOf = (node: ParsedNode): SshKey => {
        if (node.ssh.privateKeyPath !== undefined) {
            return { kind: "path", path: node.ssh.privateKeyPath };
        }
        if (clusterKey === undefined) {
            throw new Error(`internal: checkSshKeySource let ${node.name} through without a key`);
        }
        return clusterKey;
    };
    const nodes: NodeConfig[] = parsed.nodes.map((node) => ({
        name: node.name,
        kind: node.kind,
        head: node.head,
        ssh: {
            host: node.ssh.host,
            port: node.ssh.port,
            user: node.ssh.user,
            privateKey: sshKeyOf(node),
        },
        gpus: node.gpus,
        runtime: node.runtime ?? DockerRuntimeSchema.parse({ kind: "docker" }),
        interconnect: node.interconnect.map(resolveInterface),
    }));
    const { tensorParallel, pipelineParallel, servedName, enforceEager, ...model } = parsed.model;
    const parallelism = resolveParallelism({ tensorParallel, pipelineParallel }, totalGpus);
    const { transport, ...nccl } = parsed.nccl;
    return {
        nodes,
        headNode: nodes.find((node) => node.head)?.name ?? "",
        totalGpus,
        transport: resolveTransport(transport, parsed.nodes),
        interconnect: parsed.interconnect,
        roce: parsed.roce,
        nccl,
        ray: parsed.ray,
        model: {
            ...model,
            ...parallelism,
            servedName: servedName ?? defaultServedName(model.source),
            enforceEager: enforceEager ?? parsed.nodes.some((node) => node.kind === "thor"),
        },
        apiKey: new SecretString(parsed.apiKey),
        ...(parsed.hfToken !== undefined ? { hfToken: new SecretString(parsed.hfToken) } : {}),
    };
}

/** The served model name when none is given: the last path segment of the source. */
export function defaultServedName(source: string): string {
    const segments = source.split("/").filter((segment) => segment !== "");
    return segments[segments.length - 1] ?? source;
}

// ---------------------------------------------------------------------------------------------
// The entry point
// ---------------------------------------------------------------------------------------------

/** The stack config as Pulumi holds it. */
export interface RawConfig {
    /** Every key under the spark-cluster: namespace, WITHOUT the prefix, values already JSON-parsed objects/strings as Pulumi gives them. */
    values: Record<string, unknown>;
    /** Keys (without prefix) that Pulumi holds as secrets (set with --secret). */
    secretKeys: ReadonlySet<string>;
}

/**
 * Validates the stack config and resolves every default. Throws a {@link ConfigError} that lists
 * every problem of the first phase that found any (fields and secrets first, then cross-field
 * rules, which assume well-typed input).
 */
export function parseConfig(raw: RawConfig): Config {
    const result = ClusterConfigSchema.safeParse(raw.values, { error: zodMessage });
    const fieldIssues = [
        ...(result.success ? [] : result.error.issues.flatMap((issue) => fromZodIssue(issue, raw))),
        ...checkSecretsAreSecret(raw.values, raw.secretKeys),
        ...checkSshKeySource(raw.values),
    ];
    if (!result.success || fieldIssues.length > 0) {
        throw new ConfigError(fieldIssues);
    }
    const crossFieldIssues = checkCrossFieldRules(result.data);
    if (crossFieldIssues.length > 0) {
        throw new ConfigError(crossFieldIssues);
    }
    return resolveConfig(result.data);
}
