// `npm run logs`: our units' journals on each node, and the model sync's records. Pure parts only:
// the options and the script a node runs as root; ops/cli.ts runs it over SSH, node by node.
import type { EngineOps } from "../components/render/engine";
import { bashScript, shellQuote } from "../components/render/host/shell";
import { SCRUB_PY } from "../components/render/host/journal";
import { MODEL_SYNC_STATE_DIR } from "../components/render/modelSync";
import { UNITS } from "../config/hostPaths";

/**
 * The units whose journals `logs` shows: the engine's (model.engine), a rank 1+'s follower and the
 * head's watchdog of it, Ray and its watchdog, Open WebUI and its watchdog, and the metrics units
 * (journalctl shows the ones a node has).
 */
export function logUnits(engine: EngineOps): string[] {
    return [
        engine.unit,
        engine.followUnit,
        engine.watchdogUnit,
        UNITS.ray,
        UNITS.rayWatchdog,
        UNITS.openWebui,
        UNITS.openWebuiWatchdog,
        UNITS.nodeExporter,
        UNITS.prometheus,
    ];
}

export interface LogsOptions {
    /** Journal lines per node (journalctl -n). */
    lines: number;
    /** Keep printing new lines until interrupted (journalctl -f). */
    follow: boolean;
    /** Only lines since this time, in journalctl's --since syntax (e.g. "10 min ago"). Defaults to none. */
    since?: string;
}

export const LOGS_DEFAULTS: LogsOptions = { lines: 200, follow: false };

/** Why `options` cannot be used, or undefined. */
export function logsOptionsProblem(options: LogsOptions): string | undefined {
    if (!Number.isInteger(options.lines) || options.lines < 1 || options.lines > 100_000)
        return `--lines must be a whole number in 1..100000 (got ${options.lines})`;
    if (options.since !== undefined && !/^[A-Za-z0-9 :+-]{1,64}$/.test(options.since))
        return `--since must be a journalctl time such as "10 min ago" or "2026-11-25 16:00" (got ${JSON.stringify(options.since)})`;
    return undefined;
}

/**
 * The script a node runs as root: the model sync's records (it runs as steps of `up`, not as a
 * unit: what each node holds and when it was synced), then the journal of our units, merged in
 * time order, scrubbed of the stack's secrets (components/render/host/journal.ts). With `follow`,
 * the journal is followed until the SSH session ends (Ctrl-C here).
 */
export function nodeLogsScript(options: LogsOptions, engine: EngineOps): string {
    const problem = logsOptionsProblem(options);
    if (problem) throw new Error(problem);
    const units = logUnits(engine)
        .map((u) => `-u ${u}.service`)
        .join(" ");
    const since = options.since === undefined ? "" : ` --since ${shellQuote(options.since)}`;
    // Every line scrubbed of the stack's secrets found on the node, as every journal tail we print.
    const scrub = shellQuote(SCRUB_PY);
    return bashScript([
        `if [ -d ${MODEL_SYNC_STATE_DIR} ]; then`,
        `  echo "-- model sync records (${MODEL_SYNC_STATE_DIR}):"`,
        `  find ${MODEL_SYNC_STATE_DIR} -maxdepth 2 \\( -name '*.manifest' -o -name '*.log' -o -path '*.done/*' \\) -printf '%TY-%Tm-%Td %TH:%TM  %P\\n' 2>/dev/null | LC_ALL=C sort || true`,
        `fi`,
        `echo "-- journal of ${logUnits(engine).join(", ")}:"`,
        ...(options.follow
            ? [
                  // Follows until the SSH session ends: its stdin closes, and the journal reader is stopped by its id.
                  // (Its scrubber reads what journalctl writes and ends when journalctl does.)
                  `journalctl --no-pager -o short-iso ${units} -n ${options.lines}${since} -f > >(python3 -u -c ${scrub}) &`,
                  `reader=$!`,
                  `cat >/dev/null || true`,
                  `kill "$reader" 2>/dev/null || true`,
              ]
            : [`journalctl --no-pager -o short-iso ${units} -n ${options.lines}${since} | python3 -c ${scrub}`]),
    ]);
}
