// The SGLang layer (model.engine sglang): `python3 -m sglang.launch_server` argv per rank, its
// unit, the root-only `--config` file that carries the API key, the follower of a rank 1+, and
// the readiness probe (a real chat request). SGLang 0.5.23 facts, with file:line of its wheel:
// the flags are in config/sglangFlags/0.5.23.json (generated from SGLang's own definitions).
import * as yaml from "js-yaml";
import type { Runtime } from "../../config";
import { isLocalModelPath } from "../../config/facts";
import type { EnginePlan } from "./enginePlan";
import { envFileReader } from "./host/envFile";
import { installFileFromStdinScript, installUnitScript, removeDirLines, removeFilesScript, removeUnitScript } from "./host/files";
import { secretFileReadScript, unitReadScript } from "./host/read";
import { HOST_LIB } from "./host/lib";
import { runtimeStrategy } from "./host/runtime";
import { bashScript, contentHash, shellQuote } from "./host/shell";
import { renderUnit } from "./host/systemd";
import { CONFIG_DIR, CONTAINER_NAMES, MANAGED_MARKER, RUNTIME_ENV_PATH, SGLANG_SECRETS_PATH, UNITS, VLLM_SECRETS_PATH, unitPath } from "../../config/hostPaths";
import type { Probe } from "./facts";
import { type EngineProbeResult, type EngineProbeSpec, engineProbe, runtimeLabel } from "./probe";
import { type VllmServeSpec, chatReadyScript, guardUnitLines, readinessTimeout, renderFollowUnit, vllmMemoryStepArgv } from "./vllm";
import { type ServerGuard, servingGuard, gateDir } from "./watchdog";
import { type NodeVllm, groupBy } from "./vllmCompat";
import { SGLANG_VERSION } from "../../config/sglangFlags";

/**
 * What the SGLang argv is rendered from: vLLM's spec less what SGLang has no use for (the executor,
 * vLLM's KV-cache bytes). `multiNode` is this node's rank and where rank 0's dist-init
 * (torch.distributed tcp:// store) listens.
 */
export type SglangServeSpec = Omit<VllmServeSpec, "executor" | "kvCacheMemoryBytes">;

/**
 * `python3 -m sglang.launch_server …` for one rank (SGLang 0.5.23; every flag is checked against
 * the generated table in test/unit/sglang.test.ts):
 * - `--model-path` (fields/model.py:51), `--served-model-name` (serving.py:168), `--tp-size`
 *   (parallel.py:45; the guides' `--tp` is only argparse's unique-prefix abbreviation of it),
 *   `--pp-size` (parallel.py:59), `--mem-fraction-static` (schedule.py:27; SGLang's share of GPU
 *   memory for weights and KV cache, from model.gpuMemoryUtilization);
 * - several nodes: `--nnodes`, `--node-rank` (parallel.py:43-44) and `--dist-init-addr HEAD:PORT`
 *   (parallel.py:32): the `tcp://` rendezvous of torch.distributed (distributed/bootstrap.py:241),
 *   which rank 0 listens on; the firewall admits members only;
 * - rank 0: `--host`/`--port` of the API (serving.py:65-66, SGLang's defaults 127.0.0.1:30000 are
 *   replaced by model.apiHost/apiPort) and `--config` naming the root-only YAML that holds
 *   `api-key` (ConfigArgumentMerger, utils/server_args_config_parser.py: the file's keys become
 *   flags inside the process), so the key is never in argv;
 * - rank 1+: SGLang still binds --host/--port there for its dummy health server
 *   (launch_dummy_health_check_server, utils/common.py:3624): it gets 127.0.0.1;
 * - metrics.enabled, rank 0: `--enable-metrics` (observability.py:70), for Prometheus.
 */
export function sglangServeArgv(spec: SglangServeSpec): string[] {
    const rank = spec.multiNode?.rank ?? 0;
    const argv = [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        spec.source,
        "--served-model-name",
        spec.servedName,
        "--tp-size",
        String(spec.tensorParallel),
        "--pp-size",
        String(spec.pipelineParallel),
        "--mem-fraction-static",
        String(spec.gpuMemoryUtilization),
    ];
    if (spec.multiNode) {
        argv.push(
            "--nnodes",
            String(spec.multiNode.nnodes),
            "--node-rank",
            String(rank),
            "--dist-init-addr",
            `${spec.multiNode.masterAddr}:${spec.multiNode.masterPort}`,
        );
    }
    if (rank > 0) {
        argv.push("--host", "127.0.0.1", "--port", String(spec.apiPort));
    } else {
        argv.push("--host", spec.apiHost, "--port", String(spec.apiPort), "--config", SGLANG_SECRETS_PATH);
    }
    if (spec.maxModelLen !== undefined) argv.push("--context-length", String(spec.maxModelLen));
    if (spec.maxNumSeqs !== undefined) argv.push("--max-running-requests", String(spec.maxNumSeqs));
    if (spec.quantization !== undefined) argv.push("--quantization", spec.quantization);
    if (spec.kvCacheDtype !== undefined) argv.push("--kv-cache-dtype", spec.kvCacheDtype);
    // --disable-cuda-graph is deprecated in 0.5.23 (server_args.py:410) for these two.
    if (spec.enforceEager) argv.push("--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled");
    if (spec.attentionBackend !== undefined) argv.push("--attention-backend", spec.attentionBackend);
    if (spec.trustRemoteCode) argv.push("--trust-remote-code");
    // metrics.enabled: Prometheus scrapes the API's /metrics (observability.py:70; off by default, unlike vLLM's).
    if (spec.enableMetrics === true && rank === 0) argv.push("--enable-metrics");
    return [...argv, ...spec.extraArgs];
}

/**
 * The root-only `--config` file: `api-key: "<key>"`, one YAML double-quoted scalar (js-yaml). The
 * key is printable ASCII (config refuses anything else), for which YAML's double-quoted form and
 * JSON's string are the same text; the readiness probe reads it back with `json.loads`. The HF
 * token is not here: SGLang reads the model offline from the cache the model sync filled.
 */
export function renderSglangSecrets(apiKey: string): string {
    return `# ${MANAGED_MARKER}\n` + yaml.dump({ "api-key": apiKey }, { forceQuotes: true, quoteStyle: "double", lineWidth: -1 });
}

/** Python (json and os imported) that sets `key` from the `--config` file at `path`, or to None when there is none (status reads it; the readiness probe has its own, which fails instead). */
export function pythonSglangKey(path: string): string[] {
    return [
        "key = None",
        `if os.path.exists(${JSON.stringify(path)}):`,
        `    for line in open(${JSON.stringify(path)}, encoding="utf-8"):`,
        `        if line.startswith("api-key: "):`,
        `            key = json.loads(line[len("api-key: "):])`,
    ];
}

/** Python that sets `key` from the `--config` file (for the readiness probe), failing when there is none. */
function pythonReadSglangKey(path: string): string[] {
    return [
        "key = None",
        `for line in open(${JSON.stringify(path)}, encoding="utf-8"):`,
        `    if line.startswith("api-key: "):`,
        `        key = json.loads(line[len("api-key: "):])`,
        `if key is None:`,
        `    print("not ready: no api-key in ${path}"); sys.exit(1)`,
    ];
}

/** The watchdog's and the gate's part of SGLang's server on this node (render/watchdog.ts). */
export function sglangGuard(spec: SglangServeSpec, runtime: Runtime): ServerGuard {
    return servingGuard({ label: "SGLang", unit: UNITS.sglang, watchdogUnit: UNITS.sglangWatchdog, container: CONTAINER_NAMES.sglang }, spec, runtime);
}

/** The unit running SGLang on one node (HF_HUB_OFFLINE=1: the model is already in the node's cache). */
export function renderSglangUnit(spec: SglangServeSpec, runtime: Runtime, envHash: string, peersHash?: string): string {
    const rank = spec.multiNode?.rank ?? 0;
    return renderUnit({
        name: UNITS.sglang,
        description: `spark-cluster: SGLang serving ${spec.servedName}${rank > 0 ? ` (node rank ${rank})` : ""}`,
        runtime,
        container: CONTAINER_NAMES.sglang,
        argv: sglangServeArgv(spec),
        envFiles: [RUNTIME_ENV_PATH],
        environment: { HF_HUB_OFFLINE: "1", ...spec.env },
        // The container reads the --config file where the argv names it; a local model where it is.
        readOnlyMounts: [...(rank === 0 ? [SGLANG_SECRETS_PATH] : []), ...(isLocalModelPath(spec.source) ? [spec.source] : [])],
        preStart: spec.unifiedMemory ? [vllmMemoryStepArgv(spec.source)] : [],
        inputs: { "runtime.env": envHash, ...(peersHash ? { "units of ranks 1+": peersHash } : {}) },
        // Switching engine: the other engine's unit holds the API port and the GPU. systemd's
        // Conflicts= works both ways (starting either stops the other; the vLLM follower is PartOf
        // its unit), so the new engine's unit step stops the old one before its readiness check,
        // whichever way the switch goes, with vLLM's unit left as it is.
        conflicts: [`${UNITS.vllm}.service`],
        ...guardUnitLines(sglangGuard(spec, runtime)),
    });
}

/**
 * The follower unit of a rank 1+: while the rank is in the head's engine it holds its torch.distributed
 * store connection to the head's dist-init port; when that ends the rank restarts to join the next
 * engine (the loop of vLLM's follower, render/vllm.ts, on SGLang's unit).
 */
export function renderSglangFollowUnit(spec: SglangServeSpec, runtime: Runtime): string | undefined {
    const multiNode = spec.multiNode;
    if (!multiNode || multiNode.rank === 0) return undefined;
    return renderFollowUnit(
        UNITS.sglang,
        `spark-cluster: restarts node rank ${multiNode.rank} of SGLang when the head's engine ends`,
        multiNode,
        sglangGuard(spec, runtime).follow,
    );
}

/**
 * Stops, disables and removes UNITS (our files only, a replaced file restored) and FILES: what an
 * engine leaves on a node when the stack switches to another one (an update runs only the new
 * engine's create scripts).
 */
export function removeEngineScript(units: readonly string[], files: readonly string[], dirs: readonly string[] = []): string {
    return bashScript([
        HOST_LIB,
        ...units.flatMap((unit) => [`systemctl disable --now ${unit}.service 2>/dev/null || true`, `sc_remove_file ${unitPath(unit)}`]),
        "systemctl daemon-reload",
        ...units.map((unit) => `systemctl reset-failed ${unit}.service 2>/dev/null || true`),
        ...files.map((file) => `sc_remove_file ${shellQuote(file)}`),
        ...dirs.flatMap(removeDirLines),
        "sc_cleanup_state",
    ]);
}

/** SGLang's {@link EnginePlan} for one node. */
export function sglangPlan(spec: SglangServeSpec, runtime: Runtime): EnginePlan {
    const rank = spec.multiNode?.rank ?? 0;
    const followUnit = renderSglangFollowUnit(spec, runtime);
    const guard = sglangGuard(spec, runtime);
    return {
        rank,
        api: { port: spec.apiPort, servedModel: spec.servedName },
        secretsFile: (apiKey) => renderSglangSecrets(apiKey),
        secrets: {
            create: installFileFromStdinScript(SGLANG_SECRETS_PATH, "600", UNITS.sglang, followUnit === undefined ? "now" : "with-head", guard.clearDirs),
            delete: removeFilesScript([SGLANG_SECRETS_PATH], [CONFIG_DIR]),
            read: secretFileReadScript(SGLANG_SECRETS_PATH, "600"),
        },
        unit: (envHash, peerUnits, imageId) =>
            renderSglangUnit(spec, runtimeStrategy(runtime).pinned(imageId), envHash, peerUnits.length > 0 ? contentHash(peerUnits.join("\n")) : undefined),
        unitStep: {
            create: (unit) => installUnitScript(UNITS.sglang, unit, guard.companions, guard.clearDirs, followUnit === undefined ? "now" : "with-head"),
            read: (unit) => unitReadScript(UNITS.sglang, unit, guard.companions),
            delete: removeUnitScript(UNITS.sglang, guard.removeUnits, guard.removeDirs),
        },
        ready:
            rank === 0
                ? chatReadyScript({
                      port: spec.apiPort,
                      model: spec.servedName,
                      envFile: SGLANG_SECRETS_PATH,
                      reader: envFileReader(runtime),
                      unit: UNITS.sglang,
                      seconds: spec.readyTimeoutSeconds,
                      readKey: pythonReadSglangKey(SGLANG_SECRETS_PATH),
                      engine: "SGLang",
                  })
                : undefined,
        readyTimeout: readinessTimeout(spec.readyTimeoutSeconds),
        follow:
            followUnit === undefined
                ? undefined
                : {
                      create: installUnitScript(UNITS.sglangFollow, followUnit),
                      delete: removeUnitScript(UNITS.sglangFollow),
                      read: unitReadScript(UNITS.sglangFollow, followUnit),
                  },
        // vLLM -> SGLang: vLLM's unit, follower and secrets file go before SGLang's steps; SGLang ->
        // vLLM (this step leaves the stack, its delete runs at the end of that up, after vLLM's
        // unit stopped SGLang through Conflicts=) and destroy: SGLang's go.
        switchCleanup: {
            create: removeEngineScript([UNITS.vllmWatchdog, UNITS.vllmFollow, UNITS.vllm], [VLLM_SECRETS_PATH], [gateDir(UNITS.vllm)]),
            delete: removeEngineScript([UNITS.sglangWatchdog, UNITS.sglangFollow, UNITS.sglang], [SGLANG_SECRETS_PATH], [gateDir(UNITS.sglang)]),
        },
    };
}

/** The line SGLang's probe prints with the runtime's SGLang version (`none` when it has none). */
export const SGLANG_VERSION_PREFIX = "sglang-version=";

/** Python that prints SGLang's version from the installed distribution's metadata, importing nothing of SGLang. */
const SGLANG_VERSION_CODE = ["import importlib.metadata as m", "print(m.version('sglang'))"].join("\n");

/** The SGLang probe (every node): `sglang-version=…` and, for a docker runtime, `image-id=…`; read only. */
export const sglangProbe: Probe<EngineProbeSpec, EngineProbeResult> = engineProbe({
    versionPrefix: SGLANG_VERSION_PREFIX,
    versionCode: SGLANG_VERSION_CODE,
    missing: (spec) =>
        `${runtimeLabel(spec.runtime)} on ${spec.node} has no SGLang (its python3 finds no sglang distribution), and model.engine is sglang. ` +
        `Fix: give this node a runtime with SGLang ${SGLANG_VERSION} (nodes[].runtime), or set model.engine: vllm.`,
});

/** The public version (local part dropped): `0.5.23` of `0.5.23+lab.standin`. */
function publicVersion(version: string): string {
    return version.split("+")[0];
}

/**
 * The cluster's SGLang check, before anything changes on any node: every node has SGLang, all the
 * same version, one image per tag; a version other than the one whose flags we render
 * ({@link SGLANG_VERSION}, checked at preview against its generated table) is a warning.
 */
export function sglangCheckScript(nodes: readonly NodeVllm[]): string {
    const problems: string[] = [];
    const warnings: string[] = [];
    for (const n of nodes) {
        const where = `${runtimeLabel(n.runtime)} on ${n.node}`;
        if (n.probe.version === "none") {
            problems.push(`${where} has no SGLang. Fix: give ${n.node} a runtime with SGLang ${SGLANG_VERSION} (nodes[].runtime).`);
        } else if (publicVersion(n.probe.version) !== SGLANG_VERSION) {
            warnings.push(
                `SGLang ${n.probe.version} in ${where}: the flags are rendered and checked for SGLang ${SGLANG_VERSION} ` +
                    `(config/sglangFlags/${SGLANG_VERSION}.json); SGLang will refuse a flag it does not know when it starts.`,
            );
        }
    }
    const found = nodes.filter((n) => n.probe.version !== "none");
    const byVersion = groupBy(found, (n) => publicVersion(n.probe.version));
    if (byVersion.size > 1) {
        const list = [...byVersion].map(([v, ns]) => `${v} on ${ns.map((n) => n.node).join(", ")}`).join("; ");
        problems.push(`the nodes' SGLang versions differ: ${list}. Every rank must run the same SGLang. Fix: give every node the same SGLang version.`);
    }
    for (const [image, ns] of groupBy(
        found.filter((n) => runtimeStrategy(n.runtime).image !== undefined && n.probe.imageId),
        (n) => runtimeStrategy(n.runtime).image ?? "",
    )) {
        const ids = groupBy(ns, (n) => n.probe.imageId ?? "");
        if (ids.size > 1) {
            const list = [...ids].map(([id, holders]) => `${id} on ${holders.map((n) => n.node).join(", ")}`).join("; ");
            problems.push(`the tag ${image} names different images on the nodes: ${list}. Fix: docker pull ${image} on every node (or name it by digest).`);
        }
    }
    const lines = [
        ...nodes.map(
            (n) =>
                `echo ${shellQuote(
                    `${n.node}: ${
                        n.probe.version === "none"
                            ? `no SGLang found in ${runtimeLabel(n.runtime)}`
                            : `SGLang ${n.probe.version} (${runtimeLabel(n.runtime)}${n.probe.imageId ? `, ${n.probe.imageId}` : ""})`
                    }`,
                )}`,
        ),
        ...warnings.map((w) => `echo ${shellQuote(`warning: ${w}`)} >&2`),
    ];
    if (problems.length > 0) {
        lines.push(
            `echo ${shellQuote("spark-cluster: nothing was changed on any node; the nodes' SGLang cannot run this stack:")} >&2`,
            ...problems.map((p) => `echo ${shellQuote(`- ${p}`)} >&2`),
            "exit 1",
        );
    }
    return bashScript(lines);
}
