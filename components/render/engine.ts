// The serving engine as one strategy: what an engine gives the component that runs it on one
// node (EnginePlan), and the one place that picks the engine's renderers from the resolved
// engine decision (config/resolve.ts `Engine`). The component wires any EnginePlan without
// knowing which engine made it; adding an engine is one strategy here and one schema value.
import type { Engine, ModelConfig, Runtime, ServerPlacement, WatchdogConfig } from "../../config";
import type { EnginePlan } from "./enginePlan";
import type { Probe } from "./facts";
import { type EngineProbeResult, type EngineProbeSpec, vllmProbe } from "./probe";
import { SGLANG_SECRETS_PATH, UNITS, VLLM_SECRETS_PATH } from "../../config/hostPaths";
import { envFileReader, pythonReadEnvValue } from "./host/envFile";
import { pythonSglangKey, sglangCheckScript, sglangPlan, sglangProbe, sglangServeArgv } from "./sglang";
import { vllmPlan, vllmServeArgv } from "./vllm";
import { type NodeVllm, SHIPPED_FLAG_TABLES, vllmCheckScript, vllmVerdict } from "./vllmCompat";

/** What an engine renders for one server: the model settings, where the server runs, and its runtime. */
export interface EngineServer {
    model: ModelConfig;
    placement: ServerPlacement;
    runtime: Runtime;
    /** The node's GPU and OS share one memory pool (spark, thor): the model's pages leave the page cache before each start. Defaults to false. */
    unifiedMemory?: boolean;
    /** The Ray cluster the engine joins (ray executor). Defaults to none. */
    rayAddress?: string;
    /** The health watchdog and restart gate (config.watchdog). Defaults to none: the unit restarts as Restart=always alone does. */
    watchdog?: WatchdogConfig;
}

/**
 * What the operations commands (ops/: status, logs) need to know of the engine on a node: its name,
 * its units, and how to read its API key there.
 */
export interface EngineOps {
    /** The engine's name in messages: "vLLM", "SGLang". */
    label: string;
    /** The serving unit, the follower unit of a rank 1+, and the head's watchdog of the serving unit. */
    unit: string;
    followUnit: string;
    watchdogUnit: string;
    /** Python (json, os and sys imported) that sets `key` from the engine's secrets file on the node, or to None when there is none. */
    readApiKeyPython(runtime: Runtime): string[];
    /** The gauges of its /metrics that `status` shows: requests running and waiting, the KV cache's use (0-1). */
    loadMetrics: { running: string; waiting: string; kvCache: string };
}

/** One serving engine: its plan for a server, and the argv it runs there (for the cluster's compatibility check). */
export interface EngineStrategy {
    plan(server: EngineServer): EnginePlan;
    serveArgv(model: ModelConfig, placement: ServerPlacement): string[];
    /**
     * The read-only probe of the engine in a node's runtime (its version; the image's ID for docker),
     * which fails naming the runtime when the engine is missing, and its parser (`version` is `none` then).
     */
    probe: Probe<EngineProbeSpec, EngineProbeResult>;
    /** The cluster's check of every node's engine against what is rendered for it: prints `<node>: <engine> <version> (…)` per node, fails with the problems. */
    checkScript(nodes: readonly NodeVllm[]): string;
    /** What ops/ reads of the engine. */
    ops: EngineOps;
}

const VLLM: EngineStrategy = {
    plan: ({ model, placement, runtime, unifiedMemory, rayAddress, watchdog }) =>
        vllmPlan({ ...model, multiNode: placement.multiNode, unifiedMemory: unifiedMemory ?? false, watchdog }, runtime, rayAddress),
    serveArgv: (model, placement) => vllmServeArgv({ ...model, multiNode: placement.multiNode }),
    probe: vllmProbe,
    checkScript: (nodes) => vllmCheckScript(vllmVerdict(nodes, SHIPPED_FLAG_TABLES)),
    ops: {
        label: "vLLM",
        unit: UNITS.vllm,
        followUnit: UNITS.vllmFollow,
        watchdogUnit: UNITS.vllmWatchdog,
        // vllm/v1/metrics/loggers.py (PrometheusStatLogger); the cache gauge was gpu_cache_usage_perc before 0.10.
        loadMetrics: { running: "vllm:num_requests_running", waiting: "vllm:num_requests_waiting", kvCache: "vllm:kv_cache_usage_perc" },
        readApiKeyPython: (runtime) => [
            pythonReadEnvValue(envFileReader(runtime)),
            "key = None",
            `if os.path.exists(${JSON.stringify(VLLM_SECRETS_PATH)}):`,
            `    key = read_env_value(${JSON.stringify(VLLM_SECRETS_PATH)}, "VLLM_API_KEY")`,
        ],
    },
};

/** SGLang (model.engine sglang): its own multi-node mode only, so no Ray address (config refuses the ray executor). */
const SGLANG: EngineStrategy = {
    plan: ({ model, placement, runtime, unifiedMemory, watchdog }) =>
        sglangPlan({ ...model, multiNode: placement.multiNode, unifiedMemory: unifiedMemory ?? false, watchdog }, runtime),
    serveArgv: (model, placement) => sglangServeArgv({ ...model, multiNode: placement.multiNode }),
    probe: sglangProbe,
    checkScript: sglangCheckScript,
    ops: {
        label: "SGLang",
        unit: UNITS.sglang,
        followUnit: UNITS.sglangFollow,
        watchdogUnit: UNITS.sglangWatchdog,
        // sglang/srt/metrics/collector.py (SchedulerMetricsCollector), with --enable-metrics.
        loadMetrics: { running: "sglang:num_running_reqs", waiting: "sglang:num_queue_reqs", kvCache: "sglang:token_usage" },
        readApiKeyPython: () => pythonSglangKey(SGLANG_SECRETS_PATH),
    },
};

/** The strategy of the resolved engine: the one place that tells the engines apart. */
export function engineStrategy(engine: Engine): EngineStrategy {
    switch (engine.kind) {
        case "vllm":
            return VLLM;
        case "sglang":
            return SGLANG;
        default: {
            const never: never = engine;
            throw new Error(`internal: unknown engine ${JSON.stringify(never)}`);
        }
    }
}
