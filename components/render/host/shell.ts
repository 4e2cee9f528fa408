// The one way this project builds shell: every user value goes through
// shellQuote, every script starts with `set -euo pipefail`, and files are
// written from quoted heredocs whose delimiter cannot occur in the content.
import { createHash } from "node:crypto";

/** Quotes one word for POSIX sh: `it's` → `'it'"'"'s'`. */
export function shellQuote(word: string): string {
    if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) {
        return word;
    }
    return `'${word.replace(/'/g, `'"'"'`)}'`;
}

/** Joins argv into one safely quoted command line. */
export function shellJoin(argv: readonly string[]): string {
    return argv.map(shellQuote).join(" ");
}

/** A bash script: strict mode, then the given lines. */
export function bashScript(lines: readonly string[]): string {
    return ["set -euo pipefail", ...lines].join("\n") + "\n";
}

/** How a step becomes root: it logs in as root, or uses sudo without or with a password. */
export type RootAccess = "root" | "sudo" | "sudo-password";

/**
 * The line our provider puts after the sudo password on a script's stdin
 * (toolchain/plugins: connection.sudoPassword, SudoStdinMarker).
 */
export const SUDO_STDIN_MARKER = "SPARK_CLUSTER_STDIN";

/**
 * With a sudo password, the root script first skips what stdin holds up to the marker line: the
 * password's line when sudo asked for none (passwordless sudo), nothing but the marker when it
 * read it. The script's own stdin follows, untouched. Bounded by stdin's length (no wait).
 */
export const SUDO_STDIN_SKIP = `while IFS= read -r sc_stdin_line && [ "$sc_stdin_line" != ${SUDO_STDIN_MARKER} ]; do :; done; unset sc_stdin_line\n`;

/** How a login user becomes root: root itself, sudo, or sudo that asks for a password. */
export function rootAccessOf(sshUser: string, sudoPassword: boolean): RootAccess {
    return sshUser === "root" ? "root" : sudoPassword ? "sudo-password" : "sudo";
}

/**
 * The command a step runs: the script handed to bash on stdin-free `bash -c`, as root
 * (through `sudo -n` when the SSH user is not root; through `sudo -S`, which reads the password
 * from stdin's first line, when its sudo asks for one: `-k` makes it ask whatever it cached).
 */
export function remoteCommand(script: string, sshUser: string, access: RootAccess = rootAccessOf(sshUser, false)): string {
    if (access === "sudo-password") return `sudo -k -S -p '' bash -c ${shellQuote(SUDO_STDIN_SKIP + script)}`;
    const bash = `bash -c ${shellQuote(script)}`;
    return access === "root" ? bash : `sudo -n ${bash}`;
}

/** Short, stable content hash used in unit comments and heredoc delimiters. */
export function contentHash(text: string): string {
    return createHash("sha256").update(text).digest("hex").slice(0, 16);
}

/** The heredoc delimiter: fixed, so a changed file shows in a preview diff as its changed lines only. */
export const HEREDOC_DELIMITER = "SPARK_CLUSTER_EOF";
/** The delimiter's prefix for content that has {@link HEREDOC_DELIMITER} as a line: the content's hash follows. */
export const HEREDOC_FALLBACK_PREFIX = "SPARK_CLUSTER_HEREDOC_";

/**
 * A heredoc that feeds `content` verbatim to `command` (no expansion inside).
 * The delimiter is {@link HEREDOC_DELIMITER}, or, for content that has that line,
 * {@link HEREDOC_FALLBACK_PREFIX} with the content's hash. Throws if the content
 * contains that one too (it would end the heredoc early).
 */
export function heredoc(command: string, content: string): string {
    const lines = content.split("\n");
    const delimiter = lines.includes(HEREDOC_DELIMITER) ? `${HEREDOC_FALLBACK_PREFIX}${contentHash(content)}` : HEREDOC_DELIMITER;
    if (lines.includes(delimiter)) {
        throw new Error(`content contains its heredoc delimiter ${delimiter}`);
    }
    return `${command} <<'${delimiter}'\n${heredocBody(content)}${delimiter}`;
}

/** What a {@link heredoc} feeds its command: `content`, ending with a newline. */
export function heredocBody(content: string): string {
    return content.endsWith("\n") ? content : `${content}\n`;
}
