// Adding and removing workers on the lab's thor-switch-4 topology (four Thors with a venv on one
// switch; the Spark pair has no third node), Ray executor. First PP over every node, 2 → 4 → 3
// nodes from scratch: each up serves on exactly the listed nodes, and the node taken out keeps
// nothing of ours (issue 36). Then the blast radius: a three-node cluster serving with TP=1 PP=2
// gets a fourth node, then loses it again; `preview` must name exactly the resources the change
// touches, and applying it must restart no Ray or vLLM process of the nodes that stay (main PIDs
// compared). Those rows complete blastRadius.test.ts's table (docs/operations.md, "What a change
// looks like").
import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { UNITS } from "../../config/hostPaths";
import { ssh, withLabUp } from "../lab/lab-harness";
import { OUR_PATHS, Session, apiKeyOf, chat, newSession, pulumi, pulumiWithConfig, removeSession } from "./stackSession";

withLabUp("thor-switch-4");

const THORS = ["thor-a", "thor-b", "thor-c", "thor-d"] as const;
type Thor = (typeof THORS)[number];
const MGMT: Record<Thor, string> = { "thor-a": "10.77.0.21", "thor-b": "10.77.0.22", "thor-c": "10.77.0.23", "thor-d": "10.77.0.24" };
const mainPid = (node: Thor, unit: string) => ssh(node, `systemctl show -p MainPID --value ${unit}.service`).trim();

/** The lab stack's secrets and settings with `count` Thors on a switch, Ray executor, TP=1 and PP `pp`. */
function thorsConfig(dev: string, count: number, pp = 2): string {
    const keep = (pattern: RegExp) => {
        const match = pattern.exec(dev);
        assert.ok(match, `Pulumi.dev.yaml has ${pattern}`);
        return match[0];
    };
    const nodes = THORS.slice(0, count).flatMap((name, i) => [
        `    - name: ${name}`,
        "      kind: thor",
        ...(i === 0 ? ["      head: true"] : []),
        `      ssh: {host: ${MGMT[name]}}`,
        "      gpus: 1",
        "      runtime: {kind: venv, path: /opt/lab-venv}",
        "      interconnect:",
        `        - {name: enp1s0f1np1, address: 192.168.100.${21 + i}/24}`,
    ]);
    return [
        "config:",
        "  spark-cluster:nodes:",
        ...nodes,
        keep(/^ {2}spark-cluster:sshPrivateKeyPath: .*$/m),
        "  spark-cluster:interconnect: {topology: switch, mtu: 9000}",
        keep(/^ {2}spark-cluster:ray:\n\s+objectStoreMemoryMb: .*$/m),
        keep(/^ {2}spark-cluster:check:\n\s+enabled: false$/m),
        `  spark-cluster:model: {source: lab/tiny-chat, servedName: tiny-chat, tensorParallel: 1, pipelineParallel: ${pp}, executor: ray}`,
        keep(/^ {2}spark-cluster:apiKey:\n\s+secure: .*$/m),
        keep(/^encryptionsalt: .*$/m),
        "",
    ].join("\n");
}

interface Row {
    change: string;
    nodes: number;
    /** Exactly the resources (last URN segment, with the step's op) that preview must report. */
    touches: string[];
}

// The new node's own steps (Thors have no RoCE device: no PFC step), created by adding it and
// deleted by removing it; the model is copied to it (its pull step).
const NODE_STEPS = [
    "thor-d",
    "thor-d-facts",
    "thor-d-firewall",
    "thor-d-firewall-apply",
    "thor-d-interconnect",
    "thor-d-interconnect-apply",
    "thor-d-nccl",
    "thor-d-nccl-files",
    "thor-d-probe",
    "thor-d-ray-probe",
    "thor-d-ray-worker",
    "thor-d-ray-worker-auth",
    "thor-d-ray-worker-unit",
    "thor-d-ssh",
    "thor-d-vllm-probe",
    "dev-model-pull-thor-d",
];
// Both ways, the nodes that stay: every node's firewall lets the cluster's members in and every
// node's netplan step pings its peers, so each is updated (no process restarts for either); the
// head's Ray readiness counts the nodes (it runs again); the serving step lists the copies. vLLM's
// unit does not depend on the node count; its readiness probe runs again (replaced: its trigger
// names the Ray cluster's nodes), so that up ends with the engine answering. The vLLM check lists
// every node's vLLM, the node check every node's first-contact facts.
const STAYING_UPDATES = [
    "dev-model-serve",
    "dev-node-check",
    "dev-vllm-check",
    "thor-a-firewall-apply",
    "thor-a-interconnect-apply",
    "thor-a-ray-head-ready",
    "thor-b-firewall-apply",
    "thor-b-interconnect-apply",
    "thor-c-firewall-apply",
    "thor-c-interconnect-apply",
]
    .map((step) => `${step}(update)`)
    .concat("thor-a-vllm-ready(replace)");

const ROWS: Row[] = [
    { change: "adding a worker (thor-d)", nodes: 4, touches: [...NODE_STEPS.map((step) => `${step}(create)`), ...STAYING_UPDATES] },
    { change: "removing a worker (thor-d)", nodes: 3, touches: [...NODE_STEPS.map((step) => `${step}(delete)`), ...STAYING_UPDATES] },
];

/** Main PIDs of Ray (every staying node) and vLLM (the head), by `node:unit`. */
function pids(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const node of THORS.slice(0, 3)) {
        out[`${node}:ray`] = mainPid(node, UNITS.ray);
    }
    out["thor-a:vllm"] = mainPid("thor-a", UNITS.vllm);
    return out;
}

describe("adding and removing workers (thor-switch-4, Ray executor): PP over every node, then the blast radius", { timeout: 2_400_000 }, () => {
    let session: Session;
    let apiKey = "";
    let dev = "";

    before(() => {
        session = newSession();
        dev = fs.readFileSync(session.configFile, "utf8");
        apiKey = apiKeyOf(session);
    });

    // Issue 36: PP over every node, so each change of `nodes` restarts the engine on the new set.
    // Taking thor-d out used to leave its Ray worker in the cluster (its steps are deleted at the end
    // of the `up`) while the head's firewall already dropped it: the restarted engine could place a
    // shard on it and never listen. The head's Ray readiness now removes a node that left from Ray
    // before the engine restarts (components/render/ray.ts, RAY_PROBE_PY). 2 → 4 → 3 nodes, from scratch.
    for (const count of [2, 4, 3]) {
        it(`${count} nodes, pipelineParallel ${count}: up, then a chat served by exactly ${THORS.slice(0, count).join(",")}`, async (t) => {
            fs.writeFileSync(session.configFile, thorsConfig(dev, count, count));
            const start = Date.now();
            pulumiWithConfig(session, "up", "--yes", "--skip-preview");
            const seconds = Math.round((Date.now() - start) / 1000);
            const answer = await chat(pulumi(session, "stack", "output", "endpoint").trim(), apiKey, "tiny-chat");
            t.diagnostic(`${count} nodes: up ${seconds} s; ${answer.split(". You said")[0]}`);
            assert.match(answer, new RegExp(`served by ${THORS.slice(0, count).join(",")} \\(tp=1 pp=${count} executor=ray\\)`));
        });
    }

    it("the node taken out (thor-d) keeps nothing of ours: no file, no unit, no Ray", () => {
        const left = OUR_PATHS.filter((p) => ssh("thor-d", `test -e ${p} && echo yes || echo no`).trim() === "yes");
        assert.deepEqual(left, []);
        assert.equal(ssh("thor-d", `systemctl is-active ${UNITS.ray}.service || true`).trim(), "inactive");
    });

    it("three Thors with PP=2 (the blast radius rows' start) converge and answer", async () => {
        fs.writeFileSync(session.configFile, thorsConfig(dev, 3));
        pulumiWithConfig(session, "up", "--yes", "--skip-preview");
        await chat(pulumi(session, "stack", "output", "endpoint").trim(), apiKey, "tiny-chat");
    });

    for (const row of ROWS) {
        it(row.change, async (t) => {
            fs.writeFileSync(session.configFile, thorsConfig(dev, row.nodes));
            const preview = JSON.parse(pulumiWithConfig(session, "preview", "--json")) as { steps: { op: string; urn: string }[] };
            const touched = preview.steps
                .filter((s) => s.op !== "same")
                .map((s) => `${s.urn.split("::").pop()}(${s.op})`)
                .sort();
            const before = pids();
            const start = Date.now();
            pulumiWithConfig(session, "up", "--yes", "--skip-preview");
            const seconds = Math.round((Date.now() - start) / 1000);
            const after = pids();
            const restarted = Object.keys(before).filter((p) => before[p] !== after[p]);
            await chat(pulumi(session, "stack", "output", "endpoint").trim(), apiKey, "tiny-chat");
            // The converged stack's no-op up at this size (docs/speed.md: a no-op stays flat in node count).
            const noOpStart = Date.now();
            pulumiWithConfig(session, "up", "--yes", "--skip-preview", "--expect-no-changes");
            t.diagnostic(`no-op up with ${row.nodes} nodes: ${Math.round((Date.now() - noOpStart) / 100) / 10} s`);
            t.diagnostic(`| ${row.change} | ${touched.join(", ")} | ${restarted.join(", ") || "none"} | ${seconds} s |`);
            assert.deepEqual(touched, [...row.touches].sort(), "preview touches exactly the expected resources");
            assert.deepEqual(restarted, [], "no Ray or vLLM process of the nodes that stay restarts");
        });
    }

    it("removes its scratch backend", () => removeSession(session));
});
