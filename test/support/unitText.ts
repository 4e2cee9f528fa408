// Reading back what the renderers write, as their consumers read it: an Exec*= line split as systemd
// splits it, and a bash script checked by bash itself (render.test.ts, watchdog.test.ts).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";

/** `bash -n` on a script: exit status and what bash printed (syntax errors and warnings). */
export function bashCheck(script: string): { status: number | null; stderr: string } {
    const result = spawnSync("bash", ["-n"], { input: script, encoding: "utf8" });
    return { status: result.status, stderr: result.stderr };
}

/**
 * Splits an Exec*= value as systemd does (systemd.service(5), "Command lines"): `%%` is a literal
 * `%` (other specifiers are refused here: the project never means one), words split on
 * whitespace, double quotes group with backslash escapes, and `$$` is a literal `$` (a lone `$`
 * would be a variable reference: refused here too).
 */
export function systemdSplit(line: string): string[] {
    assert.doesNotMatch(line.replace(/%%/g, ""), /%/, `unescaped % specifier in ${line}`);
    const text = line.replace(/%%/g, "%");
    const words: string[] = [];
    let i = 0;
    while (i < text.length) {
        if (/\s/.test(text[i])) {
            i++;
            continue;
        }
        let word = "";
        if (text[i] === '"') {
            i++;
            while (i < text.length && text[i] !== '"') {
                if (text[i] === "\\") {
                    i++;
                }
                word += text[i];
                i++;
            }
            assert.ok(i < text.length, `unterminated quote in ${line}`);
            i++;
        } else {
            while (i < text.length && !/\s/.test(text[i])) {
                word += text[i];
                i++;
            }
        }
        assert.doesNotMatch(word.replace(/\$\$/g, ""), /\$/, `unescaped $ (a variable reference) in ${line}`);
        words.push(word.replace(/\$\$/g, "$"));
    }
    return words;
}
