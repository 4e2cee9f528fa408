// systemd units for Ray and vLLM: restart on failure, start on boot, logs in
// journald, stopped and removed by `pulumi destroy`.
import type { Runtime } from "../../../config";
import { MANAGED_MARKER } from "../../../config/hostPaths";
import { runtimeStrategy } from "./runtime";

export interface UnitSpec {
    /** Unit name without `.service`, e.g. `spark-cluster-ray`. */
    name: string;
    description: string;
    runtime: Runtime;
    container: string;
    argv: string[];
    envFiles: string[];
    /** Host directories a container sees at the same path, read-only. Defaults to none. */
    readOnlyMounts?: string[];
    /** Extra environment for the process (not secrets: those go in env files). */
    environment?: Record<string, string>;
    /** A command that decides whether the unit starts (ExecCondition=: exit 1-254 skips the start, and Restart= does not restart it). Defaults to none. */
    condition?: string[];
    /** Seconds systemd allows a start (the condition's waits included). Defaults to 900. */
    startTimeoutSeconds?: number;
    /** Commands run before start (bounded waits), as argv. */
    preStart?: string[][];
    /** Content hashes of inputs the process reads at start: a change restarts the unit. */
    inputs?: Record<string, string>;
    after?: string[];
    /** Units started with this one (`Wants=`: its watchdog, which is PartOf it). Defaults to none. */
    wants?: string[];
    /** Units that cannot run beside this one (`Conflicts=`: starting either stops the other). Defaults to none. */
    conflicts?: string[];
}

/**
 * Quotes argv for an Exec*= line: systemd splits words itself, expands `$VAR`
 * and `%` specifiers, so those are escaped (`$$`, `%%`) and odd words quoted.
 */
export function systemdJoin(argv: readonly string[]): string {
    return argv
        .map((word) => (/^[A-Za-z0-9_@+=:,./-]+$/.test(word) ? word : `"${word.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`))
        .map((word) => word.replace(/%/g, "%%").replace(/\$/g, "$$$$"))
        .join(" ");
}

/**
 * Text for a human-readable unit setting (Description=): systemd expands `%` specifiers there and
 * reads a trailing `\` as a line continuation, so `%` is doubled and anything outside printable
 * ASCII becomes `?`. (Values that must arrive exactly go through Exec argv or env files instead.)
 */
export function systemdText(text: string): string {
    return text
        .replace(/[^\x20-\x7e]/g, "?")
        .replace(/\\/g, "/")
        .replace(/%/g, "%%");
}

/** The unit file. Only ExecStart (and the container's stop/cleanup) depend on the runtime. */
export function renderUnit(spec: UnitSpec): string {
    const runtime = runtimeStrategy(spec.runtime);
    const unit = runtime.unit(spec.container);
    const after = ["network-online.target", ...unit.after, ...(spec.after ?? [])];
    const lines = [
        `# ${MANAGED_MARKER}`,
        ...Object.entries(spec.inputs ?? {}).map(([what, hash]) => `# input ${what}: ${hash}`),
        "[Unit]",
        `Description=${systemdText(spec.description)}`,
        `Wants=network-online.target`,
        `After=${after.join(" ")}`,
        ...unit.requires.map((required) => `Requires=${required}`),
        ...(spec.conflicts ?? []).map((unitName) => `Conflicts=${unitName}`),
        ...(spec.wants ?? []).map((unitName) => `Wants=${unitName}`),
        "StartLimitIntervalSec=0",
        "",
        "[Service]",
        "Type=simple",
        ...(unit.systemdReadsEnvFiles ? spec.envFiles.map((file) => `EnvironmentFile=${file}`) : []),
        ...Object.entries(spec.environment ?? {}).map(
            ([k, v]) => `Environment="${`${k}=${v}`.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/%/g, "%%")}"`,
        ),
        ...(spec.condition ? [`ExecCondition=${systemdJoin(spec.condition)}`] : []),
        ...unit.preStart,
        ...(spec.preStart ?? []).map((argv) => `ExecStartPre=${systemdJoin(argv)}`),
        `ExecStart=${systemdJoin(
            runtime.execStart({
                container: spec.container,
                argv: spec.argv,
                envFiles: spec.envFiles,
                environment: spec.environment ?? {},
                readOnlyMounts: spec.readOnlyMounts,
            }),
        )}`,
        ...unit.stop,
        // Always: vLLM exits when its engine dies (a lost Ray actor or --headless peer), and
        // the cluster heals by restarting it, however it ended. No start limit (StartLimitIntervalSec=0):
        // an engine's unit bounds its restarts with its gate instead (`condition`, render/watchdog.ts).
        "Restart=always",
        "RestartSec=5",
        `TimeoutStartSec=${spec.startTimeoutSeconds ?? 900}`,
        // Bounded stop: `ray start --block` can sit out SIGTERM; destroy must not wait 90 s per node.
        "TimeoutStopSec=30",
        "KillMode=mixed",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ];
    return lines.join("\n") + "\n";
}
