// SGLang on the lab's Spark pair (issue 21), venv runtime (/opt/lab-venv, where lab/lib/nodes.sh
// puts the SGLang stand-in beside the vLLM one), with the real Pulumi CLI: the pair converges with
// vLLM (mp), switches to SGLang, answers a chat naming both nodes, refuses the outsider on the
// dist-init port and every other internal port, changes nothing on a second `up`, and switches
// back to vLLM, whose headless rank, frozen by `kill -STOP`, its follower restarts (issue 36).
// Each switch touches only the serving steps and the engine's probe and check, and restarts only
// the serving units: every other unit of ours keeps its main PID. Both switches are printed as
// rows of the blast-radius table (test/integration/blastRadius.test.ts's format).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { withLabUp } from "../lab/lab-harness";
import { npmRun } from "./operationsOnPair";
import {
    NodeName,
    Session,
    apiKeyOf,
    chat,
    newSession,
    pulumi,
    pulumiWithConfig,
    removeSession,
    scanFromOutsider,
    secondsFrozenUntil,
    secondsUntilAnswering,
    ssh,
} from "./stackSession";

const members: NodeName[] = ["spark-a", "spark-b"];
const MODEL = "tiny-chat";
/** The serving units of either engine: the only ones a switch may restart. */
const SERVING = /^spark-cluster-(vllm|sglang)(-follow|-watchdog)?\.service$/;

withLabUp();

/** Both nodes on the lab venv, the mp executor (SGLang's own multi-node mode), and `engine`. */
function venvConfig(config: string, engine: "vllm" | "sglang"): string {
    const venv = config.replace(/runtime: \{kind: docker, [^}]*\}/g, "runtime: {kind: venv, path: /opt/lab-venv}");
    assert.notEqual(venv, config, "the stack names a runtime on each node");
    const mp = venv.replace("    executor: ray\n", `    executor: mp\n    engine: ${engine}\n`);
    assert.notEqual(mp, venv, "the stack names its executor");
    return mp;
}

/**
 * Per node: every unit of ours as `MainPID@ActiveEnterTimestampMonotonic` (a oneshot step that ran
 * again, such as the firewall's, changes its timestamp), and systemd-networkd's (a netplan apply
 * restarts it). `node:unit` -> that text.
 */
function unitStates(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const node of members) {
        const lines = ssh(
            node,
            "{ systemctl list-units 'spark-cluster-*' --all --no-legend --plain | awk '{print $1}'; echo systemd-networkd.service; } | " +
                'while read -r u; do echo "$u $(systemctl show -p MainPID --value "$u")@$(systemctl show -p ActiveEnterTimestampMonotonic --value "$u")"; done',
        );
        for (const line of lines.trim().split("\n").filter(Boolean)) {
            const [unit, state] = line.split(" ");
            out[`${node}:${unit}`] = state;
        }
    }
    return out;
}

function touchedByPreview(session: Session): string[] {
    const preview = JSON.parse(pulumiWithConfig(session, "preview", "--json")) as { steps: { op: string; urn: string }[] };
    return preview.steps
        .filter((s) => s.op !== "same")
        .map((s) => `${s.urn.split("::").pop()}(${s.op})`)
        .sort();
}

/** What a switch of engine may touch: the serving steps of both ranks, and the engine's probe and check. */
const SWITCH_TOUCHES = /^(dev-vllm-check|spark-[ab]-vllm(-(probe|ready|secrets|unit|follow|engine-switch))?)\(/;

describe("SGLang on the pair (venv): serves across both nodes, isolated, idempotent, switchable", { timeout: 3_600_000 }, () => {
    let session: Session;
    let apiKey = "";
    let endpoint = "";
    const rows: string[] = [];

    before(() => {
        session = newSession((c) => venvConfig(c, "vllm"));
        apiKey = apiKeyOf(session);
    });

    /** Applies `engine`, and returns the row: what preview touched, which units restarted. */
    async function switchTo(engine: "vllm" | "sglang", change: string): Promise<{ touched: string[]; restarted: string[] }> {
        const config = fs.readFileSync(session.configFile, "utf8");
        const next = config.replace(/    engine: (vllm|sglang)\n/, `    engine: ${engine}\n`);
        assert.notEqual(next, config);
        fs.writeFileSync(session.configFile, next);
        const touched = touchedByPreview(session);
        const before = unitStates();
        const start = Date.now();
        pulumiWithConfig(session, "up", "--yes", "--skip-preview");
        const seconds = Math.round((Date.now() - start) / 1000);
        const after = unitStates();
        const kept = Object.keys(before).filter((k) => !SERVING.test(k.split(":")[1]));
        assert.ok(
            kept.some((k) => k.endsWith(":spark-cluster-firewall.service")),
            `the firewall's unit is among those compared: ${kept.join(", ")}`,
        );
        for (const k of kept) assert.equal(after[k], before[k], `${k} kept its main PID and start time`);
        const restarted = Object.keys(before)
            .filter((k) => after[k] !== before[k])
            .sort();
        rows.push(`| ${change} | ${touched.join(", ")} | ${restarted.join(", ") || "none"} | ${seconds} s |`);
        for (const step of touched) assert.match(step, SWITCH_TOUCHES, `${change}: ${step} is a serving step or the engine's probe/check`);
        return { touched, restarted };
    }

    it("converges the pair with vLLM (mp, venv) and answers", async () => {
        pulumiWithConfig(session, "up", "--yes", "--skip-preview");
        endpoint = pulumi(session, "stack", "output", "endpoint").trim();
        await chat(endpoint, apiKey, MODEL);
    });

    it("vLLM -> SGLang: only the serving steps change and only the serving units restart; the answer names both nodes", async () => {
        const { touched, restarted } = await switchTo("sglang", "model.engine vllm -> sglang (venv)");
        assert.ok(touched.includes("spark-a-vllm-unit(update)") && touched.includes("spark-b-vllm-unit(update)"), touched.join(", "));
        assert.ok(touched.includes("spark-b-vllm-engine-switch(create)"), touched.join(", "));
        for (const node of members) {
            assert.equal(
                ssh(node, "test -e /etc/systemd/system/spark-cluster-vllm.service && echo left || echo gone").trim(),
                "gone",
                `${node}: vLLM's unit file`,
            );
            assert.equal(ssh(node, "test -e /etc/spark-cluster/vllm.env && echo left || echo gone").trim(), "gone", `${node}: vLLM's secrets file`);
        }
        for (const k of restarted) assert.match(k.split(":")[1], SERVING, `${k}: only serving units restart`);
        for (const node of members) {
            assert.equal(ssh(node, "systemctl is-active spark-cluster-vllm.service || true").trim(), "inactive", `${node}: vLLM is gone`);
            assert.equal(ssh(node, "systemctl is-active spark-cluster-sglang.service").trim(), "active", `${node}: SGLang runs`);
            assert.match(
                ssh(node, "tr '\\0' ' ' < /proc/$(systemctl show -p MainPID --value spark-cluster-sglang.service)/cmdline"),
                /-m sglang\.launch_server /,
            );
            assert.doesNotMatch(ssh(node, "ps -eo args"), new RegExp(apiKey), `${node}: the key is in no process's argv`);
        }
        const text = await chat(endpoint, apiKey, MODEL);
        assert.match(text, /LAB STAND-IN .*served by spark-a,spark-b \(sglang tp=2 nnodes=2\)/, text);
        const unauthorized = await fetch(`${endpoint}/models`, { signal: AbortSignal.timeout(10_000) });
        assert.equal(unauthorized.status, 401, "the API answers 401 without the key");
    });

    it("the outsider is refused on the dist-init port and every other internal port", (t) => {
        const scan = scanFromOutsider([
            { node: "spark-a", addresses: ["10.77.0.11"], open: [22, 8000] },
            { node: "spark-b", addresses: ["10.77.0.12"], open: [22] },
        ]);
        t.diagnostic(`outsider scan: ${scan.tried} ports tried, all refused: ${scan.ports.join(" ")}`);
        assert.ok(scan.ports.includes("10.77.0.11:29501"), "SGLang's dist-init port (model.masterPort) is among them");
    });

    it("a second up changes nothing", () => {
        assert.deepEqual(touchedByPreview(session), []);
    });

    it("status reports the SGLang pair healthy (SGLang's units and API); logs shows SGLang's units", (t) => {
        const status = npmRun(session, "status");
        t.diagnostic(`npm run status took ${status.seconds.toFixed(1)} s:\n${status.stdout}`);
        assert.equal(status.status, 0, `status exits 0:\n${status.stdout}\n${status.stderr}`);
        // A rank may have been restarted by systemd while the switch brought the ranks up (rank 1 up
        // before rank 0's dist-init answered, as under CI's load): status shows the count beside
        // the state, `active(1 restarts)`, and the node is still ok.
        assert.match(status.stdout, new RegExp(`^spark-a +head +sglang=active(\\(\\d+ restarts\\))? .*health 200, models 200 ${MODEL} .* ok$`, "m"));
        assert.match(status.stdout, /^spark-b +rank 1 +sglang=active(\(\d+ restarts\))? follow=active .* ok$/m);
        assert.doesNotMatch(status.stdout, /vllm=/, "no vLLM unit on either node");
        const logs = npmRun(session, "logs", "--lines", "20", "spark-a");
        assert.equal(logs.status, 0, logs.stderr);
        assert.match(
            logs.stdout,
            /-- journal of spark-cluster-sglang, spark-cluster-sglang-follow, spark-cluster-sglang-watchdog, spark-cluster-ray, spark-cluster-ray-watchdog, spark-cluster-open-webui, spark-cluster-open-webui-watchdog, spark-cluster-node-exporter, spark-cluster-prometheus:/,
        );
        assert.doesNotMatch(logs.stdout, /-- No entries --/, "SGLang's unit has journal lines");
    });

    it("a rank killed heals: rank 0 ends its engine (SGLang's kill_process_tree), both units restart, and the pair answers again", async (t) => {
        const rank1 = ssh("spark-b", "systemctl show -p MainPID --value spark-cluster-sglang.service").trim();
        const rank0 = ssh("spark-a", "systemctl show -p MainPID --value spark-cluster-sglang.service").trim();
        ssh("spark-b", `kill -9 ${rank1}`);
        const { seconds, text } = await secondsUntilAnswering(endpoint, apiKey, MODEL, 180);
        t.diagnostic(`answering again ${seconds} s after rank 1 was killed: ${text}`);
        assert.match(text, /served by spark-a,spark-b/);
        assert.notEqual(ssh("spark-b", "systemctl show -p MainPID --value spark-cluster-sglang.service").trim(), rank1, "rank 1 restarted");
        assert.notEqual(ssh("spark-a", "systemctl show -p MainPID --value spark-cluster-sglang.service").trim(), rank0, "rank 0's engine ended and restarted");
    });

    it("SGLang -> vLLM: only the serving steps again; vLLM answers", async () => {
        await switchTo("vllm", "model.engine sglang -> vllm (venv)");
        for (const node of members) {
            assert.equal(ssh(node, "systemctl is-active spark-cluster-sglang.service || true").trim(), "inactive", `${node}: SGLang is gone`);
            assert.equal(ssh(node, "test -e /etc/systemd/system/spark-cluster-sglang.service && echo left || echo gone").trim(), "gone");
            assert.equal(ssh(node, "test -e /etc/spark-cluster/sglang.yaml && echo left || echo gone").trim(), "gone");
        }
        const text = await chat(endpoint, apiKey, MODEL);
        assert.doesNotMatch(text, /sglang/, text);
    });

    it("vLLM's headless rank frozen (kill -STOP, mp): its follower restarts it, the pair answers again, and the follower's journal says why", async () => {
        const mainPid = () => ssh("spark-b", "systemctl show -p MainPID --value spark-cluster-vllm.service").trim();
        const rank1 = mainPid();
        const since = ssh("spark-b", "date '+%Y-%m-%d %H:%M:%S'").trim();
        // Bounded: 120 s (the follower's 30 s of a stopped engine process, checked every 2 s).
        const restartedAfter = await secondsFrozenUntil("spark-b", rank1, 120, () => {
            const now = mainPid();
            return now !== rank1 && now !== "0";
        });
        const follower = ssh("spark-b", `journalctl -u spark-cluster-vllm-follow.service --since '${since}' --no-pager -o cat`);
        assert.ok(restartedAfter > 0, `rank 1 (pid ${rank1}) was not restarted within 120 s of the stop; the follower's journal:\n${follower}`);
        // Either of the follower's two reasons: the stopped engine process (after
        // watchdog.unresponsiveSeconds), or the head's engine ending first, which ends the rank's
        // connection (the lab's stand-in head ends its engine after 10 s without a rank's heartbeat,
        // LAB_VLLM_PEER_TIMEOUT_S, lab/vllm_standin/vllm_standin/cli.py).
        const reason = /^.*(has been stopped \(state T\) for \d+ s|no engine of the head at \S+ for this rank): restarting spark-cluster-vllm.*$/m.exec(
            follower,
        );
        assert.ok(reason, `the follower's journal names why it restarted rank 1:\n${follower}`);
        // What is timed is the follower's restart, then the pair's answer on the new rank.
        const { seconds, text } = await secondsUntilAnswering(endpoint, apiKey, MODEL, 300);
        assert.match(text, /served by spark-a,spark-b/);
        console.log(
            `# vLLM's headless rank frozen: its follower restarted it ${restartedAfter} s after kill -STOP (${reason[0]}); a chat answered ${seconds} s later`,
        );
    });

    it("prints both rows of the blast-radius table", (t) => {
        t.diagnostic(["| change | preview touches | restarted | up |", "|---|---|---|---|", ...rows].join("\n"));
        assert.equal(rows.length, 2);
    });

    after(() => {
        if (session) removeSession(session);
    });
});
