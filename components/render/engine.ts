// The serving engine as one strategy: what an engine gives the component that runs it on one
// node (EnginePlan), and the one place that picks the engine's renderers from the resolved
// engine decision (config/resolve.ts `Engine`). The component wires any EnginePlan without
// knowing which engine made it; adding an engine is one strategy here and one schema value.
import type { Engine, ModelConfig, Runtime, ServerPlacement } from "../../config";
import type { StepScripts } from "./step";
import { vllmPlan, vllmServeArgv } from "./vllm";

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
}

/** What an engine renders for one server: the model settings, where the server runs, and its runtime. */
export interface EngineServer {
    model: ModelConfig;
    placement: ServerPlacement;
    runtime: Runtime;
    /** The Ray cluster the engine joins (ray executor). Defaults to none. */
    rayAddress?: string;
}

/** One serving engine: its plan for a server, and the argv it runs there (for the cluster's compatibility check). */
export interface EngineStrategy {
    plan(server: EngineServer): EnginePlan;
    serveArgv(model: ModelConfig, placement: ServerPlacement): string[];
}

const VLLM: EngineStrategy = {
    plan: ({ model, placement, runtime, rayAddress }) => vllmPlan({ ...model, multiNode: placement.multiNode }, runtime, rayAddress),
    serveArgv: (model, placement) => vllmServeArgv({ ...model, multiNode: placement.multiNode }),
};

/** The strategy of the resolved engine: the one place that tells the engines apart. */
export function engineStrategy(engine: Engine): EngineStrategy {
    switch (engine.kind) {
        case "vllm":
            return VLLM;
        default: {
            const never: never = engine.kind;
            throw new Error(`internal: unknown engine ${String(never)}`);
        }
    }
}
