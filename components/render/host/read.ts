// Read-back scripts: what a refresh runs on a host to see whether it still is
// as `pulumi up` left it. Each prints one line per difference, naming what
// differs and how, and nothing when the host is as we left it; it changes
// nothing. Our provider runs them on `pulumi refresh` (and `up` /
// `preview --refresh`) and records what they print as the command's `drift`,
// which the next `up` repairs by running the command again (docs/operations.md,
// "Drift").
import { createHash } from "node:crypto";
import { unitPath } from "../../../config/hostPaths";
import type { CompanionUnit, ManagedFile } from "./files";
import { bashScript, heredocBody, shellQuote } from "./shell";

/** Bash functions every read script starts with (kept apart from HOST_LIB: create scripts stay as they are). */
export const READ_LIB = String.raw`
# sc_file_drift PATH MODE SHA256: our file missing, edited or with another mode.
sc_file_drift() {
  local path=$1 mode=$2 sum=$3
  if [ ! -e "$path" ]; then echo "$path: missing"; return 0; fi
  [ "$(sha256sum < "$path" | cut -d' ' -f1)" = "$sum" ] || echo "$path: edited (its content is not what pulumi up wrote)"
  [ "$(stat -c %a "$path")" = "$mode" ] || echo "$path: mode $(stat -c %a "$path"), want $mode"
}
# sc_present_drift PATH MODE: a file whose content we cannot hash here (secrets) missing or with another mode.
sc_present_drift() {
  local path=$1 mode=$2
  if [ ! -e "$path" ]; then echo "$path: missing"; return 0; fi
  [ "$(stat -c %a "$path")" = "$mode" ] || echo "$path: mode $(stat -c %a "$path"), want $mode"
}
# sc_unit_drift NAME [active]: our unit disabled, or (with "active") not running.
sc_unit_drift() {
  local unit=$1.service state
  state=$(systemctl is-enabled "$unit" 2>/dev/null) || true
  [ "$state" = enabled ] || echo "$unit: ${"$"}{state:-not installed}, want enabled"
  if [ "${"$"}{2:-}" = active ]; then
    state=$(systemctl is-active "$unit" 2>/dev/null) || true
    [ "$state" = active ] || echo "$unit: ${"$"}{state:-unknown}, want active"
  fi
}
`;

/** The line that checks one file of ours against what `sc_install_file` wrote from its heredoc. */
export function fileDriftLine(path: string, mode: "600" | "644", content: string): string {
    const sum = createHash("sha256").update(heredocBody(content)).digest("hex");
    return `sc_file_drift ${shellQuote(path)} ${mode} ${sum}`;
}

/** The line that checks a unit of ours is enabled and, unless `enabledOnly`, running. */
export function unitDriftLine(name: string, enabledOnly = false): string {
    return `sc_unit_drift ${shellQuote(name)}${enabledOnly ? "" : " active"}`;
}

/** A read script: strict mode, the read functions, then the checks. */
export function readScript(lines: readonly string[]): string {
    return bashScript([READ_LIB, ...lines]);
}

/** Reads back files written by `installFilesScript`. */
export function filesReadScript(files: readonly ManagedFile[]): string {
    return readScript(files.map((f) => fileDriftLine(f.path, f.mode, f.content)));
}

/** Reads back a unit installed by `installUnitScript`: its file, enabled, running; and so each companion it installed (a watchdog). */
export function unitReadScript(name: string, content: string, companions: readonly CompanionUnit[] = []): string {
    return readScript([
        fileDriftLine(unitPath(name), "644", content),
        unitDriftLine(name),
        ...companions.flatMap((c) => (c.content === undefined ? [] : [fileDriftLine(unitPath(c.name), "644", c.content), unitDriftLine(c.name)])),
    ]);
}

/** Reads back a file written from stdin by `installFileFromStdinScript` (a secret: present, root-only, not hashed). */
export function secretFileReadScript(path: string, mode: "600" | "644"): string {
    return readScript([`sc_present_drift ${shellQuote(path)} ${mode}`]);
}
