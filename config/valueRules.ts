// Rules for single values that the schema applies with superRefine: model
// sources, extra vLLM flags (not one the project renders, not an abbreviation
// of one), and NCCL override names.
import { CONFIG_NAMESPACE } from "./namespace";

const HF_MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;
const NCCL_VARIABLE = /^NCCL_[A-Z0-9_]+$/;

export function modelSourceProblem(text: string): string | undefined {
    if (text.startsWith("/")) {
        if (/[\s:,\0-\x1f\x7f]/.test(text) || text.split("/").every((segment) => segment === "")) {
            return "must be an absolute path to the model's directory, without spaces, `:` or `,` (a container mounts it)";
        }
        return undefined;
    }
    return HF_MODEL_ID.test(text) ? undefined : "must be a Hugging Face model id (org/name) or an absolute path to a local model directory";
}

/** The vLLM flags this project renders itself, with the key to set instead and an example. */
const RENDERED_VLLM_FLAGS: Readonly<Record<string, { key: string; example: string }>> = {
    "--model": { key: "model.source", example: "model: { source: Qwen/Qwen2.5-7B-Instruct }" },
    "--tensor-parallel-size": { key: "model.tensorParallel", example: "model: { tensorParallel: 2 }" },
    "--pipeline-parallel-size": { key: "model.pipelineParallel", example: "model: { pipelineParallel: 2 }" },
    "--distributed-executor-backend": { key: "model.executor", example: "model: { executor: mp }" },
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
    "--master-port": { key: "model.masterPort", example: "model: { masterPort: 29501 }" },
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
            example: "--max-num-batched-tokens=8192",
        };
    }
    if (/[\0-\x1f\x7f]/.test(arg)) {
        return { message: "must not contain line breaks or other control characters", example: "--max-num-batched-tokens=8192" };
    }
    const flag = arg.split("=")[0].replace(/_/g, "-").toLowerCase();
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
