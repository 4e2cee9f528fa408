// `npm run doctor`: the first-contact facts of every node of a stack, read only, before (or after)
// the first `up`: the same findings the cluster's node check stops `up` on
// (components/render/firstContactFindings.ts, nodeCheck.ts), plus how the login user becomes root,
// as a table per node with a verdict and the fix of each finding. Pure parts only: ops/cli.ts
// does the I/O (Pulumi CLI, SSH).
import type { Finding, FindingLevel } from "../components/render/firstContactFindings";

/** What doctor learned of one node before judging its facts: how it logged in, or why it could not. */
export interface DoctorLogin {
    node: string;
    /** `user@host:port`. */
    target: string;
    /** The host key's fingerprint and whether it is the pinned one, or seen for the first time. */
    hostKey?: string;
    /** How the login user becomes root (`root`, `sudo without a password`, ...). */
    rootAccess?: string;
    /** Why doctor could not read this node (SSH, root): a finding that blocks. */
    error?: string;
}

const ORDER: Record<FindingLevel, number> = { block: 0, warn: 1, note: 2, ok: 3 };

/** The login findings: one per node (reached as root, or why not). */
export function loginFindings(logins: readonly DoctorLogin[]): Finding[] {
    return logins.map((l) =>
        l.error !== undefined
            ? {
                  node: l.node,
                  topic: "login",
                  level: "block",
                  what: `${l.target}: ${l.error}`,
                  fix: "the error says what is missing (nodes[].ssh.user, the key, spark-cluster:sudoPassword, passwordless sudo)",
              }
            : { node: l.node, topic: "login", level: "ok", what: `${l.target}, ${l.rootAccess ?? "root"}${l.hostKey ? `; host key ${l.hostKey}` : ""}` },
    );
}

/** The verdict: `ready` (nothing blocks; warnings allowed) or `blocked`. */
export function doctorVerdict(findings: readonly Finding[]): "ready" | "blocked" {
    return findings.some((f) => f.level === "block") ? "blocked" : "ready";
}

/** 0: nothing blocks `up` (warnings and notes allowed); 1: something does. (2: doctor could not run: usage, config.) */
export function doctorExitCode(findings: readonly Finding[]): number {
    return doctorVerdict(findings) === "ready" ? 0 : 1;
}

/** The table: per node, its findings worst first, each with its fix; then the verdict. */
export function renderDoctor(stack: string, nodes: readonly string[], findings: readonly Finding[]): string {
    const lines: string[] = [`doctor: stack ${stack}, ${nodes.length} node${nodes.length === 1 ? "" : "s"}`];
    const groups = [...nodes, ...[...new Set(findings.map((f) => f.node))].filter((n) => !nodes.includes(n))];
    for (const node of groups) {
        const own = findings.filter((f) => f.node === node).sort((a, b) => ORDER[a.level] - ORDER[b.level]);
        if (own.length === 0) continue;
        const worst = own[0].level;
        lines.push("", `${node}: ${worst === "block" ? "BLOCKED" : worst === "warn" ? "ready, with warnings" : "ready"}`);
        const width = Math.max(...own.map((f) => f.topic.length));
        for (const f of own) {
            lines.push(`  ${f.level.toUpperCase().padEnd(5)} ${f.topic.padEnd(width)}  ${f.what}`);
            if (f.fix !== undefined && f.level !== "ok") lines.push(`  ${"".padEnd(5)} ${"".padEnd(width)}  fix: ${f.fix}`);
        }
    }
    const blocks = findings.filter((f) => f.level === "block").length;
    const warns = findings.filter((f) => f.level === "warn").length;
    lines.push(
        "",
        blocks > 0
            ? `blocked: ${blocks} finding${blocks === 1 ? "" : "s"} would stop pulumi up before it changes anything (fix them, then run doctor again)`
            : `ready for pulumi up${warns > 0 ? ` (${warns} warning${warns === 1 ? "" : "s"})` : ""}`,
    );
    return lines.join("\n");
}

/** The `--json` document. */
export function doctorJson(stack: string, logins: readonly DoctorLogin[], findings: readonly Finding[]): string {
    return JSON.stringify({ stack, verdict: doctorVerdict(findings), logins, findings }, null, 2);
}
