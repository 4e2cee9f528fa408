/**
 * Rules of the serving engine (model.engine), keyed by engine as EXECUTOR_RULES is by executor:
 * what SGLang cannot do here, checked before anything touches a host. vLLM has none of its own
 * (its options are what the schema describes).
 *
 * SGLang facts are from its 0.5.23 source (the flag table, config/sglangFlags/0.5.23.json, names
 * the file and line of each flag).
 */
import { type ConfigIssue, describeValue } from "./issues";
import type { ParsedModel, ParsedNode } from "./schema";
import { SGLANG_VERSION, findSglangFlag, sglangChoices } from "./sglangFlags";

type EngineModel = Pick<ParsedModel, "engine" | "executor" | "kvCacheMemoryBytes" | "quantization" | "kvCacheDtype" | "attentionBackend" | "extraArgs">;
type EngineNode = Pick<ParsedNode, "name" | "kind" | "runtime">;
type EngineRule = (model: EngineModel, nodes: readonly EngineNode[]) => ConfigIssue[];

/**
 * The flags the SGLang plan renders itself (components/render/sglang.ts), each with the key that
 * sets it: model.extraArgs may not set them (argparse keeps the last value, so an extra one would
 * silently win over the config).
 */
export const RENDERED_SGLANG_FLAGS: Readonly<Record<string, { key: string; example: string }>> = {
    "--model-path": { key: "model.source", example: "model: { source: Qwen/Qwen2.5-7B-Instruct }" },
    "--served-model-name": { key: "model.servedName", example: "model: { servedName: qwen }" },
    "--tp-size": { key: "model.tensorParallel", example: "model: { tensorParallel: 2 }" },
    "--pp-size": { key: "model.pipelineParallel", example: "model: { pipelineParallel: 1 }" },
    "--nnodes": { key: "nodes (one rank per node)", example: "nodes: [...]" },
    "--node-rank": { key: "nodes (the head is rank 0)", example: "nodes: [...]" },
    "--dist-init-addr": { key: "model.masterPort (the head's address is the node's)", example: "model: { masterPort: 29501 }" },
    "--host": { key: "model.apiHost", example: "model: { apiHost: 0.0.0.0 }" },
    "--port": { key: "model.apiPort", example: "model: { apiPort: 8000 }" },
    "--api-key": { key: "apiKey (a secret; the plan hands it over in a root-only file)", example: "pulumi config set --secret spark-cluster:apiKey ..." },
    "--config": { key: "apiKey (the plan's root-only --config file carries it)", example: "pulumi config set --secret spark-cluster:apiKey ..." },
    "--mem-fraction-static": { key: "model.gpuMemoryUtilization", example: "model: { gpuMemoryUtilization: 0.85 }" },
    "--context-length": { key: "model.maxModelLen", example: "model: { maxModelLen: 32768 }" },
    "--max-running-requests": { key: "model.maxNumSeqs", example: "model: { maxNumSeqs: 64 }" },
    "--quantization": { key: "model.quantization", example: "model: { quantization: fp8 }" },
    "--kv-cache-dtype": { key: "model.kvCacheDtype", example: "model: { kvCacheDtype: fp8_e4m3 }" },
    "--attention-backend": { key: "model.attentionBackend", example: "model: { attentionBackend: triton }" },
    "--trust-remote-code": { key: "model.trustRemoteCode", example: "model: { trustRemoteCode: true }" },
    "--cuda-graph-backend-decode": { key: "model.enforceEager", example: "model: { enforceEager: true }" },
    "--cuda-graph-backend-prefill": { key: "model.enforceEager", example: "model: { enforceEager: true }" },
};

const SGLANG_RUNTIME_EXAMPLE = "runtime: { kind: docker, image: lmsysorg/sglang:<tag> } (or { kind: venv, path: /opt/sglang-venv })";

/** A choice-checked option: the value must be one SGLang's parser accepts. */
function choiceIssue(path: string, flag: string, value: string | undefined, example: string): ConfigIssue[] {
    const choices = sglangChoices(flag);
    if (value === undefined || choices === undefined || choices.includes(value)) return [];
    return [
        {
            path,
            message: `is not one SGLang ${SGLANG_VERSION} accepts for ${flag} (model.engine is sglang; the names differ from vLLM's): ${choices.join(", ")}`,
            got: describeValue(value),
            example,
        },
    ];
}

const checkSglang: EngineRule = (model, nodes) => {
    const issues: ConfigIssue[] = [];
    if (model.executor !== "mp") {
        issues.push({
            path: "model.executor",
            message:
                "must be mp with model.engine sglang: SGLang spans the nodes with its own multi-node mode (--nnodes, --node-rank, --dist-init-addr), " +
                "one process per node; the Ray executor here is vLLM's",
            got: describeValue(model.executor),
            example: "model: { engine: sglang, executor: mp }",
        });
    }
    if (model.kvCacheMemoryBytes !== undefined) {
        issues.push({
            path: "model.kvCacheMemoryBytes",
            message:
                "is vLLM's (--kv-cache-memory-bytes) and has no SGLang counterpart: SGLang sizes weights and KV cache from one share of the GPU's memory. " +
                "Fix: remove it and set model.gpuMemoryUtilization (SGLang's --mem-fraction-static)",
            got: describeValue(model.kvCacheMemoryBytes),
            example: "model: { gpuMemoryUtilization: 0.85 }",
        });
    }
    issues.push(
        ...choiceIssue("model.quantization", "--quantization", model.quantization, "model: { quantization: fp8 }"),
        ...choiceIssue("model.kvCacheDtype", "--kv-cache-dtype", model.kvCacheDtype, "model: { kvCacheDtype: fp8_e4m3 }"),
        ...choiceIssue("model.attentionBackend", "--attention-backend", model.attentionBackend, "model: { attentionBackend: triton }"),
    );
    model.extraArgs.forEach((arg, i) => {
        const name = arg.split("=")[0];
        const found = findSglangFlag(name);
        if (found === undefined) {
            issues.push({
                path: `model.extraArgs[${i}]`,
                message: `is not a flag of SGLang ${SGLANG_VERSION}'s server (model.engine is sglang; its parser would exit with "unrecognized arguments" or "ambiguous option")`,
                got: describeValue(arg),
                example: "--chunked-prefill-size=4096",
            });
            return;
        }
        const rendered = found.options.map((o) => RENDERED_SGLANG_FLAGS[o]).find((r) => r !== undefined);
        if (rendered !== undefined) {
            issues.push({
                path: `model.extraArgs[${i}]`,
                message: `sets ${found.options[0]}, which the project renders itself for SGLang; use ${rendered.key} instead`,
                got: describeValue(arg),
                example: rendered.example,
            });
        }
    });
    nodes.forEach((node, i) => {
        if (node.kind === "thor") {
            issues.push({
                path: `nodes[${i}].kind`,
                message:
                    "cannot run SGLang here: a Jetson Thor needs a source-built venv for sm_110, and this project has a verified one for vLLM only. " +
                    "Fix: model.engine vllm, or leave the Thor out",
                got: describeValue(node.kind),
                example: "model: { engine: vllm }",
            });
        } else if (node.runtime === undefined) {
            issues.push({
                path: `nodes[${i}].runtime`,
                message: `is required with model.engine sglang: the default runtime is the NGC vLLM image, which has no SGLang. Fix: an SGLang image or a venv with sglang ${SGLANG_VERSION}`,
                got: "nothing",
                example: SGLANG_RUNTIME_EXAMPLE,
            });
        }
    });
    return issues;
};

const ENGINE_RULES: Record<ParsedModel["engine"], EngineRule> = {
    vllm: () => [],
    sglang: checkSglang,
};

/** The rules of the configured engine. */
export function checkEngineRules(model: EngineModel, nodes: readonly EngineNode[]): ConfigIssue[] {
    return ENGINE_RULES[model.engine](model, nodes);
}
