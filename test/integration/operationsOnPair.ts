// Day-to-day operations on the lab's Spark pair (the dev stack, Ray executor), on a stack another
// suite has converged (spark-pair.test.ts, "today's stack: the ray executor ..."): `npm run status`
// (healthy: exit 0, every node; the vLLM unit stopped on the head: non-zero, naming the node and
// the unit; --json parses), `npm run logs` (the head's vLLM journal), and model.paused: pausing
// stops serving and touches only the vLLM layer, resuming serves again with no model download and
// no step on the network layers (the preview names exactly the serving steps; the Ray and
// host-layer processes keep running throughout). The suite leaves the stack converged as it found it.
import { it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { HF_HUB_DIR, UNITS } from "../../config/hostPaths";
import { hubRepoDirName } from "../../components/render/modelSync";
import { Session, chat, mainPid, pulumiWithConfig, root, secondsUntilAnswering, ssh } from "./stackSession";

const MODEL = "tiny-chat";
/** The serving steps of the dev stack (Ray executor: vLLM runs on the head only). */
const SERVING_STEPS = ["spark-a-vllm", "spark-a-vllm-ready", "spark-a-vllm-secrets", "spark-a-vllm-unit"];

/** `npm run <command> -- --stack dev --config-file <session's> ARGS` against the session's backend: exit status and output. */
export function npmRun(session: Session, command: "status" | "logs", ...args: string[]): { status: number; stdout: string; stderr: string; seconds: number } {
    const start = Date.now();
    const result = spawnSync("npm", ["run", "--silent", command, "--", "--stack", "dev", "--config-file", session.configFile, ...args], {
        cwd: root,
        encoding: "utf8",
        timeout: 180_000,
        env: { ...process.env, PULUMI_BACKEND_URL: `file://${session.backend}`, PULUMI_CONFIG_PASSPHRASE: "", PULUMI_CONFIG_PASSPHRASE_FILE: "" },
    });
    assert.equal(result.error, undefined, `npm run ${command} ran`);
    return { status: result.status ?? -1, stdout: result.stdout, stderr: result.stderr, seconds: (Date.now() - start) / 1000 };
}

/** What a preview would change: `name(op)` per step, sorted. */
function previewSteps(session: Session): string[] {
    const preview = JSON.parse(pulumiWithConfig(session, "preview", "--json")) as { steps: { op: string; urn: string }[] };
    return preview.steps
        .filter((s) => s.op !== "same")
        .map((s) => `${s.urn.split("::").pop()}(${s.op})`)
        .sort();
}

function setPaused(session: Session, paused: boolean): void {
    const text = fs.readFileSync(session.configFile, "utf8");
    const next = paused ? text.replace("    executor: ray\n", "    executor: ray\n    paused: true\n") : text.replace("    paused: true\n", "");
    assert.notEqual(next, text, "the config changed");
    fs.writeFileSync(session.configFile, next);
}

/** The PIDs that must survive a pause and a resume: Ray on both nodes, systemd-networkd (netplan's backend). */
function keptPids(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const node of ["spark-a", "spark-b"] as const) {
        out[`${node}:ray`] = mainPid(node, UNITS.ray);
        out[`${node}:networkd`] = mainPid(node, "systemd-networkd");
    }
    return out;
}

/** What the operations checks need of the converged dev stack (read when each test runs). */
export interface ConvergedPair {
    session: () => Session;
    apiKey: () => string;
    endpoint: () => string;
}

/** Registers the operations tests in the calling suite, after the test that converged the stack. */
export function operationsOnConvergedPair(pair: ConvergedPair): void {
    it("status on the healthy pair: exit 0, one row per node, in seconds; --json parses", (t) => {
        const text = npmRun(pair.session(), "status");
        t.diagnostic(`npm run status took ${text.seconds.toFixed(1)} s:\n${text.stdout}`);
        assert.equal(text.status, 0, `status exits 0:\n${text.stdout}\n${text.stderr}`);
        const rows = text.stdout.split("\n");
        assert.match(rows[0], /^NODE +ROLE +UNITS/);
        // The engine's load from its /metrics (vLLM's are always on): idle here.
        assert.match(
            text.stdout,
            /^spark-a +head +vllm=active ray=active .*health 200, models 200 tiny-chat; 0 running, 0 waiting, KV cache 0% +2 node\(s\), 2 GPU\(s\) .* ok$/m,
        );
        assert.match(text.stdout, /^spark-b +ray worker +ray=active .*enp1s0f1np1 up mtu 9000.* ok$/m);
        assert.ok(!text.stdout.includes(pair.apiKey()) && !text.stderr.includes(pair.apiKey()), "no API key in the output");
        const json = npmRun(pair.session(), "status", "--json");
        assert.equal(json.status, 0);
        const doc = JSON.parse(json.stdout) as { healthy: boolean; paused: boolean; nodes: { node: string; problems: string[] }[] };
        assert.equal(doc.healthy, true);
        assert.equal(doc.paused, false);
        assert.deepEqual(
            doc.nodes.map((n) => n.node),
            ["spark-a", "spark-b"],
        );
    });

    it("logs shows the head's vLLM journal", () => {
        // A line vLLM wrote to the journal, read on the node directly.
        const lines = ssh("spark-a", `journalctl -u ${UNITS.vllm}.service -o cat -n 5 --no-pager`)
            .split("\n")
            .filter((l) => l.trim().length > 10);
        assert.ok(lines.length > 0, "vLLM wrote to its journal");
        const logs = npmRun(pair.session(), "logs", "spark-a");
        assert.equal(logs.status, 0, logs.stderr);
        assert.match(logs.stdout, /^==> spark-a \(root@10\.77\.0\.11\) <==$/m);
        assert.doesNotMatch(logs.stdout, /==> spark-b/, "only the node asked for");
        assert.ok(logs.stdout.includes(lines[0].trim()), `logs shows vLLM's line ${JSON.stringify(lines[0])}:\n${logs.stdout.slice(-3000)}`);
        assert.ok(!logs.stdout.includes(pair.apiKey()), "no API key in the logs");
    });

    it("status after the head's vLLM unit is stopped: non-zero, naming the node and the unit", async (t) => {
        ssh("spark-a", `systemctl stop ${UNITS.vllm}.service`);
        try {
            const text = npmRun(pair.session(), "status");
            t.diagnostic(text.stdout);
            assert.equal(text.status, 1, "status exits 1");
            assert.match(text.stdout, /^ {2}spark-a: spark-cluster-vllm\.service is inactive/m);
            assert.match(text.stdout, /^spark-a .*UNHEALTHY$/m);
            assert.match(text.stdout, /^spark-b .* ok$/m);
            const json = JSON.parse(npmRun(pair.session(), "status", "--json").stdout) as { healthy: boolean };
            assert.equal(json.healthy, false);
        } finally {
            ssh("spark-a", `systemctl start ${UNITS.vllm}.service`);
        }
        await secondsUntilAnswering(pair.endpoint(), pair.apiKey(), MODEL, 600);
    });

    it("pause: the preview names exactly the serving steps; serving stops, everything else stays", async () => {
        const kept = keptPids();
        const cache = `${HF_HUB_DIR}/${hubRepoDirName("lab/tiny-chat")}`;
        setPaused(pair.session(), true);
        assert.deepEqual(
            previewSteps(pair.session()),
            SERVING_STEPS.map((s) => `${s}(delete)`),
        );
        pulumiWithConfig(pair.session(), "up", "--yes", "--skip-preview");
        assert.equal(ssh("spark-a", `systemctl show -p LoadState --value ${UNITS.vllm}.service`).trim(), "not-found", "the vLLM unit is gone");
        await assert.rejects(chat(pair.endpoint(), pair.apiKey(), MODEL, 10_000), "nothing answers on the endpoint");
        assert.deepEqual(keptPids(), kept, "Ray and networkd kept running");
        for (const node of ["spark-a", "spark-b"] as const) {
            assert.equal(ssh(node, `test -d ${cache} && echo yes || echo no`).trim(), "yes", `${node} keeps the model in its cache`);
        }
        const status = npmRun(pair.session(), "status");
        assert.equal(status.status, 0, `a paused stack is healthy:\n${status.stdout}`);
        assert.match(status.stdout, /serving is paused/);
    });

    it("resume: the preview names exactly the serving steps (no download, no network layer); serving starts again", async (t) => {
        const kept = keptPids();
        setPaused(pair.session(), false);
        assert.deepEqual(
            previewSteps(pair.session()),
            SERVING_STEPS.map((s) => `${s}(create)`),
        );
        const start = Date.now();
        pulumiWithConfig(pair.session(), "up", "--yes", "--skip-preview");
        t.diagnostic(`resume: up took ${Math.round((Date.now() - start) / 1000)} s`);
        await chat(pair.endpoint(), pair.apiKey(), MODEL);
        assert.deepEqual(keptPids(), kept, "Ray and networkd kept running");
        assert.deepEqual(previewSteps(pair.session()), [], "converged: nothing left to change");
    });
}
