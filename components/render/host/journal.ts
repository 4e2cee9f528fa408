// Journal tails that a step prints when it fails (into `pulumi up`'s output) carry whatever our
// servers logged, and some log secrets (SGLang its server_args with the API key, sglang#37457).
// Every tail goes through a scrubber on the node that replaces the value of every secret of the
// stack found in our secret files there (config/hostPaths.ts SECRET_FILES) with `[secret]`: not
// only the step's own inputs, which our provider already redacts.
import { SECRET_FILES } from "../../../config/hostPaths";
import { shellQuote } from "./shell";

/** What a secret's value becomes in a tail we print. */
export const SCRUBBED = "[secret]";

/**
 * Python: stdin to stdout with every secret value of SECRET_FILES replaced, longest first. A value
 * is taken as written, unquoted (systemd's and JSON's double quotes), and split at `;` (Open WebUI's
 * list of keys). A file it cannot read is skipped. Its first argument, when given, replaces the
 * sources (JSON `[[path, [key, …]], …]`: the tests').
 */
export const SCRUB_PY = [
    "import json, re, sys",
    "sys.stdin.reconfigure(errors='replace')",
    `SOURCES = ${JSON.stringify(SECRET_FILES.map((f) => [f.path, f.keys]))}`,
    "found = set()",
    "for path, keys in (json.loads(sys.argv[1]) if len(sys.argv) > 1 else SOURCES):",
    "    try:",
    "        lines = open(path, encoding='utf-8', errors='replace').read().splitlines()",
    "    except OSError:",
    "        continue",
    "    for line in lines:",
    "        for key in keys:",
    "            for sep in ('=', ': '):",
    "                if not line.startswith(key + sep):",
    "                    continue",
    "                value = line[len(key) + len(sep):]",
    "                found.add(value)",
    "                if len(value) >= 2 and value[0] == '\"' and value[-1] == '\"':",
    "                    found.add(re.sub(r'\\\\([\"\\\\`$])', r'\\1', value[1:-1]))",
    "                    try:",
    "                        found.add(json.loads(value))",
    "                    except ValueError:",
    "                        pass",
    "for value in list(found):",
    "    found.update(value.split(';'))",
    "secrets = sorted((v for v in found if len(v) >= 4), key=len, reverse=True)",
    "for line in sys.stdin:",
    "    for secret in secrets:",
    `        line = line.replace(secret, ${JSON.stringify(SCRUBBED)})`,
    "    sys.stdout.write(line)",
].join("\n");

/** A bash line that prints the last `lines` lines of `unit`'s journal, scrubbed of the stack's secrets (never fails). */
export function journalTailLine(unit: string, lines: number): string {
    return `journalctl -u ${shellQuote(`${unit}.service`)} -n ${lines} --no-pager 2>&1 | python3 -c ${shellQuote(SCRUB_PY)} || true`;
}
