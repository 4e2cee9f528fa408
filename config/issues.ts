// One problem in the stack config, how it is shown to the user, and the error
// that carries every problem found at once. Secret values are never shown.
import { CONFIG_NAMESPACE } from "./namespace";

/** One problem in the stack config. */
export interface ConfigIssue {
    /** The key path below the namespace, e.g. `nodes[1].ssh.port` or `model.tensorParallel`. */
    path: string;
    /** What is wrong, in words a person can act on. */
    message: string;
    /** The offending value as it may be shown: never the plaintext of a secret. */
    got: string;
    /** A right value (or the command that sets one). */
    example: string;
}

/** Renders an issue as the one line the user sees. */
export function renderIssue(issue: ConfigIssue): string {
    return `${CONFIG_NAMESPACE}:${issue.path}: ${issue.message} (got ${issue.got}). Example: ${issue.example}`;
}

/** Thrown by {@link parseConfig}; lists every problem found, one line per issue. */
export class ConfigError extends Error {
    readonly issues: ConfigIssue[];

    constructor(issues: ConfigIssue[]) {
        super(issues.map(renderIssue).join("\n"));
        this.name = "ConfigError";
        this.issues = issues;
    }
}

/** Describes a plain value for an issue: JSON, shortened to one readable fragment. */
export function describeValue(value: unknown): string {
    if (value === undefined) {
        return "nothing";
    }
    const text = JSON.stringify(value) ?? String(value);
    return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** Describes a secret value for an issue without revealing it: only its type or its length. */
export function describeSecret(value: unknown): string {
    if (value === undefined) {
        return "nothing";
    }
    if (typeof value === "string") {
        return `a value of ${value.length} characters`;
    }
    if (value === null) {
        return "null";
    }
    return Array.isArray(value) ? "a list" : `a ${typeof value}`;
}

/** Formats a key path: `nodes[1].ssh.port`. */
export function formatPath(path: readonly PropertyKey[]): string {
    let out = "";
    for (const segment of path) {
        if (typeof segment === "number") {
            out += `[${segment}]`;
        } else {
            const key = String(segment);
            out += /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${out === "" ? "" : "."}${key}` : `[${JSON.stringify(key)}]`;
        }
    }
    return out;
}
