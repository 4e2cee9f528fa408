// The hosts as they are, on the lab's Spark pair.
//
// Drift through refresh (docs/operations.md, "Drift"): with one drift of each kind made by hand over SSH
// (test/integration/drift.ts: our file edited or deleted, a unit stopped, disabled or edited, an
// interconnect address and an MTU changed, PFC off, our firewall table
// deleted), `preview --refresh` reports each on its node's resource, and nothing else;
// `up --refresh` repairs them; the next `preview --refresh` has no change. A clean cluster's
// refresh is a no-op.
//
// A node that is gone (docs/operations.md, "A node that is gone"): with spark-b's management link down (the
// host side of its veth on the lab bridge, lab/lib/net.sh), spark-b still runs and its
// interconnect still carries traffic, but no SSH reaches it:
//   - `preview --refresh` names spark-b's resources as not read, within ssh.connectTimeoutSeconds;
//   - `up --refresh --continue-on-error` with a change on both nodes and a drift on spark-a fails
//     for spark-b only, within the bound, naming its step and address and what to do next
//     (--continue-on-error, nodes[].retired); spark-a converges and its drift is repaired;
//   - `destroy --continue-on-error` fails for spark-b's steps within the same bound and cleans
//     spark-a as far as the dependency graph allows (what waits for spark-b's Ray worker and model
//     copy stays);
//   - with `nodes[1].retired: true`, `destroy --run-program` finishes the stack: spark-a is clean,
//     spark-b's resources leave the stack without their delete (nothing ran on spark-b: once its
//     link is back, everything of ours is still there);
//   - no output carries a warning about PULUMI_COMMAND_STDOUT / sshd's AcceptEnv.
// Every wait is bounded; the link is put back up whatever happens.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as path from "node:path";
import { NETPLAN_PATH, UNITS, unitPath } from "../../config/hostPaths";
import { sshRun, withLabUp } from "../lab/lab-harness";
import { DRIFTS, asLines, expectedDrift, reportedDrift } from "./drift";
import { NodeName, OUR_PATHS, Session, apiKeyOf, newSession, pulumi, removeSession, root, secondsUntilAnswering, setConfig, ssh } from "./stackSession";

withLabUp();

/** The host side of spark-b's management link: veth `scm-<tag>` on the lab bridge sclab0 (lab/lib/net.sh, node_tag). */
const SPARK_B_MGMT_LINK = "scm-sb";
const SPARK_B_SSH = "root@10.77.0.12:22";
/** How a failed step on spark-b starts saying what to do next (components/render/unreachableHint.ts). */
const UNREACHABLE_HINT = `spark-cluster: node spark-b (${SPARK_B_SSH}) could not be reached over SSH. What to do next:`;
/**
 * spark-b's nodes[].ssh.connectTimeoutSeconds in this file's stack: a third of the default (60),
 * so that each of the three operations that try spark-b while it is gone waits 20 s, not a minute
 * (the bound is what is checked, at any value; test/mocked/retiredNode.test.ts has the default's tries).
 */
const BOUND_SECONDS = 20;

interface Outcome {
    status: number;
    output: string;
    seconds: number;
}

/** `scripts/pulumi.sh --stack dev ARGS --config-file <session's>`; never throws on a failed operation (bounded). */
function pulumiOutcome(session: Session, args: string[], timeoutSeconds = 300): Outcome {
    const start = Date.now();
    const r = spawnSync(path.join(root, "scripts", "pulumi.sh"), ["--stack", "dev", "--non-interactive", ...args, "--config-file", session.configFile], {
        cwd: root,
        encoding: "utf8",
        timeout: timeoutSeconds * 1000,
        env: { ...process.env, PULUMI_BACKEND_URL: `file://${session.backend}`, PULUMI_CONFIG_PASSPHRASE: "", PULUMI_CONFIG_PASSPHRASE_FILE: "" },
    });
    if (r.error || r.status === null) {
        throw new Error(`pulumi ${args.join(" ")} did not finish within ${timeoutSeconds} s: ${r.error?.message ?? r.signal}\n${r.stdout}\n${r.stderr}`);
    }
    return { status: r.status, output: `${r.stdout}\n${r.stderr}`, seconds: Math.round((Date.now() - start) / 100) / 10 };
}

/** A failed step, as the CLI lists it under Diagnostics. */
interface Failure {
    /** The resource type: spark-remote:index:Step, or one of our components. */
    type: string;
    step: string;
    message: string;
}

/** Every `error:` under a resource's header in Diagnostics (after its warnings, if any); not the stack's own `update failed`. */
function failures(output: string): Failure[] {
    const found: Failure[] = [];
    const lines = output.split("\n");
    for (let i = 0; i < lines.length; i++) {
        const head = /^ {2}(\S+) \(([^)]+)\):$/.exec(lines[i]);
        if (head?.[1] === "pulumi:pulumi:Stack") continue;
        for (let j = i + 1; head && j < lines.length && lines[j].startsWith("    "); j++) {
            const error = /^ {4}error: (.*)$/.exec(lines[j]);
            if (error) found.push({ type: head[1], step: head[2], message: error[1] });
        }
    }
    return found;
}

/**
 * What Pulumi 3.246 reported under `up --refresh --continue-on-error` for a component of ours
 * whose command was skipped because a step it waits for failed (docs/operations.md, "A node that is gone").
 * Still allowed, and printed when it comes; 3.274.1 did not report it on 2026-11-25.
 */
const ENGINE_SKIPPED_COMPONENT = /^cannot complete a resource '\S+' whose registration isn't pending$/;

/** The provider's "could not reach the node" error: after how many tries, and how long it took. */
function dialFailure(f: Failure): { attempts: number; seconds: number } | undefined {
    const m = /^failed to connect to host (\S+) after (\d+) attempt\(s\) in ([0-9.]+)s \(connection\.dialErrorLimit \d+, perDialTimeout \d+s\): (.*)$/.exec(
        f.message,
    );
    return m && m[1] === SPARK_B_SSH ? { attempts: Number(m[2]), seconds: Number(m[3]) } : undefined;
}

/** The names of the stack's command resources, by node prefix. */
function stackCommands(session: Session): string[] {
    const state = JSON.parse(pulumi(session, "stack", "export")) as { deployment: { resources?: { type: string; urn: string }[] } };
    return (state.deployment.resources ?? []).filter((r) => r.type === "spark-remote:index:Step").map((r) => r.urn.split("::").pop() as string);
}

/** How long each step the engine finished took, as its progress lines say (`… updated (4s)`). */
function stepTimes(output: string): string {
    const times = [...output.matchAll(/spark-remote:index:Step (\S+) (?:created|updated|deleted|replaced) \((\d+)s\)/g)].map((m) => `${m[1]} ${m[2]} s`);
    return times.length > 0 ? times.join(", ") : "no step finished";
}

function ours(node: NodeName): string[] {
    return ssh(node, `ls -d ${OUR_PATHS.join(" ")} 2>/dev/null || true`)
        .trim()
        .split("\n")
        .filter(Boolean);
}

function assertNoEnvWarning(what: string, output: string): void {
    assert.doesNotMatch(output, /PULUMI_COMMAND_STDOUT|PULUMI_COMMAND_STDERR|AcceptEnv/, `${what}: a warning about what we pass to ourselves`);
}

function setLink(state: "up" | "down"): void {
    execFileSync("ip", ["link", "set", "dev", SPARK_B_MGMT_LINK, state], { timeout: 10_000 });
}

describe("the hosts as they are: drift through refresh, and spark-b's management link down", { timeout: 1_800_000 }, () => {
    let session: Session;
    const mtu: Partial<Record<NodeName, string>> = {};

    before(() => {
        session = newSession();
        setConfig(session, "spark-cluster:nodes[1].ssh.connectTimeoutSeconds", String(BOUND_SECONDS));
        for (const node of ["spark-a", "spark-b"] as const) {
            mtu[node] = ssh(node, "cat /sys/class/net/enp1s0f1np1/mtu").trim();
        }
    });

    after(() => {
        // Only this link, by its exact name; then the session's stack goes (bounded).
        try {
            setLink("up");
        } finally {
            removeSession(session);
        }
    });

    it("converges both nodes (both reachable)", (t) => {
        const up = pulumiOutcome(session, ["up", "--yes", "--skip-preview"], 600);
        assert.equal(up.status, 0, up.output);
        assertNoEnvWarning("up", up.output);
        t.diagnostic(`up with both nodes: ${up.seconds} s, ${stackCommands(session).length} commands in the stack`);
    });

    it("a clean cluster's refresh is a no-op; no-op up with and without refresh", (t) => {
        const plain = pulumiOutcome(session, ["up", "--yes", "--skip-preview", "--expect-no-changes"]);
        assert.equal(plain.status, 0, plain.output);
        const refreshed = pulumiOutcome(session, ["up", "--yes", "--skip-preview", "--refresh", "--expect-no-changes"]);
        assert.equal(refreshed.status, 0, refreshed.output);
        assert.deepEqual(asLines(reportedDrift(refreshed.output)), [], "no drift on a clean cluster");
        const preview = pulumiOutcome(session, ["preview", "--refresh", "--expect-no-changes"]);
        assert.equal(preview.status, 0, preview.output);
        t.diagnostic(`no-op up: ${plain.seconds} s; no-op up --refresh: ${refreshed.seconds} s; preview --refresh: ${preview.seconds} s`);
    });

    it("drift made by hand: preview --refresh reports each on its resource, up --refresh repairs, the next refresh is clean", async (t) => {
        for (const d of DRIFTS) {
            ssh(d.node, d.script, 30);
        }
        const want = asLines(expectedDrift());
        const preview = pulumiOutcome(session, ["preview", "--refresh", "--diff"]);
        assert.equal(preview.status, 0, preview.output);
        assert.deepEqual(asLines(reportedDrift(preview.output)), want, preview.output);
        for (const d of DRIFTS) {
            assert.ok(preview.output.includes(d.line), `the preview's diff shows ${d.what}: ${d.line}`);
        }
        t.diagnostic(`preview --refresh with ${DRIFTS.length} drifts: ${preview.seconds} s`);

        const up = pulumiOutcome(session, ["up", "--yes", "--skip-preview", "--refresh"], 600);
        assert.equal(up.status, 0, up.output);
        assert.deepEqual(asLines(reportedDrift(up.output)), want, "up --refresh saw the same drift");
        t.diagnostic(`up --refresh repairing them: ${up.seconds} s; ${stepTimes(up.output)}`);

        // Repaired on the hosts, as each check saw it.
        assert.equal(ssh("spark-b", "cat /sys/class/net/enp1s0f1np1/mtu").trim(), "9000");
        assert.match(ssh("spark-a", "ip -o -4 addr show dev enP2p1s0f1np1"), /inet 192\.168\.101\.11\/24 /);
        assert.doesNotMatch(ssh("spark-a", "cat /etc/nccl.conf"), /NCCL_DEBUG=TRACE/);
        assert.equal(ssh("spark-b", "systemctl is-enabled spark-cluster-ray.service").trim(), "enabled");
        assert.match(ssh("spark-a", "nft list tables"), /spark_cluster/);
        assert.match(ssh("spark-b", "mlnx_qos -i enP2p1s0f1np1"), /^\tprio:3 dscp:24,25,26,/m, "DSCP 26 is back on priority 3");
        // Ray's worker was restarted for its unit file, vLLM started again: wait until it answers.
        const answered = await secondsUntilAnswering("http://10.77.0.11:8000/v1", apiKeyOf(session), "tiny-chat", 300);
        t.diagnostic(`the endpoint answers ${answered.seconds} s after the repair`);

        const again = pulumiOutcome(session, ["preview", "--refresh", "--expect-no-changes"]);
        assert.equal(again.status, 0, again.output);
        assert.deepEqual(asLines(reportedDrift(again.output)), [], "the next refresh is clean");
    });

    // First contact (issue 35): a node whose facts cannot be read again cannot be judged by the node
    // check, which every node's host layers wait for, so an up --refresh with spark-b unreachable
    // changes nothing anywhere; it fails within the bound at spark-b's facts, naming step, address
    // and what to do (bring it back, or retire it).
    it("up --refresh with spark-b unreachable: spark-b's steps fail within the bound, naming step and address; nothing changes on spark-a", async (t) => {
        setLink("down");
        // spark-b still runs (and answers on the interconnect), but SSH cannot reach it.
        assert.notEqual(sshRun("spark-b", "true", 30_000).status, 0, "spark-b is unreachable over SSH");
        const preview = pulumiOutcome(session, ["preview", "--refresh"]);
        assert.equal(preview.status, 0, preview.output);
        const notRead = [
            ...preview.output.matchAll(
                /warning: (\S+) on root@10\.77\.0\.12:22 was not read back: failed to connect to host \S+ after \d+ attempt\(s\) in ([0-9.]+)s/g,
            ),
        ];
        assert.ok(notRead.length > 0, preview.output);
        for (const m of notRead) {
            assert.match(m[1], /^spark-b-/, "only spark-b's resources are not read");
            assert.ok(Number(m[2]) <= BOUND_SECONDS, `${m[1]}: read gave up after ${m[2]} s (bound ${BOUND_SECONDS} s)`);
        }
        assert.ok(
            [...reportedDrift(preview.output).keys()].every((name) => !name.startsWith("spark-a-")),
            "spark-a reads back clean",
        );
        t.diagnostic(`preview --refresh with spark-b gone: ${preview.seconds} s; ${notRead.length} of spark-b's resources not read`);

        ssh("spark-a", DRIFTS[0].script, 30);
        setConfig(session, "spark-cluster:interconnect.mtu", "8000");
        const up = pulumiOutcome(session, ["up", "--yes", "--skip-preview", "--refresh", "--continue-on-error"], 600);
        assert.notEqual(up.status, 0, "up fails");
        assertNoEnvWarning("up", up.output);
        const failed = failures(up.output);
        assert.ok(failed.length > 0, up.output);
        for (const f of failed) {
            assert.match(f.step, /^spark-b-/, `only spark-b's steps fail: ${f.step}: ${f.message}`);
            if (f.type !== "spark-remote:index:Step") {
                assert.match(f.message, ENGINE_SKIPPED_COMPONENT, `${f.type} ${f.step}`);
                t.diagnostic(`up: ${f.type} ${f.step}: ${f.message}`);
                continue;
            }
            const dial = dialFailure(f);
            assert.ok(dial, `${f.step} failed reaching ${SPARK_B_SSH}: ${f.message}`);
            assert.ok(dial.seconds <= BOUND_SECONDS, `${f.step} gave up after ${dial.seconds} s (bound ${BOUND_SECONDS} s)`);
            t.diagnostic(`up: ${f.step} failed after ${dial.attempts} tries in ${dial.seconds} s: ${f.message.split("): ").pop()}`);
        }
        assert.ok(up.output.includes(UNREACHABLE_HINT), `up's errors say what to do next: ${UNREACHABLE_HINT}`);
        assert.match(up.output, /set `retired: true` on the node named spark-b/);
        assert.ok(
            failed.some((f) => f.step === "spark-b-facts"),
            `spark-b's facts step (read again by --refresh) is among them: ${failed.map((f) => f.step).join(", ")}`,
        );
        assert.equal(ssh("spark-a", "cat /sys/class/net/enp1s0f1np1/mtu").trim(), "9000", "spark-a's MTU is unchanged");
        assert.match(ssh("spark-a", "cat /etc/nccl.conf"), /NCCL_DEBUG=TRACE/, "spark-a's drift is still there: nothing ran on spark-a");
        t.diagnostic(`up: ${up.seconds} s in all (stopped at spark-b's facts); failed: ${failed.map((f) => f.step).join(", ")}`);
    });

    it("destroy fails for spark-b's steps within the bound and cleans spark-a as far as the graph allows", (t) => {
        const before = stackCommands(session);
        const destroy = pulumiOutcome(session, ["destroy", "--yes", "--skip-preview", "--continue-on-error"]);
        assert.notEqual(destroy.status, 0, "destroy fails");
        assertNoEnvWarning("destroy", destroy.output);
        const failed = failures(destroy.output);
        assert.ok(failed.length > 0, destroy.output);
        for (const f of failed) {
            assert.ok(/^spark-b-/.test(f.step) || f.step === "dev-model-pull-spark-b", `only spark-b's steps fail: ${f.step}: ${f.message}`);
            const dial = dialFailure(f);
            assert.ok(dial, `${f.step} failed reaching ${SPARK_B_SSH}: ${f.message}`);
            assert.ok(dial.seconds <= BOUND_SECONDS, `${f.step} gave up after ${dial.seconds} s (bound ${BOUND_SECONDS} s)`);
            t.diagnostic(`destroy: ${f.step} failed after ${dial.attempts} tries in ${dial.seconds} s`);
        }
        assert.ok(destroy.output.includes(UNREACHABLE_HINT), `destroy's errors say what to do next: ${UNREACHABLE_HINT}`);
        assert.match(destroy.output, /`pulumi destroy --continue-on-error`/);
        const left = stackCommands(session);
        const leftOnA = left.filter((name) => name.startsWith("spark-a-") || (name.startsWith("dev-model-") && !name.endsWith("-spark-b")));
        t.diagnostic(`destroy: ${destroy.seconds} s in all; ${before.length - left.length} of ${before.length} commands removed`);
        t.diagnostic(`left in the stack on spark-a (they wait for spark-b's Ray worker or model copy): ${leftOnA.join(", ")}`);
        t.diagnostic(`left on spark-a's disk: ${ours("spark-a").join(", ")}`);
        // (spark-a-vllm-probe, a read-only probe, stays with the host layers it comes before.)
        assert.ok(!left.some((name) => /^spark-a-vllm(-(secrets|unit|ready))?$/.test(name)), "spark-a's vLLM is gone (nothing waits on it)");
        assert.equal(ssh("spark-a", `ls ${unitPath(UNITS.vllm)} 2>/dev/null || true`).trim(), "", "spark-a's vLLM unit is removed");
        assert.ok(
            left.some((name) => name.startsWith("spark-b-")),
            "spark-b's resources are all still in the stack",
        );
    });

    it("retired: destroy --run-program finishes the stack; nothing ran on spark-b", (t) => {
        setConfig(session, "spark-cluster:nodes[1].retired", "true");
        const destroy = pulumiOutcome(session, ["destroy", "--yes", "--skip-preview", "--run-program"]);
        assert.equal(destroy.status, 0, destroy.output);
        assertNoEnvWarning("destroy", destroy.output);
        assert.match(destroy.output, /spark-b is retired \(nodes\[1\]\.retired\): nothing runs on it/);
        assert.deepEqual(stackCommands(session), [], "the stack is empty");
        assert.deepEqual(ours("spark-a"), [], "spark-a is clean");
        assert.doesNotMatch(ssh("spark-a", "nft list tables"), /spark_cluster/, "spark-a has no table of ours");
        assert.equal(ssh("spark-a", "cat /sys/class/net/enp1s0f1np1/mtu").trim(), mtu["spark-a"], "spark-a's MTU is put back");
        t.diagnostic(`destroy --run-program with spark-b retired: ${destroy.seconds} s`);

        // Back on the network, spark-b shows that nothing ran there: everything of ours is in place.
        setLink("up");
        const leftOnB = ours("spark-b");
        t.diagnostic(`on spark-b, untouched: ${leftOnB.join(", ")}`);
        assert.ok(leftOnB.includes(NETPLAN_PATH) && leftOnB.includes(unitPath(UNITS.ray)), `spark-b keeps what we left there: ${leftOnB.join(", ")}`);
        assert.equal(ssh("spark-b", "systemctl is-active spark-cluster-ray.service || true").trim(), "active", "spark-b's Ray still runs");
    });
});
