// The serving engine as one strategy: what an engine gives the component that runs it on one
// node (EnginePlan), and the one place that picks the engine's renderers from the resolved
// engine decision (config/resolve.ts `Engine`). The component wires any EnginePlan without
// knowing which engine made it; adding an engine is one strategy here and one schema value.
import type { Engine, ModelConfig, Runtime, ServerPlacement, WatchdogConfig } from "../../config";
import type { StepScripts } from "./step";
import { vllmProbeScript } from "./probe";
import { parseSglangProbe, sglangCheckScript, sglangPlan, sglangProbeScript, sglangServeArgv } from "./sglang";
import { vllmPlan, vllmServeArgv } from "./vllm";
import { type NodeVllm, SHIPPED_FLAG_TABLES, type VllmProbeResult, parseVllmProbe, vllmCheckScript, vllmVerdict } from "./vllmCompat";

/**
 * Everything an engine puts on one node, asked for once by its component, which wires it: the
 * root-only secrets file and its step, the unit and its step, the readiness probe (rank 0), and
 * on a headless rank its follower unit. The unit and the secrets file wait for values known at
 * deploy time (the runtime env's hash, the other ranks' units, the secrets), so they are
 * functions of those.
 */
export interface EnginePlan {
    /** This server's rank (0 serves the API). */
    rank: number;
    /** The OpenAI-compatible API rank 0 serves: its port and the model name clients ask for. */
    api: { port: number; servedModel: string };
    /** Rendered secrets file (API key, HF token), read by the runtime's env-file reader. */
    secretsFile(apiKey: string, hfToken: string): string;
    /** The secrets step: the file from stdin, root-only. */
    secrets: StepScripts;
    /** The unit; `peerUnits` (rank 0 of a multi-node engine): a change of any restarts this one after them. */
    unit(envHash: string, peerUnits: readonly string[]): string;
    /** The unit step: its create and read-back scripts for the rendered unit, and its delete. */
    unitStep: { create(unit: string): string; read(unit: string): string; delete: string };
    /** The readiness probe (rank 0 only: a real chat request answered). */
    ready?: string;
    /** The readiness step's Pulumi timeout: the probe's wait and 10 minutes for its last attempt and SSH. */
    readyTimeout: string;
    /** A headless rank's follower unit step (rank 1+): restarts it when the head's engine ends. */
    follow?: StepScripts;
    /**
     * The engine-switch step of an engine other than vLLM: a switch updates the serving steps in
     * place, which runs only the new engine's create scripts. Its create removes what vLLM leaves
     * on the node (unit, follower, secrets file); its delete, when the stack goes back to vLLM
     * (or is destroyed), removes this engine's. vLLM has none, so a vLLM stack is unchanged.
     */
    switchCleanup?: { create: string; delete: string };
}

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

/** One serving engine: its plan for a server, and the argv it runs there (for the cluster's compatibility check). */
export interface EngineStrategy {
    plan(server: EngineServer): EnginePlan;
    serveArgv(model: ModelConfig, placement: ServerPlacement): string[];
    /** The read-only probe of the engine in a node's runtime (its version; the image's ID for docker); fails naming the runtime when the engine is missing. */
    probeScript(spec: { node: string; runtime: Runtime }): string;
    /** Reads {@link probeScript}'s output (`version` is `none` when the engine is missing). */
    parseProbe(output: string): VllmProbeResult;
    /** The cluster's check of every node's engine against what is rendered for it: prints `<node>: <engine> <version> (…)` per node, fails with the problems. */
    checkScript(nodes: readonly NodeVllm[]): string;
}

const VLLM: EngineStrategy = {
    plan: ({ model, placement, runtime, unifiedMemory, rayAddress, watchdog }) =>
        vllmPlan({ ...model, multiNode: placement.multiNode, unifiedMemory: unifiedMemory ?? false, watchdog }, runtime, rayAddress),
    serveArgv: (model, placement) => vllmServeArgv({ ...model, multiNode: placement.multiNode }),
    probeScript: vllmProbeScript,
    parseProbe: parseVllmProbe,
    checkScript: (nodes) => vllmCheckScript(vllmVerdict(nodes, SHIPPED_FLAG_TABLES)),
};

/** SGLang (model.engine sglang): its own multi-node mode only, so no Ray address (config refuses the ray executor). */
const SGLANG: EngineStrategy = {
    plan: ({ model, placement, runtime, unifiedMemory, watchdog }) =>
        sglangPlan({ ...model, multiNode: placement.multiNode, unifiedMemory: unifiedMemory ?? false, watchdog }, runtime),
    serveArgv: (model, placement) => sglangServeArgv({ ...model, multiNode: placement.multiNode }),
    probeScript: sglangProbeScript,
    parseProbe: parseSglangProbe,
    checkScript: sglangCheckScript,
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
