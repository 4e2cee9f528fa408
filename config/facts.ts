/**
 * The facts of a config that passed the schema: what is true of it before any rule runs or any
 * decision is made (how many GPUs, the parallelism vLLM runs with, whether a Thor is present,
 * whether the model is a local path, the nodes in rank order). Computed once by
 * {@link gatherFacts}; the cross-field rules, the fit check and the resolution step read them.
 * Nothing here imports a later phase (rules, fit, resolve).
 */
import { HF_HOME_DIR } from "./hostPaths";
import { isLocalModelPath } from "./valueRules";
import { DockerRuntimeSchema, type ParsedConfig, type ParsedModel, type ParsedNode, type Runtime } from "./schema";

export { isLocalModelPath };

/** What is true of a parsed config, computed once before the rules. */
export interface Facts {
    /** Sum of the nodes' GPUs. */
    totalGpus: number;
    /** Any node is a Jetson Thor (no RoCE: sockets everywhere, eager mode by default). */
    hasThor: boolean;
    /** The parallelism vLLM runs with ({@link resolveParallelism}). */
    parallelism: { tensorParallel: number; pipelineParallel: number };
    /** Eager mode: model.enforceEager, else on when a Thor is present. */
    enforceEager: boolean;
    /** model.source is a directory on the nodes rather than a Hugging Face id. */
    localModel: boolean;
    /** model.source is a local path under the host's Hugging Face cache, which every container of ours mounts. */
    localModelInHfCache: boolean;
    /** The nodes in rank order: the head first (rank 0, whose address every rank dials), then the others in config order. */
    rankOrder: string[];
}

/** Sum of the nodes' GPUs. */
export function totalGpusOf(nodes: readonly Pick<ParsedNode, "gpus">[]): number {
    return nodes.reduce((sum, node) => sum + node.gpus, 0);
}

/**
 * What each runtime kind is, for the rules (the rendering side of a runtime is its strategy in
 * components/render/host/runtime.ts): whether vLLM runs in a container, which sees only the
 * directories we mount, and whether the kind can run on a Jetson Thor (vLLM's pip wheels and
 * containers lack sm_110 kernels, so a Thor runs a source-built venv).
 */
export const RUNTIME_TRAITS: Record<Runtime["kind"], { containerized: boolean; runsOnThor: boolean }> = {
    docker: { containerized: true, runsOnThor: false },
    venv: { containerized: false, runsOnThor: true },
};

/**
 * What each node kind is, for resolve and the renderers: whether its GPU and OS share one memory
 * pool (a DGX Spark's GB10 and a Jetson Thor: 128 GB unified; vLLM's start-up check then reads the
 * memory the OS reports available, which the page cache competes for), or the GPU has its own;
 * and whether it has RDMA devices (a Thor has no RoCE) for the RDMA bandwidth test.
 */
export const NODE_KIND_TRAITS: Record<ParsedNode["kind"], { unifiedMemory: boolean; rdma: boolean }> = {
    spark: { unifiedMemory: true, rdma: true },
    thor: { unifiedMemory: true, rdma: false },
    workstation: { unifiedMemory: false, rdma: true },
};

/** `model.gpuMemoryUtilization` when neither it nor `model.kvCacheMemoryBytes` is given. */
export const DEFAULT_GPU_MEMORY_UTILIZATION = 0.9;

/** A node's runtime: as configured, else the container runtime with its defaults. */
export function runtimeOf(node: Pick<ParsedNode, "runtime">): Runtime {
    return node.runtime ?? DockerRuntimeSchema.parse({ kind: "docker" });
}

/** Whether any node is a Jetson Thor. */
export function hasThorIn(nodes: readonly Pick<ParsedNode, "kind">[]): boolean {
    return nodes.some((node) => node.kind === "thor");
}

/**
 * The parallelism vLLM runs with. Neither given: tensor parallelism over every GPU (TP=2
 * measured 2.09x one Spark vs PP=2 1.08x on two Sparks; the pipeline-parallel layout is there
 * to set explicitly). One given: the other is 1.
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

/** The nodes head first, the others in config order (a stable sort: with no or several heads, config order among them). */
export function headFirst<T extends Pick<ParsedNode, "head">>(nodes: readonly T[]): T[] {
    return [...nodes].sort((a, b) => Number(b.head) - Number(a.head));
}

/** Whether the model source is a local path, and whether that path is under the host's Hugging Face cache. */
export function localModelFacts(source: string): Pick<Facts, "localModel" | "localModelInHfCache"> {
    const localModel = isLocalModelPath(source);
    return { localModel, localModelInHfCache: localModel && source.startsWith(`${HF_HOME_DIR}/`) };
}

/** The facts of `parsed`, computed once. */
export function gatherFacts(parsed: Pick<ParsedConfig, "nodes" | "model">): Facts {
    const totalGpus = totalGpusOf(parsed.nodes);
    const hasThor = hasThorIn(parsed.nodes);
    return {
        totalGpus,
        hasThor,
        parallelism: resolveParallelism(parsed.model, totalGpus),
        enforceEager: parsed.model.enforceEager ?? hasThor,
        ...localModelFacts(parsed.model.source),
        rankOrder: headFirst(parsed.nodes).map((node) => node.name),
    };
}
