// Installing and removing managed files and systemd units on a host. Each
// script probes, acts only when something differs, and verifies the result.
import { unitPath } from "../../../config/hostPaths";
import { HOST_LIB } from "./lib";
import { bashScript, heredoc, shellQuote } from "./shell";

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
 * running, restarts it so the process reads the new values.
 */
export function installFileFromStdinScript(path: string, mode: "600" | "644", restartUnit?: string): string {
    return bashScript([
        HOST_LIB,
        `result=$(sc_install_file ${shellQuote(path)} ${mode})`,
        ...(restartUnit
            ? [
                  `if [ "\${result%% *}" = changed ] && systemctl is-active --quiet ${restartUnit}.service; then`,
                  `  systemctl restart ${restartUnit}.service`,
                  `  echo "restarted ${restartUnit} for the new ${path}"`,
                  `fi`,
              ]
            : []),
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

/**
 * Installs a unit, enables it, and (re)starts it when the unit changed or it
 * is not running; then verifies it stays active.
 */
export function installUnitScript(name: string, content: string): string {
    const path = unitPath(name);
    return bashScript([
        HOST_LIB,
        heredoc(`result=$(sc_install_file ${path} 644`, content) + "\n)",
        `echo "$result"`,
        `systemctl daemon-reload`,
        `systemctl enable --quiet ${name}.service`,
        `if [ "\${result%% *}" = changed ] || ! systemctl is-active --quiet ${name}.service; then`,
        `  sc_log "restarting ${name}"`,
        `  systemctl restart ${name}.service`,
        `fi`,
        `if ! sc_wait 60 "${name} to be active" systemctl is-active --quiet ${name}.service; then`,
        `  sc_log "${name} is not running; last log lines:"`,
        `  journalctl -u ${name}.service -n 40 --no-pager || true`,
        `  exit 1`,
        `fi`,
        `sc_log "${name} active (pid $(systemctl show -p MainPID --value ${name}.service))"`,
    ]);
}

/** Stops, disables and removes a unit of ours. */
export function removeUnitScript(name: string): string {
    return bashScript([
        HOST_LIB,
        `systemctl disable --now ${name}.service 2>/dev/null || true`,
        `sc_remove_file ${unitPath(name)}`,
        `systemctl daemon-reload`,
        `systemctl reset-failed ${name}.service 2>/dev/null || true`,
        "sc_cleanup_state",
    ]);
}
