/**
 * Every command the docs print (a line of a ```sh or ```bash block of README.md or docs/*.md) has
 * a home: run as printed against the lab by a test (the README's two-Spark quickstart and
 * docs/operations.md by test/integration/dgxOs.test.ts, the README's lab quickstart and demo by
 * test/integration/readmeLab.test.ts), or listed here with why it is not and what runs it instead.
 * A new command in the docs fails this test until it has one.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { NOT_RUN_BY_THE_QUICKSTART_TEST, README_LAB_COMMANDS, docCommands, quickstartCommands } from "../support/docCommands";

/** Commands not run as printed by any test, and why. */
const NOT_RUN_ELSEWHERE: Readonly<Record<string, string>> = {
    "./scripts/test.sh    # run the whole test suite (config, renderers, mocked graph, toolchain, lab, pulumi up/destroy)": "the suite itself: .ci/run runs it",
    "./scripts/preview-diff.sh                # every stack in stacks/": "test/mocked/preview.test.ts runs scripts/preview-diff.sh on the stacks in stacks/",
    "./scripts/preview-diff.sh spark-pair     # only the ones named": "test/mocked/preview.test.ts runs scripts/preview-diff.sh with stack names",
    'pulumi config set --secret spark-cluster:openWebuiAdminPassword "$(openssl rand -base64 18)"':
        "Open WebUI's steps: test/integration/openWebui.test.ts sets this secret on its own copy of the lab stack (--config-file), not as printed",
    "pulumi up": "Open WebUI's steps: test/integration/openWebui.test.ts runs up on its own copy of the lab stack, not as printed",
    "pulumi stack output openWebui   # ssh -N -L 8080:127.0.0.1:8080 root@HEAD, then open http://localhost:8080":
        "Open WebUI's steps: test/integration/openWebui.test.ts reads this output and opens the tunnel to the page, not as printed",
    "sudo npm run bench          # BENCH_SIZES=2,4,8 BENCH_REPS=3 by default; BENCH_RAY_UP=0 skips the baseline":
        "the benchmark: minutes of lab time at 2, 4 and 8 nodes, run by hand; docs/speed.md records each run",
};

describe("every command the docs print has a home", () => {
    const all = docCommands();
    const quickstart = new Set(quickstartCommands(all).map((c) => c.line));

    it("finds the docs' commands", () => {
        assert.ok(all.length >= 30, `${all.length} commands`);
        assert.ok(quickstart.has("npm run doctor -- --stack my-pair"));
    });

    for (const c of all) {
        it(`${c.file}: ${c.line}`, () => {
            const homes = [
                ...(quickstart.has(c.line) && !(c.line in NOT_RUN_BY_THE_QUICKSTART_TEST) ? ["run as printed by test/integration/dgxOs.test.ts"] : []),
                ...(README_LAB_COMMANDS.includes(c.line) ? ["run as printed by test/integration/readmeLab.test.ts"] : []),
                ...(c.line in NOT_RUN_BY_THE_QUICKSTART_TEST ? [`not run as printed: ${NOT_RUN_BY_THE_QUICKSTART_TEST[c.line]}`] : []),
                ...(c.line in NOT_RUN_ELSEWHERE ? [`not run as printed: ${NOT_RUN_ELSEWHERE[c.line]}`] : []),
            ];
            assert.equal(homes.length, 1, `${c.line}: ${homes.length === 0 ? "no test runs it and no entry says why" : homes.join("; ")}`);
        });
    }

    it("every entry of the lists names a command the docs print", () => {
        const lines = new Set(all.map((c) => c.line));
        for (const line of [...Object.keys(NOT_RUN_BY_THE_QUICKSTART_TEST), ...Object.keys(NOT_RUN_ELSEWHERE), ...README_LAB_COMMANDS]) {
            assert.ok(lines.has(line), `${line} is in no doc`);
        }
    });
});
