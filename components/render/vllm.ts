// The vLLM layer: `vllm serve` argv, its unit, the root-only secrets file, and
// the readiness probe (a real chat request).
import type { ModelConfig, Runtime, WatchdogConfig } from "../../config";
import { isLocalModelPath } from "../../config/facts";
import type { EnginePlan } from "./enginePlan";
import { HOST_LIB } from "./host/lib";
import { type FollowWatch, type ServerGuard, JOURNAL_SAY, renderServerCompanionUnit, servingGuard } from "./watchdog";
import { type EnvFileReader, runtimeStrategy } from "./host/runtime";
import { hubRepoDirName } from "./modelSync";
import { envFileReader, pythonReadEnvValue, renderEnvFile } from "./host/envFile";
import { installFileFromStdinScript, installUnitScript, removeFilesScript, removeUnitScript } from "./host/files";
import { secretFileReadScript, unitReadScript } from "./host/read";
import { bashScript, contentHash, heredoc, shellQuote } from "./host/shell";
import { renderUnit } from "./host/systemd";
import {
    CONFIG_DIR,
    CONTAINER_NAMES,
    HF_HUB_DIR,
    MANAGED_MARKER,
    RAY_ENV_PATH,
    RUNTIME_ENV_PATH,
    UNITS,
    VLLM_SECRETS_PATH,
    VllmSecretName,
    VllmUnitEnvName,
} from "../../config/hostPaths";
import { journalTailLine } from "./host/journal";

/** What `vllm serve` is rendered from: the model settings as config resolves them, plus the mp executor's rank. */
export type VllmServeSpec = Pick<
    ModelConfig,
    | "source"
    | "servedName"
    | "tensorParallel"
    | "pipelineParallel"
    | "executor"
    | "apiHost"
    | "apiPort"
    | "gpuMemoryUtilization"
    | "kvCacheMemoryBytes"
    | "maxModelLen"
    | "maxNumSeqs"
    | "quantization"
    | "kvCacheDtype"
    | "enforceEager"
    | "attentionBackend"
    | "trustRemoteCode"
    | "extraArgs"
    | "env"
    | "readyTimeoutSeconds"
    | "enableMetrics"
> & {
    /** mp executor only: this node's rank and the head's address. */
    multiNode?: { nnodes: number; rank: number; masterAddr: string; masterPort: number };
    /** The node's GPU and OS share one memory pool (spark, thor): the unit evicts the model's pages before vLLM starts. */
    unifiedMemory?: boolean;
    /** The health watchdog and restart gate (config.watchdog). Defaults to none: Restart=always alone. */
    watchdog?: WatchdogConfig;
};

/** The watchdog's and the gate's part of vLLM's server on this node (render/watchdog.ts). */
export function vllmGuard(spec: VllmServeSpec, runtime: Runtime): ServerGuard {
    return servingGuard({ label: "vLLM", unit: UNITS.vllm, watchdogUnit: UNITS.vllmWatchdog, container: CONTAINER_NAMES.vllm }, spec, runtime);
}

/**
 * `vllm serve …`. The API key is NOT here: vLLM reads it from VLLM_API_KEY in
 * the unit's root-only environment file, so it never shows in argv or ps.
 */
export function vllmServeArgv(spec: VllmServeSpec): string[] {
    const argv = [
        "vllm",
        "serve",
        spec.source,
        "--served-model-name",
        spec.servedName,
        "--tensor-parallel-size",
        String(spec.tensorParallel),
        "--pipeline-parallel-size",
        String(spec.pipelineParallel),
        "--distributed-executor-backend",
        spec.executor,
        "--gpu-memory-utilization",
        String(spec.gpuMemoryUtilization),
        ...(spec.kvCacheMemoryBytes !== undefined ? ["--kv-cache-memory-bytes", String(spec.kvCacheMemoryBytes)] : []),
    ];
    const rank = spec.multiNode?.rank ?? 0;
    if (spec.multiNode) {
        argv.push(
            "--nnodes",
            String(spec.multiNode.nnodes),
            "--node-rank",
            String(rank),
            "--master-addr",
            spec.multiNode.masterAddr,
            "--master-port",
            String(spec.multiNode.masterPort),
        );
    }
    if (rank > 0) {
        argv.push("--headless");
    } else {
        argv.push("--host", spec.apiHost, "--port", String(spec.apiPort));
    }
    if (spec.maxModelLen !== undefined) argv.push("--max-model-len", String(spec.maxModelLen));
    if (spec.maxNumSeqs !== undefined) argv.push("--max-num-seqs", String(spec.maxNumSeqs));
    if (spec.quantization !== undefined) argv.push("--quantization", spec.quantization);
    if (spec.kvCacheDtype !== undefined) argv.push("--kv-cache-dtype", spec.kvCacheDtype);
    if (spec.enforceEager) argv.push("--enforce-eager");
    if (spec.attentionBackend !== undefined) argv.push("--attention-backend", spec.attentionBackend);
    if (spec.trustRemoteCode) argv.push("--trust-remote-code");
    return [...argv, ...spec.extraArgs];
}

/**
 * The loop of the unit's memory step on a unified-memory node (bash; its arguments: the model's
 * directories on the host). On a Spark or Thor the GPU allocates from the OS's memory, and right
 * after the model sync wrote tens of GB the page cache holds those files. vLLM's start-up check
 * compares the free memory it reads with gpuMemoryUtilization × total: CUDA's cudaMemGetInfo
 * there reports the memory the kernel has free (MemFree: page cache counted as used, vLLM
 * #48140, #35356), and vLLM's source swaps in psutil's `available` (MemAvailable, which already
 * counts clean page cache as reclaimable) only for the compute capabilities it lists; its KV
 * cache gets what is left either way. This step evicts exactly the model's pages: each file is
 * written back (`sync -d`: fdatasync, since dirty pages cannot be dropped) and then dropped from
 * the page cache (`dd iflag=nocache count=0`: posix_fadvise(POSIX_FADV_DONTNEED) over the whole
 * file, GNU coreutils). It does not write /proc/sys/vm/drop_caches: that drops every clean page
 * of the node (other services' files too, which are then read again from disk), and it is
 * refused where /proc/sys is read-only. MemFree and MemAvailable go to the journal before and
 * after: the eviction moves MemFree by the pages it dropped, and MemAvailable only by the part
 * of the cache the kernel does not count as reclaimable. Best effort: it always exits 0, so
 * vLLM starts (and its own check decides) whatever happened here.
 */
const MEMORY_STEP = [
    "mem() { awk '/^MemFree:/ { f = $2 } /^MemAvailable:/ { a = $2 } END { printf \"MemFree %.2f GiB, MemAvailable %.2f GiB\", f / 1048576, a / 1048576 }' /proc/meminfo; }",
    'echo "unified memory: $(mem) before evicting the model\'s files from the page cache"',
    'for dir in "$@"; do ' +
        'if [ ! -d "$dir" ]; then echo "unified memory: $dir is not there, nothing to evict"; continue; fi; ' +
        "n=0; " +
        'while IFS= read -r -d "" f; do sync -d -- "$f" 2>/dev/null; dd if="$f" iflag=nocache count=0 status=none 2>/dev/null && n=$((n + 1)); ' +
        'done < <(find -L "$dir" -type f -print0 2>/dev/null); ' +
        'echo "unified memory: evicted $n file(s) under $dir"; done',
    'echo "unified memory: $(mem) after"',
    "exit 0",
].join("; ");

/** The directories on the host that hold the model: the hub cache's repository directory, or the local model directory. */
export function modelDirsOnHost(source: string): string[] {
    return [isLocalModelPath(source) ? source : `${HF_HUB_DIR}/${hubRepoDirName(source)}`];
}

/** The memory step's argv (an ExecStartPre of the vLLM unit on a unified-memory node). */
export function vllmMemoryStepArgv(source: string): string[] {
    return ["/bin/bash", "-c", MEMORY_STEP, "unified-memory", ...modelDirsOnHost(source)];
}

/**
 * The unit running `vllm serve` (on the head; on every node, `--headless` on the others, for the
 * mp executor), with HF_HUB_OFFLINE=1: a hub model is read from the node's own cache, where
 * ModelSync put it, and a local path (model.source) is served as it is.
 */
/**
 * The vLLM unit. `peersHash` (mp executor, rank 0): a hash of the other ranks' units, so that a
 * restart of any rank (which ends the engine everywhere) restarts rank 0 too, after them.
 */
export function renderVllmUnit(spec: VllmServeSpec, runtime: Runtime, envHash: string, rayAddress?: string, peersHash?: string): string {
    const rank = spec.multiNode?.rank ?? 0;
    // The Ray executor's driver joins the Ray cluster: it needs the cluster's token and address, and Ray up first.
    const ray: { envFiles: string[]; environment: Partial<Record<VllmUnitEnvName, string>>; after: string[] } = rayAddress
        ? { envFiles: [RAY_ENV_PATH], environment: { RAY_ADDRESS: rayAddress }, after: [`${UNITS.ray}.service`] }
        : { envFiles: [], environment: {}, after: [] };
    // Offline: the model is already on this node (the model sync, render/modelSync.ts), never fetched here.
    const own: Partial<Record<VllmUnitEnvName, string>> = { ...ray.environment, HF_HUB_OFFLINE: "1" };
    return renderUnit({
        name: UNITS.vllm,
        description: `spark-cluster: vLLM serving ${spec.servedName}${rank > 0 ? ` (headless rank ${rank})` : ""}`,
        runtime,
        container: CONTAINER_NAMES.vllm,
        argv: vllmServeArgv(spec),
        envFiles: [RUNTIME_ENV_PATH, ...ray.envFiles, VLLM_SECRETS_PATH],
        // model.env last: config refuses the names the project sets, so it only adds.
        environment: { ...own, ...spec.env },
        // A local model directory: the container sees it where vLLM is told to look.
        readOnlyMounts: isLocalModelPath(spec.source) ? [spec.source] : [],
        // On every start, restarts included: the page cache fills again whenever the model's files are read or written.
        preStart: spec.unifiedMemory ? [vllmMemoryStepArgv(spec.source)] : [],
        inputs: { "runtime.env": envHash, ...(peersHash ? { "units of ranks 1+": peersHash } : {}) },
        after: ray.after,
        ...guardUnitLines(vllmGuard(spec, runtime)),
    });
}

/**
 * The loop of the follower unit (bash; its arguments: the vLLM unit, the head's address, its
 * master port, the grace in seconds, the frozen bound in seconds (0: none), the unit's gate
 * directory or `-`). A headless rank does not notice its head's engine ending:
 * its workers wait on the head's message queue for ever (vLLM's `run_headless` watches only its
 * local workers). While the rank is in the head's engine, its workers hold a TCP connection to
 * the master port (the torch.distributed store of rank 0), and that port answers. The follower
 * checks both every 2 s; when either fails three checks in a row (6 s: the connection closed, or
 * the port refuses or does not answer, as when the head's node went down without closing its
 * connections), it restarts the vLLM unit, whose new rank joins the head's next engine. A rank
 * it has not yet seen in an engine gets the grace first (from its start: a rank can join a head
 * that goes away before the next check). A new MainPID of the vLLM unit starts the watch over.
 * It is also the rank's watchdog: a rank seen in the head's engine counts as answered for the
 * unit's restart gate (and so does a rank it restarts because no head's engine is there: waiting
 * for a head is no failed start), and a rank whose engine process (`enginePid`, the runtime's) is
 * stopped (state T: SIGSTOP, a tracer) for the frozen bound is restarted, the reason in the journal.
 */
function followLoop(enginePid: string): string {
    return [
        'unit=$1 head=$2 port=$3 grace=$4 frozen=$5 dir=$6 pid="" since=0 joined=0 lost=0 stopped=0',
        JOURNAL_SAY,
        `engine_pid() { ${enginePid}; }`,
        'echo "following the head: $unit restarts when its connection to $head:$port ends or that port stops answering"',
        "while sleep 2; do " +
            'now=$(systemctl show -p MainPID --value "$unit.service"); ' +
            'if [ "$now" != "$pid" ]; then pid=$now since=$(date +%s) joined=0 lost=0 stopped=0; fi; ' +
            'if [ "$pid" = 0 ]; then continue; fi; ' +
            'if [ "$frozen" != 0 ]; then epid=$(engine_pid || true); ' +
            `if [ -n "$epid" ] && [ "$epid" != 0 ] && [ "$(awk '/^State:/ { print $2 }' "/proc/$epid/status" 2>/dev/null)" = T ]; then stopped=$((stopped + 2)); else stopped=0; fi; ` +
            'if [ "$stopped" -ge "$frozen" ]; then say "watchdog: the engine process $epid of $unit has been stopped (state T) for $stopped s: restarting $unit" "$pid"; ' +
            'systemctl restart --no-block "$unit.service"; stopped=0 joined=0 lost=0 since=$(date +%s); continue; fi; fi; ' +
            'if [ -n "$(ss -Htn state established dst "$head" dport = ":$port")" ] && ' +
            `timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$head" "$port" 2>/dev/null; then ` +
            'if [ "$joined" != 1 ]; then echo "in the head\'s engine ($unit pid $pid)"; [ "$dir" = - ] || { mkdir -p "$dir" && echo joined > "$dir/answered"; }; fi; joined=1 lost=0; ' +
            'elif [ "$joined" = 1 ] || [ $(( $(date +%s) - since )) -ge "$grace" ]; then lost=$((lost + 1)); ' +
            'if [ "$lost" -ge 3 ]; then ' +
            'echo "no engine of the head at $head:$port for this rank: restarting $unit to join the next one"; ' +
            // Our restart, for the head's sake: not a failed start of the rank for its gate.
            '[ "$dir" = - ] || { mkdir -p "$dir" && echo head-gone > "$dir/answered"; }; ' +
            'systemctl restart --no-block "$unit.service"; joined=0 lost=0 since=$(date +%s); ' +
            "fi; fi; done",
    ].join("; ");
}

/** How long a rank not yet seen in an engine may take to join one before the follower restarts it. */
export const FOLLOW_GRACE_SECONDS = 60;

/** The unit's lines from a {@link ServerGuard}: the gate as ExecCondition= and its start timeout, and the watchdog it starts. */
export function guardUnitLines(guard: ServerGuard): { condition?: string[]; startTimeoutSeconds?: number; wants?: string[] } {
    return {
        ...(guard.condition ? { condition: guard.condition } : {}),
        ...(guard.wants ? { wants: guard.wants } : {}),
        ...(guard.startTimeoutSeconds !== undefined ? { startTimeoutSeconds: guard.startTimeoutSeconds } : {}),
    };
}

/** The follower's argv: the loop above, with the unit, the head's address and port as its arguments. */
export function vllmFollowArgv(unit: string, head: string, port: number, graceSeconds = FOLLOW_GRACE_SECONDS, watch?: FollowWatch): string[] {
    return [
        "/bin/bash",
        "-c",
        followLoop(watch?.enginePid ?? "echo 0"),
        "follow",
        unit,
        head,
        String(port),
        String(graceSeconds),
        String(watch?.frozenSeconds ?? 0),
        watch?.gateDir ?? "-",
    ];
}

/**
 * The follower unit of a rank 1+ of an engine's unit (`what` is its description): restarts the rank
 * when the head's engine ends (and, with `watch`, when its engine process is frozen), runs on the
 * host whatever the runtime (the ranks use the host's network), stops with the engine's unit
 * (PartOf). vLLM's and SGLang's share it.
 */
export function renderFollowUnit(unit: string, what: string, multiNode: { masterAddr: string; masterPort: number }, watch?: FollowWatch): string {
    return renderServerCompanionUnit(unit, what, vllmFollowArgv(unit, multiNode.masterAddr, multiNode.masterPort, FOLLOW_GRACE_SECONDS, watch));
}

/** The follower unit of a headless rank (mp executor, rank 1+). */
export function renderVllmFollowUnit(spec: VllmServeSpec, runtime: Runtime): string | undefined {
    const multiNode = spec.multiNode;
    if (!multiNode || multiNode.rank === 0) return undefined;
    return renderFollowUnit(
        UNITS.vllm,
        `spark-cluster: restarts headless rank ${multiNode.rank} of vLLM when the head's engine ends`,
        multiNode,
        vllmGuard(spec, runtime).follow,
    );
}

/**
 * The vLLM layer's plan for one node (the vLLM engine's {@link EnginePlan}): the secrets file and
 * its step, the unit and its step, the readiness probe (rank 0) and the follower (headless rank).
 * `rayAddress`: the Ray cluster vLLM joins (ray executor).
 */
export function vllmPlan(spec: VllmServeSpec, runtime: Runtime, rayAddress?: string): EnginePlan {
    const rank = spec.multiNode?.rank ?? 0;
    const reader = envFileReader(runtime);
    const followUnit = renderVllmFollowUnit(spec, runtime);
    const guard = vllmGuard(spec, runtime);
    return {
        rank,
        api: { port: spec.apiPort, servedModel: spec.servedName },
        secretsFile: (apiKey) => renderVllmSecrets(reader, apiKey),
        secrets: {
            create: installFileFromStdinScript(VLLM_SECRETS_PATH, "600", UNITS.vllm, followUnit === undefined ? "now" : "with-head", guard.clearDirs),
            delete: removeFilesScript([VLLM_SECRETS_PATH], [CONFIG_DIR]),
            read: secretFileReadScript(VLLM_SECRETS_PATH, "600"),
        },
        unit: (envHash, peerUnits, imageId) =>
            renderVllmUnit(
                spec,
                runtimeStrategy(runtime).pinned(imageId),
                envHash,
                rayAddress,
                peerUnits.length > 0 ? contentHash(peerUnits.join("\n")) : undefined,
            ),
        unitStep: {
            create: (unit) => installUnitScript(UNITS.vllm, unit, guard.companions, guard.clearDirs, followUnit === undefined ? "now" : "with-head"),
            read: (unit) => unitReadScript(UNITS.vllm, unit, guard.companions),
            delete: removeUnitScript(UNITS.vllm, guard.removeUnits, guard.removeDirs),
        },
        ready:
            rank === 0
                ? chatReadyScript({
                      port: spec.apiPort,
                      model: spec.servedName,
                      envFile: VLLM_SECRETS_PATH,
                      reader,
                      unit: UNITS.vllm,
                      seconds: spec.readyTimeoutSeconds,
                  })
                : undefined,
        readyTimeout: readinessTimeout(spec.readyTimeoutSeconds),
        follow:
            followUnit === undefined
                ? undefined
                : {
                      create: installUnitScript(UNITS.vllmFollow, followUnit),
                      delete: removeUnitScript(UNITS.vllmFollow),
                      read: unitReadScript(UNITS.vllmFollow, followUnit),
                  },
    };
}

/** A Pulumi timeout covering a readiness wait of `seconds`: the wait plus 10 minutes, in whole minutes (600 s: "20m"). */
export function readinessTimeout(seconds: number): string {
    return `${Math.ceil((seconds + 600) / 60)}m`;
}

/**
 * The root-only env file vLLM reads its API key from. Not the HF token: vLLM serves offline
 * (HF_HUB_OFFLINE=1) from the cache the model sync filled, and only that download needs it.
 */
export function renderVllmSecrets(reader: EnvFileReader, apiKey: string): string {
    return renderEnvFile(MANAGED_MARKER, [["VLLM_API_KEY" satisfies VllmSecretName, apiKey]], reader);
}

/**
 * Ready only when a real chat request returns text (sparkrun's rule: /health
 * can be green before the model answers). The API key is read on the node
 * from the root-only env file, never passed on a command line.
 */
export function chatReadyScript(opts: {
    port: number;
    model: string;
    envFile: string;
    reader: EnvFileReader;
    unit: string;
    seconds?: number;
    /** Python that sets `key` from `envFile` (another engine's secrets file). Defaults to VLLM_API_KEY of the env file. */
    readKey?: string[];
    /** The engine, for the failure message. Defaults to vLLM. */
    engine?: string;
}): string {
    const seconds = opts.seconds ?? 600;
    const probe = [
        "import json, os, sys, urllib.request",
        ...(opts.readKey ?? [pythonReadEnvValue(opts.reader), `key = read_env_value(${JSON.stringify(opts.envFile)}, "VLLM_API_KEY")`]),
        `body = json.dumps({"model": ${JSON.stringify(opts.model)}, "max_tokens": 32,`,
        `    "messages": [{"role": "user", "content": "Say hello."}]}).encode()`,
        `req = urllib.request.Request("http://127.0.0.1:${opts.port}/v1/chat/completions", data=body,`,
        `    headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})`,
        `try:`,
        `    reply = json.load(urllib.request.urlopen(req, timeout=60))`,
        `    text = reply["choices"][0]["message"]["content"]`,
        `except Exception as exc:`,
        `    print("not ready:", exc); sys.exit(1)`,
        `if not text: sys.exit(1)`,
        `print("answer:", text)`,
    ].join("\n");
    return bashScript([
        HOST_LIB,
        `mkdir -p "$SC_STATE"`,
        heredoc(`cat > "$SC_STATE/chat-probe.py"`, probe),
        `chat_ready() { python3 "$SC_STATE/chat-probe.py" | tail -n 1; [ "\${PIPESTATUS[0]}" = 0 ]; }`,
        `if ! sc_wait ${seconds} ${shellQuote(`a chat completion from ${opts.model}`)} chat_ready; then`,
        `  sc_log "${opts.engine ?? "vLLM"} never answered; last log lines of ${opts.unit}:"`,
        `  ${journalTailLine(opts.unit, 60)}`,
        `  rm -f "$SC_STATE/chat-probe.py"`,
        `  exit 1`,
        `fi`,
        `rm -f "$SC_STATE/chat-probe.py"`,
        `sc_cleanup_state`,
    ]);
}
