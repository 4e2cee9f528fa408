/**
 * Table tests for the fit planner (config/fitPlanner.ts, config/modelSize.ts) with the seeds'
 * numbers, config.json fixtures written by hand from models' published configs, and a generated
 * test: random clusters and plans, where every "fits" must really fit and every proposal must
 * itself be planned as fitting.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
    FitNode,
    FitResult,
    GIB,
    ModelDescription,
    ServingPlan,
    UNIFIED_GPU_MEMORY_GIB,
    UNIFIED_OS_RESERVED_GIB,
    evaluatePlan,
    planFit,
    startupUtilization,
} from "../../config/fitPlanner";
import {
    BYTES_PER_PARAM,
    ModelSizeConfig,
    ModelSizeSchema,
    estimateParamsFromHfConfig,
    kvBytesPerToken,
    modelSizeFromConfig,
    modelSizeFromHfConfig,
    pipelineStageLayers,
    weightDtypeFromHfConfig,
} from "../../config/modelSize";
import { matchSnapshot } from "../support/snapshot";

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

const spark = (name: string): FitNode => ({ name, kind: "spark" });
const thor = (name: string): FitNode => ({ name, kind: "thor" });
const TWO_SPARKS = [spark("spark-a"), spark("spark-b")];

/** Qwen/Qwen2.5-72B-Instruct's config.json, written by hand from the published file. */
const QWEN25_72B_CONFIG = {
    architectures: ["Qwen2ForCausalLM"],
    attention_dropout: 0.0,
    bos_token_id: 151643,
    eos_token_id: 151645,
    hidden_act: "silu",
    hidden_size: 8192,
    initializer_range: 0.02,
    intermediate_size: 29568,
    max_position_embeddings: 32768,
    max_window_layers: 70,
    model_type: "qwen2",
    num_attention_heads: 64,
    num_hidden_layers: 80,
    num_key_value_heads: 8,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000.0,
    sliding_window: 131072,
    tie_word_embeddings: false,
    torch_dtype: "bfloat16",
    transformers_version: "4.43.1",
    use_cache: true,
    use_sliding_window: false,
    vocab_size: 152064,
};
/** deepseek-ai/DeepSeek-V3's config.json (the fields that size it): MLA, 256 routed experts, FP8 weights. */
const DEEPSEEK_V3_CONFIG = {
    architectures: ["DeepseekV3ForCausalLM"],
    model_type: "deepseek_v3",
    hidden_size: 7168,
    intermediate_size: 18432,
    moe_intermediate_size: 2048,
    n_routed_experts: 256,
    n_shared_experts: 1,
    num_experts_per_tok: 8,
    first_k_dense_replace: 3,
    num_attention_heads: 128,
    num_key_value_heads: 128,
    num_hidden_layers: 61,
    q_lora_rank: 1536,
    kv_lora_rank: 512,
    qk_nope_head_dim: 128,
    qk_rope_head_dim: 64,
    v_head_dim: 128,
    vocab_size: 129280,
    max_position_embeddings: 163840,
    tie_word_embeddings: false,
    torch_dtype: "bfloat16",
    quantization_config: { activation_scheme: "dynamic", fmt: "e4m3", quant_method: "fp8", weight_block_size: [128, 128] },
};
/** mistralai/Mixtral-8x7B-Instruct-v0.1's config.json (the fields that size it). */
const MIXTRAL_CONFIG = {
    architectures: ["MixtralForCausalLM"],
    hidden_size: 4096,
    intermediate_size: 14336,
    num_attention_heads: 32,
    num_hidden_layers: 32,
    num_key_value_heads: 8,
    num_local_experts: 8,
    num_experts_per_tok: 2,
    vocab_size: 32000,
    max_position_embeddings: 32768,
    tie_word_embeddings: false,
    torch_dtype: "bfloat16",
};

/** Qwen2.5-72B as a user writes it under model.size (the Spark + workstation guide's model). */
const QWEN_72B: ModelDescription = {
    from: "size",
    name: "Qwen/Qwen2.5-72B-Instruct",
    size: { paramsB: 72.7, dtype: "bf16", layers: 80, hiddenSize: 8192, attentionHeads: 64, kvHeads: 8, headDim: 128, vocabSize: 152064 },
};
/** Seed 000's plan for the 72B: TP=2, 0.85, 2048 tokens, 8 sequences, eager. */
const SEED_000_PLAN: ServingPlan = {
    tensorParallel: 2,
    pipelineParallel: 1,
    gpuMemoryUtilization: 0.85,
    maxModelLen: 2048,
    maxNumSeqs: 8,
    enforceEager: true,
};
/** Llama-3.1-405B (126 layers, 8 KV heads, head dim 128; 405.8B parameters). */
const LLAMA_405B: ModelDescription = {
    from: "size",
    name: "meta-llama/Llama-3.1-405B",
    size: { paramsB: 405.85, dtype: "bf16", layers: 126, hiddenSize: 16384, attentionHeads: 128, kvHeads: 8, headDim: 128, vocabSize: 128256 },
};
/** Seed 002's 405B launch: PP=2, 8192 tokens, 4 sequences, 0.90. */
const SEED_002_PLAN: ServingPlan = {
    tensorParallel: 1,
    pipelineParallel: 2,
    gpuMemoryUtilization: 0.9,
    maxModelLen: 8192,
    maxNumSeqs: 4,
    quantization: "fp4",
};
/**
 * Qwen3.5-122B-A10B-FP8 (the Spark + Thor guide's model): 48 layers, hidden 3072, 32 heads, full attention every 4th
 * layer (NVIDIA Dynamo's recipe; Vultr's model page); 2 KV heads of 256 as in the Qwen3.5 family's
 * configs (the 397B's config.json).
 */
const QWEN35_122B: ModelDescription = {
    from: "size",
    name: "Qwen/Qwen3.5-122B-A10B-FP8",
    size: { paramsB: 122, dtype: "fp8", layers: 48, hiddenSize: 3072, attentionHeads: 32, kvHeads: 2, headDim: 256, vocabSize: 248320, kvLayers: 12 },
};
/** Seed 004's launch of it: PP=4 over 2 Sparks + 2 Thors, 32768 tokens, 256 sequences, 0.85, eager. */
const SEED_004_PLAN: ServingPlan = {
    tensorParallel: 1,
    pipelineParallel: 4,
    gpuMemoryUtilization: 0.85,
    maxModelLen: 32768,
    maxNumSeqs: 256,
    enforceEager: true,
};

function expectStatus<S extends FitResult["status"]>(result: FitResult, status: S): Extract<FitResult, { status: S }> {
    assert.equal(result.status, status, JSON.stringify(result, null, 1).slice(0, 2000));
    return result as Extract<FitResult, { status: S }>;
}

/** Every GPU's numbers add up and stay under memory × utilization. */
function assertReallyFits(result: FitResult, plan: ServingPlan, nodes: readonly FitNode[]): void {
    const fits = expectStatus(result, "fits");
    assert.equal(fits.estimates.length, plan.tensorParallel * plan.pipelineParallel);
    for (const e of fits.estimates) {
        const node = nodes[e.nodeIndex];
        assert.equal(e.memoryGiB, node.gpuMemoryGiB ?? UNIFIED_GPU_MEMORY_GIB);
        assert.ok(Math.abs(e.usableGiB - e.memoryGiB * plan.gpuMemoryUtilization) < 1e-9);
        assert.ok(Math.abs(e.totalGiB - (e.weightsGiB + (e.kvCacheGiB ?? 0) + e.overheadGiB)) < 1e-9);
        assert.ok(e.totalGiB <= e.usableGiB, `${e.node}: ${e.totalGiB} > ${e.usableGiB}`);
        assert.equal(e.problem, undefined);
    }
}

/** The proposal and every alternative, planned again, fit. */
function assertProposalsFit(model: ModelDescription, result: FitResult, nodes: readonly FitNode[]): void {
    const dnf = expectStatus(result, "does-not-fit");
    for (const p of [dnf.proposal, ...dnf.alternatives].filter((p) => p !== undefined)) {
        assertReallyFits(planFit(model, p.plan, nodes), p.plan, nodes);
        assert.ok(p.changes.length > 0);
    }
}

// ---------------------------------------------------------------------------------------------
// The seeds
// ---------------------------------------------------------------------------------------------

describe("the seeds' models and plans", () => {
    it("the Spark + workstation guide: Qwen2.5-72B BF16 needs ~136 GB, so it does not fit one Spark but fits two", () => {
        const weights = (72.7e9 * 2) / GIB;
        assert.ok(weights > 135 && weights < 136.5, `weights ${weights} GiB`);
        const one = expectStatus(planFit(QWEN_72B, { ...SEED_000_PLAN, tensorParallel: 1 }, [spark("spark-a")]), "does-not-fit");
        assert.ok(one.estimates[0].weightsGiB > 135);
        assert.match(
            one.message,
            /spark-a needs 144\.4 GiB \(weights 135\.4 \+ KV 5\.0 \+ overhead 4\.0\) but model\.gpuMemoryUtilization 0\.85 × 121\.6 GiB allows 103\.4/,
        );
        assert.ok(one.keys.includes("model.quantization") && one.keys.includes("nodes[0].gpuMemoryGiB"));
        assert.deepEqual(one.proposal?.plan.quantization, "fp8");
        assertProposalsFit(QWEN_72B, one, [spark("spark-a")]);
        matchSnapshot("fitPlanner.seed000-one-spark.txt", `${one.message}\n`);

        const two = planFit(QWEN_72B, SEED_000_PLAN, TWO_SPARKS);
        assertReallyFits(two, SEED_000_PLAN, TWO_SPARKS);
        const fits = expectStatus(two, "fits");
        assert.ok(fits.estimates.every((e) => Math.abs(e.weightsGiB - weights / 2) < 0.01 && e.fullLengthSequences! >= 8));
        matchSnapshot("fitPlanner.seed000-two-sparks.txt", `${fits.summary}\n`);
    });

    it("the Spark + workstation guide: Spark + RTX PRO 6000 workstation (96 GB = 89.4 GiB) fits; without gpuMemoryGiB it is skipped", () => {
        const nodes: FitNode[] = [spark("spark"), { name: "workstation", kind: "workstation", gpuMemoryGiB: 96e9 / GIB }];
        assertReallyFits(planFit(QWEN_72B, SEED_000_PLAN, nodes), SEED_000_PLAN, nodes);
        const skipped = expectStatus(planFit(QWEN_72B, SEED_000_PLAN, [spark("spark"), { name: "ws", kind: "workstation" }]), "skipped");
        assert.deepEqual(skipped.keys, ["nodes[1].gpuMemoryGiB"]);
        assert.match(skipped.reason, /workstation: its GPU memory must come from nodes\[1\]\.gpuMemoryGiB/);
    });

    it("the two-Spark guide: 405B needs FP4 on two Sparks; FP8 gets a computed FP4 proposal, one Spark gets none", () => {
        assertReallyFits(planFit(LLAMA_405B, SEED_002_PLAN, TWO_SPARKS), SEED_002_PLAN, TWO_SPARKS);
        const fp8 = expectStatus(planFit(LLAMA_405B, { ...SEED_002_PLAN, quantization: "fp8" }, TWO_SPARKS), "does-not-fit");
        assert.ok(
            fp8.estimates.every((e) => e.weightsGiB > 180),
            "FP8 weights: ~405 GB over two nodes",
        );
        assert.equal(fp8.proposal?.plan.quantization, "modelopt_fp4");
        assert.deepEqual(fp8.proposal?.changes, [
            "model.quantization: fp8 → modelopt_fp4 (an NVFP4 checkpoint of the model: vLLM does not quantize to FP4 on load)",
        ]);
        assert.deepEqual(fp8.alternatives, []);
        assertProposalsFit(LLAMA_405B, fp8, TWO_SPARKS);

        const one = expectStatus(planFit(LLAMA_405B, { ...SEED_002_PLAN, pipelineParallel: 1 }, [spark("spark1")]), "does-not-fit");
        assert.equal(one.proposal, undefined);
        assert.match(one.message, /even FP4 weights take 189\.0 GiB against 109\.5 GiB usable in all; add nodes/);
    });

    it("the Spark + Thor guide: Qwen3.5-122B FP8 over 2 Sparks + 2 Thors with PP=4 fits, 12 layers and 3 KV layers per node", () => {
        const nodes = [spark("spark-ea8e"), spark("spark-4080"), thor("jetson-thor"), thor("thorx")];
        const result = planFit(QWEN35_122B, SEED_004_PLAN, nodes);
        assertReallyFits(result, SEED_004_PLAN, nodes);
        const fits = expectStatus(result, "fits");
        assert.deepEqual(
            fits.estimates.map((e) => e.layers),
            [
                [0, 12],
                [12, 24],
                [24, 36],
                [36, 48],
            ],
        );
        // 3 full-attention layers × 2 × 2 KV heads × 256 × 2 bytes, × 32768 tokens × 256 sequences
        const kv = (3 * 2 * 2 * 256 * 2 * 32768 * 256) / GIB;
        assert.ok(
            fits.estimates.every((e) => Math.abs(e.kvCacheGiB! - kv) < 1e-9),
            `KV ${kv} GiB per node`,
        );
        const weights = fits.estimates.reduce((n, e) => n + e.weightsGiB, 0);
        assert.ok(Math.abs(weights - 122e9 / GIB) < 1e-6, "PP places all 122 GB of FP8 weights once");
    });
});

// ---------------------------------------------------------------------------------------------
// The KV cache, the layer split, config.json
// ---------------------------------------------------------------------------------------------

describe("KV cache per token: 2 × layers × kv_heads × head_dim × bytes", () => {
    const llama70b = modelSizeFromConfig("Llama-3-70B", { paramsB: 70.6, layers: 80, attentionHeads: 64, kvHeads: 8, headDim: 128 });
    const table: [string, number, number, number, number | undefined, number][] = [
        // name, bytes per element, TP, layer start, layer end, bytes per token (per GPU)
        ["BF16, one GPU", 2, 1, 0, undefined, 2 * 80 * 8 * 128 * 2],
        ["FP8 KV cache", 1, 1, 0, undefined, 163840],
        ["TP=2 splits the 8 KV heads", 2, 2, 0, undefined, 163840],
        ["TP=16 replicates KV heads beyond 8", 2, 16, 0, undefined, 2 * 80 * 1 * 128 * 2],
        ["PP=2 stage holds 40 layers", 2, 1, 40, 80, 163840],
    ];
    for (const [name, bytes, tp, start, end, expected] of table) {
        it(name, () => assert.deepEqual(kvBytesPerToken(llama70b, bytes, tp, start, end), { full: expected, sliding: 0 }));
    }
    it("is 1/8 of the two-Spark guide's 2.56 MB per token, which counted the 64 attention heads instead of the 8 KV heads", () => {
        assert.equal(kvBytesPerToken(llama70b, 2, 1)!.full * 8, 80 * 2 * 64 * 128 * 2);
    });
    it("MLA (DeepSeek-V3) caches kv_lora_rank + qk_rope_head_dim per layer, the same on every TP rank", () => {
        const r = modelSizeFromHfConfig("DeepSeek-V3", DEEPSEEK_V3_CONFIG);
        assert.ok("size" in r);
        assert.deepEqual(kvBytesPerToken(r.size, 2, 8), { full: 61 * (512 + 64) * 2, sliding: 0 });
    });
});

describe("pipeline stages follow vLLM's get_pp_indices", () => {
    const table: [number, number, [number, number][]][] = [
        [
            80,
            2,
            [
                [0, 40],
                [40, 80],
            ],
        ],
        [
            126,
            4,
            [
                [0, 31],
                [31, 63],
                [63, 95],
                [95, 126],
            ],
        ],
        [
            80,
            3,
            [
                [0, 27],
                [27, 54],
                [54, 80],
            ],
        ],
        [
            10,
            4,
            [
                [0, 2],
                [2, 5],
                [5, 8],
                [8, 10],
            ],
        ],
    ];
    for (const [layers, pp, expected] of table) {
        it(`${layers} layers over PP=${pp}`, () => assert.deepEqual(pipelineStageLayers(layers, pp), expected));
    }
});

describe("config.json", () => {
    it("Qwen2.5-72B-Instruct: 72.7B parameters estimated, BF16, and the same fit as model.size gives", () => {
        const estimate = estimateParamsFromHfConfig(QWEN25_72B_CONFIG);
        assert.ok("paramsB" in estimate && Math.abs(estimate.paramsB - 72.7) < 0.05, JSON.stringify(estimate));
        const r = modelSizeFromHfConfig("Qwen/Qwen2.5-72B-Instruct", QWEN25_72B_CONFIG);
        assert.ok("size" in r);
        assert.equal(r.size.dtype, "bf16");
        assert.equal(r.size.maxContext, 32768);
        assert.deepEqual(kvBytesPerToken(r.size, 2, 1), { full: 327680, sliding: 0 });
        const fromJson = expectStatus(planFit({ from: "hf-config", name: "q", config: QWEN25_72B_CONFIG }, SEED_000_PLAN, TWO_SPARKS), "fits");
        const fromSize = expectStatus(planFit(QWEN_72B, SEED_000_PLAN, TWO_SPARKS), "fits");
        fromJson.estimates.forEach((e, i) => assert.ok(Math.abs(e.totalGiB - fromSize.estimates[i].totalGiB) < 0.01));
        assert.match(fromJson.summary, /72\.7B parameters estimated from config\.json/);
    });

    it("MoE: Mixtral-8x7B 46.7B, DeepSeek-V3 671B with FP8 weights from quantization_config", () => {
        const mixtral = estimateParamsFromHfConfig(MIXTRAL_CONFIG);
        assert.ok("paramsB" in mixtral && Math.abs(mixtral.paramsB - 46.7) < 0.05, JSON.stringify(mixtral));
        const deepseek = estimateParamsFromHfConfig(DEEPSEEK_V3_CONFIG);
        assert.ok("paramsB" in deepseek && Math.abs(deepseek.paramsB - 671) < 1, JSON.stringify(deepseek));
        assert.deepEqual(weightDtypeFromHfConfig(DEEPSEEK_V3_CONFIG), { dtype: "fp8" });
    });

    it("multimodal text_config, compressed-tensors FP4 and a 1-in-4 full-attention hybrid", () => {
        const config = {
            architectures: ["SomeVLForConditionalGeneration"],
            tie_word_embeddings: false,
            quantization_config: { quant_method: "compressed-tensors", config_groups: { group_0: { weights: { num_bits: 4, type: "float" } } } },
            text_config: {
                hidden_size: 2048,
                intermediate_size: 6144,
                num_attention_heads: 16,
                num_key_value_heads: 2,
                head_dim: 256,
                num_hidden_layers: 8,
                vocab_size: 151936,
                full_attention_interval: 4,
                dtype: "bfloat16",
            },
        };
        const r = modelSizeFromHfConfig("vl", config);
        assert.ok("size" in r);
        assert.equal(r.size.dtype, "fp4");
        assert.deepEqual(r.size.layerKv, ["none", "none", "none", "full", "none", "none", "none", "full"]);
        assert.deepEqual(kvBytesPerToken(r.size, 2, 1), { full: 2 * 2 * 2 * 256 * 2, sliding: 0 });
    });

    const quantTable: [string, Record<string, unknown>, string][] = [
        ["modelopt NVFP4", { quant_method: "modelopt", quant_algo: "NVFP4" }, "fp4"],
        ["GPTQ 4-bit", { quant_method: "gptq", bits: 4 }, "int4"],
        ["AWQ 4-bit", { quant_method: "awq", bits: 4 }, "int4"],
        ["bitsandbytes 8-bit", { quant_method: "bitsandbytes", load_in_8bit: true }, "int8"],
        ["mxfp4 (gpt-oss)", { quant_method: "mxfp4" }, "fp4"],
    ];
    for (const [name, quantization_config, dtype] of quantTable) {
        it(`weights of ${name} are ${dtype}`, () => assert.deepEqual(weightDtypeFromHfConfig({ quantization_config }), { dtype }));
    }

    it("says why it cannot estimate, and the fit is then skipped naming model.size.paramsB", () => {
        const partial = { hidden_size: 4096, num_attention_heads: 32, torch_dtype: "bfloat16" };
        assert.deepEqual(estimateParamsFromHfConfig(partial), {
            reason: "cannot estimate the parameter count: config.json has no num_hidden_layers, vocab_size, intermediate_size; give model.size.paramsB",
        });
        const skipped = expectStatus(planFit({ from: "hf-config", name: "org/partial", config: partial }, SEED_000_PLAN, TWO_SPARKS), "skipped");
        assert.deepEqual(skipped.keys, ["model.size.paramsB"]);
        assert.match(skipped.reason, /^org\/partial: cannot estimate/);
        assert.ok("size" in modelSizeFromHfConfig("org/partial", { ...partial, num_hidden_layers: 32 }, 7), "an explicit count is used as is");
    });
});

// ---------------------------------------------------------------------------------------------
// Skips, proposals, the schema
// ---------------------------------------------------------------------------------------------

describe("skipped, and proposals that are checked to fit", () => {
    it("a hub id whose size is not known offline is skipped, naming model.size", () => {
        const skipped = expectStatus(planFit({ from: "unknown", name: "org/new-model" }, SEED_000_PLAN, TWO_SPARKS), "skipped");
        assert.deepEqual(skipped.keys, ["model.size"]);
        assert.match(skipped.reason, /org\/new-model is not known offline.*model\.size: \{ paramsB: 72\.7/);
    });

    it("the two-Spark guide's 70B plan (PP=2, 16384 × 32 sequences) only fits vLLM's one-sequence check; proposals each fit", () => {
        const llama70b: ModelDescription = {
            from: "size",
            name: "Llama-3.1-70B",
            size: { paramsB: 70.6, layers: 80, hiddenSize: 8192, attentionHeads: 64, kvHeads: 8, headDim: 128, vocabSize: 128256 },
        };
        const plan: ServingPlan = { tensorParallel: 1, pipelineParallel: 2, gpuMemoryUtilization: 0.85, maxModelLen: 16384, maxNumSeqs: 32 };
        const dnf = expectStatus(planFit(llama70b, plan, TWO_SPARKS), "does-not-fit");
        assertProposalsFit(llama70b, dnf, TWO_SPARKS);
        assert.deepEqual(dnf.proposal?.changes, ["model.maxModelLen: 16384 → 6144"]);
        assert.deepEqual(
            dnf.alternatives.map((a) => a.changes),
            [
                ["model.maxNumSeqs: 32 → 12"],
                ["model.quantization: (unset) → fp8 (vLLM quantizes the weights to FP8 on load)", "model.kvCacheDtype: (unset) → fp8"],
                ["model.quantization: (unset) → modelopt_fp4 (an NVFP4 checkpoint of the model: vLLM does not quantize to FP4 on load)"],
            ],
        );
        const relaxed = { ...plan, kvBudget: "one-sequence" as const };
        assertReallyFits(planFit(llama70b, relaxed, TWO_SPARKS), relaxed, TWO_SPARKS);
    });

    it("gpuMemoryUtilization above what the OS leaves on a Spark is refused, and the proposal lowers only it", () => {
        const plan = { ...SEED_000_PLAN, gpuMemoryUtilization: 0.95 };
        const dnf = expectStatus(planFit(QWEN_72B, plan, TWO_SPARKS), "does-not-fit");
        assert.match(dnf.message, /model\.gpuMemoryUtilization 0\.95 asks for 115\.5 GiB of 121\.6 but the OS keeps about 11 GiB/);
        assert.deepEqual(dnf.proposal?.changes, ["model.gpuMemoryUtilization: 0.95 → 0.9"]);
        assertProposalsFit(QWEN_72B, dnf, TWO_SPARKS);
    });

    it("a TP that does not divide the attention heads is refused; the proposal is a split that does", () => {
        const nodes = [spark("a"), spark("b"), spark("c")];
        const plan: ServingPlan = { ...SEED_000_PLAN, tensorParallel: 3 };
        const dnf = expectStatus(planFit(QWEN_72B, plan, nodes), "does-not-fit");
        assert.match(dnf.message, /model\.tensorParallel 3 does not divide the model's 64 attention heads/);
        assert.deepEqual(dnf.proposal?.changes, ["model.tensorParallel: 3 → 1", "model.pipelineParallel: 1 → 3"]);
        assertProposalsFit(QWEN_72B, dnf, nodes);
    });
});

describe("ModelSizeSchema (model.size)", () => {
    it("defaults dtype to bf16 and tiedEmbeddings to false", () => {
        assert.deepEqual(ModelSizeSchema.parse({ paramsB: 7 }), { paramsB: 7, dtype: "bf16", tiedEmbeddings: false });
    });
    const bad: [string, unknown, RegExp][] = [
        ["kvHeads must divide attentionHeads", { paramsB: 70, attentionHeads: 64, kvHeads: 7 }, /kvHeads: 8 with attentionHeads: 64/],
        ["kvLayers needs layers", { paramsB: 122, kvLayers: 12 }, /Example: layers: 48, kvLayers: 12/],
        ["unknown keys are refused", { paramsB: 7, params: 7 }, /params/],
        ["dtype is one of the known", { paramsB: 7, dtype: "q4_k_m" }, /dtype/],
    ];
    for (const [name, input, message] of bad) {
        it(name, () => {
            const r = ModelSizeSchema.safeParse(input);
            assert.equal(r.success, false);
            assert.match(JSON.stringify(r.error?.issues), message);
        });
    }
    it("a bad model.size is skipped with the key path", () => {
        const skipped = expectStatus(planFit({ from: "size", name: "m", size: { paramsB: -1 } as ModelSizeConfig }, SEED_000_PLAN, TWO_SPARKS), "skipped");
        assert.match(skipped.reason, /^model\.size\.paramsB: /);
    });
});

// ---------------------------------------------------------------------------------------------
// Generated inputs
// ---------------------------------------------------------------------------------------------

/** A cluster of 1 to 4 nodes: Sparks (twice as likely), Thors and workstations of 1 or 2 GPUs. */
const nodesArb: fc.Arbitrary<FitNode[]> = fc
    .array(
        fc.oneof(
            fc.constantFrom("spark", "spark", "thor").map((kind) => ({ kind })),
            fc.record({ kind: fc.constant("workstation" as const), gpus: fc.constantFrom(1, 2), gpuMemoryGiB: fc.constantFrom(22.5, 44.6, 89.4) }),
        ),
        { minLength: 1, maxLength: 4 },
    )
    .map((specs) =>
        specs.map((spec, n): FitNode => (spec.kind === "workstation" ? { name: `ws${n}`, ...spec } : { name: `${spec.kind}${n}`, kind: spec.kind })),
    );

/** A model.size: a dense shape of a known family, 0 to 500 B parameters above its embeddings. */
const sizeArb: fc.Arbitrary<ModelSizeConfig> = fc
    .record({
        shape: fc.constantFrom<[number, number]>([4096, 32], [8192, 64], [5120, 40], [16384, 128]),
        vocabSize: fc.constantFrom(32000, 128256, 152064),
        layers: fc.constantFrom(32, 48, 61, 80, 126),
        extraB: fc.double({ min: 0, max: 500, maxExcluded: true, noNaN: true }),
        dtype: fc.constantFrom("bf16", "fp8", "fp4") as fc.Arbitrary<"bf16" | "fp8" | "fp4">,
        kvHeads: fc.constantFrom(1, 8),
        everyFourthKv: fc.boolean(),
    })
    .map(({ shape: [hiddenSize, attentionHeads], vocabSize, layers, extraB, dtype, kvHeads, everyFourthKv }) => ({
        paramsB: Math.ceil((2 * vocabSize * hiddenSize) / 1e9 + extraB),
        dtype,
        layers,
        hiddenSize,
        attentionHeads,
        kvHeads,
        headDim: hiddenSize / attentionHeads,
        vocabSize,
        kvLayers: everyFourthKv ? Math.floor(layers / 4) : undefined,
        maxContext: 131072,
    }));

/** A plan for `nodes`: every GPU or one fewer, split into TP x PP, with the serving knobs drawn. */
function planArb(nodes: FitNode[]): fc.Arbitrary<ServingPlan> {
    const gpuCount = nodes.reduce((n, node) => n + (node.gpus ?? 1), 0);
    return fc
        .constantFrom(gpuCount, Math.max(1, gpuCount - 1))
        .chain((world) =>
            fc.record({ world: fc.constant(world), tp: fc.constantFrom(...Array.from({ length: world }, (_, k) => k + 1).filter((k) => world % k === 0)) }),
        )
        .chain(({ world, tp }) =>
            fc.record({
                tensorParallel: fc.constant(tp),
                pipelineParallel: fc.constant(world / tp),
                gpuMemoryUtilization: fc.constantFrom(0.5, 0.7, 0.85, 0.9, 0.95),
                maxModelLen: fc.constantFrom(undefined, 2048, 8192, 32768),
                maxNumSeqs: fc.constantFrom(undefined, 1, 8, 64),
                quantization: fc.constantFrom(undefined, "fp8", "modelopt_fp4"),
                kvCacheDtype: fc.constantFrom(undefined, "fp8"),
                enforceEager: fc.boolean(),
                kvBudget: fc.constantFrom("all-sequences", "one-sequence") as fc.Arbitrary<"all-sequences" | "one-sequence">,
            }),
        );
}

const caseArb = fc.tuple(nodesArb, sizeArb).chain(([nodes, size]) => fc.record({ nodes: fc.constant(nodes), size: fc.constant(size), plan: planArb(nodes) }));

describe("generated clusters and plans", () => {
    it("every fits really fits, every proposal fits, and PP places each weight once", () => {
        const seen = { fits: 0, "does-not-fit": 0, skipped: 0, proposals: 0 };
        let i = 0;
        // A fixed seed, so the coverage counted below is the same on every run (fast-check prints the seed and path of a failure).
        fc.assert(
            fc.property(caseArb, ({ nodes, size, plan }) => {
                const model: ModelDescription = { from: "size", name: `m${i++}`, size };
                const result = planFit(model, plan, nodes);
                seen[result.status] += 1;
                if (result.status === "fits") assertReallyFits(result, plan, nodes);
                if (result.status === "does-not-fit") {
                    assert.ok(result.estimates.some((e) => !e.fits) || /tensorParallel|pipelineParallel/.test(result.message));
                    assertProposalsFit(model, result, nodes);
                    seen.proposals += result.proposal ? 1 : 0;
                }
                const parsed = modelSizeFromConfig(model.name, size);
                const ev = evaluatePlan(parsed, plan, nodes);
                assert.ok("estimates" in ev);
                const placed = ev.estimates.reduce((n, e) => n + e.weightsGiB, 0);
                const bytes = BYTES_PER_PARAM[parsed.dtype];
                const quantBytes = Math.min(bytes, plan.quantization === "fp8" ? 1 : plan.quantization ? 0.5 : bytes);
                assert.ok(Math.abs(placed - (size.paramsB * 1e9 * quantBytes) / GIB) < 1e-6, "weights placed once");
            }),
            { numRuns: 250, seed: 20261122 },
        );
        assert.ok(seen.fits >= 20 && seen["does-not-fit"] >= 20 && seen.proposals >= 10, JSON.stringify(seen));
    });
});

describe("unified memory: the memory the OS shows, the headroom, a fixed KV budget", () => {
    it("a Spark is planned with the ~121.7 GiB the OS shows, and the summary prints the headroom and what the OS keeps", () => {
        assert.ok(UNIFIED_GPU_MEMORY_GIB > 121.5 && UNIFIED_GPU_MEMORY_GIB < 121.8);
        const fits = expectStatus(planFit(QWEN_72B, SEED_000_PLAN, TWO_SPARKS), "fits");
        const e = fits.estimates[0];
        const headroom = (e.usableGiB - e.totalGiB).toFixed(1);
        const osKeeps = (e.memoryGiB * (1 - SEED_000_PLAN.gpuMemoryUtilization)).toFixed(1);
        assert.ok(fits.summary.includes(`headroom ${headroom} GiB; the OS keeps ${osKeeps} of the 121.6 GiB it shows`), fits.summary);
        assert.equal(fits.startupUtilization, undefined);
    });

    it("a workstation's summary has the headroom but no OS share (its GPU has its own memory)", () => {
        const ws: FitNode[] = [{ name: "ws", kind: "workstation", gpuMemoryGiB: 89.4 }];
        const fits = expectStatus(planFit(QWEN_72B, { ...SEED_000_PLAN, tensorParallel: 1, quantization: "fp4" }, ws), "fits");
        assert.match(fits.summary, /headroom \d+\.\d GiB/);
        assert.doesNotMatch(fits.summary, /the OS keeps/);
    });

    it("kvCacheMemoryBytes: the KV cache is the budget, vLLM may use what the OS leaves, and the start-up utilization covers the need", () => {
        const budget = 16 * GIB;
        const plan: ServingPlan = { ...SEED_000_PLAN, gpuMemoryUtilization: 0.9, kvCacheMemoryBytes: budget };
        const fits = expectStatus(planFit(QWEN_72B, plan, TWO_SPARKS), "fits");
        for (const e of fits.estimates) {
            assert.equal(e.kvCacheGiB, 16);
            assert.ok(Math.abs(e.usableGiB - (UNIFIED_GPU_MEMORY_GIB - UNIFIED_OS_RESERVED_GIB)) < 1e-9);
            assert.ok(Math.abs(e.totalGiB - (e.weightsGiB + 16 + e.overheadGiB)) < 1e-9);
        }
        assert.match(fits.summary, /KV cache fixed at 16\.0 GiB per GPU/);
        const util = fits.startupUtilization;
        assert.ok(util !== undefined);
        const need = Math.max(...fits.estimates.map((e) => e.totalGiB / e.memoryGiB));
        assert.ok(util >= need && util < need + 0.01, `${util} vs ${need}`);
        assert.equal(startupUtilization(fits.estimates), util);
    });

    it("kvCacheMemoryBytes too large for what the OS leaves does not fit, naming the GPU", () => {
        const plan: ServingPlan = { ...SEED_000_PLAN, gpuMemoryUtilization: 0.9, kvCacheMemoryBytes: 60 * GIB };
        const dnf = expectStatus(planFit(QWEN_72B, plan, TWO_SPARKS), "does-not-fit");
        assert.match(dnf.message, /spark-a needs 131\.7 GiB \(weights 67\.7 \+ KV 60\.0 \+ overhead 4\.0\)/);
    });

    it("startupUtilization rounds up to a hundredth and stays within (0, 1]", () => {
        const e = (totalGiB: number) => ({ totalGiB, memoryGiB: 100 }) as Parameters<typeof startupUtilization>[0][number];
        assert.equal(startupUtilization([e(50), e(70.01)]), 0.71);
        assert.equal(startupUtilization([e(70)]), 0.7);
        assert.equal(startupUtilization([e(0)]), 0.01);
        assert.equal(startupUtilization([e(130)]), 1);
    });
});
