// Installing and removing managed files and systemd units on a host. Each
// script probes, acts only when something differs, and verifies the result.
import { unitPath } from "../../../config/hostPaths";
import { HOST_LIB } from "./lib";
import { bashScript, heredoc, shellQuote } from "./shell";
import { journalTailLine } from "./journal";

export interface ManagedFile {
    path: string;
    mode: "600" | "644";
    content: string;
}

function installLines(files: readonly ManagedFile[]): string[] {
    return files.map((file) => heredoc(`sc_install_file ${shellQuote(file.path)} ${file.mode}`, file.content));
}

/** Writes files whose content is in the script itself (nothing secret). */
export function installFilesScript(files: readonly ManagedFile[]): string {
    return bashScript([HOST_LIB, ...installLines(files)]);
}

/**
 * Writes one file from the command's stdin (used for secrets: they stay out of
 * the script and out of its output). When it changed and `restartUnit` is
 * running, restarts it so the process reads the new values; a headless rank's (`with-head`) is
 * left running: its head's secrets change with it and restart the head, whose follower then
 * restarts the rank (see {@link UnitRestart}). `clearDirs` (the unit's restart gate's state) are
 * emptied before that restart, as the unit step does: a restart `up` asks for begins a new series
 * of starts, so the gate cannot skip it for the starts before. The unit must then be active within
 * 60 s (a skipped start leaves it inactive, with nothing else to say so), else it is started once
 * more, and then the step fails with the unit's result and its last log lines.
 */
export function installFileFromStdinScript(
    path: string,
    mode: "600" | "644",
    restartUnit?: string,
    restart: UnitRestart = "now",
    clearDirs: readonly string[] = [],
): string {
    const whenChanged = (unit: string): string[] =>
        restart === "now"
            ? [
                  ...clearDirs.map((dir) => `  rm -rf ${shellQuote(dir)}`),
                  `  systemctl restart ${unit}.service`,
                  `  if ! sc_wait 60 "${unit} to be active" systemctl is-active --quiet ${unit}.service; then`,
                  // A start can fail before its gate ran (systemd: "Failed at step CGROUP spawning",
                  // the old run's cgroup still going): exit 219, which systemd reads as the
                  // condition skipping the start. The gate is cleared, so one more start is safe.
                  `    sc_log "${unit} did not start again after the new ${path} ($(systemctl show -p Result --value ${unit}.service)): starting it once more"`,
                  `    systemctl start ${unit}.service`,
                  `    if ! sc_wait 60 "${unit} to be active" systemctl is-active --quiet ${unit}.service; then`,
                  `      sc_log "${unit} is not running ($(systemctl show -p Result --value ${unit}.service)); last log lines:"`,
                  `      ${journalTailLine(unit, 40)}`,
                  `      exit 1`,
                  `    fi`,
                  `  fi`,
                  `  echo "restarted ${unit} for the new ${path}"`,
              ]
            : [`  sc_log "${unit} reads the new ${path} when its head's engine restarts next (its follower restarts it)"`];
    return bashScript([
        HOST_LIB,
        `result=$(sc_install_file ${shellQuote(path)} ${mode})`,
        ...(restartUnit === undefined
            ? []
            : [`if [ "\${result%% *}" = changed ] && systemctl is-active --quiet ${restartUnit}.service; then`, ...whenChanged(restartUnit), `fi`]),
        `echo "installed ${path}"`,
    ]);
}

/** Removes files we wrote, restoring any we replaced, then empty directories of ours. */
export function removeFilesScript(paths: readonly string[], emptyDirs: readonly string[] = []): string {
    return bashScript([
        HOST_LIB,
        ...paths.map((path) => `sc_remove_file ${shellQuote(path)}`),
        ...emptyDirs.map((dir) => `rmdir ${shellQuote(dir)} 2>/dev/null || true`),
        "sc_cleanup_state",
    ]);
}

/** A unit that goes with a server's unit (its watchdog): installed after it, or removed (no `content`). */
export interface CompanionUnit {
    name: string;
    /** The rendered unit; undefined: the unit is not wanted (removed where an earlier up left it). */
    content?: string;
}

/**
 * When a running unit whose file changed restarts: `now`, or `with-head` (a headless rank of a
 * multi-node engine): not here. Its head's unit changes too (it carries a hash of its ranks'
 * units) and restarts after this step; the rank's follower then restarts the rank, from its new
 * file, into the head's new engine. Restarting it here as well ended the engine the head was
 * forming and started a round of refused joins, each a failed start for the rank's gate.
 */
export type UnitRestart = "now" | "with-head";

/** Lines that install `name`, enable it, (re)start it when it changed (see {@link UnitRestart}) or is not running, and check it stays active. */
export function unitInstallLines(name: string, content: string, beforeStart: readonly string[] = [], restart: UnitRestart = "now"): string[] {
    const path = unitPath(name);
    const whenChanged =
        restart === "now"
            ? [`if [ "\${result%% *}" = changed ] || ! systemctl is-active --quiet ${name}.service; then`]
            : [
                  `if [ "\${result%% *}" = changed ] && systemctl is-active --quiet ${name}.service; then`,
                  `  sc_log "${name} changed: it restarts, from the new file, when its head's engine restarts next (its follower restarts it)"`,
                  `elif ! systemctl is-active --quiet ${name}.service; then`,
              ];
    return [
        heredoc(`result=$(sc_install_file ${path} 644`, content) + "\n)",
        `echo "$result"`,
        `systemctl daemon-reload`,
        `systemctl enable --quiet ${name}.service`,
        ...beforeStart,
        ...whenChanged,
        `  sc_log "restarting ${name}"`,
        `  systemctl restart ${name}.service`,
        `fi`,
        `if ! sc_wait 60 "${name} to be active" systemctl is-active --quiet ${name}.service; then`,
        `  sc_log "${name} is not running; last log lines:"`,
        `  ${journalTailLine(name, 40)}`,
        `  exit 1`,
        `fi`,
        `sc_log "${name} active (pid $(systemctl show -p MainPID --value ${name}.service))"`,
    ];
}

/** Lines that stop, disable and remove a unit of ours (nothing when it is not there). */
export function unitRemoveLines(name: string): string[] {
    return [
        `systemctl disable --now ${name}.service 2>/dev/null || true`,
        `sc_remove_file ${unitPath(name)}`,
        `systemctl daemon-reload`,
        `systemctl reset-failed ${name}.service 2>/dev/null || true`,
    ];
}

/**
 * Installs a unit, enables it, and (re)starts it when the unit changed (see `restart`) or it
 * is not running; then verifies it stays active. `companions` (a watchdog) follow it, each
 * installed the same way or removed; `clearDirs` (the restart gate's state) are emptied before
 * the unit is (re)started, so an apply starts a new series of starts.
 */
export function installUnitScript(
    name: string,
    content: string,
    companions: readonly CompanionUnit[] = [],
    clearDirs: readonly string[] = [],
    restart: UnitRestart = "now",
): string {
    return bashScript([
        HOST_LIB,
        ...unitInstallLines(
            name,
            content,
            clearDirs.map((dir) => `rm -rf ${shellQuote(dir)}`),
            restart,
        ),
        ...companions.flatMap((c) => (c.content === undefined ? unitRemoveLines(c.name) : unitInstallLines(c.name, c.content))),
    ]);
}

/** Lines that remove a directory of ours and its parents that are left empty. */
export function removeDirLines(dir: string): string[] {
    return [`rm -rf ${shellQuote(dir)}`, `rmdir -p --ignore-fail-on-non-empty ${shellQuote(dir.replace(/\/[^/]+\/?$/, ""))} 2>/dev/null || true`];
}

/** Stops, disables and removes a unit of ours, its companions first, and the directories given (the restart gate's state). */
export function removeUnitScript(name: string, companions: readonly string[] = [], dirs: readonly string[] = []): string {
    return bashScript([HOST_LIB, ...companions.flatMap(unitRemoveLines), ...unitRemoveLines(name), ...dirs.flatMap(removeDirLines), "sc_cleanup_state"]);
}
