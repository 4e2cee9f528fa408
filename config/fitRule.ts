/**
 * The fit check at preview: will the model fit across the nodes as configured? Runs after the
 * cross-field rules, once (planFit in fitPlanner.ts does the arithmetic). A plan that cannot fit
 * is refused with the planner's proposal of one that does; one that fits, or one the planner
 * cannot judge offline, is reported in the stack's `fit` output.
 */
import { ConfigIssue } from "./issues";
import { FitNode, ModelDescription, FitResult, ServingPlan, planFit } from "./fitPlanner";
import { DEFAULT_GPU_MEMORY_UTILIZATION, type Facts } from "./facts";
import type { ParsedConfig } from "./schema";

/** What the stack's `fit` output says: the estimate of a plan that fits, or why it was not checked. */
export type FitReport =
    | { status: "fits"; summary: string; notes: string[]; /** With model.kvCacheMemoryBytes: the start-up check's utilization. */ startupUtilization?: number }
    | { status: "skipped"; reason: string };

/** What the planner is asked: the model, the serving plan and the nodes (memory as configured), so the node check can ask again with each node's probed memory. */
export interface FitInputs {
    description: ModelDescription;
    plan: ServingPlan;
    nodes: FitNode[];
}

/**
 * The fit inputs of `parsed`. The model's size comes from `model.size`, else from the model
 * directory's config.json when the caller could read it (`hfConfig`), else it is unknown.
 */
export function fitInputs(parsed: ParsedConfig, facts: Pick<Facts, "parallelism" | "enforceEager" | "rankOrder">, hfConfig?: unknown): FitInputs {
    const model = parsed.model;
    const description: ModelDescription = model.size
        ? { from: "size", name: model.source, size: model.size }
        : hfConfig !== undefined
          ? { from: "hf-config", name: model.source, config: hfConfig }
          : { from: "unknown", name: model.source };
    // vLLM's own start-up rule: one sequence of maxModelLen must fit; the summary says how many do.
    return {
        description,
        plan: {
            ...facts.parallelism,
            quantization: model.quantization,
            kvCacheDtype: model.kvCacheDtype,
            maxModelLen: model.maxModelLen,
            maxNumSeqs: model.maxNumSeqs,
            gpuMemoryUtilization: model.gpuMemoryUtilization ?? DEFAULT_GPU_MEMORY_UTILIZATION,
            kvCacheMemoryBytes: model.kvCacheMemoryBytes,
            enforceEager: facts.enforceEager,
            kvBudget: "one-sequence",
        },
        nodes: facts.rankOrder
            .map((name) => parsed.nodes.find((node) => node.name === name))
            .filter((node) => node !== undefined)
            .map((node) => ({ name: node.name, kind: node.kind, gpus: node.gpus, gpuMemoryGiB: node.gpuMemoryGiB })),
    };
}

/** Plans the fit of `parsed` (see {@link fitInputs}). */
export function planModelFit(parsed: ParsedConfig, facts: Pick<Facts, "parallelism" | "enforceEager" | "rankOrder">, hfConfig?: unknown): FitResult {
    const inputs = fitInputs(parsed, facts, hfConfig);
    return planFit(inputs.description, inputs.plan, inputs.nodes);
}

/** Each node's memory as a node reported it: unified memory's total (GiB), or its GPU's (GiB); undefined where not known. */
export type ProbedMemory = Readonly<Record<string, { unifiedGiB?: number; gpuGiB?: number } | undefined>>;

/**
 * The fit again, with each node's memory as probed where the config does not set
 * nodes[].gpuMemoryGiB: a unified-memory node (spark, thor) by its MemTotal, a workstation by
 * what nvidia-smi reports of its GPU. A 64 GB Spark is then planned as one. Returns the nodes as
 * planned (memory and where it came from) and the result.
 */
export function probedFit(inputs: FitInputs, memory: ProbedMemory): { result: FitResult; nodes: (FitNode & { memoryFrom: string })[] } {
    const nodes = inputs.nodes.map((node) => {
        const probed = memory[node.name];
        if (node.gpuMemoryGiB !== undefined) return { ...node, memoryFrom: "nodes[].gpuMemoryGiB" };
        const value = node.kind === "workstation" ? probed?.gpuGiB : probed?.unifiedGiB;
        return value === undefined ? { ...node, memoryFrom: "the default" } : { ...node, gpuMemoryGiB: Math.floor(value * 100) / 100, memoryFrom: "probed" };
    });
    return { result: planFit(inputs.description, inputs.plan, nodes), nodes };
}

/** The issue that refuses a plan that cannot fit (with the proposal), or none. */
export function fitIssues(result: FitResult): ConfigIssue[] {
    if (result.status !== "does-not-fit") {
        return [];
    }
    return [
        {
            path: "model",
            message: result.message,
            got:
                result.estimates.length > 0
                    ? `${Math.max(...result.estimates.map((e) => e.totalGiB)).toFixed(1)} GiB on the fullest GPU`
                    : "a plan that does not fit",
            example: result.proposal ? result.proposal.changes.join("; ") : "more nodes, or a smaller or more quantized model",
        },
    ];
}

/** The stack output for a plan that passed. */
export function fitReport(result: FitResult): FitReport {
    if (result.status === "fits")
        return {
            status: "fits",
            summary: result.summary,
            notes: result.notes,
            ...(result.startupUtilization === undefined ? {} : { startupUtilization: result.startupUtilization }),
        };
    if (result.status === "skipped") return { status: "skipped", reason: result.reason };
    throw new Error("internal: a plan that does not fit reached the outputs");
}
