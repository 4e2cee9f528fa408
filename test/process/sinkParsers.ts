/**
 * The readers that stand between a rendered config value and the program that finally uses it,
 * for test/process/sinks.property.test.ts (and, the env-file readers, for checks against real hosts).
 *
 * Two kinds:
 * - faithful ports, pure functions, each written from the reader's own source (cited at each):
 *   systemd's EnvironmentFile= reader, docker's --env-file reader, NCCL's nccl.conf reader, the
 *   quoting of the `bash -c` line a remote command runs, a lexer for the scripts we render, the
 *   `Command Line:` format systemd prints, systemd's `$` substitution at exec time;
 * - the real programs where this machine has them, driven without executing anything we
 *   rendered: `bash -n`, bash evaluating only quoted words (as nobody, in an empty directory, with
 *   `touch` the only command on PATH), systemd 252 itself (`systemd --test` prints each unit's
 *   parsed command lines; ConditionOSRelease= reads an env file with systemd's parser), the docker
 *   CLI (against a fake daemon that records the container it would create), the lab's vLLM
 *   argument parser (generated from vLLM 0.33's own definitions), Python's `ast`, nft (in a network
 *   namespace of its own).
 */
import { ChildProcess, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { SUDO_STDIN_SKIP } from "../../components/render/host/shell";

// ---------------------------------------------------------------------------------------------
// Environment files
// ---------------------------------------------------------------------------------------------

/** An env file as its reader sees it: variables in the order a process gets them (later wins). */
export type EnvVars = Map<string, string>;

const SYSTEMD_WHITESPACE = " \t\n\r";
const SYSTEMD_NEWLINE = "\n\r";
const SYSTEMD_COMMENTS = "#;";
/** SHELL_NEED_ESCAPE in systemd's src/basic/escape.h. */
const SYSTEMD_SHELL_NEED_ESCAPE = '"\\`$';

/**
 * systemd's EnvironmentFile= reader, as systemd 252 (Debian 12's 252.39) has it: the state
 * machine of parse_env_file_internal() in src/basic/env-file.c (v252), the pushes of
 * load_env_file_push() (a key/value pair per assignment, later wins: strv_env_replace_consume),
 * then exec_context_load_environment() in src/core/execute.c drops assignments whose name or value
 * is invalid (strv_env_clean_with_callback → env_assignment_is_valid). Differences from later
 * systemd: a comment line ending in `\` swallows the next line (COMMENT_ESCAPE; changed in v254).
 * test/process/sinks.property.test.ts checks this port against systemd 252 itself ({@link systemdEnvOracle}).
 */
export function parseSystemdEnvFile(text: string): EnvVars {
    type State =
        | "PRE_KEY"
        | "KEY"
        | "PRE_VALUE"
        | "VALUE"
        | "VALUE_ESCAPE"
        | "SINGLE_QUOTE_VALUE"
        | "DOUBLE_QUOTE_VALUE"
        | "DOUBLE_QUOTE_VALUE_ESCAPE"
        | "COMMENT"
        | "COMMENT_ESCAPE";
    const out: EnvVars = new Map();
    let state: State = "PRE_KEY";
    let key = "";
    let value: string | undefined;
    let lastKeyWhitespace = -1;
    let lastValueWhitespace = -1;
    const push = () => {
        let k = key;
        if (lastKeyWhitespace >= 0) k = k.slice(0, lastKeyWhitespace);
        // load_env_file_push: strjoin(key, "=", value) with a NULL value gives "key=".
        const v = value ?? "";
        // strv_env_clean_with_callback: only valid assignments reach the process.
        if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) {
            out.delete(k);
            out.set(k, v);
        }
        key = "";
        value = undefined;
    };
    // The C code walks bytes; every byte it tests is ASCII, so walking UTF-16 units is the same.
    // A NUL byte ends the C string (read_full_file), so it ends the walk here too.
    const end = text.indexOf("\0");
    const body = end < 0 ? text : text.slice(0, end);
    for (const c of body) {
        switch (state) {
            case "PRE_KEY":
                if (SYSTEMD_COMMENTS.includes(c)) state = "COMMENT";
                else if (!SYSTEMD_WHITESPACE.includes(c)) {
                    state = "KEY";
                    lastKeyWhitespace = -1;
                    key += c;
                }
                break;
            case "KEY":
                if (SYSTEMD_NEWLINE.includes(c)) {
                    state = "PRE_KEY";
                    key = "";
                } else if (c === "=") {
                    state = "PRE_VALUE";
                    lastValueWhitespace = -1;
                } else {
                    if (!SYSTEMD_WHITESPACE.includes(c)) lastKeyWhitespace = -1;
                    else if (lastKeyWhitespace < 0) lastKeyWhitespace = key.length;
                    key += c;
                }
                break;
            case "PRE_VALUE":
                if (SYSTEMD_NEWLINE.includes(c)) {
                    state = "PRE_KEY";
                    push();
                } else if (c === "'") state = "SINGLE_QUOTE_VALUE";
                else if (c === '"') state = "DOUBLE_QUOTE_VALUE";
                else if (c === "\\") state = "VALUE_ESCAPE";
                else if (!SYSTEMD_WHITESPACE.includes(c)) {
                    state = "VALUE";
                    value = (value ?? "") + c;
                }
                break;
            case "VALUE":
                if (SYSTEMD_NEWLINE.includes(c)) {
                    state = "PRE_KEY";
                    if (lastValueWhitespace >= 0 && value !== undefined) value = value.slice(0, lastValueWhitespace);
                    push();
                } else if (c === "\\") {
                    state = "VALUE_ESCAPE";
                    lastValueWhitespace = -1;
                } else {
                    if (!SYSTEMD_WHITESPACE.includes(c)) lastValueWhitespace = -1;
                    else if (lastValueWhitespace < 0) lastValueWhitespace = (value ?? "").length;
                    value = (value ?? "") + c;
                }
                break;
            case "VALUE_ESCAPE":
                state = "VALUE";
                // Escaped newlines are eaten up entirely.
                if (!SYSTEMD_NEWLINE.includes(c)) value = (value ?? "") + c;
                break;
            case "SINGLE_QUOTE_VALUE":
                if (c === "'") state = "PRE_VALUE";
                else value = (value ?? "") + c;
                break;
            case "DOUBLE_QUOTE_VALUE":
                if (c === '"') state = "PRE_VALUE";
                else if (c === "\\") state = "DOUBLE_QUOTE_VALUE_ESCAPE";
                else value = (value ?? "") + c;
                break;
            case "DOUBLE_QUOTE_VALUE_ESCAPE":
                state = "DOUBLE_QUOTE_VALUE";
                // A character that needs escaping loses its backslash; any other keeps it, as the
                // shell does; an escaped newline is a continuation and is eaten up.
                if (SYSTEMD_SHELL_NEED_ESCAPE.includes(c)) value = (value ?? "") + c;
                else if (c !== "\n") value = (value ?? "") + "\\" + c;
                break;
            case "COMMENT":
                if (c === "\\") state = "COMMENT_ESCAPE";
                else if (SYSTEMD_NEWLINE.includes(c)) state = "PRE_KEY";
                break;
            case "COMMENT_ESCAPE":
                state = "COMMENT";
                break;
        }
    }
    if (["PRE_VALUE", "VALUE", "VALUE_ESCAPE", "SINGLE_QUOTE_VALUE", "DOUBLE_QUOTE_VALUE", "DOUBLE_QUOTE_VALUE_ESCAPE"].includes(state)) {
        if (state === "VALUE" && lastValueWhitespace >= 0 && value !== undefined) value = value.slice(0, lastValueWhitespace);
        push();
    }
    return out;
}

/** bufio.MaxScanTokenSize: the longest line (with its newline) docker's reader takes. */
const GO_MAX_SCAN_TOKEN_SIZE = 64 * 1024;

/** unicode.IsSpace as Go defines it (the characters strings.TrimLeftFunc removes). */
function goIsSpace(c: string): boolean {
    return /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$/.test(c);
}

/**
 * docker's --env-file reader: parseKeyValueFile() of the docker CLI (28.x: opts/file.go and
 * pkg/kvfile/kvfile.go, as docker 28.2.2 reads files). Lines are split by bufio.Scanner
 * (ScanLines: at `\n`, a trailing `\r` dropped; a line of 64 KiB or more is an error), the first
 * line loses a UTF-8 BOM, every line its leading white space (unicode.IsSpace); empty lines and
 * `#` lines are skipped; the key is what precedes the first `=` and must hold no space or tab;
 * the value is everything after it, verbatim. A line without `=` takes the variable from the
 * CLI's own environment (never in our files: such a line is reported as an error here).
 *
 * `trimQuotes`: what docker/cli's pkg/kvfile does since its trimQuotes() change (docker/cli#6805,
 * after 28.x): a value that starts and ends with the same quote character loses both.
 * Throws, with docker's message, where docker refuses the file.
 */
export function parseDockerEnvFile(text: string, options: { trimQuotes?: boolean } = {}): EnvVars {
    return new Map(parseDockerEnvFileEntries(text, options));
}

/** {@link parseDockerEnvFile}'s lines in file order, duplicates kept: the list docker hands to the daemon. */
export function parseDockerEnvFileEntries(text: string, options: { trimQuotes?: boolean } = {}): [string, string][] {
    const out: [string, string][] = [];
    const lines = text.split("\n");
    if (lines.at(-1) === "") lines.pop();
    lines.forEach((raw, index) => {
        const bytes = Buffer.byteLength(raw, "utf8") + (index < lines.length - 1 || text.endsWith("\n") ? 1 : 0);
        if (bytes > GO_MAX_SCAN_TOKEN_SIZE) throw new Error("bufio.Scanner: token too long");
        let scanned = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
        if (/[\ud800-\udfff]/u.test(scanned)) throw new Error(`invalid utf8 bytes at line ${index + 1}`);
        if (index === 0 && scanned.startsWith("\ufeff")) scanned = scanned.slice(1);
        let start = 0;
        const chars = [...scanned];
        while (start < chars.length && goIsSpace(chars[start])) start++;
        const line = chars.slice(start).join("");
        if (line.length === 0 || line.startsWith("#")) return;
        const eq = line.indexOf("=");
        const key = eq < 0 ? line : line.slice(0, eq);
        if (key.length === 0) throw new Error(`no variable name on line '${line}'`);
        if (/[ \t]/.test(key)) throw new Error(`variable '${key}' contains whitespaces`);
        if (eq < 0) throw new Error(`line ${index + 1} has no '=': docker would take ${key} from its own environment`);
        let value = line.slice(eq + 1);
        if (options.trimQuotes && value.length >= 2 && (value[0] === "'" || value[0] === '"') && value.at(-1) === value[0]) value = value.slice(1, -1);
        out.push([key, value]);
    });
    return out;
}

/**
 * NCCL's reader of /etc/nccl.conf: setEnvFile() in NCCL's src/misc/param.cc (2.2x). A line
 * starting with `#` is skipped, the trailing newline dropped, the name is what precedes the first
 * `=`, the value the rest, both cut to 1023 bytes; setenv(…, 0): an earlier line (and the
 * process's own environment) wins. Values are compared as bytes: a cut inside a multi-byte
 * character shows as U+FFFD.
 */
export function parseNcclConf(text: string): EnvVars {
    const out: EnvVars = new Map();
    for (const line of text.split("\n")) {
        if (line.startsWith("#")) continue;
        const eq = line.indexOf("=");
        if (eq < 0) continue;
        const name = Buffer.from(line.slice(0, eq), "utf8").subarray(0, 1023).toString("utf8");
        const value = Buffer.from(line.slice(eq + 1), "utf8")
            .subarray(0, 1023)
            .toString("utf8");
        if (!out.has(name)) out.set(name, value);
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Shell
// ---------------------------------------------------------------------------------------------

/**
 * A remote command as our provider sends it: optional `# …` comment lines, then
 * `[sudo -n ]bash -c '<script>'` with the script single-quoted by shellQuote (`'` as `'"'"'`).
 * Exactly that grammar is accepted; bash reads it the same way (checked by {@link bashWords}).
 */
export function decodeRemoteCommand(line: string): { comments: string[]; sudo: boolean; script: string; quoted: string; word: string } {
    const lines = line.split("\n");
    let start = 0;
    while (lines[start]?.startsWith("# ")) start++;
    const rest = lines.slice(start).join("\n");
    // root, `sudo -n` (passwordless sudo) or `sudo -k -S -p ''` (sudo that reads its password from stdin).
    const match = /^(sudo -n |sudo -k -S -p '' )?bash -c ('(?:[^']|'"'"')*')$/.exec(rest);
    if (!match) throw new Error(`not a remote command line: ${JSON.stringify(rest.slice(0, 120))}`);
    const quoted = match[2];
    const parts = quoted.slice(1, -1).split(`'"'"'`);
    if (parts.some((part) => part.includes("'"))) throw new Error("a single quote outside shellQuote's '\"'\"' escapes");
    const word = parts.join("'");
    let script = word;
    if (match[1] === "sudo -k -S -p '' ") {
        // The wrapper's own first line: skip stdin up to the marker (components/render/host/shell.ts).
        if (!script.startsWith(SUDO_STDIN_SKIP)) throw new Error("a sudo -S command line without the stdin skip before its script");
        script = script.slice(SUDO_STDIN_SKIP.length);
    }
    // `word` is what bash makes of the quoted argument (the skip included), `script` the step's own.
    return { comments: lines.slice(0, start), sudo: match[1] !== undefined, script, quoted, word };
}

/** One item of a script as {@link lexShell} reads it. */
export type ShellItem =
    /** A literal word: bare characters that need no quoting and quoted parts that expand nothing; `text` is what bash makes of it. */
    | { kind: "word"; text: string; raw: string }
    /** A word with expansions: its literal runs (decoded, with their raw text) and the rest (raw). */
    | { kind: "mixed"; parts: ({ text: string; raw: string } | { code: string })[] }
    /** Anything else (operators, expansions, double quotes, comments), raw. */
    | { kind: "code"; text: string }
    /** A here-document: the line that opened it (up to `<<`) and its body, verbatim. */
    | { kind: "heredoc"; command: string; body: string };

/** Characters a word may hold bare and mean themselves (shellQuote's own set). */
const BARE = /^[A-Za-z0-9_@%+=:,./-]$/;
const OPERATOR_CHARS = ";&|()<>";

/**
 * Reads a bash script into items without running it: words (at any depth of `$(…)`), code, and
 * here-documents with their bodies. Written for the scripts this project renders (bash -n says
 * whether they are bash at all); a word that mixes anything but bare characters and single quotes
 * is code, and so is everything inside double quotes, `${…}`, `$((…))`, backquotes and comments.
 */
export function lexShell(script: string): ShellItem[] {
    const s = script;
    const items: ShellItem[] = [];
    let i = 0;
    let lineStart = 0;
    const pending: { delimiter: string; strip: boolean; command: string }[] = [];
    /** The insides of `$(…)`: their items stand on their own, so the word around them leaves them out. */
    const cuts: [number, number][] = [];

    const readHeredocs = () => {
        while (pending.length > 0) {
            const doc = pending.shift() as { delimiter: string; strip: boolean; command: string };
            const body: string[] = [];
            for (;;) {
                if (i >= s.length) throw new Error(`here-document ${doc.delimiter} is not closed`);
                const nl = s.indexOf("\n", i);
                const line = s.slice(i, nl < 0 ? s.length : nl);
                i = nl < 0 ? s.length : nl + 1;
                if ((doc.strip ? line.replace(/^\t+/, "") : line) === doc.delimiter) break;
                body.push(line + "\n");
            }
            items.push({ kind: "heredoc", command: doc.command, body: body.join("") });
        }
        lineStart = i;
    };

    const skipSingleQuoted = () => {
        const end = s.indexOf("'", i + 1);
        if (end < 0) throw new Error("unterminated single quote");
        i = end + 1;
    };
    const skipDoubleQuoted = () => {
        i++;
        while (i < s.length && s[i] !== '"') {
            if (s[i] === "\\") i += 2;
            else if (s[i] === "$") dollar();
            else if (s[i] === "`") backquote();
            else i++;
        }
        if (i >= s.length) throw new Error("unterminated double quote");
        i++;
    };
    const backquote = () => {
        i++;
        while (i < s.length && s[i] !== "`") i += s[i] === "\\" ? 2 : 1;
        if (i >= s.length) throw new Error("unterminated backquote");
        i++;
    };
    const dollar = () => {
        const next = s[i + 1];
        if (next === "(" && s[i + 2] === "(") {
            let depth = 0;
            i += 1;
            do {
                if (s[i] === "(") depth++;
                else if (s[i] === ")") depth--;
                i++;
            } while (depth > 0 && i < s.length);
        } else if (next === "(") {
            i += 2;
            const from = i;
            list(true);
            if (s[i] !== ")") throw new Error("unterminated $(");
            cuts.push([from, i]);
            i++;
        } else if (next === "{") {
            i += 2;
            let depth = 1;
            while (i < s.length && depth > 0) {
                const c = s[i];
                if (c === "{") depth++;
                if (c === "}") depth--;
                if (depth === 0) break;
                if (c === "'") skipSingleQuoted();
                else if (c === '"') skipDoubleQuoted();
                else if (c === "$") dollar();
                else if (c === "\\") i += 2;
                else i++;
            }
            i++;
        } else if (next === "'") {
            i += 2;
            while (i < s.length && s[i] !== "'") i += s[i] === "\\" ? 2 : 1;
            i++;
        } else {
            i++;
            if (/[A-Za-z_]/.test(s[i] ?? "")) while (/[A-Za-z0-9_]/.test(s[i] ?? "")) i++;
            else if (/[0-9?#@*!$-]/.test(s[i] ?? "")) i++;
        }
    };
    const word = () => {
        const parts: ({ text: string; raw: string } | { code: string })[] = [];
        const literal = (text: string, raw: string) => {
            const last = parts.at(-1);
            if (last && "text" in last) {
                last.text += text;
                last.raw += raw;
            } else parts.push({ text, raw });
        };
        const other = (from: number) => {
            // Leave out the insides of `$(…)` scanned since `from`: their items stand on their own.
            let text = "";
            let k = from;
            for (const [a, b] of cuts.filter(([a, b]) => a >= from && b <= i).sort((x, y) => x[0] - y[0])) {
                if (a < k) continue;
                text += s.slice(k, a) + "…";
                k = b;
            }
            text += s.slice(k, i);
            const last = parts.at(-1);
            if (last && "code" in last) last.code += text;
            else parts.push({ code: text });
        };
        while (i < s.length && !" \t\n".includes(s[i]) && !OPERATOR_CHARS.includes(s[i])) {
            const c = s[i];
            const from = i;
            if (c === "'") {
                skipSingleQuoted();
                literal(s.slice(from + 1, i - 1), s.slice(from, i));
            } else if (c === '"') {
                // Double quotes around nothing that expands (shellQuote's "'"): literal too.
                skipDoubleQuoted();
                const inner = s.slice(from + 1, i - 1);
                if (/[$`\\]/.test(inner)) other(from);
                else literal(inner, s.slice(from, i));
            } else if (c === "\\") {
                i += 2;
                other(from);
            } else if (c === "$") {
                dollar();
                other(from);
            } else if (c === "`") {
                backquote();
                other(from);
            } else {
                i++;
                if (BARE.test(c)) literal(c, c);
                else other(from);
            }
        }
        const only = parts[0];
        if (parts.length === 1 && "text" in only) items.push({ kind: "word", text: only.text, raw: only.raw });
        else if (parts.every((p) => "code" in p)) items.push({ kind: "code", text: parts.map((p) => ("code" in p ? p.code : "")).join("") });
        else items.push({ kind: "mixed", parts });
    };
    const operator = () => {
        const start = i;
        if (s.startsWith("<<<", i)) {
            i += 3;
        } else if (s.startsWith("<<", i)) {
            i += 2;
            const strip = s[i] === "-";
            if (strip) i++;
            while (s[i] === " " || s[i] === "\t") i++;
            const from = i;
            while (i < s.length && !" \t\n".includes(s[i]) && !OPERATOR_CHARS.includes(s[i])) {
                if (s[i] === "'") skipSingleQuoted();
                else if (s[i] === '"') skipDoubleQuoted();
                else i++;
            }
            const delimiter = s.slice(from, i).replace(/['"\\]/g, "");
            pending.push({ delimiter, strip, command: s.slice(lineStart, start).trim() });
        } else {
            i++;
            if ((s[i] === s[start] && "&|;<>".includes(s[i])) || (s[start] === ">" && s[i] === "&")) i++;
        }
        items.push({ kind: "code", text: s.slice(start, i) });
    };
    /** A command list, up to the `)` that closes a `$(` when `inSubstitution`. */
    function list(inSubstitution: boolean): void {
        let depth = 0;
        while (i < s.length) {
            const c = s[i];
            if (c === "\n") {
                i++;
                readHeredocs();
            } else if (c === " " || c === "\t") {
                i++;
            } else if (c === "#") {
                const nl = s.indexOf("\n", i);
                const end = nl < 0 ? s.length : nl;
                items.push({ kind: "code", text: s.slice(i, end) });
                i = end;
            } else if (c === ")" && inSubstitution && depth === 0) {
                return;
            } else if (OPERATOR_CHARS.includes(c)) {
                if (c === "(") depth++;
                if (c === ")") depth--;
                operator();
            } else {
                word();
            }
        }
    }
    list(false);
    if (pending.length > 0) throw new Error("a here-document was opened but never read");
    return items;
}

// ---------------------------------------------------------------------------------------------
// systemd
// ---------------------------------------------------------------------------------------------

/**
 * Reads one `Command Line:` of systemd's unit dump back into argv: exec_command_dump() prints
 * quote_command_line(argv, SHELL_ESCAPE_EMPTY) (src/basic/escape.c, v252): a word is printed bare
 * unless it holds SHELL_NEED_QUOTES, else double-quoted with `\` before `"`, `\`, `` ` ``, `$`,
 * and control characters C-escaped (`\n`, `\t`, …, `\NNN` octal).
 */
export function decodeSystemdCommandLine(line: string): string[] {
    const argv: string[] = [];
    let i = 0;
    const simple: Record<string, string> = { a: "\x07", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v" };
    while (i < line.length) {
        if (line[i] === " ") {
            i++;
            continue;
        }
        if (line[i] !== '"') {
            const end = line.indexOf(" ", i);
            argv.push(line.slice(i, end < 0 ? line.length : end));
            i = end < 0 ? line.length : end;
            continue;
        }
        i++;
        let word = "";
        const bytes: number[] = [];
        const flush = () => {
            if (bytes.length > 0) word += Buffer.from(bytes.splice(0)).toString("latin1");
        };
        while (i < line.length && line[i] !== '"') {
            if (line[i] === "\\") {
                const e = line[i + 1];
                if (/[0-7]/.test(e)) {
                    bytes.push(parseInt(line.slice(i + 1, i + 4), 8));
                    i += 4;
                    continue;
                }
                flush();
                word += simple[e] ?? e;
                i += 2;
            } else {
                flush();
                word += line[i];
                i++;
            }
        }
        flush();
        if (line[i] !== '"') throw new Error(`unterminated quote in systemd's command line: ${line}`);
        i++;
        argv.push(word);
    }
    return argv;
}

/**
 * What systemd makes of an argv at exec time (replace_env_argv() in src/basic/env-util.c, v252):
 * a word that is `$NAME` alone becomes the variable split at white space; in every other word
 * `$$` is one `$` and `${NAME}` the variable's value ("" when unset); `$NAME` inside a word stays.
 */
export function systemdReplaceEnvArgv(argv: readonly string[], env: ReadonlyMap<string, string> = new Map()): string[] {
    const out: string[] = [];
    for (const word of argv) {
        if (word[0] === "$" && word[1] !== "{" && word[1] !== "$") {
            const value = env.get(word.slice(1));
            if (value !== undefined) out.push(...value.split(/[ \t\n\r]+/).filter((w) => w !== ""));
            continue;
        }
        let result = "";
        let i = 0;
        while (i < word.length) {
            if (word[i] === "$" && word[i + 1] === "$") {
                result += "$";
                i += 2;
            } else if (word[i] === "$" && word[i + 1] === "{" && word.indexOf("}", i) > 0) {
                const end = word.indexOf("}", i);
                result += env.get(word.slice(i + 2, end)) ?? "";
                i = end + 1;
            } else {
                result += word[i];
                i++;
            }
        }
        out.push(result);
    }
    return out;
}

/** A device unit's name back to the path it stands for (unit_name_to_path(): `-` is `/`, `\xNN` a byte). */
export function unitNameToPath(name: string): string {
    const stem = name.replace(/\.[a-z]+$/, "");
    const bytes: number[] = [];
    for (let i = 0; i < stem.length; i++) {
        if (stem[i] === "\\" && stem[i + 1] === "x") {
            bytes.push(parseInt(stem.slice(i + 2, i + 4), 16));
            i += 3;
        } else {
            bytes.push(...Buffer.from(stem[i] === "-" ? "/" : stem[i], "utf8"));
        }
    }
    return "/" + Buffer.from(bytes).toString("utf8");
}

/** One unit as systemd 252 loaded it. */
export interface SystemdUnit {
    loadState: string;
    description?: string;
    environment: string[];
    environmentFiles: string[];
    /** Exec settings in file order, each command's argv as parsed (before `$` substitution). */
    exec: Record<string, string[][]>;
    /** Dependencies the file itself declared (origin-file), e.g. `Wants: x.device`. */
    dependencies: string[];
    /** What systemd logged about the file while loading it (line number and message). */
    warnings: string[];
}

/** Runs a command, collecting its output; rejects when it cannot start. */
export function runProcess(
    command: string,
    args: readonly string[],
    options: { input?: string | Buffer; env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {},
): Promise<{ status: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
        const child: ChildProcess = spawn(command, args, { env: options.env ?? process.env, cwd: options.cwd, stdio: ["pipe", "pipe", "pipe"] });
        const out: Buffer[] = [];
        const err: Buffer[] = [];
        const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 120_000);
        child.stdout?.on("data", (d: Buffer) => out.push(d));
        child.stderr?.on("data", (d: Buffer) => err.push(d));
        child.on("error", (e) => {
            clearTimeout(timer);
            reject(e);
        });
        child.on("close", (status) => {
            clearTimeout(timer);
            resolve({ status, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") });
        });
        child.stdin?.on("error", () => undefined);
        child.stdin?.end(options.input ?? "");
    });
}

const SYSTEMD = "/usr/lib/systemd/systemd";
/** setpriv by its full path: the sandboxes below run with a PATH of their own. */
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => fs.existsSync(p)) ?? "setpriv";

/** Whether this machine can run systemd in test mode (`systemd --test` as an unprivileged user). */
export function systemdAvailable(): boolean {
    return fs.existsSync(SYSTEMD) && spawnSync(SETPRIV, ["--version"]).status === 0;
}

/**
 * Loads unit files with systemd 252 itself, offline: `systemd --test --system` (as nobody: systemd
 * refuses test mode as root) with the units and a target that wants them all on
 * SYSTEMD_UNIT_PATH, and reads its dump of every unit back. Nothing is started.
 */
export async function systemdLoadUnits(units: ReadonlyMap<string, string>): Promise<Map<string, SystemdUnit>> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sinkprop-units-"));
    try {
        const names = [...units.keys()];
        for (const [name, text] of units) fs.writeFileSync(path.join(dir, name), text);
        const wants = [];
        for (let k = 0; k < names.length; k += 50) wants.push(`Wants=${names.slice(k, k + 50).join(" ")}`);
        fs.writeFileSync(path.join(dir, "sinkprop-all.target"), ["[Unit]", "Description=sinks property test", ...wants, ""].join("\n"));
        // Units ours require or order against, so that the transaction systemd builds holds.
        for (const stub of ["docker.service"]) fs.writeFileSync(path.join(dir, stub), "[Service]\nExecStart=/bin/true\n");
        fs.chmodSync(dir, 0o755);
        for (const f of fs.readdirSync(dir)) fs.chmodSync(path.join(dir, f), 0o644);
        const result = await runProcess(
            SETPRIV,
            [
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                SYSTEMD,
                "--test",
                "--system",
                "--unit=sinkprop-all.target",
                "--no-pager",
                "--log-target=console",
                "--log-level=notice",
            ],
            { env: { PATH: "/usr/bin:/bin", SYSTEMD_UNIT_PATH: `${dir}:`, LANG: "C.UTF-8" }, cwd: "/" },
        );
        if (result.status !== 0) throw new Error(`systemd --test failed (${result.status}): ${result.stderr.slice(0, 2000)}`);
        const parsed = parseSystemdDump(result.stdout, new Set(names));
        for (const line of (result.stdout + "\n" + result.stderr).split("\n")) {
            const m = /^(?:[^ ]*\/)?([^/: ]+\.service):(\d+): ([^\n]*)$/.exec(line);
            if (m && parsed.has(m[1])) parsed.get(m[1])?.warnings.push(`${m[2]}: ${m[3]}`);
        }
        for (const name of names) if (!parsed.has(name)) throw new Error(`systemd's dump has no unit ${name}`);
        return parsed;
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

/** Reads the units of `names` out of `systemd --test`'s dump (exec_command_dump, unit_dump, exec_context_dump). */
export function parseSystemdDump(dump: string, names: ReadonlySet<string>): Map<string, SystemdUnit> {
    const units = new Map<string, SystemdUnit>();
    let current: SystemdUnit | undefined;
    let execKind: string | undefined;
    for (const line of dump.split("\n")) {
        const unitHeader = /^\t-> Unit ([^\n]+):$/.exec(line);
        if (unitHeader) {
            current = names.has(unitHeader[1]) ? { loadState: "", environment: [], environmentFiles: [], exec: {}, dependencies: [], warnings: [] } : undefined;
            if (current) units.set(unitHeader[1], current);
            execKind = undefined;
            continue;
        }
        if (!current) continue;
        if (/^\t-> /.test(line) || /^-> /.test(line)) {
            current = undefined;
            continue;
        }
        const setting = /^\t\t([A-Za-z ]+): ([^\n]*)$/.exec(line);
        const execHeader = /^\t\t-> (Exec[A-Za-z]+):$/.exec(line);
        // [^\n], not `.`: a value may hold U+2028, which `.` does not match.
        const command = /^\t\t\tCommand Line: ([^\n]*)$/.exec(line);
        if (execHeader) {
            execKind = execHeader[1];
            current.exec[execKind] ??= [];
        } else if (command && execKind) {
            current.exec[execKind].push(decodeSystemdCommandLine(command[1]));
        } else if (setting) {
            execKind = undefined;
            const [, name, value] = setting;
            if (name === "Unit Load State") current.loadState = value;
            else if (name === "Description") current.description = value;
            else if (name === "Environment") current.environment.push(value);
            else if (name === "EnvironmentFile") current.environmentFiles.push(value);
            else if (/^(Wants|Requires|After|Before|Conflicts|WantedBy)$/.test(name) && /\(origin-file\)$/.test(value)) {
                current.dependencies.push(`${name}: ${value.replace(/ \(origin-file\)$/, "")}`);
            }
        } else if (/^\t\t-> Job/.test(line)) {
            execKind = undefined;
        }
    }
    return units;
}

/**
 * Checks {@link parseSystemdEnvFile} against systemd 252 itself: systemd reads os-release files
 * with the same parser as EnvironmentFile= (parse_env_file_internal), and `systemd-analyze
 * condition 'ConditionOSRelease=KEY=VALUE'` (with SYSTEMD_OS_RELEASE pointing at the file) says
 * whether it read KEY as VALUE. Per file: undefined when systemd reads every value as the port
 * does, else the condition that failed. Values a condition cannot state (empty, starting with
 * white space or an operator character) are left to the port. Up to 40 files go in one file (each
 * file's keys prefixed); systemd stops at the first condition that fails, so a chunk that fails is
 * run again without the file it names.
 */
export async function systemdEnvOracle(files: readonly string[]): Promise<(string | undefined)[]> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sinkprop-osrel-"));
    const verdicts: (string | undefined)[] = files.map(() => undefined);
    try {
        for (let start = 0; start < files.length; start += 40) {
            let pending = files.slice(start, start + 40).map((text, k) => ({ text, index: start + k }));
            while (pending.length > 0) {
                const renamed: string[] = [];
                const conditions: string[] = [];
                pending.forEach(({ text }, k) => {
                    // Each file's keys get a prefix of their own: one os-release file holds them all.
                    renamed.push(text.replace(/^([ \t]*)([A-Za-z_][A-Za-z0-9_]*)([ \t]*=)/gm, `$1F${k}_$2$3`));
                    for (const [key, value] of parseSystemdEnvFile(text)) {
                        // A condition cannot state an empty value, one starting with white space, or one
                        // starting with a comparison operator's character (parse_compare_operator).
                        if (value === "" || /^[ \t\n\r!<=>$]/.test(value)) continue;
                        const word = `F${k}_${key}=${value}`.replace(/[\\"]/g, (c) => `\\${c}`).replace(/%/g, "%%");
                        conditions.push(`ConditionOSRelease="${word}"`);
                    }
                });
                if (conditions.length === 0) break;
                const file = path.join(dir, "os-release");
                fs.writeFileSync(file, renamed.join("\n"));
                const result = await runProcess("systemd-analyze", ["condition", ...conditions], {
                    env: { ...process.env, SYSTEMD_OS_RELEASE: file, SYSTEMD_LOG_LEVEL: "info" },
                });
                if (result.status === 0) break;
                const output = result.stdout + result.stderr;
                const failed = output.split("\n").find((line) => line.includes("ConditionOSRelease=") && !line.endsWith(" succeeded."));
                const which = failed ? /ConditionOSRelease="?F(\d+)_/.exec(failed) : null;
                if (!which) {
                    for (const p of pending) verdicts[p.index] = `systemd-analyze failed: ${output.slice(-400)}`;
                    break;
                }
                const k = Number(which[1]);
                verdicts[pending[k].index] = `systemd does not read the file as the port does: ${failed}`;
                pending = pending.filter((_, j) => j !== k);
            }
        }
        return verdicts;
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

// ---------------------------------------------------------------------------------------------
// docker
// ---------------------------------------------------------------------------------------------

/** What the docker CLI would ask the daemon to create (the parts a config value reaches). */
export interface DockerCreate {
    image: string;
    cmd: string[];
    entrypoint: string[] | null;
    env: string[];
    binds: string[];
}

/** One `docker run` for {@link FakeDockerDaemon.runAll}: its args (args[0] is `run`), and the files to put where they name them (--env-file). */
export interface DockerRunRequest {
    args: string[];
    files: Readonly<Record<string, string>>;
}

/**
 * The docker CLI as the parser of `docker run` argv and its --env-file files: the real `docker
 * run`, against a daemon of our own on a unix socket that records the container the CLI asks for
 * (POST /containers/create) and refuses it, so nothing is created or pulled. The runs of a batch go
 * one after the other from one bash (each with a config of its own whose HttpHeaders tell the
 * daemon which run a request belongs to).
 */
export class FakeDockerDaemon {
    readonly #dir = fs.mkdtempSync(path.join(os.tmpdir(), "sinkprop-docker-"));
    readonly #socket = path.join(this.#dir, "docker.sock");
    readonly #server = http.createServer();
    readonly #created = new Map<string, string>();
    #batches = 0;

    static available(): boolean {
        return spawnSync("docker", ["--version"]).status === 0;
    }

    async start(): Promise<void> {
        this.#server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
            const chunks: Buffer[] = [];
            req.on("data", (d: Buffer) => chunks.push(d));
            req.on("end", () => {
                if (req.url?.endsWith("/_ping")) {
                    res.writeHead(200, { "API-Version": "1.50", OSType: "linux", "Docker-Experimental": "false", "Content-Type": "text/plain" });
                    res.end("OK");
                } else if (req.url?.includes("/containers/create")) {
                    this.#created.set(String(req.headers["x-sinkprop-run"]), Buffer.concat(chunks).toString("utf8"));
                    res.writeHead(400, { "Content-Type": "application/json" });
                    res.end(JSON.stringify({ message: "recorded by the sinks property test; nothing created" }));
                } else {
                    res.writeHead(404, { "Content-Type": "application/json" });
                    res.end(JSON.stringify({ message: `not served here: ${req.method} ${req.url}` }));
                }
            });
        });
        await new Promise<void>((resolve) => this.#server.listen(this.#socket, resolve));
    }

    async stop(): Promise<void> {
        await new Promise((resolve) => this.#server.close(resolve));
        fs.rmSync(this.#dir, { recursive: true, force: true });
    }

    /** Runs every request's `docker <args>`; per request, what docker would have created, or why it refused. */
    async runAll(requests: readonly DockerRunRequest[]): Promise<(DockerCreate | { error: string })[]> {
        const batch = path.join(this.#dir, `batch${this.#batches++}`);
        fs.mkdirSync(batch);
        try {
            requests.forEach((request, i) => {
                const run = path.join(batch, String(i));
                fs.mkdirSync(run);
                fs.writeFileSync(path.join(run, "config.json"), JSON.stringify({ HttpHeaders: { "X-Sinkprop-Run": `${batch}/${i}` } }));
                let n = 0;
                const args = request.args.map((arg, k) => {
                    const file = k > 0 && request.args[k - 1] === "--env-file" ? request.files[arg] : undefined;
                    if (file === undefined) return arg;
                    const where = path.join(run, `f${n++}`);
                    fs.writeFileSync(where, file);
                    return where;
                });
                fs.writeFileSync(path.join(run, "argv"), args.map((a) => `${a}\0`).join(""));
            });
            const script = `for run in $(seq 0 ${requests.length - 1}); do mapfile -d '' args < "${batch}/$run/argv"; DOCKER_CONFIG="${batch}/$run" docker "\${args[@]}" 2> "${batch}/$run/stderr" >/dev/null; done; true`;
            await runProcess("bash", ["-c", script], {
                env: { PATH: process.env.PATH, DOCKER_HOST: `unix://${this.#socket}`, DOCKER_CLI_HINTS: "false", LANG: "C.UTF-8" },
                timeoutMs: 600_000,
            });
            return requests.map((_, i) => {
                const body = this.#created.get(`${batch}/${i}`);
                this.#created.delete(`${batch}/${i}`);
                if (body === undefined)
                    return { error: `docker refused the command line: ${fs.readFileSync(path.join(batch, String(i), "stderr"), "utf8").trim()}` };
                const created = JSON.parse(body) as {
                    Image: string;
                    Cmd: string[] | null;
                    Entrypoint: string[] | null;
                    Env: string[] | null;
                    HostConfig: { Binds: string[] | null };
                };
                return {
                    image: created.Image,
                    cmd: created.Cmd ?? [],
                    entrypoint: created.Entrypoint,
                    env: created.Env ?? [],
                    binds: created.HostConfig.Binds ?? [],
                };
            });
        } finally {
            fs.rmSync(batch, { recursive: true, force: true });
        }
    }
}

// ---------------------------------------------------------------------------------------------
// bash
// ---------------------------------------------------------------------------------------------

/** `bash -n` on each script (one bash runs them all): the syntax errors of those that are not bash, by index. */
export async function bashSyntaxErrors(scripts: readonly string[]): Promise<Map<number, string>> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sinkprop-syntax-"));
    try {
        scripts.forEach((script, i) => fs.writeFileSync(path.join(dir, `${i}.sh`), script));
        const result = await runProcess(
            "bash",
            ["-c", `for i in $(seq 0 ${scripts.length - 1}); do bash -n "${dir}/$i.sh" 2> "${dir}/$i.err" || echo "$i"; done`],
            {
                timeoutMs: 600_000,
            },
        );
        const errors = new Map<number, string>();
        for (const line of result.stdout.split("\n").filter((l) => l !== ""))
            errors.set(Number(line), fs.readFileSync(path.join(dir, `${line}.err`), "utf8").trim());
        return errors;
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

/**
 * What bash makes of each word (raw, as rendered): one bash evaluates `__w <word>` per word and
 * prints the arguments it got. It runs as nobody in an empty directory with `touch` the only
 * command on PATH, so a word whose quoting failed can do no more than leave a marker file behind
 * (values carry `$(touch <marker>)`). Returns, per word, the arguments bash saw.
 */
export async function bashWords(words: readonly string[]): Promise<string[][]> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sinkprop-bash-"));
    try {
        fs.mkdirSync(path.join(dir, "bin"));
        fs.symlinkSync("/usr/bin/touch", path.join(dir, "bin", "touch"));
        fs.chmodSync(dir, 0o755);
        const script = ["__w() { printf '%s\\0' \"$#\"; printf '%s\\0' \"$@\"; }", ...words.map((w) => `__w ${w}`), ""].join("\n");
        fs.writeFileSync(path.join(dir, "words.sh"), script);
        fs.chmodSync(path.join(dir, "words.sh"), 0o644);
        const result = await runProcess(
            SETPRIV,
            ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/bash", "--norc", "--noprofile", path.join(dir, "words.sh")],
            {
                env: { PATH: path.join(dir, "bin"), HOME: dir, LANG: "C.UTF-8" },
                cwd: dir,
            },
        );
        if (result.status !== 0) throw new Error(`bash could not evaluate the words: ${result.stderr.slice(0, 400)}`);
        const fields = result.stdout.split("\0");
        const out: string[][] = [];
        let k = 0;
        for (let w = 0; w < words.length; w++) {
            const count = Number(fields[k++]);
            out.push(fields.slice(k, k + count));
            k += count;
        }
        return out;
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

/** What `token=$(cat)` leaves in `$token` for each stdin (the download step's hfToken): one bash for all. */
export async function bashCommandSubstitution(inputs: readonly string[]): Promise<string[]> {
    const script = `while IFS= read -r -d '' v; do t=$(printf '%s' "$v" | cat); printf '%s\\0' "$t"; done`;
    const result = await runProcess("bash", ["-c", script], { input: inputs.map((v) => `${v}\0`).join("") });
    return result.stdout.split("\0").slice(0, inputs.length);
}

// ---------------------------------------------------------------------------------------------
// Python: vLLM's argument parser (the lab's, generated from vLLM 0.33), ast, readers
// ---------------------------------------------------------------------------------------------

/** The Python helper the test drives: one process, JSON requests in, JSON results out. */
const PYTHON_HELPER = String.raw`
import argparse, ast, http.client, io, json, os, re, sys, tempfile
sys.path.insert(0, os.environ["VLLM_STANDIN"])
from vllm_standin.flags import build_parser

class Refused(Exception):
    pass

def parser():
    p = build_parser()
    def error(message):
        raise Refused(message)
    stack = [p]
    while stack:
        q = stack.pop()
        q.error = error
        for a in q._actions:
            if isinstance(a, argparse._SubParsersAction):
                stack.extend(a.choices.values())
    return p

def serve_parser(p):
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a.choices["serve"]

def plain(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    return repr(v)

def vllm(req):
    p = parser()
    serve = serve_parser(p)
    argv = req["argv"]
    tail = req["extra"]
    head = argv[: len(argv) - tail]
    out = {}
    try:
        ns = vars(p.parse_args(head))
    except Refused as e:
        return {"error": str(e)}
    except SystemExit as e:
        return {"error": "vllm would exit (%s) before serving" % e.code}
    protected = {"model_tag", "model", "api_key", "hf_token"}
    for a in head:
        if a.startswith("-"):
            act = serve._option_string_actions.get(a.split("=")[0])
            if act is not None:
                protected.add(act.dest)
    out["dests"] = {d: plain(ns.get(d)) for d in sorted(protected)}
    if tail:
        try:
            full = vars(p.parse_args(argv))
            out["overridden"] = sorted(d for d in protected if plain(full.get(d)) != out["dests"][d])
        except SystemExit as e:
            # --help, --version: vLLM prints and exits; not a flag of ours.
            out["tailError"] = "vllm would exit (%s) before serving" % e.code
            out["tailErrorNamesOurs"] = False
        except Refused as e:
            msg = str(e)
            names = [o for o in serve._option_string_actions if serve._option_string_actions[o].dest in protected]
            out["tailError"] = msg
            out["tailErrorNamesOurs"] = any(o in msg.replace(",", " ").split() for o in names)
    return out

def tree(node):
    if isinstance(node, ast.AST):
        return {"_": type(node).__name__, **{f: tree(getattr(node, f, None)) for f in node._fields}}
    if isinstance(node, list):
        return [tree(x) for x in node]
    if isinstance(node, (bytes, complex)):
        return repr(node)
    return node

def function_from(source, name):
    module = ast.parse(source)
    keep = [n for n in module.body if isinstance(n, (ast.Import, ast.ImportFrom)) or (isinstance(n, ast.FunctionDef) and n.name == name)]
    scope = {}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "<rendered>", "exec"), scope)
    return scope[name]

def read_with(req):
    fd, where = tempfile.mkstemp()
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(req["file"])
    try:
        fn = function_from(req["source"], req["function"])
        return {"value": fn(where, *req["args"])}
    except Exception as e:
        return {"error": repr(e)}
    finally:
        os.unlink(where)

def header(req):
    # "Authorization: Bearer <key>" as a client sends it and a server reads it: servers (h11,
    # starlette) decode header bytes as latin-1; http.client encodes latin-1, curl and httpx UTF-8.
    value = "Bearer " + req["key"]
    if http.client._is_illegal_header_value(value.encode("utf-8")):
        return {"error": "illegal in an HTTP header (http.client)"}
    for encoding in ("latin-1", "utf-8"):
        try:
            sent = value.encode(encoding)
        except UnicodeEncodeError as e:
            return {"error": "a client sending headers as %s cannot send it: %s" % (encoding, e)}
        if sent.decode("latin-1") != value:
            return {"error": "a client sending headers as %s sends %r, not the key" % (encoding, sent.decode("latin-1")[7:])}
    return {"value": req["key"]}

# huggingface_hub's validate_repo_id() (src/huggingface_hub/utils/_validators.py, 1.x), verbatim:
# what hf download and vLLM's hub client check an id against before asking the hub.
REPO_ID_REGEX = re.compile(r"""
    ^
    (\b[\w\-.]+\b/)? # optional namespace (username or organization)
    \b               # starts with a word boundary
    [\w\-.]{1,96}    # repo_name: alphanumeric + . _ -
    \b               # ends with a word boundary
    $
    """, flags=re.VERBOSE | re.ASCII)

def repo_id(req):
    rid = req["id"]
    if rid.count("/") > 1:
        return {"error": "Repo id must be in the form 'repo_name' or 'namespace/repo_name'"}
    if not REPO_ID_REGEX.match(rid):
        return {"error": "Repo id must use alphanumeric chars, '-', '_' or '.'. The name cannot start or end with '-' or '.' and the maximum length is 96"}
    if "--" in rid or ".." in rid:
        return {"error": "Cannot have -- or .. in repo_id"}
    if rid.endswith(".git"):
        return {"error": "Repo_id cannot end by '.git'"}
    return {"value": rid}

def flags(_req):
    p = parser()
    return {"options": sorted(serve_parser(p)._option_string_actions)}

out = sys.stdout
for line in sys.stdin:
    req = json.loads(line)
    kind = req["kind"]
    # Whatever a request prints (argparse's --help, a rendered function) stays out of the answers.
    sys.stdout = io.StringIO()
    try:
        if kind == "vllm":
            res = vllm(req)
        elif kind == "ast":
            res = {"tree": tree(ast.parse(req["source"]))}
        elif kind == "read":
            res = read_with(req)
        elif kind == "header":
            res = header(req)
        elif kind == "flags":
            res = flags(req)
        elif kind == "repo-id":
            res = repo_id(req)
        else:
            res = {"error": "unknown request"}
    except SyntaxError as e:
        res = {"error": "SyntaxError: " + str(e)}
    finally:
        sys.stdout = out
    out.write(json.dumps(res) + "\n")
`;

/** The lab's vLLM stand-in: its argument parser is built from vLLM 0.33's own argument definitions. */
export function vllmStandInDir(root: string): string {
    return path.join(root, "lab", "vllm_standin");
}

/** Requests to {@link pythonBatch}. */
export type PythonRequest =
    /** `vllm serve` argv (without `vllm`); the last `extra` elements are model.extraArgs. */
    | { kind: "vllm"; argv: string[]; extra: number }
    | { kind: "ast"; source: string }
    /** Calls the function `function` defined in rendered Python `source` on a file holding `file`. */
    | { kind: "read"; source: string; function: string; file: string; args: string[] }
    /** Whether `Bearer <key>` reaches a server as the key from a client that sends headers as latin-1 (http.client) and one that sends UTF-8 (curl, httpx). */
    | { kind: "header"; key: string }
    /** huggingface_hub's validate_repo_id(), as `hf download` and vLLM check a hub id. */
    | { kind: "repo-id"; id: string }
    | { kind: "flags" };

/** Runs Python requests in one python3 process. */
export async function pythonBatch(requests: readonly PythonRequest[], standIn: string): Promise<Record<string, unknown>[]> {
    if (requests.length === 0) return [];
    const result = await runProcess("python3", ["-c", PYTHON_HELPER], {
        input: requests.map((r) => JSON.stringify(r)).join("\n") + "\n",
        env: { ...process.env, VLLM_STANDIN: standIn, PYTHONDONTWRITEBYTECODE: "1", PYTHONIOENCODING: "utf-8" },
        timeoutMs: 300_000,
    });
    if (result.status !== 0) throw new Error(`python3 failed: ${result.stderr.slice(-2000)}`);
    const lines = result.stdout.trimEnd().split("\n");
    if (lines.length !== requests.length) throw new Error(`python3 answered ${lines.length} of ${requests.length} requests: ${result.stderr.slice(-2000)}`);
    return lines.map((line) => JSON.parse(line) as Record<string, unknown>);
}

// ---------------------------------------------------------------------------------------------
// nftables
// ---------------------------------------------------------------------------------------------

/**
 * nft itself as the reader of rendered rule files: in a network namespace of our own (`unshare
 * --net`), each file is loaded (`nft -f`, which replaces our table) and listed back as JSON
 * (`nft -j list table inet spark_cluster`), one after the other.
 */
export async function nftLoad(files: readonly string[]): Promise<({ json: unknown } | { error: string })[]> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sinkprop-nft-"));
    try {
        files.forEach((text, i) => fs.writeFileSync(path.join(dir, `${i}.nft`), text));
        const script = `for i in $(seq 0 ${files.length - 1}); do if nft -f "${dir}/$i.nft" 2> "${dir}/$i.err"; then nft -j list table inet spark_cluster > "${dir}/$i.json"; fi; done`;
        const result = await runProcess("unshare", ["--net", "bash", "-c", script], { timeoutMs: 600_000 });
        if (result.status !== 0) throw new Error(`nft could not run: ${result.stderr}`);
        return files.map((_, i) => {
            const json = path.join(dir, `${i}.json`);
            return fs.existsSync(json)
                ? { json: JSON.parse(fs.readFileSync(json, "utf8")) as unknown }
                : { error: fs.readFileSync(path.join(dir, `${i}.err`), "utf8").trim() };
        });
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}
