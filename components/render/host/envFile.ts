// Environment files: the same variables reach a process through systemd's
// EnvironmentFile= (venv runtime) or docker's --env-file (container runtime),
// and the two read a line differently. systemd 252 (src/basic/env-file.c)
// strips quotes and processes backslash escapes inside double quotes; docker
// (cli/opts/envfile.go) takes everything after the first `=` verbatim. So each
// file is rendered for its reader, and values neither can carry are refused.
import type { Runtime } from "../../../config";
import { type EnvFileReader, runtimeStrategy } from "./runtime";

/** The reader of env files for a runtime: the container runtime hands them to docker, the venv runtime to systemd. */
export function envFileReader(runtime: Runtime): EnvFileReader {
    return runtimeStrategy(runtime).envFileReader;
}

/** Why `value` cannot reach a process intact through an env file (either reader), or undefined when it can. */
export function envValueProblem(value: string): string | undefined {
    // A line break ends the line for both readers; NUL and other control bytes end or corrupt it.
    if (/[\0-\x1f\x7f]/.test(value)) {
        return "must not contain line breaks or other control characters (an environment file holds one variable per line)";
    }
    return undefined;
}

/** Inside systemd's double quotes `"`, `\`, `` ` `` and `$` are escaped with a backslash; nothing is expanded. */
function systemdQuote(value: string): string {
    return `"${value.replace(/["\\`$]/g, (c) => `\\${c}`)}"`;
}

/** The file: a comment line first, then one `KEY=value` per variable in the reader's syntax. Throws on a value {@link envValueProblem} refuses. */
export function renderEnvFile(comment: string, vars: readonly (readonly [string, string])[], reader: EnvFileReader): string {
    const lines = vars.map(([key, value]) => {
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) {
            throw new Error(`not an environment variable name: ${JSON.stringify(key)}`);
        }
        const problem = envValueProblem(value);
        if (problem) {
            throw new Error(`${key} ${problem}`);
        }
        return `${key}=${reader === "systemd" ? systemdQuote(value) : value}`;
    });
    return [`# ${comment}`, ...lines].join("\n") + "\n";
}

/**
 * Python source of `read_env_value(path, key)`: the value as the reader of a file
 * {@link renderEnvFile} wrote sees it. The readiness probe reads the API key with it.
 */
export function pythonReadEnvValue(reader: EnvFileReader): string {
    const unquote =
        reader === "systemd"
            ? [
                  "            if len(value) >= 2 and value[0] == '\"' and value[-1] == '\"':",
                  "                value = re.sub(r'\\\\([\"\\\\`$])', r'\\1', value[1:-1])",
              ]
            : [];
    return [
        "import re",
        "def read_env_value(path, key):",
        "    for line in open(path, encoding='utf-8'):",
        "        line = line.rstrip('\\n')",
        "        if line.startswith(key + '='):",
        "            value = line[len(key) + 1:]",
        ...unquote,
        "            return value",
        "    return ''",
    ].join("\n");
}
