/**
 * Every flag the product's renderer can emit (components/render/vllm.ts `vllmServeArgv`), checked
 * for every vLLM version with a flag table (config/vllmFlags/<version>.json) against that
 * release's own source, by a method independent of the generator:
 *
 * - the table's verdict: `flagAccepted(version, flag)` (gen_flags.py interprets vLLM's argument
 *   definitions, following get_kwargs() into the config dataclasses);
 * - the source's verdict: the wheel the table names (fetched and sha256-checked by
 *   scripts/vllm-wheels.sh, cached) is read with plain text matching: a flag is vLLM's when its
 *   exact string literal (`"--nnodes"`) appears in vllm/engine/arg_utils.py,
 *   vllm/entrypoints/{cli/serve,<any>/cli_args}.py, or it is a field of the FrontendArgs
 *   dataclasses there (vLLM turns `host: str` into `--host`).
 *
 * This is the cheap check (the wheels only, no imports). The same tables against vLLM's REAL
 * argument parser, every version, every rendered flag and every spelling, is
 * test/process/vllmParserParity.test.ts (scripts/vllm-parser.sh installs each release with its torch,
 * once, into the user cache).
 *
 * The flags are enumerated by rendering specs with every optional turned on, for rank 0 and a
 * headless rank of the mp executor and for the Ray executor; a guard fails when the renderer
 * emits a flag literal the specs do not reach.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { VLLM_FLAG_VERSIONS, findVllmFlag, flagAccepted } from "../../config/vllmFlags";
import { RENDERABLE_VLLM_FLAGS } from "../support/fixtures";

const ROOT = path.resolve(__dirname, "..", "..", "..");

const RENDERED = RENDERABLE_VLLM_FLAGS;

/** Reads the wheels with plain text matching (see the file's comment). Input: JSON {version: wheel}; output: JSON {version: [options]}. */
const SOURCE_FLAGS_PY = String.raw`
import json, re, sys, zipfile
wheels = json.load(sys.stdin)
out = {}
for version, wheel in wheels.items():
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n == "vllm/engine/arg_utils.py" or n == "vllm/entrypoints/cli/serve.py"
                 or re.fullmatch(r"vllm/entrypoints/[a-z_]+/cli_args\.py", n)]
        texts = {n: zf.read(n).decode("utf-8") for n in names}
    flags = set()
    for name, text in texts.items():
        flags.update(re.findall(r"""["'](--?[A-Za-z][A-Za-z0-9_-]*)["']""", text))
        if name.endswith("cli_args.py"):
            for body in re.findall(r"^class (?:Base)?FrontendArgs\b[^\n]*\n((?:(?:    [^\n]*)?\n)+)", text, re.M):
                flags.update("--" + f.replace("_", "-") for f in re.findall(r"^    ([a-z][a-z0-9_]*)\s*:", body, re.M))
    out[version] = sorted(flags)
json.dump(out, sys.stdout)
`;

function sourceFlags(): Record<string, Set<string>> {
    const listing = execFileSync(path.join(ROOT, "scripts", "vllm-wheels.sh"), { cwd: ROOT, encoding: "utf8", timeout: 30 * 60_000 });
    const wheels = Object.fromEntries(
        listing
            .trim()
            .split("\n")
            .map((l) => l.split("\t")),
    );
    assert.deepEqual(Object.keys(wheels).sort(), [...VLLM_FLAG_VERSIONS].sort(), "a wheel per table");
    const out = JSON.parse(
        execFileSync("python3", ["-c", SOURCE_FLAGS_PY], { input: JSON.stringify(wheels), encoding: "utf8", maxBuffer: 64 << 20 }),
    ) as Record<string, string[]>;
    return Object.fromEntries(Object.entries(out).map(([v, flags]) => [v, new Set(flags)]));
}

test("the specs reach every flag the renderer can emit", () => {
    const source = fs.readFileSync(path.join(ROOT, "components", "render", "vllm.ts"), "utf8");
    const start = source.indexOf("export function vllmServeArgv");
    const body = source.slice(start, source.indexOf("\nexport function ", start + 1));
    const literals = [...new Set([...body.matchAll(/"(--?[a-z][a-z0-9-]*)"/g)].map((m) => m[1]))].sort();
    assert.deepEqual(RENDERED, literals);
    assert.equal(RENDERED.length, 20, RENDERED.join(" "));
});

test("every rendered flag x every version: the table agrees with the release's source", () => {
    const source = sourceFlags();
    let accepted = 0;
    let refused = 0;
    const rows: string[] = [];
    const disagreements: string[] = [];
    for (const version of VLLM_FLAG_VERSIONS) {
        const missing: string[] = [];
        for (const flag of RENDERED) {
            const table = flagAccepted(version, flag);
            const real = source[version].has(flag);
            if (table !== real)
                disagreements.push(`${version} ${flag}: table ${table ? "accepts" : "refuses"}, source ${real ? "has it" : "has no such literal"}`);
            if (table) accepted++;
            else {
                refused++;
                missing.push(flag);
            }
        }
        rows.push(`# ${version}: ${RENDERED.length - missing.length}/${RENDERED.length} accepted${missing.length ? `; refused: ${missing.join(" ")}` : ""}`);
    }
    console.log(rows.join("\n"));
    console.log(
        `# checked ${VLLM_FLAG_VERSIONS.length} versions x ${RENDERED.length} flags = ${accepted + refused}: ${accepted} accepted, ${refused} refused (table and source agree on ${accepted + refused - disagreements.length})`,
    );
    assert.deepEqual(disagreements, []);
});

test("the executors the product renders are among --distributed-executor-backend's values in every version (enforced in 0.10.1.1, listed in help since)", () => {
    for (const version of VLLM_FLAG_VERSIONS) {
        const flag = findVllmFlag(version, "--distributed-executor-backend");
        const choices = flag?.choices ?? flag?.metavar_choices ?? [];
        for (const executor of ["ray", "mp"]) assert.ok(choices.includes(executor), `${version}: ${executor} in ${choices.join(",")}`);
    }
});
