// The read-only probes every node runs before anything is changed on it: which
// RoCE devices and interfaces it has (ibdev2netdev), and, for the ray executor,
// whether its runtime has Ray. They change nothing; the Ray probe fails, naming
// the config key, when the runtime cannot run the executor.
import type { Runtime } from "../../config";
import { runtimeStrategy } from "./host/runtime";
import { readScript } from "./host/read";
import { bashScript, shellQuote } from "./host/shell";

/** The line the probe prints with the runtime's Ray version (`none` when it has no Ray). */
export const RAY_VERSION_PREFIX = "ray-version=";

/** How to ask the runtime for its Ray version: Python's `import ray` inside the image or the venv. */
function rayVersionCommand(runtime: Runtime): string {
    return runtimeStrategy(runtime).pythonOneOff("import ray; print(ray.__version__)");
}

/** Where the runtime is, in the user's words, for messages. */
export function runtimeLabel(runtime: Runtime): string {
    return runtimeStrategy(runtime).label;
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
    return bashScript(versionProbeLines(RAY_VERSION_PREFIX, rayVersionCommand(spec.runtime), message));
}

/** Prints `<prefix><version>` from `command`'s output, or `<prefix>none` and fails with `message`. */
export function versionProbeLines(prefix: string, command: string, message: string): string[] {
    return [
        `if version=$(${command} 2>/dev/null) && [ -n "$version" ]; then`,
        `  echo "${prefix}$version"`,
        `else`,
        `  echo "${prefix}none"`,
        `  echo ${shellQuote(message)} >&2`,
        `  exit 1`,
        `fi`,
    ];
}

/** The line the vLLM probe prints with the runtime's vLLM version (`none` when it has none). */
export const VLLM_VERSION_PREFIX = "vllm-version=";
/** The line the vLLM probe prints with the image's ID on the node (docker runtime only). */
export const IMAGE_ID_PREFIX = "image-id=";

/**
 * Python that prints vLLM's version without starting it: the installed distribution's metadata,
 * else `vllm/version.py` (a source checkout run in place has no metadata). Nothing else is imported.
 */
const VLLM_VERSION_CODE = [
    "import importlib.metadata as m",
    "try:",
    "    print(m.version('vllm'))",
    "except m.PackageNotFoundError:",
    "    from vllm.version import __version__",
    "    print(__version__)",
].join("\n");

/** How to ask the runtime for its vLLM version: inside the image (a throwaway container) or the venv. */
function vllmVersionCommand(runtime: Runtime): string {
    return runtimeStrategy(runtime).pythonOneOff(VLLM_VERSION_CODE);
}

/**
 * The vLLM probe (every node, every executor): prints `vllm-version=…` and, for a docker runtime,
 * `image-id=…` (the ID of the image the tag names on this node; `docker run` pulls it when it is
 * missing). Read only; fails naming the runtime when it has no vLLM. Whether that version can run
 * what we render, and whether the nodes agree, is decided from these lines (render/vllmCompat.ts)
 * before anything changes on any node.
 */
export function vllmProbeScript(spec: { node: string; runtime: Runtime }): string {
    const message =
        `${runtimeLabel(spec.runtime)} on ${spec.node} has no vLLM (its python3 finds neither the vllm distribution nor vllm.version). ` +
        `Fix: give this node a runtime with vLLM (nodes[].runtime).`;
    const imageId = runtimeStrategy(spec.runtime).imageIdLines(IMAGE_ID_PREFIX);
    return bashScript([...versionProbeLines(VLLM_VERSION_PREFIX, vllmVersionCommand(spec.runtime), message), ...imageId]);
}

/**
 * The engine probe's read-back (refresh), for a runtime with an image (undefined otherwise: no
 * read): the ID the tag names on the node now against the one the probe printed at the last up (its
 * output, on stdin), which the serving units start by ID (RuntimeStrategy.pinned). A re-pointed tag
 * (a later `docker pull` of a republished tag, a re-tag) prints
 * `<node>: the tag <image> names <new ID> now, not <old ID> as when up last probed it; …`, and the
 * old image gone from the node says so too: drift, so `pulumi preview --refresh` shows it and
 * `pulumi up --refresh` runs the probe again, whose new ID the cluster's engine check then judges
 * against the other nodes' (refused while they differ). Nothing changes on the node.
 */
export function engineProbeReadScript(spec: { node: string; runtime: Runtime }): string | undefined {
    const lines = runtimeStrategy(spec.runtime).imageDriftLines(spec.node, IMAGE_ID_PREFIX);
    return lines.length > 0 ? readScript(["last=$(cat)", ...lines]) : undefined;
}
