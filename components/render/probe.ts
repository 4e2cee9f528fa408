// The read-only probe every node runs before anything is changed on it: which
// RoCE devices and interfaces it has (ibdev2netdev), and whether its runtime
// can run the chosen executor (Ray, for the ray executor). It changes nothing;
// it fails, naming the config key, when the runtime cannot run the executor.
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

export interface ProbeSpec {
    node: string;
    runtime: Runtime;
    executor: "ray" | "mp";
}

/** The probe script: ibdev2netdev's lines, then `ray-version=…` (ray executor only). */
export function probeScript(spec: ProbeSpec): string {
    const lines = ["ibdev2netdev 2>/dev/null || true"];
    if (spec.executor === "ray") {
        const message =
            `spark-cluster:model.executor is ray, but ${runtimeLabel(spec.runtime)} on ${spec.node} has no Ray ` +
            "(NGC vLLM images ship without Ray from 26.05 on). Fix: set model.executor: mp (vLLM's own multi-node mode, no Ray), " +
            "or give this node a runtime with Ray.";
        lines.push(
            `if version=$(${rayVersionCommand(spec.runtime)} 2>/dev/null) && [ -n "$version" ]; then`,
            `  echo "${RAY_VERSION_PREFIX}$version"`,
            `else`,
            `  echo "${RAY_VERSION_PREFIX}none"`,
            `  echo ${shellQuote(message)} >&2`,
            `  exit 1`,
            `fi`,
        );
    }
    return bashScript(lines);
}
