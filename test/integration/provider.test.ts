// Our provider (package spark-remote, toolchain/plugins) on the lab's Spark pair, with the real
// Pulumi CLI:
//   - a stack deployed by the last commit whose provider announced itself as Pulumi's `command`
//     moves to spark-remote by a rewrite of its state (toolchain/migrate-provider.js, what
//     scripts/pulumi.sh runs by itself): the preview then shows every resource unchanged, a second
//     up changes nothing, no resource of the state is a command:remote:Command, and destroy
//     leaves no file, unit, rule, container or address of ours on either node.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as path from "node:path";
import { labReusableFor, withLabUp } from "../lab/lab-harness";
import { root, run } from "./stackSession";

withLabUp("spark-pair");

/** The last commit whose provider was package `command` 1.2.1 (type command:remote:Command). */
const BEFORE_THE_RENAME = "d74a5e6";

describe("a stack deployed before the rename moves to our provider without touching a host", { timeout: 1_800_000 }, () => {
    it(`scripts/check-no-change.sh ${BEFORE_THE_RENAME} HEAD: migrated, no change, destroy leaves nothing`, (t) => {
        const out = run(undefined, path.join(root, "scripts", "check-no-change.sh"), [BEFORE_THE_RENAME, "HEAD"], 1500);
        const lines = out.split("\n").filter((l) => l.startsWith("check-no-change:"));
        t.diagnostic(lines.join(" | "));
        assert.match(out, /check-no-change: moved the state to HEAD's provider/);
        assert.match(out, /check-no-change: \d+ unchanged, new components: none/);
        assert.match(out, /check-no-change: custom resource types in the state after HEAD: pulumi:providers:spark-remote spark-remote:index:Step$/m);
        assert.match(out, /check-no-change: HEAD changes nothing on a stack deployed with \S+/);
        // check-no-change destroys with HEAD at its end.
        assert.equal(labReusableFor("spark-pair"), "", "nothing of ours is left on the nodes after destroy");
    });
});
