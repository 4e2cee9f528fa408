// Our provider (package spark-remote, toolchain/plugins) on the lab's Spark pair, with the real
// Pulumi CLI:
//   - a stack deployed by the last commit whose provider announced itself as Pulumi's `command`
//     moves to spark-remote by a rewrite of its state (toolchain/migrate-provider.js, what
//     scripts/pulumi.sh runs by itself): the preview then shows every resource unchanged, a second
//     up changes nothing, no resource of the state is a command:remote:Command, and destroy
//     leaves no file, unit, rule, container or address of ours on either node;
//   - a step whose create fails after it started on the node (a unit step whose unit never
//     becomes active) is recorded by the engine with its inputs, so destroy runs its delete and
//     leaves nothing of ours, and the next up runs its create again;
//   - so are the host layers failing midway (issue 36, part 4): the netplan steps (after writing
//     their files, `netplan apply` fails), the firewall's (after its rules, unit and drop-ins, `nft`
//     fails) and PFC's (after recording what it found, `mlnx_qos` fails): destroy leaves nothing.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as path from "node:path";
import { FIREWALL_RULES_PATH, NETPLAN_PATH, PFC_STATE_DIR, UNITS, firewallDropInPath, unitPath } from "../../config/hostPaths";
import { labReusableFor, withLabUp } from "../lab/lab-harness";
import { Session, newSession, pulumi, pulumiWithConfig, removeSession, root, run, ssh } from "./stackSession";

withLabUp("spark-pair");

/**
 * The last commit whose provider was package `command` 1.2.1 (type command:remote:Command): main
 * just before the rename was merged, with every step the program has besides (first contact's).
 */
const BEFORE_THE_RENAME = "8a51149";
/**
 * What HEAD changes on purpose on every stack deployed before issue 36 (the lab's dev stack: Ray
 * executor, docker runtime): the serving units start the image by the ID the probe found, not by
 * its tag, and the head's Ray and vLLM unit steps install their health watchdogs (the units name
 * them), so each is updated once (restarted onto the same image) and the readiness checks run again;
 * and each firewall step installs its drop-ins on our listening units (issue 40, item 7: no
 * restart of anything, a daemon-reload); each interconnect apply step's script has the netplan
 * apply that tries again after a daemon-reload's race (its update finds the file and addresses in
 * place, so it applies nothing). And the internal secrets move off the API key (issue 40, item 1):
 * the stack's root secret is created, and the steps that carry the Ray token and the model sync's
 * secret are updated with the ones derived from it. And the engine's secrets step's script clears
 * the restart gate before a restart and checks the unit came back (71df7bd): an update that writes
 * the same file, so it restarts nothing.
 */
const EXPECTED_CHANGES = [
    "dev-model-pull-spark-b(update)",
    "dev-model-serve(update)",
    "dev-root-secret(create)",
    "spark-a-firewall-apply(update)",
    "spark-a-interconnect-apply(update)",
    "spark-a-ray-head-auth(update)",
    "spark-a-ray-head-ready(update)",
    "spark-a-ray-head-unit(update)",
    "spark-a-vllm-ready(replace)",
    "spark-a-vllm-secrets(update)",
    "spark-a-vllm-unit(update)",
    "spark-b-firewall-apply(update)",
    "spark-b-interconnect-apply(update)",
    "spark-b-ray-worker-auth(update)",
    "spark-b-ray-worker-unit(update)",
];

/** The stack outputs HEAD adds or changes on purpose for a stack deployed before the rename: the model sync's summary per node (issue 41). */
const CHANGED_OUTPUTS = ["modelSync"];

describe("a stack deployed before the rename moves to our provider without touching a host", { timeout: 1_800_000 }, () => {
    it(`scripts/check-no-change.sh ${BEFORE_THE_RENAME} HEAD: migrated, no change but the units' image by ID and the watchdogs, destroy leaves nothing`, (t) => {
        process.env.SPARK_EXPECTED_CHANGES = EXPECTED_CHANGES.join(",");
        process.env.SPARK_CHANGED_OUTPUTS = CHANGED_OUTPUTS.join(",");
        let out = "";
        try {
            out = run(undefined, path.join(root, "scripts", "check-no-change.sh"), [BEFORE_THE_RENAME, "HEAD"], 1500);
        } finally {
            delete process.env.SPARK_EXPECTED_CHANGES;
            delete process.env.SPARK_CHANGED_OUTPUTS;
        }
        const lines = out.split("\n").filter((l) => l.startsWith("check-no-change:"));
        t.diagnostic(lines.join(" | "));
        // check-no-change names each side by its full commit id.
        assert.match(out, /check-no-change: moved the state to \S+'s provider/);
        assert.match(
            out,
            new RegExp(
                `check-no-change: \\d+ unchanged, new components: none, expected changes: ${EXPECTED_CHANGES.join(", ").replace(/[()]/g, "\\$&")}$`,
                "m",
            ),
        );
        assert.match(
            out,
            /check-no-change: custom resource types in the state after \S+: pulumi:providers:spark-remote spark-remote:index:RandomSecret spark-remote:index:Step$/m,
        );
        assert.match(out, /check-no-change: \S+ changes only what SPARK_EXPECTED_CHANGES lists on a stack deployed with \S+/);
        // check-no-change destroys with HEAD at its end.
        assert.equal(labReusableFor("spark-pair"), "", "nothing of ours is left on the nodes after destroy");
    });
});

describe("a step that fails after it started is recorded: destroy removes what it did, the next up runs it again", { timeout: 1_800_000 }, () => {
    // A drop-in of the test's (not ours) that keeps the head's vLLM unit from starting: the unit
    // step installs and enables the unit, then waits 60 s for it to be active and fails. The last
    // layer, so no other step waits on it.
    const dropIn = `/etc/systemd/system/${UNITS.vllm}.service.d`;
    const breakUnit = () =>
        ssh("spark-a", `mkdir -p ${dropIn} && printf '[Service]\\nExecStartPre=/bin/false\\n' > ${dropIn}/lab-fail.conf && systemctl daemon-reload`);
    const mendUnit = () => ssh("spark-a", `rm -rf ${dropIn} && systemctl daemon-reload`);
    /** Whether spark-a has the vLLM unit's file, and the link that enables it. */
    const unitOnA = () =>
        ssh(
            "spark-a",
            `echo "file=$(test -e ${unitPath(UNITS.vllm)} && echo yes || echo no) enabled=$(ls /etc/systemd/system/*.wants/${UNITS.vllm}.service 2>/dev/null | wc -l)"`,
        ).trim();

    it("up fails at the head's vLLM unit, the state has the step with its error, and destroy leaves no file, unit or rule of ours", (t) => {
        const session: Session = newSession();
        try {
            breakUnit();
            assert.throws(() => pulumiWithConfig(session, "up", "--yes", "--skip-preview"), /spark-a-vllm-unit/);
            assert.equal(unitOnA(), "file=yes enabled=1", "the failed step left its unit installed and enabled");
            const state = JSON.parse(pulumi(session, "stack", "export")) as {
                deployment: { resources: { urn: string; type: string; initErrors?: string[] }[] };
            };
            const failed = state.deployment.resources.filter((r) => (r.initErrors ?? []).length > 0);
            t.diagnostic(`recorded with initialization errors: ${failed.map((r) => r.urn.split("::").pop()).join(", ")}`);
            assert.equal(failed.length, 1, "one step recorded with its error");
            assert.equal(failed[0].type, "spark-remote:index:Step");
            assert.match(failed[0].urn, /::spark-a-vllm-unit$/);
            // The unit installed and enabled, then its start failed: `systemctl restart` (what this
            // drop-in makes fail) or the wait for it to be active.
            assert.match((failed[0].initErrors ?? []).join("\n"), /Job for spark-cluster-vllm\.service failed|spark-cluster-vllm is not running/);

            pulumiWithConfig(session, "destroy", "--yes", "--skip-preview");
            assert.equal(unitOnA(), "file=no enabled=0", "destroy ran the failed step's delete");
            mendUnit();
            assert.equal(labReusableFor("spark-pair"), "", "nothing of ours is left on the nodes");
        } finally {
            mendUnit();
            removeSession(session);
        }
    });

    it("after the cause is gone, the next up runs the failed step's create again and converges", (t) => {
        const session: Session = newSession();
        try {
            breakUnit();
            assert.throws(() => pulumiWithConfig(session, "up", "--yes", "--skip-preview"));
            mendUnit();
            const preview = pulumiWithConfig(session, "preview", "--diff");
            assert.match(
                preview,
                /~ spark-remote:index:Step: \(update\)\n(?:\s+\[(?!urn=)[^\n]*\n)*\s+\[urn=[^\]\n]*::spark-a-vllm-unit\]/,
                "the recorded step is updated: its create runs again",
            );
            const up = pulumiWithConfig(session, "up", "--yes", "--skip-preview");
            t.diagnostic(up.trim().split("\n").slice(-6).join(" | "));
            assert.equal(unitOnA(), "file=yes enabled=1");
            assert.equal(ssh("spark-a", `systemctl is-active ${UNITS.vllm}.service`).trim(), "active");
            assert.match(pulumiWithConfig(session, "preview", "--diff"), /unchanged/);
            assert.doesNotMatch(pulumiWithConfig(session, "preview", "--diff"), /to update|to create|to delete|to replace/);
            pulumiWithConfig(session, "destroy", "--yes", "--skip-preview");
            assert.equal(labReusableFor("spark-pair"), "", "nothing of ours is left on the nodes");
        } finally {
            mendUnit();
            removeSession(session);
        }
    });
});

describe("the host layers failing midway are recorded too: destroy leaves nothing of ours", { timeout: 1_800_000 }, () => {
    /**
     * A tool of the node's that fails (`subcommand`: only that one; the rest runs the real tool): the
     * tool moved aside (a symlink stays one, so netplan's script still finds its modules) and a
     * script in its place, undone by {@link mendTools}.
     */
    const breakTool = (node: "spark-a" | "spark-b", tool: string, subcommand?: string) =>
        ssh(
            node,
            [
                `p=$(command -v ${tool})`,
                `mv "$p" "$p.lab-real"`,
                `printf '#!/bin/sh\n%s\necho "lab: ${tool} broken by the test" >&2\nexit 1\n' ` +
                    `'${subcommand ? `[ "$1" = ${subcommand} ] || exec "$0.lab-real" "$@"` : ""}' > "$p"`,
                `chmod 755 "$p"`,
            ].join(" && "),
        );
    const mendTools = () => {
        for (const node of ["spark-a", "spark-b"] as const) {
            ssh(
                node,
                `for p in /usr/sbin/netplan /usr/sbin/nft "$(command -v mlnx_qos)"; do if [ -e "$p.lab-real" ] || [ -L "$p.lab-real" ]; then mv -f "$p.lab-real" "$p"; fi; done; true`,
            );
        }
    };

    /** One up with these tools broken fails in exactly `steps`, which left `leftOn`; destroy then leaves nothing of ours. */
    const failsThenCleans = (
        t: { diagnostic(message: string): void },
        broken: [node: "spark-a" | "spark-b", tool: string, subcommand?: string][],
        steps: string[],
        leftOn: [node: "spark-a" | "spark-b", paths: string[]],
    ) => {
        const session: Session = newSession();
        try {
            for (const [node, tool, subcommand] of broken) breakTool(node, tool, subcommand);
            // --continue-on-error: every layer that can run does, so each breaks in one up.
            assert.throws(
                () => pulumiWithConfig(session, "up", "--yes", "--skip-preview", "--continue-on-error"),
                /lab: (netplan|nft|mlnx_qos) broken by the test/,
            );
            const state = JSON.parse(pulumi(session, "stack", "export")) as { deployment: { resources: { urn: string; initErrors?: string[] }[] } };
            const failed = state.deployment.resources
                .filter((r) => (r.initErrors ?? []).length > 0)
                .map((r) => r.urn.split("::").pop())
                .sort();
            t.diagnostic(`recorded with initialization errors: ${failed.join(", ")}`);
            assert.deepEqual(failed, steps);
            const [node, paths] = leftOn;
            const left = ssh(node, `for p in ${paths.join(" ")}; do [ -e "$p" ] && echo "$p"; done; true`)
                .trim()
                .split("\n");
            assert.deepEqual(left, paths, "what the failed steps wrote before they failed is there");
            mendTools();
            pulumiWithConfig(session, "destroy", "--yes", "--skip-preview");
            assert.equal(labReusableFor("spark-pair"), "", "nothing of ours is left on the nodes");
        } finally {
            mendTools();
            removeSession(session);
        }
    };

    it("the firewall (nft) and PFC (mlnx_qos) fail after they started on spark-a: each is recorded, and destroy removes what it did", (t) => {
        failsThenCleans(
            t,
            [
                ["spark-a", "nft"],
                ["spark-a", "mlnx_qos"],
            ],
            ["spark-a-firewall-apply", "spark-a-roce-apply"],
            ["spark-a", [FIREWALL_RULES_PATH, unitPath(UNITS.firewall), firewallDropInPath(UNITS.ray), PFC_STATE_DIR]],
        );
    });

    it("netplan apply fails on both nodes after their files are written: both recorded, destroy removes them", (t) => {
        // Only `netplan apply`: first contact reads the node with `netplan get`. On both nodes: with
        // spark-b's alone, spark-a's step waited its 120 s for a peer that never came before it failed
        // too (recorded the same way), about 115 s of this test.
        failsThenCleans(
            t,
            [
                ["spark-a", "netplan", "apply"],
                ["spark-b", "netplan", "apply"],
            ],
            ["spark-a-interconnect-apply", "spark-b-interconnect-apply"],
            ["spark-b", [NETPLAN_PATH]],
        );
    });
});
