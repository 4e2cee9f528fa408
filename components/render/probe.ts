// The read-only probes every node runs before anything is changed on it: which
// RoCE devices and interfaces it has (ibdev2netdev), and, for the ray executor,
// whether its runtime has Ray. They change nothing; the Ray probe fails, naming
// the config key, when the runtime cannot run the executor.
import type { Runtime } from "../../config";
import { bashScript, shellJoin, shellQuote } from "./host/shell";

/** The line the probe prints with the runtime's Ray version (`none` when it has no Ray). */
export const RAY_VERSION_PREFIX = "ray-version=";

/** How to ask the runtime for its Ray version: Python's `import ray` inside the image or the venv. */
function rayVersionCommand(runtime: Runtime): string {
    const code = "import ray; print(ray.__version__)";
    if (runtime.kind === "docker") {
        // A throwaway container of the same image, no network: nothing else is touched.
        return shellJoin(["docker", "run", "--rm", "--network", "none", "--entrypoint", "python3", "--", runtime.image, "-c", code]);
    }
    return shellJoin([`${runtime.path}/bin/python`, "-c", code]);
}

/** Where the runtime is, in the user's words, for messages. */
function runtimeLabel(runtime: Runtime): string {
    return runtime.kind === "docker" ? `the image ${runtime.image}` : `the venv ${runtime.path}`;
}

/** The hardware probe: ibdev2netdev's lines. The same script whatever the executor or runtime. */
export function probeScript(): string {
    return bashScript(["ibdev2netdev 2>/dev/null || true"]);
}

export interface RayProbeSpec {
    node: string;
    runtime: Runtime;
}

/**
 * The Ray probe (ray executor only): prints `ray-version=…`, or fails naming the config key when
 * the runtime has no Ray. A step of its own, so that switching the executor leaves the hardware
 * probe (and everything that reads its output) unchanged.
 */
export function rayProbeScript(spec: RayProbeSpec): string {
    const message =
        `spark-cluster:model.executor is ray, but ${runtimeLabel(spec.runtime)} on ${spec.node} has no Ray ` +
        "(NGC vLLM images ship without Ray from 26.05 on). Fix: set model.executor: mp (vLLM's own multi-node mode, no Ray), " +
        "or give this node a runtime with Ray.";
    return bashScript([
        `if version=$(${rayVersionCommand(spec.runtime)} 2>/dev/null) && [ -n "$version" ]; then`,
        `  echo "${RAY_VERSION_PREFIX}$version"`,
        `else`,
        `  echo "${RAY_VERSION_PREFIX}none"`,
        `  echo ${shellQuote(message)} >&2`,
        `  exit 1`,
        `fi`,
    ]);
}
