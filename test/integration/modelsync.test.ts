// End to end on the lab's Spark pair (docker runtime, mp executor: vLLM on both nodes), with the
// real Pulumi CLI over real SSH: a hub model is downloaded once, on the head (the lab hub
// stand-in's log says who fetched what), copied to the other node over the interconnect, and
// every vLLM runs with HF_HUB_OFFLINE=1 against its own copy. A second `up` changes and copies
// nothing; switching the model downloads only the new one; `destroy` leaves the caches, unless
// model.removeCacheOnDestroy; a local path missing on a node fails naming model.source.
import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { CONFIG_DIR, STATE_DIR, UNITS, unitPath } from "../../config/hostPaths";
import { HF_HUB_DIR, MODEL_SYNC_PORT, hubRepoDirName } from "../../components/render/modelSync";
import { withLabUp } from "../lab/lab-harness";
import { LAB_IMAGES, NodeName, Session, apiKeyOf, chat, newSession, pulumi, pulumiWithConfig, removeSession, setConfig, ssh, withImage } from "./stackSession";

const members: NodeName[] = ["spark-a", "spark-b"];
const HF_TOKEN = "hf_labModelSyncToken0123456789abcdef";
const TINY = "lab/tiny-chat";
const QWEN = "Qwen/Qwen2.5-0.5B-Instruct";

withLabUp();

/** Every download the lab hub stand-in logged on every node (node log and the containers' log in the HF cache). */
function downloads(): string[] {
    return members.flatMap((node) =>
        ssh(node, "cat /var/lib/lab-sim/hf-downloads.log /root/.cache/huggingface/.lab-sim-hf-downloads.log 2>/dev/null || true")
            .split("\n")
            .filter((line) => line.trim() !== "")
            .map((line) => `${node}: ${line}`),
    );
}

/** The repository's files and links as a node holds them (path, size, link target), and its refs/main. */
function repoListing(node: NodeName, repoId: string): string {
    const repo = `${HF_HUB_DIR}/${hubRepoDirName(repoId)}`;
    return ssh(node, `cd ${repo} && find . \\( -type f -o -type l \\) -printf '%P %s %l\\n' | LC_ALL=C sort && cat refs/main`);
}

/** Inode and mtime of every file of the repository: unchanged when nothing was copied again. */
function repoInodes(node: NodeName, repoId: string): string {
    return ssh(node, `cd ${HF_HUB_DIR}/${hubRepoDirName(repoId)} && find . -type f -printf '%P %i %T@\\n' | LC_ALL=C sort`);
}

/** Seconds a step took, for the report. */
function timed<T>(t: { diagnostic(message: string): void }, what: string, work: () => T): T {
    const start = Date.now();
    const result = work();
    t.diagnostic(`${what}: ${Math.round((Date.now() - start) / 100) / 10} s`);
    return result;
}

describe("model sync on the lab's Spark pair: downloaded once on the head, copied over the interconnect, vLLM offline", { timeout: 3_600_000 }, () => {
    let session: Session;
    let apiKey = "";

    before(() => {
        // mp's multi-node flags need vLLM >= 0.11.1: the 26.10 image (vLLM 0.31.0), not the stack's 25.09 (0.10.1.1).
        session = newSession((c) => withImage(c, LAB_IMAGES.v2610));
        setConfig(session, "spark-cluster:model.executor", "mp");
        pulumiWithConfig(session, "config", "set", "--secret", "spark-cluster:hfToken", HF_TOKEN);
        apiKey = apiKeyOf(session);
        for (const node of members) {
            assert.equal(ssh(node, `ls ${HF_HUB_DIR} 2>/dev/null || true`).trim(), "", `${node} starts with an empty HF cache`);
        }
        assert.deepEqual(downloads(), [], "nothing downloaded yet");
    });

    it("up: the model lands on every node, downloaded exactly once, on the head, with the token", async (t) => {
        const out = timed(t, "first up", () => pulumiWithConfig(session, "up", "--yes", "--skip-preview"));
        const log = downloads();
        t.diagnostic(`download log: ${log.join(" | ")}`);
        const syncLines = out.split("\n").filter((line) => /dev-model-/.test(line) && /\[spark-cluster\]/.test(line));
        t.diagnostic(`model sync in the up output:\n${syncLines.map((line) => line.trim()).join("\n")}`);
        assert.equal(log.length, 1, `exactly one download:\n${log.join("\n")}`);
        assert.match(
            log[0],
            /^spark-a: \S+ lab\/tiny-chat -> \/root\/\.cache\/huggingface\/hub\/models--lab--tiny-chat\/snapshots\/[0-9a-f]{40} \(hf download, node=spark-a, revision=main, files=4, bytes=\d+, token=yes, container\)$/,
        );
        for (const node of members) {
            assert.match(repoListing(node, TINY), /^snapshots\/[0-9a-f]{40}\/config\.json \d+ \.\.\/\.\.\/blobs\/[0-9a-f]{64}$/m, `${node} holds the snapshot`);
        }
        assert.equal(repoListing("spark-b", TINY), repoListing("spark-a", TINY), "spark-b holds exactly the head's copy (sizes, links, revision)");
        // Progress reached the up output; the pull went to the head's interconnect address; no token anywhere in it.
        assert.match(out, /downloading lab\/tiny-chat from the Hugging Face hub on spark-a with a throwaway container of nvcr\.io\/nvidia\/vllm:26\.10-py3/);
        assert.match(out, /pulling lab\/tiny-chat from spark-a \(192\.168\.100\.11\)/);
        assert.match(out, /every other node holds lab\/tiny-chat; stopped serving it/);
        assert.ok(!out.includes(HF_TOKEN), "the HF token is not in the up output");
        assert.equal(ssh("spark-a", `ss -Hltn | grep -c ':${MODEL_SYNC_PORT} ' || true`).trim(), "0", "the head stopped serving");
        const text = await chat(pulumi(session, "stack", "output", "endpoint").trim(), apiKey, "tiny-chat");
        assert.match(text, /served by spark-a,spark-b/);
    });

    it("vLLM on every node runs with HF_HUB_OFFLINE=1 (unit and running container)", () => {
        for (const node of members) {
            assert.match(ssh(node, `grep ^ExecStart= ${unitPath(UNITS.vllm)}`), / -e HF_HUB_OFFLINE=1 -- /, `${node}: the unit`);
            const env = ssh(node, "docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' spark-cluster-vllm");
            assert.match(env, /^HF_HUB_OFFLINE=1$/m, `${node}: the running container`);
            assert.equal(ssh(node, `systemctl is-active ${UNITS.vllm}.service`).trim(), "active");
        }
    });

    it("a second up reports no changes and copies nothing", (t) => {
        const before = { log: downloads(), inodes: repoInodes("spark-b", TINY) };
        const out = timed(t, "second up", () => pulumiWithConfig(session, "up", "--yes", "--skip-preview", "--expect-no-changes"));
        assert.match(out, /Resources:\s*\n\s*\d+ unchanged/);
        assert.doesNotMatch(out, /to create|to update|to replace|to delete|created|updated|replaced|deleted/);
        assert.deepEqual(downloads(), before.log, "no download");
        assert.equal(repoInodes("spark-b", TINY), before.inodes, "spark-b's copy untouched");
    });

    it("keeps the HF token and the sync secret out of state, argv and the journal", () => {
        const state = pulumi(session, "stack", "export");
        assert.ok(!state.includes(HF_TOKEN), "HF token in stack export");
        for (const node of members) {
            assert.ok(!ssh(node, "ps -eo args").includes(HF_TOKEN), `HF token in ps on ${node}`);
            assert.ok(!ssh(node, "journalctl --no-pager -q 2>/dev/null || true").includes(HF_TOKEN), `HF token in the journal on ${node}`);
        }
    });

    it("switching the model downloads only the new one, once; the old one stays", async (t) => {
        const before = downloads();
        setConfig(session, "spark-cluster:model.source", QWEN);
        setConfig(session, "spark-cluster:model.servedName", "qwen-small");
        timed(t, "up with the new model", () => pulumiWithConfig(session, "up", "--yes", "--skip-preview"));
        const added = downloads().filter((line) => !before.includes(line));
        t.diagnostic(`new downloads: ${added.join(" | ")}`);
        assert.equal(added.length, 1, `one new download:\n${added.join("\n")}`);
        assert.match(added[0], /^spark-a: \S+ Qwen\/Qwen2\.5-0\.5B-Instruct -> .* \(hf download, node=spark-a, /);
        for (const node of members) {
            assert.match(repoListing(node, QWEN), /config\.json/, `${node} holds the new model`);
            assert.match(repoListing(node, TINY), /config\.json/, `${node} still holds the old one`);
        }
        assert.equal(repoListing("spark-b", QWEN), repoListing("spark-a", QWEN));
        assert.match(await chat(pulumi(session, "stack", "output", "endpoint").trim(), apiKey, "qwen-small"), /spark-b/);
    });

    it("destroy leaves the model caches (the user's data) and nothing else of ours", (t) => {
        timed(t, "destroy", () => pulumiWithConfig(session, "destroy", "--yes", "--skip-preview"));
        for (const node of members) {
            assert.equal(ssh(node, `ls -d ${CONFIG_DIR} ${STATE_DIR} ${unitPath(UNITS.vllm)} 2>/dev/null || true`).trim(), "", `${node} keeps nothing of ours`);
            assert.match(repoListing(node, TINY), /config\.json/, `${node} keeps lab/tiny-chat`);
            assert.match(repoListing(node, QWEN), /config\.json/, `${node} keeps Qwen`);
        }
    });

    it("with the caches in place, up copies nothing again; model.removeCacheOnDestroy makes destroy remove them", (t) => {
        setConfig(session, "spark-cluster:model.removeCacheOnDestroy", "true");
        const before = { log: downloads(), inodes: repoInodes("spark-b", QWEN) };
        const out = timed(t, "up over existing caches", () => pulumiWithConfig(session, "up", "--yes", "--skip-preview"));
        assert.deepEqual(downloads(), before.log, "hf fetched nothing");
        assert.equal(repoInodes("spark-b", QWEN), before.inodes, "rsync rewrote nothing on spark-b (same size and mtime)");
        assert.match(out, /spark-b holds Qwen\/Qwen2\.5-0\.5B-Instruct/);
        timed(t, "destroy with removeCacheOnDestroy", () => pulumiWithConfig(session, "destroy", "--yes", "--skip-preview"));
        for (const node of members) {
            assert.equal(ssh(node, `ls -d ${HF_HUB_DIR}/${hubRepoDirName(QWEN)} 2>/dev/null || true`).trim(), "", `${node}: Qwen removed`);
            assert.match(repoListing(node, TINY), /config\.json/, `${node}: a model this stack no longer serves is not touched`);
        }
    });

    it("a local path missing on a node fails up, naming model.source and the node", (t) => {
        const snapshot = ssh(
            "spark-a",
            `readlink -f ${HF_HUB_DIR}/${hubRepoDirName(TINY)}/snapshots/$(cat ${HF_HUB_DIR}/${hubRepoDirName(TINY)}/refs/main)`,
        ).trim();
        setConfig(session, "spark-cluster:model.source", "/srv/models/tiny-chat");
        setConfig(session, "spark-cluster:model.removeCacheOnDestroy", "false");
        // Present on the head only: up stops at spark-b's check, before any vLLM unit changes.
        ssh("spark-a", `mkdir -p /srv/models && cp -rL ${snapshot} /srv/models/tiny-chat`);
        try {
            assert.throws(
                () => timed(t, "up with a local path missing on spark-b", () => pulumiWithConfig(session, "up", "--yes", "--skip-preview")),
                /spark-cluster:model\.source: \/srv\/models\/tiny-chat does not exist on spark-b\. A local path is served as it is/,
            );
        } finally {
            ssh("spark-a", "rm -rf /srv/models"); // the lab may go on to the next file
        }
        for (const node of members) {
            assert.doesNotMatch(
                ssh(node, `cat ${unitPath(UNITS.vllm)} 2>/dev/null || true`),
                /\/srv\/models/,
                `no vLLM unit on ${node} was changed to the path`,
            );
        }
    });

    it("removes its scratch backend", () => removeSession(session));
});
