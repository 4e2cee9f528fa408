// What an engine puts on one node (EnginePlan): the shape every engine's renderer returns and the
// component that runs it wires. A leaf of its own, so the engines' renderers (vllm.ts, sglang.ts)
// and the strategy that picks among them (engine.ts) all import it without importing each other.
import type { StepScripts } from "./step";

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
    secretsFile(apiKey: string): string;
    /** The secrets step: the file from stdin, root-only. */
    secrets: StepScripts;
    /**
     * The unit; `peerUnits` (rank 0 of a multi-node engine): a change of any restarts this one after
     * them. `imageId`: the image's ID the node's engine probe found (docker), which the unit starts
     * instead of the tag (RuntimeStrategy.pinned). Defaults to the tag.
     */
    unit(envHash: string, peerUnits: readonly string[], imageId?: string): string;
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

/** The OpenAI-compatible base URL rank 0 serves on `publicHost` (the head's SSH address). */
export function apiBaseUrl(publicHost: string, apiPort: number): string {
    return `http://${publicHost}:${apiPort}/v1`;
}
