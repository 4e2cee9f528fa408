/**
 * How big a model is, for the fit planner (fitPlanner.ts): its parameter count, the dtype its
 * checkpoint stores weights in, and the shapes that size its KV cache. Either the numbers a user
 * writes under `model.size` ({@link ModelSizeSchema}), or what a Hugging Face `config.json` says
 * ({@link modelSizeFromHfConfig}). Pure: no I/O, no Pulumi, nothing from ../config.
 */
import { z } from "zod";

/** Weight storage types the planner knows. */
export const WEIGHT_DTYPES = ["fp32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"] as const;
export type WeightDtype = (typeof WEIGHT_DTYPES)[number];

/**
 * Bytes per parameter: BF16 2, FP8 1, FP4/INT4 0.5 (the community guides' sizing). Block
 * scales of FP8/FP4 checkpoints and embeddings a quantized checkpoint keeps in BF16 are not
 * counted: an FP4 estimate runs a few percent low.
 */
export const BYTES_PER_PARAM: Readonly<Record<WeightDtype, number>> = {
    fp32: 4,
    bf16: 2,
    fp16: 2,
    fp8: 1,
    int8: 1,
    fp4: 0.5,
    int4: 0.5,
};

/** Which layers keep a paged KV cache: all tokens, only the last `slidingWindow`, or none (linear attention, Mamba). */
export type LayerKv = "full" | "sliding" | "none";

/** The model's size, however it was learned. Lengths are per model, not per GPU. */
export interface ModelSize {
    /** For messages, e.g. "Qwen/Qwen2.5-72B-Instruct". */
    name: string;
    /** Total parameters in billions (a MoE counts every expert). */
    paramsB: number;
    /** Weights as the checkpoint stores them. */
    dtype: WeightDtype;
    /** Decoder layers; unknown: weights split evenly, no KV estimate. */
    layers?: number;
    hiddenSize?: number;
    attentionHeads?: number;
    kvHeads?: number;
    headDim?: number;
    vocabSize?: number;
    /** Input embedding and LM head share one matrix. */
    tiedEmbeddings?: boolean;
    /** Per layer (length `layers`): what its KV cache holds. Unknown: every layer "full". */
    layerKv?: LayerKv[];
    slidingWindow?: number;
    /** MLA (DeepSeek): cached elements per token per layer (kv_lora_rank + qk_rope_head_dim), the same on every TP rank. */
    mlaCacheDim?: number;
    /** max_position_embeddings: what vLLM uses when model.maxModelLen is not set. */
    maxContext?: number;
    /** Where an estimate is rough, said once for the summary. */
    notes: string[];
}

const count = (example: string) => z.int().min(1).optional().meta({ example });

/**
 * `model.size`: the model's size when it cannot be read offline (a hub id at preview). Only
 * `paramsB` is required; the shapes let the planner estimate the KV cache and place the layers.
 */
export const ModelSizeSchema = z
    .strictObject({
        /** Total parameters in billions; a MoE counts every expert (Qwen2.5-72B: 72.7). Required. */
        paramsB: z.number().gt(0).lte(100000).meta({ example: "72.7" }),
        /** Weights as the checkpoint stores them: fp32, bf16, fp16, fp8, int8, fp4 or int4. Defaults to "bf16". */
        dtype: z.enum(WEIGHT_DTYPES).default("bf16").meta({ example: "bf16 (or fp8, fp4)" }),
        /** Decoder layers (config.json num_hidden_layers). Defaults to unknown: no KV estimate, weights split evenly. */
        layers: count("80"),
        /** Hidden size (hidden_size). Defaults to unknown: embeddings are not placed on their PP stage. */
        hiddenSize: count("8192"),
        /** Attention heads (num_attention_heads). Defaults to unknown: TP sizes are not checked against it. */
        attentionHeads: count("64"),
        /** KV heads (num_key_value_heads; 8 on Llama-3-70B). Defaults to attentionHeads, else unknown: no KV estimate. */
        kvHeads: count("8"),
        /** Head dimension (head_dim). Defaults to hiddenSize / attentionHeads, else unknown: no KV estimate. */
        headDim: count("128"),
        /** Vocabulary size (vocab_size). Defaults to unknown: embeddings are not placed on their PP stage. */
        vocabSize: count("152064"),
        /** Input embedding and LM head are one matrix (tie_word_embeddings). Defaults to false. */
        tiedEmbeddings: z.boolean().default(false).meta({ example: "false" }),
        /** Layers that keep a KV cache, for hybrid models (Qwen3.5: 1 in 4). Defaults to every layer. */
        kvLayers: count("12"),
        /** The model's own context length (max_position_embeddings). Defaults to unknown: set model.maxModelLen. */
        maxContext: count("32768"),
    })
    .superRefine((size, ctx) => {
        const issue = (path: string, message: string) => ctx.addIssue({ code: "custom", path: [path], message });
        if (size.kvHeads !== undefined && size.attentionHeads !== undefined && size.attentionHeads % size.kvHeads !== 0) {
            issue("kvHeads", `must divide attentionHeads (${size.attentionHeads}). Example: kvHeads: 8 with attentionHeads: 64`);
        }
        if (size.kvLayers !== undefined && (size.layers === undefined || size.kvLayers > size.layers)) {
            issue("kvLayers", "needs layers and must be at most layers. Example: layers: 48, kvLayers: 12");
        }
    });
export type ModelSizeConfig = z.input<typeof ModelSizeSchema>;

/** Every `every`-th layer of `layers`, spread evenly: `kv` of them "full", the rest "none". */
function spreadKvLayers(layers: number, kv: number): LayerKv[] {
    return Array.from({ length: layers }, (_, i) => (Math.floor(((i + 1) * kv) / layers) > Math.floor((i * kv) / layers) ? "full" : "none"));
}

/** A {@link ModelSize} from the numbers of `model.size`; throws zod's error on input {@link ModelSizeSchema} refuses. */
export function modelSizeFromConfig(name: string, raw: ModelSizeConfig): ModelSize {
    const size = ModelSizeSchema.parse(raw);
    const headDim = size.headDim ?? (size.hiddenSize && size.attentionHeads ? size.hiddenSize / size.attentionHeads : undefined);
    return {
        name,
        paramsB: size.paramsB,
        dtype: size.dtype,
        layers: size.layers,
        hiddenSize: size.hiddenSize,
        attentionHeads: size.attentionHeads,
        kvHeads: size.kvHeads ?? size.attentionHeads,
        headDim,
        vocabSize: size.vocabSize,
        tiedEmbeddings: size.tiedEmbeddings,
        maxContext: size.maxContext,
        layerKv: size.layers && size.kvLayers !== undefined ? spreadKvLayers(size.layers, size.kvLayers) : undefined,
        notes: [],
    };
}

// ---------------------------------------------------------------------------------------------
// Hugging Face config.json
// ---------------------------------------------------------------------------------------------

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const num = (c: Json, ...keys: string[]): number | undefined => {
    for (const key of keys) {
        const v = c[key];
        if (typeof v === "number" && Number.isFinite(v) && v >= 0) return v;
    }
    return undefined;
};

/** The text model's fields: multimodal configs nest them under `text_config` (Qwen3.5, Gemma 3, Llama 4). */
function textFields(config: Json): Json {
    return isObject(config["text_config"]) ? { ...config, ...config["text_config"] } : config;
}

/** The weights' dtype from `quantization_config` (fp8, compressed-tensors, modelopt, gptq, awq, mxfp4) or `torch_dtype`. */
export function weightDtypeFromHfConfig(config: unknown): { dtype: WeightDtype } | { reason: string } {
    if (!isObject(config)) return { reason: "config.json is not a JSON object" };
    const c = textFields(config);
    const q = c["quantization_config"];
    if (isObject(q)) {
        const method = String(q["quant_method"] ?? "").toLowerCase();
        const algo = String(q["quant_algo"] ?? "").toUpperCase();
        const group = isObject(q["config_groups"]) ? Object.values(q["config_groups"]).find(isObject) : undefined;
        const weights = group && isObject(group["weights"]) ? group["weights"] : {};
        const bits =
            num(q, "bits", "w_bit", "weight_bits") ??
            num(weights, "num_bits") ??
            (/FP4/.test(algo) || /fp4/.test(method) ? 4 : /FP8/.test(algo) || method === "fp8" ? 8 : undefined) ??
            (q["load_in_4bit"] === true ? 4 : q["load_in_8bit"] === true ? 8 : undefined);
        const float = /fp/.test(method) || /FP/.test(algo) || weights["type"] === "float";
        if (bits === 8) return { dtype: float ? "fp8" : "int8" };
        if (bits === 4) return { dtype: float ? "fp4" : "int4" };
        return { reason: `quantization_config (quant_method ${method || "unset"}) does not say how many bits a weight takes` };
    }
    const torch = String(c["torch_dtype"] ?? c["dtype"] ?? "bfloat16");
    const dtype = ({ bfloat16: "bf16", float16: "fp16", float32: "fp32" } as const)[torch as "bfloat16"];
    return dtype ? { dtype } : { reason: `torch_dtype ${torch} is not one the planner knows` };
}

/** Per-layer KV kinds from `layer_types`, else `full_attention_interval` (Qwen3-Next/3.5), else every layer full. */
function layerKvFromHfConfig(c: Json, layers: number): LayerKv[] | undefined {
    const types = c["layer_types"];
    if (Array.isArray(types) && types.length === layers) {
        return types.map((t) => (t === "full_attention" ? "full" : t === "sliding_attention" ? "sliding" : "none"));
    }
    const interval = num(c, "full_attention_interval");
    return interval ? Array.from({ length: layers }, (_, i) => ((i + 1) % interval === 0 ? "full" : "none")) : undefined;
}

/**
 * Estimates the parameter count (billions) of a decoder-only transformer from its config.json:
 * embeddings (and an untied LM head), attention (GQA, MLA, or linear attention per layer type),
 * gated MLPs, and MoE layers (routed + shared experts + router; DeepSeek's first dense layers).
 * Norms and biases are left out (under 0.1%). Qwen2.5-72B gives 72.7, Llama-3.1-405B 405.8,
 * DeepSeek-V3 671.0 (its 14B MTP module is not served). Says why when a needed field is missing.
 */
export function estimateParamsFromHfConfig(config: unknown): { paramsB: number } | { reason: string } {
    if (!isObject(config)) return { reason: "config.json is not a JSON object" };
    const c = textFields(config);
    const hidden = num(c, "hidden_size", "n_embd", "d_model");
    const layers = num(c, "num_hidden_layers", "n_layer", "num_layers");
    const vocab = num(c, "vocab_size");
    const heads = num(c, "num_attention_heads", "n_head");
    const inter = num(c, "intermediate_size", "ffn_dim");
    const experts = num(c, "num_local_experts", "n_routed_experts", "num_experts") ?? 0;
    const moeInter = num(c, "moe_intermediate_size") ?? inter;
    const missing = Object.entries({
        hidden_size: hidden,
        num_hidden_layers: layers,
        vocab_size: vocab,
        num_attention_heads: heads,
        [experts ? "moe_intermediate_size" : "intermediate_size"]: experts ? moeInter : inter,
    })
        .filter(([, v]) => v === undefined)
        .map(([k]) => k);
    if (missing.length > 0 || !hidden || !layers || !vocab || !heads) {
        return { reason: `cannot estimate the parameter count: config.json has no ${missing.join(", ")}; give model.size.paramsB` };
    }
    const kvHeads = num(c, "num_key_value_heads") ?? heads;
    const headDim = num(c, "head_dim") ?? hidden / heads;
    const kvLora = num(c, "kv_lora_rank");
    let attention = hidden * headDim * (2 * heads + 2 * kvHeads);
    if (kvLora !== undefined) {
        const rope = num(c, "qk_rope_head_dim") ?? 0;
        const qkHead = (num(c, "qk_nope_head_dim") ?? 0) + rope;
        const vHead = num(c, "v_head_dim") ?? headDim;
        const qLora = num(c, "q_lora_rank");
        const q = qLora ? hidden * qLora + qLora * heads * qkHead : hidden * heads * qkHead;
        attention = q + hidden * (kvLora + rope) + kvLora * heads * ((num(c, "qk_nope_head_dim") ?? 0) + vHead) + heads * vHead * hidden;
    }
    const lkH = num(c, "linear_num_key_heads"),
        lvH = num(c, "linear_num_value_heads");
    const lkD = num(c, "linear_key_head_dim") ?? 128,
        lvD = num(c, "linear_value_head_dim") ?? 128;
    const linearAttention = lkH && lvH ? hidden * (2 * lkH * lkD + 2 * lvH * lvD) + lvH * lvD * hidden : attention;
    const kinds = layerKvFromHfConfig(c, layers);
    const linearLayers = kinds ? kinds.filter((k) => k === "none").length : 0;
    const denseLayers = experts ? (num(c, "first_k_dense_replace") ?? 0) + (Array.isArray(c["mlp_only_layers"]) ? c["mlp_only_layers"].length : 0) : layers;
    const shared = num(c, "shared_expert_intermediate_size") ?? (num(c, "n_shared_experts") ?? 0) * (moeInter ?? 0);
    const moeLayer = experts * 3 * hidden * (moeInter ?? 0) + 3 * hidden * shared + hidden * experts;
    const total =
        (config["tie_word_embeddings"] === true || c["tie_word_embeddings"] === true ? 1 : 2) * vocab * hidden +
        (layers - linearLayers) * attention +
        linearLayers * linearAttention +
        denseLayers * 3 * hidden * (inter ?? 0) +
        (layers - denseLayers) * moeLayer;
    return { paramsB: total / 1e9 };
}

/**
 * A {@link ModelSize} from a Hugging Face config.json object (nested `text_config` included).
 * `paramsB` overrides the estimate (from the model card); without it the count is estimated by
 * {@link estimateParamsFromHfConfig}, and when that cannot, the reason comes back.
 */
export function modelSizeFromHfConfig(name: string, config: unknown, paramsB?: number): { size: ModelSize } | { reason: string } {
    const dtype = weightDtypeFromHfConfig(config);
    if ("reason" in dtype) return dtype;
    const estimate = paramsB === undefined ? estimateParamsFromHfConfig(config) : { paramsB };
    if ("reason" in estimate) return estimate;
    const c = textFields(config as Json);
    const layers = num(c, "num_hidden_layers", "n_layer", "num_layers");
    const hidden = num(c, "hidden_size", "n_embd", "d_model");
    const heads = num(c, "num_attention_heads", "n_head");
    const kvLora = num(c, "kv_lora_rank");
    const notes = paramsB === undefined ? [`${estimate.paramsB.toFixed(1)}B parameters estimated from config.json`] : [];
    return {
        size: {
            name,
            paramsB: estimate.paramsB,
            dtype: dtype.dtype,
            layers,
            hiddenSize: hidden,
            attentionHeads: heads,
            kvHeads: num(c, "num_key_value_heads") ?? heads,
            headDim: num(c, "head_dim") ?? (hidden && heads ? hidden / heads : undefined),
            vocabSize: num(c, "vocab_size"),
            tiedEmbeddings: config !== null && ((config as Json)["tie_word_embeddings"] === true || c["tie_word_embeddings"] === true),
            layerKv: layers ? layerKvFromHfConfig(c, layers) : undefined,
            slidingWindow: num(c, "sliding_window"),
            mlaCacheDim: kvLora === undefined ? undefined : kvLora + (num(c, "qk_rope_head_dim") ?? 0),
            maxContext: num(c, "max_position_embeddings"),
            notes,
        },
    };
}

/**
 * KV cache bytes per token for the layers `[start, end)` on one TP rank: per layer
 * 2 (K and V) × kv_heads/TP × head_dim × bytes per element (the community guides' formula, with the KV heads
 * of GQA, not the attention heads; TP beyond the KV heads replicates them), or the MLA latent
 * (not split by TP). Returns the bytes of full-attention and of sliding-window layers apart
 * (a sliding layer holds at most `slidingWindow` tokens); undefined when the shapes are unknown.
 */
export function kvBytesPerToken(
    size: ModelSize,
    kvElementBytes: number,
    tensorParallel: number,
    start = 0,
    end = size.layers ?? 0,
): { full: number; sliding: number } | undefined {
    const perLayer =
        size.mlaCacheDim !== undefined
            ? size.mlaCacheDim * kvElementBytes
            : size.kvHeads && size.headDim
              ? 2 * Math.max(1, size.kvHeads / tensorParallel) * size.headDim * kvElementBytes
              : undefined;
    if (perLayer === undefined || !size.layers) return undefined;
    const kinds = size.layerKv ?? Array<LayerKv>(size.layers).fill("full");
    const slice = kinds.slice(start, end);
    return {
        full: slice.filter((k) => k === "full" || (k === "sliding" && !size.slidingWindow)).length * perLayer,
        sliding: size.slidingWindow ? slice.filter((k) => k === "sliding").length * perLayer : 0,
    };
}

// ---------------------------------------------------------------------------------------------
// What vLLM's flags make of it
// ---------------------------------------------------------------------------------------------

/** vLLM --quantization names → stored weight type; "fp4" is a community guide's spelling (vLLM itself has no method of that name). */
const QUANTIZATION_DTYPES: Readonly<Record<string, WeightDtype>> = {
    fp8: "fp8",
    fbgemm_fp8: "fp8",
    ptpc_fp8: "fp8",
    deepgemm_fp8: "fp8",
    modelopt: "fp8",
    modelopt_fp4: "fp4",
    mxfp4: "fp4",
    nvfp4: "fp4",
    fp4: "fp4",
    awq: "int4",
    awq_marlin: "int4",
    gptq: "int4",
    gptq_marlin: "int4",
    bitsandbytes: "int4",
};
/** Methods that read the checkpoint's own format: the weights keep the dtype config.json says. */
const CHECKPOINT_FORMATS = new Set(["compressed-tensors", "compressed_tensors", "gguf", "quark", "auto-round", "torchao"]);
/** The weights as vLLM serves them: the --quantization method's type when it is smaller than the checkpoint's; undefined for a method the planner does not know. */
export function servedWeightDtype(size: ModelSize, quantization: string | undefined): WeightDtype | undefined {
    if (quantization === undefined || CHECKPOINT_FORMATS.has(quantization)) return size.dtype;
    const q = QUANTIZATION_DTYPES[quantization];
    if (q === undefined) return undefined;
    return BYTES_PER_PARAM[q] < BYTES_PER_PARAM[size.dtype] ? q : size.dtype;
}

/** Bytes per KV cache element for --kv-cache-dtype: auto is the model's dtype (2, or 4 for fp32); undefined when unknown. */
export function kvElementBytes(size: ModelSize, kvCacheDtype: string | undefined): number | undefined {
    const kv = kvCacheDtype ?? "auto";
    if (kv === "auto") return size.dtype === "fp32" ? 4 : 2;
    if (kv.startsWith("fp8")) return 1;
    return ["bfloat16", "float16", "half"].includes(kv) ? 2 : undefined;
}

/** vLLM's get_pp_indices: layers split evenly; the remainder goes to the stages before the last, from the back. */
export function pipelineStageLayers(layers: number, pipelineParallel: number): [number, number][] {
    const parts = Array<number>(pipelineParallel).fill(Math.floor(layers / pipelineParallel));
    for (let i = 2; i < (layers % pipelineParallel) + 2; i++) parts[pipelineParallel - i] += 1;
    return parts.map((n, s) => {
        const start = parts.slice(0, s).reduce((a, b) => a + b, 0);
        return [start, start + n];
    });
}
