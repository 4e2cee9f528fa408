/**
 * The fit planner: does the model fit the cluster's GPUs with this serving plan, judged at
 * preview, before any host is touched? Per GPU it adds the weights (placed by TP × PP the way
 * vLLM places them), the KV cache and a runtime overhead, and compares the sum with what vLLM may
 * use (GPU memory × gpuMemoryUtilization). The answer is a {@link FitResult}: fits (numbers and a
 * one-line summary for the stack outputs), does-not-fit (which keys, and a computed plan that
 * fits), or skipped (why the size is unknown). Pure: nothing from ../config or ../components.
 */
import { z } from "zod";
import {
    BYTES_PER_PARAM,
    kvBytesPerToken,
    kvElementBytes,
    ModelSize,
    ModelSizeConfig,
    ModelSizeSchema,
    modelSizeFromConfig,
    modelSizeFromHfConfig,
    pipelineStageLayers,
    servedWeightDtype,
} from "./modelSize";

export const GIB = 2 ** 30;

/**
 * GPU memory of a DGX Spark as CUDA reports it, which vLLM multiplies by gpuMemoryUtilization:
 * the memory the OS shows of the 128 GB pool, about 121.7 GiB by Spark owners' reports: 121.63 GiB
 * ("vLLM sees 121.63 GiB usable (not 128 — ~6 GiB system/firmware)", rwlove/home-ops#13221; vLLM
 * logs 121.69 GiB total on another Spark, MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#47). A Jetson Thor (also 128 GB unified) is ASSUMED the same: no source
 * measured it; set nodes[].gpuMemoryGiB from vLLM's "Free memory on device (x/TOTAL GiB)" line.
 */
export const UNIFIED_GPU_MEMORY_GIB = 121.63;
/**
 * What the OS keeps of a unified-memory node while vLLM starts: free memory was 110.37 of
 * 121.69 GiB at vLLM's start on a headless Spark (MiaAI-Lab #47 above), ~11 GiB held by the OS,
 * services and page cache. vLLM refuses to start when free memory is below utilization × total
 * (a Spark + Thor guide: "Free memory less than desired GPU memory utilization"; vllm-project/vllm#35313), so
 * on a Spark gpuMemoryUtilization above (121.63 − 11) / 121.63 = 0.90 does not start.
 */
export const UNIFIED_OS_RESERVED_GIB = 11;
/** CUDA context, NCCL buffers and other non-torch memory per GPU: vLLM's profile logged 2.18 GiB on a Jetson AGX Orin (unified memory). */
export const RUNTIME_OVERHEAD_GIB = 2;
/** Activation peak of vLLM's profile run per GPU: its logs show 0.2–2.0 GiB for 7B–32B text models at default batch sizes. */
export const ACTIVATION_PEAK_GIB = 2;
/** CUDA graphs, unless --enforce-eager: 2.4 GiB more per GPU measured without it (vllm-project/vllm#7553). */
export const CUDA_GRAPHS_GIB = 2.5;
/** A proposal never shortens the context below this (a community guide serves a 72B model with 2048). */
export const MIN_PROPOSED_CONTEXT = 2048;

export type NodeKind = "spark" | "thor" | "workstation";

/** A node as the planner sees it; `nodes` in rank order (head first: vLLM gives its GPUs the first ranks). */
export interface FitNode {
    name: string;
    kind: NodeKind;
    /** Defaults to 1. */
    gpus?: number;
    /** Per GPU, as CUDA reports it. Defaults to {@link UNIFIED_GPU_MEMORY_GIB} on a spark or thor; required on a workstation. */
    gpuMemoryGiB?: number;
    /** Defaults to {@link UNIFIED_OS_RESERVED_GIB} on a spark or thor, 0 on a workstation (discrete GPU). */
    osReservedGiB?: number;
}

/**
 * `nodes[].gpuMemoryGiB`: memory of each GPU of the node in GiB, as CUDA reports it (vLLM logs it
 * at start: "Free memory on device (free/TOTAL GiB)"). Defaults to 121.63 on a spark or thor;
 * required on a workstation for the fit check (an RTX PRO 6000 has 96 GB = 89.4 GiB or more).
 */
export const GpuMemoryGiBSchema = z.number().gt(0).lte(4096).optional().meta({ example: "89.4" });

/** The serving plan: the vLLM flags that decide memory. */
export interface ServingPlan {
    tensorParallel: number;
    pipelineParallel: number;
    /** --quantization; unset: the checkpoint's own dtype. */
    quantization?: string;
    /** --kv-cache-dtype; unset: "auto" (the model's dtype). */
    kvCacheDtype?: string;
    /** Unset: the model's max_position_embeddings. */
    maxModelLen?: number;
    maxNumSeqs?: number;
    gpuMemoryUtilization: number;
    /**
     * A fixed KV-cache budget per GPU in bytes (`--kv-cache-memory-bytes`): the KV cache is this
     * size whatever the sequences, vLLM ignores gpuMemoryUtilization for it, and what it may use
     * is the GPU's memory less what the OS keeps.
     */
    kvCacheMemoryBytes?: number;
    enforceEager?: boolean;
    /**
     * "all-sequences": the KV cache must hold maxNumSeqs sequences of maxModelLen at once (one
     * when maxNumSeqs is unset). "one-sequence": vLLM's own start-up check, one sequence of
     * maxModelLen; beyond what fits, requests wait or are preempted. Defaults to "all-sequences".
     */
    kvBudget?: "all-sequences" | "one-sequence";
}

/** Where the model's size comes from. */
export type ModelDescription =
    | { from: "size"; name: string; size: ModelSizeConfig }
    | { from: "hf-config"; name: string; config: unknown; paramsB?: number }
    | { from: "unknown"; name: string };

/** One GPU's estimate (a node with one GPU: the node's). GiB throughout. */
export interface GpuEstimate {
    node: string;
    nodeIndex: number;
    gpu: number;
    stage: number;
    tpRank: number;
    /** Decoder layers [start, end) on this PP stage, when the layer count is known. */
    layers?: [number, number];
    weightsGiB: number;
    /** Undefined when the KV shapes or maxModelLen are unknown. */
    kvCacheGiB?: number;
    overheadGiB: number;
    totalGiB: number;
    memoryGiB: number;
    usableGiB: number;
    /** Sequences of maxModelLen the memory left after weights and overhead holds. */
    fullLengthSequences?: number;
    /** Why vLLM would not start here besides the sum (gpuMemoryUtilization vs the OS). */
    problem?: string;
    fits: boolean;
}

export interface Proposal {
    plan: ServingPlan;
    /** `model.<key>: old → new`, one per changed key. */
    changes: string[];
    estimates: GpuEstimate[];
}

export type FitResult =
    | {
          status: "fits";
          estimates: GpuEstimate[];
          summary: string;
          notes: string[];
          /** With a fixed KV budget: the `--gpu-memory-utilization` that vLLM's start-up check gets ({@link startupUtilization}). */
          startupUtilization?: number;
      }
    | { status: "does-not-fit"; estimates: GpuEstimate[]; message: string; keys: string[]; proposal?: Proposal; alternatives: Proposal[] }
    | { status: "skipped"; reason: string; keys: string[] };

/** What a proposal asks for, per target dtype. */
const PROPOSED_QUANTIZATION = { fp8: "fp8", fp4: "modelopt_fp4" } as const;

const PLAN_KEYS = ["tensorParallel", "pipelineParallel", "quantization", "kvCacheDtype", "maxModelLen", "maxNumSeqs", "gpuMemoryUtilization"] as const;
const round1 = (n: number) => Math.round(n * 10) / 10;
const gib = (n: number | undefined) => (n === undefined ? "?" : round1(n).toFixed(1));

type Evaluation = { skip: string; keys: string[] } | { estimates: GpuEstimate[]; problems: string[]; fits: boolean };
const skip = (reason: string, ...keys: string[]) => ({ skip: reason, keys });

/** The highest gpuMemoryUtilization (2 decimals) with which vLLM still starts on the node: the OS keeps its part of unified memory. */
function startableUtilization(node: FitNode): number {
    const memory = node.gpuMemoryGiB ?? UNIFIED_GPU_MEMORY_GIB;
    const reserved = node.osReservedGiB ?? (node.kind === "workstation" ? 0 : UNIFIED_OS_RESERVED_GIB);
    return Math.floor(((memory - reserved) / memory) * 100) / 100;
}

/** Why vLLM would refuse this TP × PP for the model, if it would. */
function layoutProblem(size: ModelSize, tp: number, pp: number): string | undefined {
    if (size.attentionHeads && size.attentionHeads % tp !== 0) {
        return `model.tensorParallel ${tp} does not divide the model's ${size.attentionHeads} attention heads`;
    }
    if (size.kvHeads && size.mlaCacheDim === undefined && size.kvHeads % tp !== 0 && tp % size.kvHeads !== 0) {
        return `model.tensorParallel ${tp} and the model's ${size.kvHeads} KV heads do not divide one another`;
    }
    return size.layers && pp > size.layers ? `model.pipelineParallel ${pp} exceeds the model's ${size.layers} layers` : undefined;
}

/** Per-GPU estimate of one plan; the only place the sum is made, so proposals are checked by the same code. */
export function evaluatePlan(size: ModelSize, plan: ServingPlan, nodes: readonly FitNode[]): Evaluation {
    const { tensorParallel: tp, pipelineParallel: pp, gpuMemoryUtilization: util } = plan;
    const gpus = nodes.flatMap((node, nodeIndex) => Array.from({ length: node.gpus ?? 1 }, (_, gpu) => ({ node, nodeIndex, gpu })));
    const missing = nodes.findIndex((n) => n.kind === "workstation" && n.gpuMemoryGiB === undefined);
    if (missing >= 0) {
        return skip(
            `nodes[${missing}] (${nodes[missing].name}) is a workstation: its GPU memory must come from nodes[${missing}].gpuMemoryGiB`,
            `nodes[${missing}].gpuMemoryGiB`,
        );
    }
    if (tp * pp > gpus.length) {
        return skip(
            `model.tensorParallel × model.pipelineParallel = ${tp * pp} exceeds the cluster's ${gpus.length} GPUs`,
            "model.tensorParallel",
            "model.pipelineParallel",
        );
    }
    const dtype = servedWeightDtype(size, plan.quantization);
    if (dtype === undefined) {
        return skip(
            `model.quantization ${plan.quantization}: the planner does not know its bytes per parameter. Example: quantization: fp8`,
            "model.quantization",
        );
    }
    const kvBytes = kvElementBytes(size, plan.kvCacheDtype);
    if (kvBytes === undefined) {
        return skip(
            `model.kvCacheDtype ${plan.kvCacheDtype}: the planner does not know its bytes per element. Example: kvCacheDtype: fp8`,
            "model.kvCacheDtype",
        );
    }
    const total = size.paramsB * 1e9;
    const embed = size.vocabSize && size.hiddenSize ? size.vocabSize * size.hiddenSize : 0;
    const perLayer = size.layers ? Math.max(0, total - embed * (size.tiedEmbeddings ? 1 : 2)) / size.layers : 0;
    const stages = size.layers ? pipelineStageLayers(size.layers, pp) : undefined;
    const len = plan.maxModelLen ?? size.maxContext;
    const seqs = plan.kvBudget === "one-sequence" ? 1 : (plan.maxNumSeqs ?? 1);
    const budgetGiB = plan.kvCacheMemoryBytes === undefined ? undefined : plan.kvCacheMemoryBytes / GIB;
    const overhead = RUNTIME_OVERHEAD_GIB + ACTIVATION_PEAK_GIB + (plan.enforceEager ? 0 : CUDA_GRAPHS_GIB);
    const estimates = gpus.slice(0, tp * pp).map(({ node, nodeIndex, gpu }, rank): GpuEstimate => {
        const stage = Math.floor(rank / tp);
        const layers = stages?.[stage];
        const head = size.tiedEmbeddings && pp === 1 ? 0 : embed;
        const params = layers ? perLayer * (layers[1] - layers[0]) + (stage === 0 ? embed : 0) + (stage === pp - 1 ? head : 0) : total / pp;
        const weightsGiB = (params * BYTES_PER_PARAM[dtype]) / tp / GIB;
        const kv = layers && kvBytesPerToken(size, kvBytes, tp, layers[0], layers[1]);
        const perSeq = kv && len ? kv.full * len + kv.sliding * Math.min(len, size.slidingWindow ?? len) : undefined;
        const kvCacheGiB = budgetGiB ?? (perSeq === undefined ? undefined : (seqs * perSeq) / GIB);
        const memoryGiB = node.gpuMemoryGiB ?? UNIFIED_GPU_MEMORY_GIB;
        const reserved = node.osReservedGiB ?? (node.kind === "workstation" ? 0 : UNIFIED_OS_RESERVED_GIB);
        // With a fixed KV budget vLLM takes what the plan needs, up to what the OS leaves.
        const usableGiB = budgetGiB === undefined ? memoryGiB * util : memoryGiB - reserved;
        const problem =
            budgetGiB === undefined && util > startableUtilization(node)
                ? `model.gpuMemoryUtilization ${util} asks for ${gib(usableGiB)} GiB of ${gib(memoryGiB)} but the OS keeps about ${reserved} GiB; vLLM refuses to start when free memory is below that (at most ${startableUtilization(node)})`
                : undefined;
        const totalGiB = weightsGiB + (kvCacheGiB ?? 0) + overhead;
        return {
            node: node.name,
            nodeIndex,
            gpu,
            stage,
            tpRank: rank % tp,
            layers,
            weightsGiB,
            kvCacheGiB,
            overheadGiB: overhead,
            totalGiB,
            memoryGiB,
            usableGiB,
            problem,
            fits: totalGiB <= usableGiB && problem === undefined,
            fullLengthSequences: perSeq ? Math.max(0, Math.floor(((budgetGiB ?? usableGiB - weightsGiB - overhead) * GIB) / perSeq)) : undefined,
        };
    });
    const layout = layoutProblem(size, tp, pp);
    const problems = layout ? [layout] : [];
    return { estimates, problems, fits: problems.length === 0 && estimates.every((e) => e.fits) };
}

const fitsPlan = (size: ModelSize, plan: ServingPlan, nodes: readonly FitNode[]) => {
    const ev = evaluatePlan(size, plan, nodes);
    return "fits" in ev && ev.fits ? ev.estimates : undefined;
};

/** The largest value in [low, high] (multiples of `step`) for which `fits` holds; fits must be monotone. */
function largestFitting(low: number, high: number, step: number, fits: (n: number) => boolean): number | undefined {
    let lo = Math.ceil(low / step),
        hi = Math.floor(high / step),
        best: number | undefined;
    while (lo <= hi) {
        const mid = Math.floor((lo + hi) / 2);
        if (fits(mid * step)) {
            best = mid * step;
            lo = mid + 1;
        } else hi = mid - 1;
    }
    return best;
}

function describeChanges(from: ServingPlan, to: ServingPlan, size: ModelSize): string[] {
    return PLAN_KEYS.filter((k) => from[k] !== to[k]).map((k) => {
        const note =
            k === "quantization" && to.quantization === PROPOSED_QUANTIZATION.fp4
                ? " (an NVFP4 checkpoint of the model: vLLM does not quantize to FP4 on load)"
                : k === "quantization" && size.dtype !== "fp8"
                  ? " (vLLM quantizes the weights to FP8 on load)"
                  : "";
        return `model.${k}: ${from[k] ?? "(unset)"} → ${to[k]}${note}`;
    });
}

/**
 * Plans that fit, each from one family of change, in this order: gpuMemoryUtilization down to
 * what the OS leaves (always applied when needed), another TP × PP split, an FP8 KV cache, a
 * shorter maxModelLen, fewer maxNumSeqs, FP8 weights, FP4 weights (the last two with the layout,
 * KV cache and, failing those, context length that then fit). Every plan is re-checked by
 * {@link evaluatePlan}.
 */
export function proposePlans(size: ModelSize, plan: ServingPlan, nodes: readonly FitNode[]): Proposal[] {
    const gpuCount = nodes.reduce((n, node) => n + (node.gpus ?? 1), 0);
    const worlds = [...new Set([plan.tensorParallel * plan.pipelineParallel, gpuCount])];
    const layouts = worlds
        .flatMap((w) =>
            Array.from({ length: w }, (_, i) => i + 1)
                .filter((tp) => w % tp === 0)
                .map((tp) => ({ tensorParallel: tp, pipelineParallel: w / tp })),
        )
        .filter((l) => !layoutProblem(size, l.tensorParallel, l.pipelineParallel));
    const isCurrent = (l: (typeof layouts)[number]) => l.tensorParallel === plan.tensorParallel && l.pipelineParallel === plan.pipelineParallel;
    layouts.sort((a, b) => Number(isCurrent(b)) - Number(isCurrent(a)));
    const maxUtil = plan.kvCacheMemoryBytes === undefined ? Math.min(plan.gpuMemoryUtilization, ...nodes.map(startableUtilization)) : plan.gpuMemoryUtilization;
    const base: ServingPlan = { ...plan, gpuMemoryUtilization: maxUtil };
    const len = plan.maxModelLen ?? size.maxContext;
    const firstFit = (plans: ServingPlan[]) => plans.find((p) => fitsPlan(size, p, nodes));
    /** `p` with the largest `key` in [low, high] that fits. */
    const lowered = (p: ServingPlan, key: "maxModelLen" | "maxNumSeqs", low: number, high: number, step: number) => {
        const best = largestFitting(low, high, step, (n) => fitsPlan(size, { ...p, [key]: n }, nodes) !== undefined);
        return best === undefined ? undefined : { ...p, [key]: best };
    };
    const shorter = (p: ServingPlan) =>
        len === undefined ? undefined : lowered(p, "maxModelLen", Math.min(MIN_PROPOSED_CONTEXT, len), len - 1, len > 1024 ? 256 : 16);
    const fewerSeqs = (p: ServingPlan) =>
        plan.kvBudget === "one-sequence" || !plan.maxNumSeqs ? undefined : lowered(p, "maxNumSeqs", 1, plan.maxNumSeqs - 1, 1);
    const kvFp8 = kvElementBytes(size, plan.kvCacheDtype) === 1 ? [] : ["fp8"];
    const withLayouts = (p: ServingPlan) => layouts.map((l) => ({ ...p, ...l }));
    const requantized = (target: "fp8" | "fp4") => {
        if (BYTES_PER_PARAM[servedWeightDtype(size, plan.quantization) ?? size.dtype] <= BYTES_PER_PARAM[target]) return undefined;
        const q = withLayouts({ ...base, quantization: PROPOSED_QUANTIZATION[target] });
        return firstFit([...q, ...kvFp8.flatMap((kv) => q.map((p) => ({ ...p, kvCacheDtype: kv })))]) ?? q.map(shorter).find((p) => p !== undefined);
    };
    const families: (() => ServingPlan | undefined)[] = [
        () => (maxUtil < plan.gpuMemoryUtilization ? firstFit([base]) : undefined),
        () => firstFit(withLayouts(base)),
        () => firstFit(kvFp8.flatMap((kv) => withLayouts({ ...base, kvCacheDtype: kv }))),
        () =>
            withLayouts(base)
                .map(shorter)
                .filter((p) => p !== undefined)
                .sort((a, b) => (b.maxModelLen ?? 0) - (a.maxModelLen ?? 0))[0],
        () =>
            withLayouts(base)
                .map(fewerSeqs)
                .filter((p) => p !== undefined)
                .sort((a, b) => (b.maxNumSeqs ?? 0) - (a.maxNumSeqs ?? 0))[0],
        () => requantized("fp8"),
        () => requantized("fp4"),
    ];
    const proposals: Proposal[] = [];
    for (const family of families) {
        const p = family();
        const estimates = p && fitsPlan(size, p, nodes);
        const changes = p ? describeChanges(plan, p, size) : [];
        if (p && estimates && !proposals.some((q) => q.changes.join() === changes.join())) proposals.push({ plan: p, changes, estimates });
    }
    return proposals;
}

function resolveSize(model: ModelDescription): { size: ModelSize } | { reason: string; keys: string[] } {
    switch (model.from) {
        case "unknown":
            return {
                reason: `the size of ${model.name} is not known offline and model.size gives no numbers; add e.g. model.size: { paramsB: 72.7, dtype: bf16, layers: 80, kvHeads: 8, headDim: 128 } to check the fit at preview`,
                keys: ["model.size"],
            };
        case "size": {
            const parsed = ModelSizeSchema.safeParse(model.size);
            if (!parsed.success) {
                return { reason: parsed.error.issues.map((i) => `model.size.${i.path.join(".")}: ${i.message}`).join("; "), keys: ["model.size"] };
            }
            return { size: modelSizeFromConfig(model.name, model.size) };
        }
        case "hf-config": {
            const r = modelSizeFromHfConfig(model.name, model.config, model.paramsB);
            return "size" in r ? r : { reason: `${model.name}: ${r.reason}`, keys: ["model.size.paramsB"] };
        }
        default: {
            const never: never = model;
            return never;
        }
    }
}

/**
 * The headroom a plan leaves on one GPU: what vLLM may use beyond the estimate, and on a
 * unified-memory node what it leaves the OS of the memory the OS shows (121.6 GiB on a Spark).
 */
function headroom(e: GpuEstimate, nodes: readonly FitNode[]): string {
    const spare = `headroom ${gib(e.usableGiB - e.totalGiB)} GiB`;
    return nodes[e.nodeIndex].kind === "workstation"
        ? spare
        : `${spare}; the OS keeps ${gib(e.memoryGiB - e.usableGiB)} of the ${gib(e.memoryGiB)} GiB it shows`;
}

/**
 * The `--gpu-memory-utilization` a plan with a fixed KV budget renders: vLLM still refuses to start
 * when less than this share of the GPU's memory is free, so it is what the plan needs (weights,
 * the budget and overhead) over the GPU's memory, rounded up to a hundredth, on the fullest GPU.
 */
export function startupUtilization(estimates: readonly GpuEstimate[]): number {
    const need = Math.max(...estimates.map((e) => e.totalGiB / e.memoryGiB));
    return Math.min(1, Math.max(0.01, Math.ceil(need * 100 - 1e-9) / 100));
}

function describeGpu(e: GpuEstimate, nodes: readonly FitNode[], util?: number): string {
    const where = (nodes[e.nodeIndex].gpus ?? 1) > 1 ? `${e.node} GPU ${e.gpu}` : e.node;
    const parts = `weights ${gib(e.weightsGiB)} + KV ${gib(e.kvCacheGiB)} + overhead ${gib(e.overheadGiB)}`;
    return util === undefined
        ? `${where}: ${gib(e.totalGiB)} of ${gib(e.usableGiB)} GiB (${parts})`
        : `${where} needs ${gib(e.totalGiB)} GiB (${parts}) but model.gpuMemoryUtilization ${util} × ${gib(e.memoryGiB)} GiB allows ${gib(e.usableGiB)}`;
}

/**
 * Does `model` fit `nodes` with `plan`? See {@link FitResult}. The plan's parallelism is taken
 * as given (resolve defaults first); `nodes` are in rank order.
 */
export function planFit(model: ModelDescription, plan: ServingPlan, nodes: readonly FitNode[]): FitResult {
    const resolved = resolveSize(model);
    if ("reason" in resolved) return { status: "skipped", reason: resolved.reason, keys: resolved.keys };
    const size = resolved.size;
    const ev = evaluatePlan(size, plan, nodes);
    if ("skip" in ev) return { status: "skipped", reason: ev.skip, keys: ev.keys };
    const len = plan.maxModelLen ?? size.maxContext;
    const notes = [...size.notes];
    if (ev.estimates.some((e) => e.kvCacheGiB === undefined)) {
        notes.push(`KV cache not estimated: set ${len === undefined ? "model.maxModelLen" : "model.size.layers, kvHeads and headDim"}`);
    }
    const quant = servedWeightDtype(size, plan.quantization);
    const what = `${size.name} (${round1(size.paramsB)}B, ${quant} weights) with TP=${plan.tensorParallel} PP=${plan.pipelineParallel}`;
    if (ev.fits) {
        const tightest = ev.estimates.reduce((a, b) => (b.usableGiB - b.totalGiB < a.usableGiB - a.totalGiB ? b : a));
        const seqs = Math.min(...ev.estimates.map((e) => e.fullLengthSequences ?? Infinity));
        const holds = Number.isFinite(seqs) ? `; the KV cache holds ${seqs} sequence(s) of ${len} tokens` : "";
        const budget = plan.kvCacheMemoryBytes === undefined ? "" : `; KV cache fixed at ${gib(plan.kvCacheMemoryBytes / GIB)} GiB per GPU`;
        return {
            status: "fits",
            estimates: ev.estimates,
            notes,
            summary: `fits: ${what}${budget}; tightest ${describeGpu(tightest, nodes)}; ${headroom(tightest, nodes)}${holds}${notes.length ? ` (${notes.join("; ")})` : ""}`,
            ...(plan.kvCacheMemoryBytes === undefined ? {} : { startupUtilization: startupUtilization(ev.estimates) }),
        };
    }
    const failing = ev.estimates.filter((e) => !e.fits);
    const keys = [
        ...PLAN_KEYS.map((k) => `model.${k}`),
        ...(model.from === "size" ? ["model.size"] : []),
        ...[...new Set(failing.map((e) => e.nodeIndex))].map((i) => `nodes[${i}].gpuMemoryGiB`),
    ];
    const [proposal, ...alternatives] = proposePlans(size, plan, nodes);
    const cheapest = (size.paramsB * 1e9 * BYTES_PER_PARAM.fp4) / GIB;
    const usable = nodes.reduce((n, node) => n + (node.gpus ?? 1) * (node.gpuMemoryGiB ?? UNIFIED_GPU_MEMORY_GIB) * plan.gpuMemoryUtilization, 0);
    const next = proposal
        ? `It fits with ${proposal.changes.join(", ")}${alternatives.length ? `; or with ${alternatives.map((a) => a.changes.join(", ")).join("; or with ")}` : ""}.`
        : `No plan over these GPUs fits: even FP4 weights take ${gib(cheapest)} GiB against ${gib(usable)} GiB usable in all; add nodes.`;
    const why = [...ev.problems, ...failing.map((e) => (e.problem ? `${e.node}: ${e.problem}` : describeGpu(e, nodes, plan.gpuMemoryUtilization)))];
    return {
        status: "does-not-fit",
        estimates: ev.estimates,
        keys,
        proposal,
        alternatives,
        message: `${what} does not fit: ${why.join("; ")}. Keys involved: ${keys.join(", ")}. ${next}`,
    };
}

/** The checkpoint's bytes on disk (parameters times the stored dtype's bytes), when the model's size is known. */
export function checkpointBytes(model: ModelDescription): number | undefined {
    const resolved = resolveSize(model);
    return "size" in resolved ? resolved.size.paramsB * 1e9 * BYTES_PER_PARAM[resolved.size.dtype] : undefined;
}
