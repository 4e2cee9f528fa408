// The README's lab commands, run as printed (issue 35, "every command printed in README.md and
// docs/ runs as printed against the lab"): the demo (./scripts/demo.sh, then ./scripts/demo-down.sh,
// which the README names to undo it), then the lab quickstart's lines one after the other, the
// tryIt line it prints pasted into bash. The state goes to a throwaway backend (the reader's would
// be .pulumi-state/); "yes" at up's and destroy's prompt is PULUMI_SKIP_CONFIRMATIONS.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { withLabUp } from "../lab/lab-harness";
import { README_LAB_COMMANDS } from "../support/docCommands";
import { root } from "./stackSession";

withLabUp("spark-pair");

describe("the README's lab commands, as printed", () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-readme-"));
    const env = {
        ...process.env,
        PULUMI_BACKEND_URL: `file://${work}`,
        PULUMI_SKIP_CONFIRMATIONS: "true",
        PULUMI_CONFIG_PASSPHRASE: "",
        PULUMI_CONFIG_PASSPHRASE_FILE: "",
    };
    const runLine = (line: string, seconds = 1200) => {
        const started = Date.now();
        const r = spawnSync("bash", ["-c", line], { cwd: root, env, encoding: "utf8", timeout: seconds * 1000 });
        console.log(`ran in ${((Date.now() - started) / 1000).toFixed(1)} s: ${line}`);
        assert.equal(r.status, 0, `${line}\n${`${r.stdout}${r.stderr}`.slice(-3000)}`);
        return r.stdout;
    };
    after(() => fs.rmSync(work, { recursive: true, force: true }));

    it("the demo answers a chat naming both Sparks, and demo-down undoes it", () => {
        const demo = README_LAB_COMMANDS[0];
        assert.match(demo, /^\.\/scripts\/demo\.sh/);
        assert.match(runLine(demo), /LAB STAND-IN tiny-chat: served by spark-a,spark-b/);
        runLine("./scripts/demo-down.sh");
    });

    it("the lab quickstart: up, preview, up, the tryIt line answers, destroy, down", () => {
        for (const line of README_LAB_COMMANDS.slice(1)) {
            const out = runLine(line);
            if (line.includes("stack output tryIt")) {
                assert.match(out.trim(), /^curl -s /);
                assert.match(runLine(out.trim(), 120), /served by spark-a,spark-b/);
            }
        }
    });
});
