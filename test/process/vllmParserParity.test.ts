/**
 * Every vLLM flag table (config/vllmFlags/<version>.json) against the REAL argument parser of its
 * release: scripts/vllm-parser.sh builds, per version, the parser `vllm serve` builds (its CLI's
 * subparser from vllm/entrypoints/cli/serve.py, which calls that release's make_arg_parser) in a
 * venv with the wheel the table was generated from and its requirements (built once with uv,
 * cached in ~/.cache/spark-cluster/venvs/vllm-parser-<version>/), on one shared torch (2.13.0,
 * the lab's; the script's header says why, and that each parser prints the same options on the
 * torch its release pins), and prints every option string of it.
 *
 * For every version in VLLM_FLAG_VERSIONS:
 * - every flag the renderer can emit (RENDERABLE_VLLM_FLAGS): the parser has the option exactly
 *   when `flagAccepted(version, flag)` says so;
 * - every spelling: the table's options (all `options` of all args) are the option strings the
 *   parser matches, neither more nor fewer (`-h/--help` aside, which argparse adds and the table
 *   omits); in 0.33 that includes the `--no-enable-X`/`--no-disable-X` spellings vLLM hides from
 *   --help but still accepts.
 *
 * The first run on a machine installs eight venvs from PyPI, and torch unless the NCCL check's
 * test did (see scripts/vllm-parser.sh for what, and docs/development.md, "What the tests cost",
 * for the time and bytes). Later runs build each parser again, two at a time, where its venv
 * changed since its last report, and print that report where it did not (the report says when
 * its parser was built; SPARK_PARSER_REPROBE=1 builds every parser again).
 */
import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { VLLM_FLAG_VERSIONS, flagAccepted, vllmFlagTable } from "../../config/vllmFlags";
import { RENDERABLE_VLLM_FLAGS } from "../support/fixtures";

const ROOT = path.resolve(__dirname, "..", "..", "..");

/** One line of scripts/vllm-parser.sh. */
interface ParserReport {
    version: string;
    /** When the parser was built: the script reports a venv's parser again while the venv is unchanged. */
    probed: string;
    vllm: string;
    torch: string;
    make_arg_parser: string;
    /** Every option string the parser matches (argparse's `_option_string_actions`), `-h/--help` included. */
    options: string[];
    /** Those among them that no action lists in `option_strings` (0.33 keeps `--no-enable-X` accepted but out of --help). */
    hidden: string[];
}

describe("every flag table against its release's real `vllm serve` parser (scripts/vllm-parser.sh)", () => {
    const parsers = new Map<string, ParserReport>();

    before(() => {
        const started = Date.now();
        const out = execFileSync(path.join(ROOT, "scripts", "vllm-parser.sh"), [...VLLM_FLAG_VERSIONS], {
            cwd: ROOT,
            encoding: "utf8",
            stdio: ["ignore", "pipe", "inherit"],
            maxBuffer: 64 << 20,
            timeout: 3 * 60 * 60_000,
        });
        for (const line of out.trim().split("\n")) {
            const report = JSON.parse(line) as ParserReport;
            parsers.set(report.version, report);
        }
        console.log(`# scripts/vllm-parser.sh: ${parsers.size} parsers in ${Math.round((Date.now() - started) / 1000)} s`);
    });

    it("the script reports a parser for every version with a table", () => {
        assert.deepEqual([...parsers.keys()], [...VLLM_FLAG_VERSIONS]);
    });

    for (const version of VLLM_FLAG_VERSIONS) {
        it(`${version}: the table agrees with the real parser on every rendered flag and on every spelling`, () => {
            const report = parsers.get(version);
            assert.ok(report, `scripts/vllm-parser.sh printed no parser for ${version}`);
            assert.equal(report.vllm.split("+")[0], version, "the venv's vLLM is the table's");
            const real = new Set(report.options.filter((o) => o !== "-h" && o !== "--help"));
            const table = vllmFlagTable(version);
            assert.ok(table, `a ${version} table`);
            const spellings = new Set(table.args.flatMap((a) => a.options));
            const disagree = RENDERABLE_VLLM_FLAGS.filter((flag) => real.has(flag) !== flagAccepted(version, flag)).map(
                (flag) => `${flag}: parser ${real.has(flag) ? "has it" : "lacks it"}, table ${flagAccepted(version, flag) ? "accepts" : "refuses"}`,
            );
            const accepted = RENDERABLE_VLLM_FLAGS.filter((flag) => real.has(flag)).length;
            console.log(
                `# ${version} (vllm ${report.vllm}, torch ${report.torch}, ${report.make_arg_parser}.make_arg_parser, probed ${report.probed}): ` +
                    `${RENDERABLE_VLLM_FLAGS.length} rendered flags checked, ${accepted} accepted by the parser, ${disagree.length} disagreements; ` +
                    `spellings: parser ${real.size} (${report.hidden.length} hidden from --help), table ${spellings.size}`,
            );
            assert.deepEqual(disagree, []);
            assert.deepEqual([...spellings].filter((o) => !real.has(o)).sort(), [], "every spelling in the table is the parser's");
            assert.deepEqual([...real].filter((o) => !spellings.has(o)).sort(), [], "every spelling of the parser is in the table");
        });
    }
});
