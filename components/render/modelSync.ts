// The model layer: a Hugging Face model is downloaded once, on the head, into the host's Hugging
// Face cache, then pulled by every other node from a read-only rsync daemon the head runs on its
// interconnect address for the duration of the sync; a local path is checked on every node.
// The order and the conditions these scripts run in (components/plan/clusterPlan.ts makes the steps
// from modelSyncPlan, below):
//
// The model every vLLM serves, on every node, before any vLLM starts; vLLM then runs with
// HF_HUB_OFFLINE=1 against the node's own copy.
//
// A Hugging Face id (`org/name`) is downloaded once, on the head, and copied to the other nodes
// over the interconnect:
//
// - **download** (head): the runtime's own `hf download` (docker: a throwaway `docker run --rm` of
//   the node's image with the host's Hugging Face cache mounted; venv: the venv's `bin/hf`) into
//   `/root/.cache/huggingface/hub/models--ORG--NAME`, the cache vLLM reads. The hfToken secret is
//   this step's stdin (as it is vllm.env's writer's): it reaches `hf` through the environment
//   only, never argv, and is replaced in anything printed. The size so far and the tool's last
//   line show in `up` every 10 s (bounded: 24 h).
// - **serve** (head): an rsync daemon bound to the head's interconnect address, read-only, for
//   the duration of the sync only: per worker a module open to that worker's interconnect
//   addresses alone, authenticated by a secret derived from the stack's root secret (stdin, a root-only
//   file while serving). The firewall already keeps everyone but members off the port. It stops
//   once every worker reported (an rsync `done-<node>` module it lists after checking its copy),
//   when a worker does not connect within 10 min, or after the overall bound.
// - **pull-<node>** (each other node): waits (bounded) for the head to serve, copies the model's
//   files in model.syncStreams rsync streams at once (one stream is bound by a core, below the
//   interconnect), then `rsync -a --partial-dir` of the whole tree into its own cache: resumable,
//   up to 5 attempts, the bytes, rate or rsync's overall progress every 10 s, the rate achieved at
//   the end; checks the snapshot vLLM will resolve (refs/main and its config.json).
//
// Unchanged detection, three layers: (1) the steps' inputs hold the model id, so a second `up`
// with the same model runs none of them (the Pulumi engine's diff); (2) when they do run again
// (a failed earlier run, a changed connection), the head and each worker compare the repository
// with the manifest they recorded after the last download or pull (every file's size, mtime and
// link target) and do nothing when it matches, and the head does not wait for a worker it
// already saw finish this model; (3) rsync itself skips every file already present with the
// same size and mtime. Changing the model runs everything for the new repository only: other
// repositories in the cache are never touched.
//
// `destroy` (and a model change) removes our records but leaves the model in every node's cache:
// it is the user's data. `model.removeCacheOnDestroy: true` removes the repository instead (a
// model change then removes the old one before the new one arrives: delete-before-replace).
//
// A local path is served as it is: a read-only check on every node that the directory exists
// with config.json, failing with a message naming model.source and the node.
import type { Runtime } from "../../config";
import { HOST_LIB } from "./host/lib";
import { runtimeStrategy } from "./host/runtime";
import { bashScript, heredoc, shellQuote } from "./host/shell";
import { HF_HOME_DIR, HF_HUB_DIR, MANAGED_MARKER, STATE_DIR } from "../../config/hostPaths";

export { HF_HOME_DIR, HF_HUB_DIR } from "../../config/hostPaths";
/** Our records of the sync: what was downloaded or pulled (manifests), which workers got a model, the daemon's scratch. */
export const MODEL_SYNC_STATE_DIR = `${STATE_DIR}/model-sync`;
/** TCP port of the head's rsync daemon, bound to the head's interconnect address only while it serves. */
export const MODEL_SYNC_PORT = 8873;
/** The rsync user every node authenticates as (with the sync secret). */
export const MODEL_SYNC_USER = "spark-cluster";
/** The throwaway container that downloads on a docker head. */
export const MODEL_DOWNLOAD_CONTAINER = "spark-cluster-model-download";

/** Upper bounds (seconds). Each wait also prints where it is at least every 10 s. */
export const MODEL_SYNC_LIMITS = {
    /** The hub download (or the image pull before it) on the head. */
    download: 24 * 3600,
    /** A worker's pull, all attempts together. */
    pull: 6 * 3600,
    /** How long a worker waits for the head to start serving. */
    serveStart: 600,
    /** How long the head waits for a worker's first connection before it gives up on it. */
    firstConnect: 600,
    /** How long a worker already holding the model waits to tell a serving head so. */
    confirm: 30,
} as const;

export { isLocalModelPath } from "../../config/facts";

/** The cache directory huggingface_hub uses for a model repository: `models--ORG--NAME`. */
export function hubRepoDirName(repoId: string): string {
    return `models--${repoId.replace(/\//g, "--")}`;
}

/** Shell lines shared by the sync scripts: paths of one model, the manifest and snapshot checks. */
function modelLines(repoId: string): string[] {
    const dir = hubRepoDirName(repoId);
    return [
        `model=${shellQuote(repoId)}`,
        `repo=${HF_HUB_DIR}/${dir}`,
        `sync_dir=${MODEL_SYNC_STATE_DIR}`,
        `manifest=$sync_dir/${dir}.manifest`,
        // Every file and link of the repository with its size, mtime and link target: what was
        // synced, to compare with later (partial transfers and unfinished downloads left out).
        `current_manifest() {`,
        `  [ -d "$repo" ] || return 0`,
        `  (cd "$repo" && find . \\( -name '*.incomplete' -o -name .rsync-partial \\) -prune -o \\( -type f -o -type l \\) -printf '%P %s %T@ %l\\n' | LC_ALL=C sort)`,
        `}`,
        // What vLLM needs offline: the revision it resolves (refs/main) and a snapshot with config.json.
        `snapshot_ok() {`,
        `  local ref`,
        `  ref=$(cat "$repo/refs/main" 2>/dev/null) && [ -n "$ref" ] && [ -f "$repo/snapshots/$ref/config.json" ]`,
        `}`,
        `unchanged_since_recorded() { [ -f "$manifest" ] && snapshot_ok && [ "$(current_manifest)" = "$(cat "$manifest")" ]; }`,
        `record_manifest() { mkdir -p "$sync_dir" && chmod 700 "$sync_dir" && current_manifest > "$manifest.tmp" && mv -f "$manifest.tmp" "$manifest"; }`,
        `size_of() { du -sh "$repo" 2>/dev/null | cut -f1; }`,
    ];
}

export interface ModelDownloadSpec {
    /** The Hugging Face id (model.source). */
    repoId: string;
    /** The head, for messages. */
    node: string;
    runtime: Runtime;
    /** Whether the step's stdin carries the hfToken secret. */
    withToken: boolean;
}

/**
 * Downloads the model on the head into the host's Hugging Face cache with the runtime's own
 * `hf download`, printing progress (size so far, the tool's last line) every 10 s. Does nothing
 * when the repository is as the last download left it (its manifest). The token comes on stdin,
 * reaches `hf` through the environment only, and is replaced in anything printed.
 */
export function modelDownloadScript(spec: ModelDownloadSpec): string {
    // The runtime's own `hf`, in a throwaway container of the node's image or from the venv.
    const runtime = runtimeStrategy(spec.runtime);
    const { where, present: tool, missing: noTool } = runtime.hfTool(spec.node);
    const removeContainer = runtime.removeThrowaway(MODEL_DOWNLOAD_CONTAINER);
    return bashScript([
        HOST_LIB,
        ...modelLines(spec.repoId),
        spec.withToken ? `token=$(cat)` : `token=`,
        `redact() { local line; while IFS= read -r line || [ -n "$line" ]; do [ -z "$token" ] || line=\${line//"$token"/[hfToken]}; printf '%s\\n' "$line"; done; }`,
        `if unchanged_since_recorded; then`,
        `  sc_log "$model is already in ${spec.node}'s cache ($(size_of), as downloaded before): nothing to download"`,
        `  exit 0`,
        `fi`,
        `if ! ${tool}; then sc_log ${shellQuote(`cannot download: ${noTool}`)}; exit 1; fi`,
        `mkdir -p "$sync_dir" && chmod 700 "$sync_dir"`,
        `log=$sync_dir/download.log`,
        `cleanup() {`,
        ...removeContainer.map((line) => `  ${line}`),
        `  [ -z "\${pid:-}" ] || kill "$pid" 2>/dev/null || true`,
        `  rm -f "$log"`,
        `}`,
        `trap cleanup EXIT`,
        ...removeContainer,
        `sc_log ${shellQuote(`downloading ${spec.repoId} from the Hugging Face hub on ${spec.node} with ${where}, into`)}" $repo"`,
        `${runtime.hfDownload({ container: MODEL_DOWNLOAD_CONTAINER, hfHome: HF_HOME_DIR, repoId: spec.repoId, withToken: spec.withToken })} > "$log" 2>&1 &`,
        `pid=$!`,
        `start=$(date +%s); shown=$start`,
        `while kill -0 "$pid" 2>/dev/null; do`,
        `  sleep 2`,
        `  now=$(date +%s)`,
        `  if [ $(( now - start )) -ge ${MODEL_SYNC_LIMITS.download} ]; then`,
        `    sc_log "gave up after ${MODEL_SYNC_LIMITS.download} s downloading $model; last lines:"; tail -n 20 "$log" | tr '\\r' '\\n' | redact; exit 1`,
        `  fi`,
        `  if [ $(( now - shown )) -ge 10 ]; then`,
        `    line=$(tail -c 2000 "$log" | tr '\\r' '\\n' | grep -v '^[[:space:]]*$' | tail -n 1 | redact) || line=`,
        `    sc_log "downloading $model: $(size_of || echo 0) in the cache after $(( now - start )) s\${line:+ (\${line:0:160})}"`,
        `    shown=$now`,
        `  fi`,
        `done`,
        `rc=0; wait "$pid" || rc=$?; pid=`,
        `if [ "$rc" != 0 ]; then`,
        `  sc_log "hf download of $model failed on ${spec.node} (exit $rc); its last lines:"`,
        `  tail -n 20 "$log" | tr '\\r' '\\n' | redact`,
        `  sc_log ${shellQuote(`check spark-cluster:model.source (a Hugging Face id such as Qwen/Qwen2.5-7B-Instruct) and, for a gated model, the hfToken secret`)}`,
        `  exit 1`,
        `fi`,
        `if ! snapshot_ok; then sc_log "hf download finished but $repo has no snapshot with config.json for refs/main"; exit 1; fi`,
        `record_manifest`,
        `sc_log "$model downloaded on ${spec.node}: $(size_of) in $repo (revision main = $(cat "$repo/refs/main"))"`,
    ]);
}

/** One node that pulls the model from the head. */
export interface ModelPuller {
    node: string;
    /** Its interconnect addresses: the only sources the daemon accepts for its modules. */
    ips: string[];
}

export interface ModelServeSpec {
    repoId: string;
    /** The head, for messages. */
    node: string;
    /** The head's interconnect address the daemon binds to (the one Ray and vLLM pin to). */
    headIp: string;
    workers: ModelPuller[];
    /** Defaults to {@link MODEL_SYNC_PORT}. */
    port?: number;
}

/** Where the head serves from while it serves: config, secrets file, log, connection marks. */
const SERVE_DIR = `${MODEL_SYNC_STATE_DIR}/serve`;

/** The rsync daemon's config: per worker a read-only module of the model and a `done` module it lists when it holds it. */
export function renderModelRsyncdConf(spec: ModelServeSpec): string {
    const dir = hubRepoDirName(spec.repoId);
    const doneDir = `${MODEL_SYNC_STATE_DIR}/${dir}.done`;
    const common = (ips: string[]) => [
        `    read only = yes`,
        `    list = no`,
        `    auth users = ${MODEL_SYNC_USER}`,
        `    secrets file = ${SERVE_DIR}/secrets`,
        `    strict modes = yes`,
        `    hosts allow = ${ips.join(" ")}`,
        `    hosts deny = *`,
    ];
    const modules = spec.workers.flatMap((w) => [
        "",
        `[model-${w.node}]`,
        `    path = ${HF_HUB_DIR}/${dir}`,
        ...common(w.ips),
        `    exclude = *.incomplete`,
        `    pre-xfer exec = /bin/touch ${SERVE_DIR}/connected-${w.node}`,
        "",
        `[done-${w.node}]`,
        `    path = ${SERVE_DIR}/empty`,
        ...common(w.ips),
        `    post-xfer exec = /bin/sh -c '[ "$RSYNC_EXIT_STATUS" = 0 ] && touch ${doneDir}/${w.node}'`,
    ]);
    return (
        [
            `# ${MANAGED_MARKER}`,
            `# Exists only while ${spec.node} serves ${spec.repoId} to the other nodes (components/modelSync.ts).`,
            `use chroot = yes`,
            `uid = root`,
            `gid = root`,
            `reverse lookup = no`,
            `log file = ${SERVE_DIR}/rsyncd.log`,
            ...modules,
        ].join("\n") + "\n"
    );
}

/**
 * The head serves the model read-only until every worker that does not hold it yet says it
 * does: an rsync daemon bound to the head's interconnect address, the sync secret (stdin) in a
 * root-only file, each worker's modules open to that worker's addresses only. Bounded: a worker
 * that never connects, a daemon that dies, or the overall limit fail the step; the daemon stops
 * with the script (and by `timeout` at the latest). A worker that got this model before (its
 * mark from an earlier sync) is not waited for; the mark of a node no longer among the workers is
 * removed (it left; back later, it pulls again).
 */
export function modelServeScript(spec: ModelServeSpec): string {
    const port = spec.port ?? MODEL_SYNC_PORT;
    const dir = hubRepoDirName(spec.repoId);
    const limit = MODEL_SYNC_LIMITS.pull + MODEL_SYNC_LIMITS.firstConnect + 600;
    const names = spec.workers.map((w) => shellQuote(w.node)).join(" ");
    return bashScript([
        HOST_LIB,
        ...modelLines(spec.repoId),
        `secret=$(cat)`,
        `[ -n "$secret" ] || { sc_log "no sync secret on stdin"; exit 1; }`,
        `done_dir=$sync_dir/${dir}.done`,
        `serve=${SERVE_DIR}`,
        `if ! snapshot_ok; then sc_log "$repo on ${spec.node} has no complete snapshot to serve"; exit 1; fi`,
        `workers=(${names})`,
        // A mark of a node that left the cluster goes: if it comes back, it pulls again (its own
        // copy's record went with its steps), and a mark kept would have the head not serve it.
        `for mark in "$done_dir"/*; do`,
        `  [ -f "$mark" ] || continue`,
        `  member=; for w in "\${workers[@]}"; do [ "$w" != "\${mark##*/}" ] || member=1; done`,
        `  [ -n "$member" ] || { rm -f "$mark"; sc_log "\${mark##*/} is no longer a node of the cluster: forgot that it held $model (it pulls again if it comes back)"; }`,
        `done`,
        `pending=()`,
        `for w in "\${workers[@]}"; do`,
        `  if [ -f "$done_dir/$w" ]; then sc_log "$w already holds $model (copied $(date -u -r "$done_dir/$w" +%Y-%m-%dT%H:%M:%SZ))"; else pending+=("$w"); fi`,
        `done`,
        `if [ \${#pending[@]} -eq 0 ]; then sc_log "every other node holds $model: nothing to serve"; exit 0; fi`,
        `if ! command -v rsync >/dev/null; then sc_log "rsync is not installed on ${spec.node}: install it (apt-get install rsync)"; exit 1; fi`,
        `mkdir -p "$sync_dir" && chmod 700 "$sync_dir"`,
        `rm -rf "$serve" && mkdir -m 700 "$serve" "$serve/empty" && mkdir -p "$done_dir"`,
        `cleanup() {`,
        `  [ -z "\${daemon:-}" ] || kill "$daemon" 2>/dev/null || true`,
        `  rm -rf "$serve"`,
        `}`,
        `trap cleanup EXIT`,
        `( umask 077; printf '%s:%s\\n' ${MODEL_SYNC_USER} "$secret" > "$serve/secrets" )`,
        heredoc(`cat > "$serve/rsyncd.conf"`, renderModelRsyncdConf(spec)),
        `timeout --kill-after=10 ${limit} rsync --daemon --no-detach --config="$serve/rsyncd.conf" --address=${spec.headIp} --port=${port} &`,
        `daemon=$!`,
        `listening() { kill -0 "$daemon" 2>/dev/null && ss -Hltn | awk '{print $4}' | grep -qxF ${spec.headIp}:${port}; }`,
        `if ! sc_wait 20 "the rsync daemon on ${spec.headIp}:${port}" listening; then`,
        `  sc_log "the rsync daemon did not start on ${spec.headIp}:${port}:"; cat "$serve/rsyncd.log" 2>/dev/null || true; exit 1`,
        `fi`,
        `sc_log "serving $model read-only on ${spec.headIp}:${port} to \${pending[*]}"`,
        `start=$(date +%s); shown=$start`,
        `while :; do`,
        `  left=()`,
        `  for w in "\${pending[@]}"; do [ -f "$done_dir/$w" ] && continue; left+=("$w"); done`,
        `  [ \${#left[@]} -gt 0 ] || break`,
        `  now=$(date +%s); elapsed=$(( now - start ))`,
        `  if ! kill -0 "$daemon" 2>/dev/null; then sc_log "the rsync daemon stopped; its log:"; cat "$serve/rsyncd.log" 2>/dev/null || true; exit 1; fi`,
        `  for w in "\${left[@]}"; do`,
        `    if [ ! -f "$serve/connected-$w" ] && [ "$elapsed" -ge ${MODEL_SYNC_LIMITS.firstConnect} ]; then`,
        `      sc_log "$w did not connect within ${MODEL_SYNC_LIMITS.firstConnect} s: see the output of its pull step"; exit 1`,
        `    fi`,
        `  done`,
        `  if [ "$elapsed" -ge ${limit} ]; then sc_log "gave up after ${limit} s: \${left[*]} did not finish pulling $model"; exit 1; fi`,
        `  if [ $(( now - shown )) -ge 10 ]; then`,
        `    status=; for w in "\${left[@]}"; do status+=" $w ($([ -f "$serve/connected-$w" ] && echo pulling || echo 'not connected yet'))"; done`,
        `    sc_log "serving $model for \${elapsed} s; waiting for:$status"; shown=$now`,
        `  fi`,
        `  sleep 2`,
        `done`,
        `sc_log "every other node holds $model; stopped serving it"`,
    ]);
}

export interface ModelPullSpec {
    repoId: string;
    /** This node. */
    node: string;
    /** The head, for messages. */
    head: string;
    /** The head's interconnect address (where it serves). */
    headIp: string;
    /** Defaults to {@link MODEL_SYNC_PORT}. */
    port?: number;
    /** Parallel rsync streams for the model's files (model.syncStreams); 1: the single pass alone. Defaults to 1. */
    streams?: number;
}

/**
 * A worker pulls the model from the head over the interconnect: it waits (bounded) for the head
 * to serve; with `streams` > 1 it lists the model's regular files and copies them in that many
 * rsync streams at once, each file to the stream with the fewest bytes so far, largest first (a
 * best effort: whatever it leaves, the single pass copies); then `rsync -a --partial-dir` of the
 * whole tree into its own cache (resumable; files already there with the same size and mtime are
 * skipped; up to 5 attempts), printing the progress every 10 s; it checks the snapshot vLLM will
 * read, records what it holds, tells the head, and prints the bytes it pulled and the rate. When
 * its copy is exactly what it recorded after an earlier pull, it copies nothing.
 */
export function modelPullScript(spec: ModelPullSpec): string {
    const port = spec.port ?? MODEL_SYNC_PORT;
    const base = `rsync://${MODEL_SYNC_USER}@${spec.headIp}:${port}`;
    return bashScript([
        HOST_LIB,
        ...modelLines(spec.repoId),
        `secret=$(cat)`,
        `[ -n "$secret" ] || { sc_log "no sync secret on stdin"; exit 1; }`,
        `export RSYNC_PASSWORD=$secret`,
        `serving() { timeout 3 bash -c 'exec 3<>/dev/tcp/${spec.headIp}/${port}' 2>/dev/null; }`,
        `tell_head() { rsync --contimeout=20 --timeout=60 --list-only ${base}/done-${spec.node}/ >/dev/null; }`,
        `if unchanged_since_recorded; then`,
        `  sc_log "${spec.node} already holds $model ($(size_of), unchanged since it was copied): nothing to copy"`,
        // A head that serves right now may be waiting to hear it (an earlier run stopped between the two).
        `  if sc_wait ${MODEL_SYNC_LIMITS.confirm} "${spec.head} to serve" serving >/dev/null; then tell_head || true; fi`,
        `  exit 0`,
        `fi`,
        `if ! command -v rsync >/dev/null; then sc_log "rsync is not installed on ${spec.node}: install it (apt-get install rsync)"; exit 1; fi`,
        `mkdir -p "$sync_dir" "$repo" && chmod 700 "$sync_dir"`,
        `log=$sync_dir/pull.log`,
        `streams=()`,
        `cleanup() { [ -z "\${pid:-}" ] || kill "$pid" 2>/dev/null || true; for p in "\${streams[@]}"; do kill "$p" 2>/dev/null || true; done; rm -f "$log" "$sync_dir"/list "$sync_dir"/stream-*; }`,
        `trap cleanup EXIT`,
        `if ! sc_wait ${MODEL_SYNC_LIMITS.serveStart} "${spec.head} to serve $model on ${spec.headIp}:${port}" serving; then`,
        `  sc_log "${spec.head} did not serve $model on ${spec.headIp}:${port} within ${MODEL_SYNC_LIMITS.serveStart} s: see the output of its serve step"; exit 1`,
        `fi`,
        `start_ns=$(date +%s%N); start=$(( start_ns / 1000000000 ))`,
        `bytes() { du -sb "$repo" 2>/dev/null | cut -f1; }`,
        `rate_of() { awk -v b="$1" -v ms="$2" 'BEGIN { printf "%.1f MB/s", b / (ms > 0 ? ms : 1) / 1000 }'; }`,
        `before=$(bytes)`,
        ...parallelPullLines(spec, base),
        `for attempt in 1 2 3 4 5; do`,
        `  sc_log "pulling $model from ${spec.head} (${spec.headIp}) into $repo, attempt $attempt"`,
        `  rsync -a --partial-dir=.rsync-partial --exclude='*.incomplete' --timeout=120 --contimeout=20 --info=progress2 --no-inc-recursive ${base}/model-${spec.node}/ "$repo/" > "$log" 2>&1 &`,
        `  pid=$!; shown=$(date +%s)`,
        `  while kill -0 "$pid" 2>/dev/null; do`,
        `    sleep 0.5`,
        `    now=$(date +%s)`,
        `    if [ $(( now - start )) -ge ${MODEL_SYNC_LIMITS.pull} ]; then sc_log "gave up after ${MODEL_SYNC_LIMITS.pull} s pulling $model"; tail -n 5 "$log" | tr '\\r' '\\n'; exit 1; fi`,
        `    if [ $(( now - shown )) -ge 10 ]; then`,
        `      sc_log "pulling $model: $(tail -c 400 "$log" | tr '\\r' '\\n' | grep -v '^[[:space:]]*$' | tail -n 1 | sed 's/^ *//')"; shown=$now`,
        `    fi`,
        `  done`,
        `  rc=0; wait "$pid" || rc=$?; pid=`,
        `  [ "$rc" != 0 ] || break`,
        `  sc_log "rsync exited with $rc:"; tr '\\r' '\\n' < "$log" | grep -v '^[[:space:]]*$' | tail -n 5`,
        `  if [ "$attempt" = 5 ]; then exit 1; fi`,
        `  sleep 5`,
        `done`,
        `if ! snapshot_ok; then sc_log "the copy in $repo has no snapshot with config.json for refs/main"; exit 1; fi`,
        `record_manifest`,
        `if ! tell_head; then sc_log "could not tell ${spec.head} that ${spec.node} holds $model"; exit 1; fi`,
        `took_ms=$(( ($(date +%s%N) - start_ns) / 1000000 )); pulled=$(( $(bytes) - before ))`,
        `sc_log "${spec.node} holds $model: $(size_of) in $repo; pulled $(( pulled / 1048576 )) MiB in $(( took_ms / 1000 )) s ($(rate_of "$pulled" "$took_ms"), ${streamCount(spec)} stream(s))"`,
    ]);
}

/**
 * What a worker's pull step printed, for the `modelSync` output: the bytes it pulled, how long it
 * took, the rate and the streams (its closing line), or that it held the model already; what an
 * older pull step printed (no rate) or nothing yet, as such.
 */
export function pullSummary(stdout: string | undefined): string {
    const lines = (stdout ?? "").split("\n");
    const pulled = lines.map((l) => /; (pulled \d+ MiB in \d+ s \([\d.]+ MB\/s, \d+ stream\(s\)\))$/.exec(l)).find((m) => m !== null);
    if (pulled) return pulled[1];
    if (lines.some((l) => / already holds .*: nothing to copy$/.test(l))) return "held it already: nothing copied";
    const older = lines.map((l) => /, (pulled in \d+ s)$/.exec(l)).find((m) => m !== null);
    if (older) return `${older[1]} (before the rate was recorded)`;
    return "not pulled yet";
}

function streamCount(spec: ModelPullSpec): number {
    return spec.streams ?? 1;
}

/**
 * The parallel pass of a pull (streams > 1): the module's regular files (`rsync --list-only`, plain
 * sizes) dealt to the streams largest first, each to the one with the fewest bytes so far; one
 * `rsync --files-from` per stream, side by side, with the bytes in the repository and the rate
 * every 10 s, bounded by the pull's limit. It fails soft: the single pass after it copies what it
 * left, and decides.
 */
function parallelPullLines(spec: ModelPullSpec, base: string): string[] {
    const n = streamCount(spec);
    if (n <= 1) return [];
    const rsync = `rsync --contimeout=20 --timeout=120`;
    return [
        `streams_alive() { for p in "\${streams[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }`,
        `parallel_pull() {`,
        `  if ! ${rsync} --list-only -r --no-human-readable ${base}/model-${spec.node}/ > "$sync_dir/list" 2>&1; then`,
        `    sc_log "could not list $model on ${spec.head}: $(tail -n 1 "$sync_dir/list")"; return 1`,
        `  fi`,
        `  rm -f "$sync_dir"/stream-*`,
        // perms, size, date, time, name: the name is the rest of the line after the fourth field.
        `  total=$(awk '$1 ~ /^-/ { name = $0; sub(/^[^ ]+ +[0-9]+ +[^ ]+ +[^ ]+ /, "", name); print $2 "\\t" name }' "$sync_dir/list" | sort -t "$(printf '\\t')" -k1,1nr | awk -F '\\t' -v n=${n} -v dir="$sync_dir" '{ b = 0; for (i = 1; i < n; i++) if (load[i] < load[b]) b = i; load[b] += $1; print $2 > (dir "/stream-" b) } END { for (i = 0; i < n; i++) t += load[i]; print t + 0 }')`,
        `  sc_log "pulling $model from ${spec.head} (${spec.headIp}) in ${n} streams: $(( total / 1048576 )) MiB in $(ls "$sync_dir"/stream-* 2>/dev/null | wc -l) lists"`,
        `  for list in "$sync_dir"/stream-*; do`,
        `    [ -e "$list" ] || continue`,
        `    ${rsync} -a --partial-dir=.rsync-partial --files-from="$list" ${base}/model-${spec.node}/ "$repo/" > "$list.log" 2>&1 &`,
        `    streams+=("$!")`,
        `  done`,
        `  shown=$(date +%s); rc=0`,
        `  while streams_alive; do`,
        `    sleep 0.5; now=$(date +%s)`,
        `    if [ $(( now - start )) -ge ${MODEL_SYNC_LIMITS.pull} ]; then sc_log "gave up after ${MODEL_SYNC_LIMITS.pull} s pulling $model"; exit 1; fi`,
        `    if [ $(( now - shown )) -ge 10 ]; then`,
        `      got=$(( $(bytes) - before )); sc_log "pulling $model: $(( got / 1048576 )) of $(( total / 1048576 )) MiB in $(( now - start )) s ($(rate_of "$got" $(( (now - start) * 1000 ))), ${n} streams)"; shown=$now`,
        `    fi`,
        `  done`,
        `  for p in "\${streams[@]}"; do wait "$p" || rc=$?; done`,
        `  streams=()`,
        `  if [ "$rc" != 0 ]; then sc_log "a stream ended with rsync's $rc: $(cat "$sync_dir"/stream-*.log | tr '\\r' '\\n' | grep -v '^[[:space:]]*$' | tail -n 2 | paste -sd' ')"; return 1; fi`,
        `}`,
        `parallel_pull || sc_log "the parallel pass did not copy everything: the single pass copies the rest"`,
    ];
}

export interface ModelCacheRemovalSpec {
    repoId: string;
    node: string;
    /** model.removeCacheOnDestroy: remove the repository from the node's cache, or leave it (the default). */
    remove: boolean;
}

/**
 * The delete of a download or pull step: our record of the model goes; the model itself stays in
 * the node's cache (it is the user's data) unless model.removeCacheOnDestroy is true.
 */
export function modelCacheRemovalScript(spec: ModelCacheRemovalSpec): string {
    const dir = hubRepoDirName(spec.repoId);
    return bashScript([
        HOST_LIB,
        ...modelLines(spec.repoId),
        `rm -f "$manifest" "$manifest.tmp"`,
        ...(spec.remove
            ? [
                  `if [ -e "$repo" ]; then`,
                  `  rm -rf "$repo" ${HF_HUB_DIR}/.locks/${dir}`,
                  `  sc_log "removed $model from ${spec.node}'s Hugging Face cache (model.removeCacheOnDestroy is true)"`,
                  `fi`,
              ]
            : [
                  `if [ -e "$repo" ]; then`,
                  `  sc_log "left $model in $repo on ${spec.node}: model caches are your data (model.removeCacheOnDestroy: true removes them)"`,
                  `fi`,
              ]),
        `rmdir "$sync_dir" 2>/dev/null || true`,
        `sc_cleanup_state`,
    ]);
}

/** The delete of the serve step: which workers got the model (the head's marks) and any leftover of a serve. */
export function modelServeRemovalScript(repoId: string): string {
    return bashScript([
        HOST_LIB,
        `rm -rf ${MODEL_SYNC_STATE_DIR}/${hubRepoDirName(repoId)}.done ${SERVE_DIR}`,
        `rmdir ${MODEL_SYNC_STATE_DIR} 2>/dev/null || true`,
        `sc_cleanup_state`,
    ]);
}

/**
 * A local path is served as it is: each node must hold it (a directory with config.json). Fails
 * naming model.source and the node, and changes nothing.
 */
export function localModelCheckScript(path: string, node: string): string {
    const missing =
        `spark-cluster:model.source: ${path} REASON on ${node}. A local path is served as it is, from the same path on every node: ` +
        "put the model directory there on each node, or give a Hugging Face id (org/name) to have it downloaded once and copied over the interconnect";
    const [before, after] = missing.split("REASON");
    return bashScript([
        `path=${shellQuote(path)}`,
        `if [ -f "$path/config.json" ]; then`,
        `  echo "[spark-cluster] ${node} holds the model at $path ($(du -sh "$path" 2>/dev/null | cut -f1))"`,
        `  exit 0`,
        `fi`,
        `if [ -d "$path" ]; then reason="has no config.json"; else reason="does not exist"; fi`,
        `echo ${shellQuote(before)}"$reason"${shellQuote(after)} >&2`,
        `exit 1`,
    ]);
}

/** One node as the model sync sees it: its name, interconnect addresses and runtime. */
export interface ModelSyncNodeSpec {
    node: string;
    /** Its first interconnect address (the head serves there). */
    ip: string;
    /** Every interconnect address (the only sources the head's daemon accepts from a worker). */
    ips: string[];
    runtime: Runtime;
}

/** What the model sync is rendered from. */
export interface ModelSyncSpec {
    /** model.source: a Hugging Face id, or a directory on the nodes. */
    source: string;
    /** model.source is a directory on the nodes: checked there, nothing synced. */
    localModel: boolean;
    /** model.removeCacheOnDestroy. */
    removeCacheOnDestroy: boolean;
    /** model.syncStreams: the parallel streams of each pull. */
    syncStreams: number;
    /** An hfToken is set: the download reads it from stdin. */
    withToken: boolean;
    head: ModelSyncNodeSpec;
    workers: ModelSyncNodeSpec[];
}

/** One step of the model sync on one node, as its component wires it. */
export interface ModelSyncStep {
    /** The step's name after the component's: `download`, `serve`, `pull-<node>`, `check-<node>`. */
    name: string;
    /** The node it runs on. */
    node: string;
    create: string;
    delete?: string;
    /** What its stdin carries: the HF token (download) or the sync secret (serve, pull). Defaults to nothing. */
    stdin?: "hfToken" | "syncSecret";
    /** Keyed on the model: replaced (old delete first) when model.source changes. */
    keyed: boolean;
    /** The steps (by name) it runs after, besides its node's host layers. */
    after: string[];
    /** The Pulumi create/update timeout, covering the script's own bounds. Defaults to Pulumi's. */
    timeout?: string;
}

/**
 * The model sync's plan, asked for once by its component: every step in order. A local path:
 * a read-only check per node. A Hugging Face id: the head's download, then (with workers) the
 * head's serve and each worker's pull, side by side.
 */
export function modelSyncPlan(spec: ModelSyncSpec): ModelSyncStep[] {
    const source = spec.source;
    const nodes = [spec.head, ...spec.workers];
    if (spec.localModel) {
        return nodes.map((n) => ({ name: `check-${n.node}`, node: n.node, create: localModelCheckScript(source, n.node), keyed: false, after: [] }));
    }
    const hours = (seconds: number) => `${Math.ceil(seconds / 3600) + 1}h`;
    const head = spec.head;
    const remove = spec.removeCacheOnDestroy;
    const pullTimeout = hours(MODEL_SYNC_LIMITS.pull + MODEL_SYNC_LIMITS.serveStart);
    const steps: ModelSyncStep[] = [
        {
            name: "download",
            node: head.node,
            create: modelDownloadScript({ repoId: source, node: head.node, runtime: head.runtime, withToken: spec.withToken }),
            delete: modelCacheRemovalScript({ repoId: source, node: head.node, remove }),
            ...(spec.withToken ? { stdin: "hfToken" as const } : {}),
            keyed: true,
            after: [],
            timeout: hours(MODEL_SYNC_LIMITS.download),
        },
    ];
    if (spec.workers.length > 0) {
        steps.push({
            name: "serve",
            node: head.node,
            create: modelServeScript({ repoId: source, node: head.node, headIp: head.ip, workers: spec.workers.map((w) => ({ node: w.node, ips: w.ips })) }),
            delete: modelServeRemovalScript(source),
            stdin: "syncSecret",
            keyed: true,
            after: ["download"],
            timeout: pullTimeout,
        });
    }
    for (const worker of spec.workers) {
        steps.push({
            name: `pull-${worker.node}`,
            node: worker.node,
            create: modelPullScript({ repoId: source, node: worker.node, head: head.node, headIp: head.ip, streams: spec.syncStreams }),
            delete: modelCacheRemovalScript({ repoId: source, node: worker.node, remove }),
            stdin: "syncSecret",
            keyed: true,
            after: ["download"],
            timeout: pullTimeout,
        });
    }
    return steps;
}
