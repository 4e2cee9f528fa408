// The read-only probes every node runs before anything is changed on it, each its script and its
// parser together (./facts.ts `Probe`): which RoCE devices and interfaces it has (ibdev2netdev),
// the serving engine's version in its runtime (and the image's ID), and, for the ray executor,
// whether its runtime has Ray. They change nothing; the engine and Ray probes fail, naming the
// config key, when the runtime cannot run what we render. What derives from their facts (the
// interface names, the HCAs, Ray's authentication) is in components/nodeFacts.ts; SGLang's probe
// is in ./sglang.ts, LLDP's in ./lldp.ts, the link checks' results in ./netplan.ts.
import type { Runtime } from "../../config";
import type { Probe } from "./facts";
import { runtimeStrategy } from "./host/runtime";
import { readScript } from "./host/read";
import { bashScript, shellQuote } from "./host/shell";

/** Where the runtime is, in the user's words, for messages. */
export function runtimeLabel(runtime: Runtime): string {
    return runtimeStrategy(runtime).label;
}

/** One RoCE device as ibdev2netdev reports it. */
export interface RoceDevice {
    /** RDMA device, e.g. rocep1s0f1. */
    device: string;
    /** Its network interface, e.g. enp1s0f1np1. */
    netdev: string;
    up: boolean;
}

/**
 * The hardware probe: ibdev2netdev's lines (`rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)`), none on a
 * node without RoCE (a Thor) or without the tool. The same script whatever the executor or runtime.
 */
export const hardwareProbe: Probe<void, RoceDevice[]> = {
    script: () => bashScript(["ibdev2netdev 2>/dev/null || true"]),
    parse(stdout) {
        const devices: RoceDevice[] = [];
        for (const line of stdout.split("\n")) {
            const match = /^(\S+)\s+port\s+\d+\s+==>\s+(\S+)\s+\((\w+)\)/.exec(line.trim());
            if (match) {
                devices.push({ device: match[1], netdev: match[2], up: match[3] === "Up" });
            }
        }
        return devices;
    },
};

/** Prints `<prefix><version>` from `command`'s output, or `<prefix>none` and fails with `message`. */
function versionProbeLines(prefix: string, command: string, message: string): string[] {
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

/** The value of the first line of `stdout` that starts with `prefix`, trimmed; undefined when there is none. */
function prefixedValue(stdout: string, prefix: string): string | undefined {
    return stdout
        .split("\n")
        .find((l) => l.startsWith(prefix))
        ?.slice(prefix.length)
        .trim();
}

/** The line the Ray probe prints with the runtime's Ray version (`none` when it has no Ray). */
export const RAY_VERSION_PREFIX = "ray-version=";

export interface RayProbeSpec {
    node: string;
    runtime: Runtime;
}

/**
 * The Ray probe (ray executor only): prints `ray-version=…` (Python's `import ray` inside the image
 * or the venv), or fails naming the config key when the runtime has no Ray. A step of its own, so
 * that switching the executor leaves the hardware probe (and everything that reads its output)
 * unchanged. Its fact: the version (`none` when the runtime has none), undefined where the output
 * has no `ray-version=` line.
 */
export const rayProbe: Probe<RayProbeSpec, string | undefined> = {
    script(spec) {
        const message =
            `spark-cluster:model.executor is ray, but ${runtimeLabel(spec.runtime)} on ${spec.node} has no Ray ` +
            "(NGC vLLM images ship without Ray from 26.05 on). Fix: set model.executor: mp (vLLM's own multi-node mode, no Ray), " +
            "or give this node a runtime with Ray.";
        const command = runtimeStrategy(spec.runtime).pythonOneOff("import ray; print(ray.__version__)");
        return bashScript(versionProbeLines(RAY_VERSION_PREFIX, command, message));
    },
    parse: (stdout) => prefixedValue(stdout, RAY_VERSION_PREFIX),
};

/** The line an engine's probe prints with the image's ID on the node (docker runtime only). */
export const IMAGE_ID_PREFIX = "image-id=";

/** The node an engine probe runs on, and its runtime. */
export interface EngineProbeSpec {
    node: string;
    runtime: Runtime;
}

/** What an engine's probe found on one node. */
export interface EngineProbeResult {
    /** The version (`none` when the probe found no engine; the probe fails then). */
    version: string;
    /** The ID of the image the node's tag names (docker runtime only). */
    imageId?: string;
}

/** What tells one engine's probe from another's. */
export interface EngineVersionProbe {
    /** The line's prefix: `vllm-version=`. */
    versionPrefix: string;
    /** Python that prints the engine's version without starting it. */
    versionCode: string;
    /** Why the probe fails on a runtime without the engine, and the fix. */
    missing(spec: EngineProbeSpec): string;
}

/**
 * An engine's probe (every node, every executor): prints `<versionPrefix>…` and, for a docker
 * runtime, `image-id=…` (the ID of the image the tag names on this node; `docker run` pulls it
 * when it is missing). Read only; fails naming the runtime when it has no such engine. Whether
 * that version can run what we render, and whether the nodes agree, is decided from its fact (the
 * engine's check: render/vllmCompat.ts, render/sglang.ts) before anything changes on any node.
 */
export function engineProbe(engine: EngineVersionProbe): Probe<EngineProbeSpec, EngineProbeResult> {
    return {
        script(spec) {
            const strategy = runtimeStrategy(spec.runtime);
            return bashScript([
                ...versionProbeLines(engine.versionPrefix, strategy.pythonOneOff(engine.versionCode), engine.missing(spec)),
                ...strategy.imageIdLines(IMAGE_ID_PREFIX),
            ]);
        },
        parse(stdout) {
            const imageId = prefixedValue(stdout, IMAGE_ID_PREFIX);
            return { version: prefixedValue(stdout, engine.versionPrefix) ?? "none", ...(imageId ? { imageId } : {}) };
        },
    };
}

/** The line the vLLM probe prints with the runtime's vLLM version (`none` when it has none). */
export const VLLM_VERSION_PREFIX = "vllm-version=";

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

/** The vLLM probe: `vllm-version=…` inside the image (a throwaway container) or the venv, and the image's ID. */
export const vllmProbe: Probe<EngineProbeSpec, EngineProbeResult> = engineProbe({
    versionPrefix: VLLM_VERSION_PREFIX,
    versionCode: VLLM_VERSION_CODE,
    missing: (spec) =>
        `${runtimeLabel(spec.runtime)} on ${spec.node} has no vLLM (its python3 finds neither the vllm distribution nor vllm.version). ` +
        `Fix: give this node a runtime with vLLM (nodes[].runtime).`,
});

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
export function engineProbeReadScript(spec: EngineProbeSpec): string | undefined {
    const lines = runtimeStrategy(spec.runtime).imageDriftLines(spec.node, IMAGE_ID_PREFIX);
    return lines.length > 0 ? readScript(["last=$(cat)", ...lines]) : undefined;
}
