// Failures as they happen (issue 36): the health watchdog of a server we start (the engine's API on
// the head, Ray's head), and the restart gate of the engine's unit (backoff after starts that never
// answered, a memory check on a unified-memory node, and a stop after too many). systemd 252
// (Debian 12) has neither RestartSteps= nor RestartMaxDelaySec= (systemd 254), so the gate is an
// ExecCondition= of the unit, and the watchdog a unit of its own beside the server.
import type { Runtime, WatchdogConfig } from "../../config";
import type { CompanionUnit } from "./host/files";
import { GATE_STATE_DIR, MANAGED_MARKER } from "../../config/hostPaths";
import { runtimeStrategy } from "./host/runtime";
import { systemdJoin, systemdText } from "./host/systemd";

/** The directory of a unit's gate: `failed` (starts in a row that never answered), `started`, `answered`, and `stopped` (the cause) once the gate stopped it. */
export function gateDir(unit: string): string {
    return `${GATE_STATE_DIR}/${unit}`;
}

/** The file that holds why the gate stopped `unit` (read by `npm run status`). */
export function gateStoppedFile(unit: string): string {
    return `${gateDir(unit)}/stopped`;
}

/** Each probe of the watchdog may take this long (curl --max-time). */
export const PROBE_MAX_SECONDS = 5;

/**
 * A line for the journal of the server `$unit` too (not only the watchdog's own): journald files a
 * message whose OBJECT_PID= names a process of a unit under that unit as well (`journalctl -u`
 * matches OBJECT_SYSTEMD_UNIT= of root's messages). Best effort: the message is on stdout anyway.
 */
export const JOURNAL_SAY = `say() { echo "$1"; printf 'MESSAGE=%s\\nSYSLOG_IDENTIFIER=spark-cluster-watchdog\\nPRIORITY=4\\nOBJECT_PID=%s\\n' "$1" "$2" | logger --journald 2>/dev/null || true; }`;

/**
 * The watchdog's loop (bash; its arguments: the server's unit, the health URL, the start seconds,
 * the unresponsive seconds, the gate's directory or `-`, `restart` or `wait`). Every few seconds (a sixth of the
 * unresponsive bound, 1-5 s) it reads the unit's state, invocation and start time from systemd, and
 * asks the URL with a bound. An answer marks the invocation answered (once, in the journal and in
 * the gate's directory). Without one: a server that answered before is restarted when its last
 * answer is older than the unresponsive bound; one that never answered, when the start seconds since
 * its start are over (with `restart`; with `wait` it is not judged until it answers). It restarts with `systemctl restart --no-block` (a stopped process too: systemd's
 * stop ends with SIGKILL after TimeoutStopSec, and SIGKILL ends a stopped process), after the
 * reason went to the journal, and judges nothing more of that invocation. The watchdog is PartOf the
 * server: that restart restarts it too.
 */
const WATCHDOG_LOOP = [
    'unit=$1 url=$2 start=$3 quiet=$4 dir=$5 unanswered=$6 inv="" answered=0 last=0 restarted=""',
    JOURNAL_SAY,
    'every=$(( quiet / 6 )); [ "$every" -ge 1 ] || every=1; [ "$every" -le 5 ] || every=5',
    'echo "watchdog: $unit is restarted when $url does not answer for $quiet s (from $start s after each start until its first answer)"',
    'while sleep "$every"; do ' +
        'state="" id="" enter=0 pid=0; ' +
        'while IFS="=" read -r k v; do case $k in ActiveState) state=$v;; InvocationID) id=$v;; ActiveEnterTimestampMonotonic) enter=$v;; MainPID) pid=$v;; esac; ' +
        'done < <(systemctl show -p ActiveState -p InvocationID -p ActiveEnterTimestampMonotonic -p MainPID "$unit.service"); ' +
        'if [ "$state" != active ] || [ -z "$id" ] || [ "$id" = "$restarted" ]; then inv=""; continue; fi; ' +
        'if [ "$id" != "$inv" ]; then inv=$id answered=0 last=0; fi; ' +
        "now=$(awk '{ printf \"%d\", $1 }' /proc/uptime); began=$(( enter / 1000000 )); " +
        `if curl -fsS -o /dev/null --max-time ${PROBE_MAX_SECONDS} "$url" 2>/dev/null; then ` +
        'if [ "$answered" = 0 ]; then echo "watchdog: $unit answered at $url, $(( now - began )) s after its start"; ' +
        '[ "$dir" = - ] || { mkdir -p "$dir" && echo "$id" > "$dir/answered"; }; fi; ' +
        "answered=1 last=$now; continue; fi; " +
        'if [ "$answered" = 1 ]; then deadline=$(( last + quiet )) why="did not answer for $quiet s"; ' +
        'elif [ "$unanswered" = restart ]; then deadline=$(( began + start )) why="has not answered in the $start s since $unit started"; ' +
        "else continue; fi; " +
        'if [ "$now" -ge "$deadline" ]; then say "watchdog: $url $why: restarting $unit" "$pid"; ' +
        'systemctl restart --no-block "$unit.service"; restarted=$id; fi; ' +
        "done",
].join("; ");

/** The watchdog's argv: the loop above and its arguments. */
export function watchdogArgv(
    unit: string,
    url: string,
    config: Pick<WatchdogConfig, "startSeconds" | "unresponsiveSeconds">,
    stateDir?: string,
    unanswered: "restart" | "wait" = "restart",
): string[] {
    return [
        "/bin/bash",
        "-c",
        WATCHDOG_LOOP,
        "watchdog",
        unit,
        url,
        String(config.startSeconds),
        String(config.unresponsiveSeconds),
        stateDir ?? "-",
        unanswered,
    ];
}

/** What a watchdog unit watches: the server's unit, its health URL, and what it is (Description=). */
export interface WatchdogSpec {
    /** The server's unit, without `.service`. */
    unit: string;
    /** The health URL (on the node: 127.0.0.1). */
    url: string;
    /** The unit's description. */
    what: string;
    /** Whether the server's unit has a restart gate, which the watchdog tells that a start answered. */
    gated: boolean;
    /**
     * `restart`: a server that has not answered when its start seconds are over is restarted;
     * `wait`: only one that answered is judged (Ray's head: a dashboard that never came up is no
     * sign of a hung GCS). Defaults to `restart`.
     */
    unanswered?: "restart" | "wait";
}

/**
 * A unit that watches a server (`unit`, without `.service`): runs `argv` on the host whatever the
 * runtime, is PartOf the server's unit (stopped and restarted with it) and starts after it. The
 * watchdogs and a headless rank's follower are such units.
 */
export function renderServerCompanionUnit(unit: string, what: string, argv: readonly string[]): string {
    return (
        [
            `# ${MANAGED_MARKER}`,
            "[Unit]",
            `Description=${systemdText(what)}`,
            `After=${unit}.service`,
            `PartOf=${unit}.service`,
            "StartLimitIntervalSec=0",
            "",
            "[Service]",
            "Type=simple",
            `ExecStart=${systemdJoin(argv)}`,
            "Restart=always",
            "RestartSec=5",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
        ].join("\n") + "\n"
    );
}

/** The watchdog unit of a server (it asks over the node's network). */
export function renderWatchdogUnit(spec: WatchdogSpec, config: WatchdogConfig): string {
    return renderServerCompanionUnit(
        spec.unit,
        spec.what,
        watchdogArgv(spec.unit, spec.url, config, spec.gated ? gateDir(spec.unit) : undefined, spec.unanswered),
    );
}

/**
 * The gate (bash; its arguments: the unit, its gate directory, the first backoff, the longest, the
 * most starts in a row that never answered, the memory wait in seconds, and the share of MemTotal
 * the engine asks for, 0 where the GPU has its own memory). It runs as the unit's ExecCondition=
 * before each start:
 * - a start whose previous start (this boot) did not answer counts one more failed start; one whose
 *   previous start answered (the watchdog or the follower wrote `answered`), or the first, none;
 * - after `limit` failed starts in a row it writes the cause (how many, and the last lines of the
 *   unit's journal) to `stopped` and exits 1: systemd skips the start, and Restart=always never
 *   restarts a unit whose condition failed (systemd's service_shall_restart). A later start (by hand,
 *   or `pulumi up --refresh`, which also clears the directory) begins a new series;
 * - before a restart after a failed start it sleeps the backoff (first × 2^(failed-1), at most max),
 *   and on a unified-memory node waits, at most `memwait` s, for MemAvailable to reach the engine's
 *   share of MemTotal, saying so; then it lets the engine start, whose own check decides. Before
 *   any other start it only says when MemAvailable is short.
 */
const GATE_SCRIPT = [
    "unit=$1 dir=$2 base=$3 max=$4 limit=$5 memwait=$6 share=$7",
    'mkdir -p "$dir"',
    'if [ -e "$dir/stopped" ]; then rm -f "$dir/stopped" "$dir/failed" "$dir/started"; ' +
        'echo "gate: $unit was stopped by this gate and is started again: a new series of at most $limit starts"; fi',
    "failed=0",
    'if [ -e "$dir/started" ] && [ ! -e "$dir/answered" ]; then failed=$(( $(cat "$dir/failed" 2>/dev/null || echo 0) + 1 )); fi',
    'rm -f "$dir/answered"; echo "$failed" > "$dir/failed"; touch "$dir/started"',
    'if [ "$failed" -ge "$limit" ]; then ' +
        '{ echo "$unit was stopped by its restart gate at $(date -u +%FT%TZ): $failed starts in a row never answered (restarts.maxFailedStarts: $limit)"; ' +
        "journalctl -u \"$unit.service\" -n 300 -o cat --no-pager 2>/dev/null | grep -v '^gate: ' | grep -v '^\\s*$' | tail -n 12; } > \"$dir/stopped.new\"; " +
        'mv -f "$dir/stopped.new" "$dir/stopped"; ' +
        "sed 's/^/gate: /' \"$dir/stopped\"; exit 1; fi",
    'if [ "$failed" -gt 0 ]; then ' +
        'delay=$base i=1; while [ "$i" -lt "$failed" ] && [ "$delay" -lt "$max" ]; do delay=$(( delay * 2 )) i=$(( i + 1 )); done; ' +
        '[ "$delay" -le "$max" ] || delay=$max; ' +
        'echo "gate: $failed start(s) of $unit in a row never answered: start $(( failed + 1 )) of at most $limit after a backoff of $delay s"; ' +
        'sleep "$delay"; fi',
    'if [ "$share" != 0 ]; then ' +
        'mem() { awk -v s="$share" \'/^MemTotal:/ { t = $2 } /^MemAvailable:/ { a = $2 } END { printf "%d %d", a, t * s }\' /proc/meminfo; }; ' +
        "read -r avail need < <(mem); waited=0; " +
        'if [ "$avail" -lt "$need" ] && [ "$failed" -gt 0 ]; then ' +
        'echo "gate: MemAvailable $(( avail / 1024 )) MiB is below the $(( need / 1024 )) MiB $unit asks for ($share of MemTotal): waiting at most $memwait s"; ' +
        'while [ "$avail" -lt "$need" ] && [ "$waited" -lt "$memwait" ]; do sleep 5; waited=$(( waited + 5 )); read -r avail need < <(mem); done; fi; ' +
        'if [ "$avail" -lt "$need" ]; then echo "gate: MemAvailable $(( avail / 1024 )) MiB is below the $(( need / 1024 )) MiB $unit asks for ($share of MemTotal)$( [ "$waited" = 0 ] || echo " after $waited s"): starting it anyway, its own check decides"; ' +
        'elif [ "$waited" -gt 0 ]; then echo "gate: MemAvailable $(( avail / 1024 )) MiB after $waited s: starting $unit"; fi; fi',
    "exit 0",
].join("; ");

/** The gate's argv (the unit's ExecCondition=). `memoryShare`: the share of MemTotal the engine asks for on a unified-memory node; 0 elsewhere. */
export function gateArgv(unit: string, config: WatchdogConfig, memoryShare: number): string[] {
    return [
        "/bin/bash",
        "-c",
        GATE_SCRIPT,
        "gate",
        unit,
        gateDir(unit),
        String(config.backoffSeconds),
        String(config.maxBackoffSeconds),
        String(config.maxFailedStarts),
        String(config.memoryWaitSeconds),
        String(memoryShare),
    ];
}

/** The seconds systemd allows a gated unit's start: its usual 900 plus the longest backoff and the memory wait. */
export function gatedStartTimeoutSeconds(config: WatchdogConfig): number {
    return 900 + config.maxBackoffSeconds + config.memoryWaitSeconds;
}

/** What a headless rank's follower also watches: its engine process (the runtime's PID), frozen for at most `frozenSeconds`; and the unit's gate, told when the rank joined. */
export interface FollowWatch {
    /** Shell printing the engine process's PID (RuntimeStrategy.enginePid). */
    enginePid: string;
    frozenSeconds: number;
    gateDir: string;
}

/**
 * Everything the watchdog and the gate add to one server of an engine, for its renderer to put in
 * place: the unit's ExecCondition= and start timeout, the unit step's companion (rank 0's watchdog
 * unit, or its removal) and the gate's directory it clears, what the delete removes, and a headless
 * rank's follower watch. With the watchdog off (`config` undefined) only the removals remain.
 */
export interface ServerGuard {
    condition?: string[];
    /** The watchdog unit the server's unit starts with it (`Wants=`), when it has one. */
    wants?: string[];
    startTimeoutSeconds?: number;
    companions: CompanionUnit[];
    clearDirs: string[];
    removeUnits: string[];
    removeDirs: string[];
    follow?: FollowWatch;
}

/** The {@link ServerGuard} of an engine's server: `health` (rank 0) is the URL its watchdog asks; `memoryShare` the share of MemTotal it asks for (0: not unified memory). */
export function engineGuard(spec: {
    unit: string;
    watchdogUnit: string;
    what: string;
    health?: string;
    memoryShare: number;
    enginePid: string;
    config?: WatchdogConfig;
}): ServerGuard {
    const dir = gateDir(spec.unit);
    const removals = { removeUnits: [spec.watchdogUnit], removeDirs: [dir] };
    const config = spec.config;
    if (config === undefined) return { companions: [{ name: spec.watchdogUnit }], clearDirs: [], ...removals };
    return {
        condition: gateArgv(spec.unit, config, spec.memoryShare),
        ...(spec.health !== undefined ? { wants: [`${spec.watchdogUnit}.service`] } : {}),
        startTimeoutSeconds: gatedStartTimeoutSeconds(config),
        companions: [
            {
                name: spec.watchdogUnit,
                content:
                    spec.health === undefined ? undefined : renderWatchdogUnit({ unit: spec.unit, url: spec.health, what: spec.what, gated: true }, config),
            },
        ],
        clearDirs: [dir],
        ...removals,
        ...(spec.health === undefined ? { follow: { enginePid: spec.enginePid, frozenSeconds: config.unresponsiveSeconds, gateDir: dir } } : {}),
    };
}

/**
 * The {@link ServerGuard} of one server of an engine (vLLM, SGLang), from the engine's names (its
 * label, unit, watchdog unit and container) and the server's settings: rank 0 has a watchdog on
 * its API's /health; on unified memory the gate checks the engine's share of MemTotal.
 */
export function servingGuard(
    engine: { label: string; unit: string; watchdogUnit: string; container: string },
    server: {
        apiPort: number;
        gpuMemoryUtilization: number;
        multiNode?: { rank: number };
        unifiedMemory?: boolean;
        watchdog?: WatchdogConfig;
    },
    runtime: Runtime,
): ServerGuard {
    const rank = server.multiNode?.rank ?? 0;
    return engineGuard({
        unit: engine.unit,
        watchdogUnit: engine.watchdogUnit,
        what: `spark-cluster: restarts ${engine.label} when its API stops answering /health`,
        health: rank === 0 ? `http://127.0.0.1:${server.apiPort}/health` : undefined,
        memoryShare: server.unifiedMemory ? server.gpuMemoryUtilization : 0,
        enginePid: runtimeStrategy(runtime).enginePid(engine.container, engine.unit),
        config: server.watchdog,
    });
}
