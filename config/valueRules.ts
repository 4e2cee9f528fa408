// Rules for single values that the schema applies with superRefine: model
// sources, extra vLLM flags (not one the project renders, not an abbreviation
// of one), and NCCL override names.
import { CONFIG_NAMESPACE } from "./namespace";
import { PROJECT_ENV, RUNTIME_ENV_PATH } from "./hostPaths";

/**
 * `org/name` as the hub client takes it (huggingface_hub's validate_repo_id, which `hf download`
 * and vLLM run first): letters, digits, `-`, `_` and `.`, each part ending in a letter, digit or
 * `_`, the name at most 96 characters; no `--` or `..` anywhere, no `.git` at the end.
 */
const HF_MODEL_ID = /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?\/[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?$/;
const NCCL_VARIABLE = /^NCCL_[A-Z0-9_]+$/;

/** Whether a model source is a directory on the nodes (an absolute path) rather than a Hugging Face id. */
export function isLocalModelPath(source: string): boolean {
    return source.startsWith("/");
}

export function modelSourceProblem(text: string): string | undefined {
    if (isLocalModelPath(text)) {
        if (/[\s:,\0-\x1f\x7f]/.test(text) || text.split("/").every((segment) => segment === "")) {
            return "must be an absolute path to the model's directory, without spaces, `:` or `,` (a container mounts it)";
        }
        // The kernel's PATH_MAX (4096 with its NUL) and NAME_MAX (255 bytes a name).
        if (Buffer.byteLength(text, "utf8") > 4095 || text.split("/").some((segment) => Buffer.byteLength(segment, "utf8") > 255)) {
            return "must be a path Linux can open: at most 4095 bytes, each name in it at most 255";
        }
        // Its last directory is the served name when model.servedName is not set: vLLM would read one
        // starting with - as a flag.
        const names = text.split("/").filter((segment) => segment !== "");
        if (names[names.length - 1].startsWith("-")) {
            return "must not end in a directory whose name starts with - (the served name defaults to it, and vLLM would read it as a flag); rename the directory";
        }
        return undefined;
    }
    return HF_MODEL_ID.test(text) && !/--|\.\./.test(text) && !text.endsWith(".git")
        ? undefined
        : "must be a Hugging Face model id (org/name) or an absolute path to a local model directory; an id as the hub takes it has letters, digits, -, _ and ., each part ending in a letter, digit or _, no -- or .., a name of at most 96 characters";
}

/** The vLLM flags this project renders itself, with the key to set instead and an example. */
const RENDERED_VLLM_FLAGS: Readonly<Record<string, { key: string; example: string }>> = {
    "--model": { key: "model.source", example: "model: { source: Qwen/Qwen2.5-7B-Instruct }" },
    "--tensor-parallel-size": { key: "model.tensorParallel", example: "model: { tensorParallel: 2 }" },
    "--pipeline-parallel-size": { key: "model.pipelineParallel", example: "model: { pipelineParallel: 2 }" },
    "--distributed-executor-backend": { key: "model.executor", example: "model: { executor: mp }" },
    "--gpu-memory-utilization": { key: "model.gpuMemoryUtilization", example: "model: { gpuMemoryUtilization: 0.85 }" },
    // vLLM's alias of --gpu-memory-utilization (vLLM 0.33's argument table).
    "--device-memory-utilization": { key: "model.gpuMemoryUtilization", example: "model: { gpuMemoryUtilization: 0.85 }" },
    "--kv-cache-memory-bytes": { key: "model.kvCacheMemoryBytes", example: "model: { kvCacheMemoryBytes: 34359738368 }" },
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
    "--master-port": { key: "model.masterPort", example: "model: { masterPort: 29501 }" },
    "--nnodes": { key: "nodes (rendered per node for the mp executor)", example: "model: { executor: mp }" },
    "--node-rank": { key: "nodes (rendered per node for the mp executor)", example: "model: { executor: mp }" },
    "--master-addr": { key: "nodes (rendered per node for the mp executor)", example: "model: { executor: mp }" },
    "--headless": { key: "nodes (rendered per node for the mp executor)", example: "model: { executor: mp }" },
};

/**
 * Why one element of `model.extraArgs` is rejected, or undefined: it must be one `--flag` or
 * `--flag=value` token, and not a flag the project renders from its own key. vLLM reads `_` and
 * `-` alike, boolean flags also come as `--no-<flag>`, and `--flag.key=value` sets a key of the
 * flag's JSON value (FlexibleArgumentParser: the flag is what precedes the first `.`); every
 * spelling is caught.
 */
export function extraArgProblem(arg: string): { message: string; example: string } | undefined {
    if (!/^--[A-Za-z0-9]/.test(arg)) {
        return {
            message: "must be one token starting with --; give a flag's value after =",
            example: "--max-num-batched-tokens=8192",
        };
    }
    if (/[\0-\x1f\x7f]/.test(arg)) {
        return { message: "must not contain line breaks or other control characters", example: "--max-num-batched-tokens=8192" };
    }
    // Every script that carries the unit is one argument of the SSH login shell: the kernel takes at
    // most 128 KiB there (MAX_ARG_STRLEN); a flag stays far below.
    if (arg.length > 4096) {
        return { message: "must be at most 4096 characters (put a long value in a file and pass its path)", example: "--chat-template=/models/chat.jinja" };
    }
    const flag = arg.split("=")[0].split(".")[0].replace(/_/g, "-").toLowerCase();
    const rendered = RENDERED_VLLM_FLAGS[flag] ?? RENDERED_VLLM_FLAGS[flag.replace(/^--no-/, "--")];
    if (rendered) {
        return {
            message: `sets ${flag}, which the project renders itself; use ${rendered.key} instead`,
            example: rendered.example,
        };
    }
    // vLLM's parser is argparse with abbreviations allowed: `--max-model` would set --max-model-len.
    const bare = flag.replace(/^--no-/, "--");
    const abbreviated = Object.keys(RENDERED_VLLM_FLAGS).find((name) => name !== bare && name.startsWith(bare));
    if (abbreviated) {
        return {
            message: `is an abbreviation that vLLM's argument parser expands to ${abbreviated}, which the project renders itself; use ${RENDERED_VLLM_FLAGS[abbreviated].key} instead`,
            example: RENDERED_VLLM_FLAGS[abbreviated].example,
        };
    }
    return undefined;
}

/** NCCL variables that have their own key, or that must not be set at all. */
const RESERVED_NCCL_VARIABLES: Readonly<Record<string, { message: string; example: string }>> = {
    NCCL_IB_GID_INDEX: {
        message: "must not be pinned: the RoCE GID index moves at run time (3 to 4 within 30 minutes on one Spark) and NCCL >= 2.21 picks it itself",
        example: 'remove it; set NCCL_IB_ROCE_VERSION_NUM: "2" if you need RoCE v2',
    },
    NCCL_IB_DISABLE: { message: "is rendered from nccl.transport; set that instead", example: "nccl: { transport: socket }" },
    NCCL_SOCKET_IFNAME: { message: "is rendered from nccl.socketIfname; set that instead", example: "nccl: { socketIfname: enp1s0f1np1 }" },
    NCCL_IB_HCA: { message: "is rendered from nccl.ibHca; set that instead", example: "nccl: { ibHca: [rocep1s0f1, roceP2p1s0f1] }" },
    NCCL_DEBUG: { message: "is rendered from nccl.debug; set that instead", example: "nccl: { debug: INFO }" },
    NCCL_IB_TC: {
        message: "is rendered from roce.dscp (DSCP << 2 | 2), so that NCCL's packets land in the PFC priority; set that instead",
        example: "roce: { dscp: 26 }",
    },
};

export function overrideKeyProblem(key: string): { message: string; example: string } | undefined {
    if (!NCCL_VARIABLE.test(key)) {
        return {
            message: "is not an NCCL variable; keys must match ^NCCL_[A-Z0-9_]+$",
            example: 'NCCL_IB_MERGE_NICS: "1"',
        };
    }
    return RESERVED_NCCL_VARIABLES[key];
}

/** A shell and environment variable name: a letter or `_`, then letters, digits or `_`. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** Where to set instead a variable the project writes into the runtime env file. */
const RUNTIME_ENV_KEYS: Readonly<Record<string, { key: string; example: string }>> = {
    NCCL_DEBUG: { key: "nccl.debug", example: "nccl: { debug: INFO }" },
    NCCL_SOCKET_IFNAME: { key: "nccl.socketIfname", example: "nccl: { socketIfname: enp1s0f1np1 }" },
    NCCL_IB_HCA: { key: "nccl.ibHca", example: "nccl: { ibHca: [rocep1s0f1, roceP2p1s0f1] }" },
    NCCL_IB_DISABLE: { key: "nccl.transport", example: "nccl: { transport: socket }" },
};

/**
 * Why a name of `model.env` is rejected, or undefined: it must be an environment variable name,
 * and not one the project sets for vLLM itself ({@link PROJECT_ENV}: the runtime env file, the
 * secrets files, the unit), nor HF_HOME/HF_HUB_CACHE (vLLM reads the model offline from the cache
 * the model sync fills).
 */
export function modelEnvNameProblem(name: string): { message: string; example: string } | undefined {
    if (!ENV_NAME.test(name)) {
        return {
            message: "is not an environment variable name: a letter or _, then letters, digits or _ (at most 128)",
            example: 'VLLM_USE_FLASHINFER_MOE_FP4: "1"',
        };
    }
    const where = PROJECT_ENV.get(name);
    if (where !== undefined) {
        const own = RUNTIME_ENV_KEYS[name];
        const fix =
            own !== undefined
                ? `set ${own.key} instead`
                : where === RUNTIME_ENV_PATH && name.startsWith("NCCL_")
                  ? "set nccl.overrides instead (it applies to Ray, vLLM and the NCCL check alike)"
                  : "remove it";
        return {
            message: `is set by the project itself (${where}); ${fix}`,
            example:
                own?.example ?? (name.startsWith("NCCL_") ? `nccl: { overrides: { ${name}: "..." } }` : 'model: { env: { VLLM_USE_FLASHINFER_MOE_FP4: "1" } }'),
        };
    }
    if (name === "HF_HOME" || name === "HF_HUB_CACHE") {
        return {
            message:
                "must not move the Hugging Face cache: vLLM reads the model offline from /root/.cache/huggingface, where the model sync puts it; remove it",
            example: 'model: { env: { VLLM_USE_FLASHINFER_MOE_FP4: "1" } }',
        };
    }
    return undefined;
}

/**
 * Why a value of `model.env` cannot reach vLLM intact, or undefined. It lands in the unit's
 * Environment= line (venv: systemd unquotes it) or docker's `-e NAME=value` (docker takes it as
 * it is): both carry any text but control characters, which systemd refuses in an environment
 * value and which would end the unit's line.
 */
export function modelEnvValueProblem(value: string): string | undefined {
    if (/[\0-\x1f\x7f]/.test(value)) return "must be a single line without control characters (tabs and line breaks included)";
    if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(value)) return "must be valid Unicode (no lone surrogate halves)";
    // Every script that carries the unit is one argument of the SSH login shell (at most 128 KiB).
    if (Buffer.byteLength(value, "utf8") > 4096) return "must be at most 4096 bytes (put a long value in a file and name its path)";
    return undefined;
}

/**
 * Names that can never be an interconnect port (a QSFP/RDMA NIC), with why: netplan would take the
 * device over, and the destroy step would restore the wrong thing. Loopback; the kernel's
 * `all`/`default` entries of /proc/sys/net/ipv{4,6}/conf (writing there would change every
 * interface); /sys/class/net/bonding_masters (a file, not a device); and the software devices
 * container engines, VPNs and hypervisors create (docker0, br-*, veth*, virbr*, tun/tap, WireGuard,
 * Tailscale, ZeroTier, CNI bridges).
 */
const NOT_AN_INTERCONNECT: readonly { pattern: RegExp; what: string }[] = [
    { pattern: /^lo$/, what: "the loopback interface" },
    { pattern: /^(all|default)$/, what: "the kernel's name for every interface's settings (/proc/sys/net/ipv6/conf)" },
    { pattern: /^bonding_masters$/, what: "a control file of the bonding driver, not an interface" },
    { pattern: /^docker[0-9]*$|^br-[0-9a-f]+$/, what: "a Docker bridge" },
    { pattern: /^veth/, what: "a virtual Ethernet pair (containers)" },
    { pattern: /^virbr[0-9]/, what: "a libvirt bridge" },
    { pattern: /^(tun|tap)[0-9]/, what: "a TUN/TAP device (VPN, VM)" },
    { pattern: /^wg[0-9]|^tailscale[0-9]|^zt[0-9a-z]/, what: "a VPN device" },
    { pattern: /^(cni|flannel|cali|cilium_|kube-)/, what: "a Kubernetes network device" },
];

/**
 * Why `name` cannot be an interconnect interface, or undefined: the loopback, kernel and software
 * names of {@link NOT_AN_INTERCONNECT}. The interconnect is the RoCE NIC's port (`ibdev2netdev`
 * shows the names on a Spark).
 */
export function interconnectNameProblem(name: string): string | undefined {
    const hit = NOT_AN_INTERCONNECT.find((entry) => entry.pattern.test(name));
    return hit
        ? `names ${hit.what}, which cannot be an interconnect port; give the NIC's port (\`ibdev2netdev\` lists them: enp1s0f1np1 and enP2p1s0f1np1 on a Spark)`
        : undefined;
}
