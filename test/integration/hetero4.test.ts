// End to end on the lab's hetero-4 topology (two Sparks with Docker, two Thors with a venv, one
// switch): vLLM's own multi-node mode, pipeline parallel across all four nodes over sockets,
// with no Ray anywhere.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { CONFIG_DIR, NETPLAN_PATH, STATE_DIR, UNITS, unitPath } from "../../config/hostPaths";
import { withLabUp } from "../lab/lab-harness";
import { NodeName, Session, apiKeyOf, chat, newSession, pulumi, pulumiWithConfig, removeSession, scanFromOutsider, ssh } from "./stackSession";

const members: NodeName[] = ["spark-a", "spark-b", "thor-a", "thor-b"];

withLabUp("hetero-4");

/** The lab stack's secrets and settings, with hetero-4's four nodes on a switch and the mp executor, PP=4. */
function hetero4Config(dev: string): string {
    const keep = (pattern: RegExp) => {
        const match = pattern.exec(dev);
        assert.ok(match, `Pulumi.dev.yaml has ${pattern}`);
        return match[0];
    };
    const spark = (name: string, host: string, last: number) => [
        `    - name: ${name}`,
        "      kind: spark",
        ...(name === "spark-a" ? ["      head: true"] : []),
        `      ssh: {host: ${host}}`,
        // mp's multi-node flags need vLLM >= 0.11.1: the lab's 26.10 image (vLLM 0.31.0).
        "      runtime: {kind: docker, image: nvcr.io/nvidia/vllm:26.10-py3, privileged: false, memlockUnlimited: false, infiniband: false}",
        "      interconnect:",
        `        - {name: enp1s0f1np1, address: 192.168.100.${last}/24}`,
        `        - {name: enP2p1s0f1np1, address: 192.168.101.${last}/24}`,
    ];
    const thor = (name: string, host: string, last: number) => [
        `    - name: ${name}`,
        "      kind: thor",
        `      ssh: {host: ${host}}`,
        "      runtime: {kind: venv, path: /opt/lab-venv}",
        "      interconnect:",
        `        - {name: enp1s0f1np1, address: 192.168.100.${last}/24}`,
    ];
    return [
        "config:",
        "  spark-cluster:nodes:",
        ...spark("spark-a", "10.77.0.11", 11),
        ...spark("spark-b", "10.77.0.12", 12),
        ...thor("thor-a", "10.77.0.21", 21),
        ...thor("thor-b", "10.77.0.22", 22),
        keep(/^ {2}spark-cluster:sshPrivateKeyPath: .*$/m),
        "  spark-cluster:interconnect: {topology: switch, mtu: 9000}",
        "  spark-cluster:model: {source: lab/tiny-chat, servedName: tiny-chat, tensorParallel: 1, pipelineParallel: 4, executor: mp}",
        // As in the lab stack: the NCCL check needs torch, which the lab's runtimes do not carry.
        keep(/^ {2}spark-cluster:check:\n\s+enabled: false$/m),
        keep(/^ {2}spark-cluster:apiKey:\n\s+secure: .*$/m),
        keep(/^encryptionsalt: .*$/m),
        "",
    ].join("\n");
}

describe("the mp executor on Sparks + Thors: pipeline parallel over four nodes, sockets, no Ray", { timeout: 3_600_000 }, () => {
    let session: Session;
    let apiKey = "";

    before(() => {
        session = newSession(hetero4Config);
        apiKey = apiKeyOf(session);
        // Every rank must run the same vLLM (the vLLM check refuses mixed versions): the Thors'
        // source builds are of the Sparks' image's vLLM, 0.31.0 (the lab's venv plays 0.33.0 by default).
        for (const thor of ["thor-a", "thor-b"] as const) ssh(thor, "/opt/lab-venv/bin/python3 -m vllm_standin.set_version 0.31.0");
    });
    after(() => removeSession(session));

    it("converges and answers a chat completion naming every node", async () => {
        pulumiWithConfig(session, "up", "--yes", "--skip-preview");
        const endpoint = pulumi(session, "stack", "output", "endpoint").trim();
        const text = await chat(endpoint, apiKey, "tiny-chat");
        assert.match(text, /served by spark-a,spark-b,thor-a,thor-b \(tp=1 pp=4 executor=mp\)/);
        assert.equal(pulumi(session, "stack", "output", "transport").trim(), "socket");
        const vllm = JSON.parse(pulumi(session, "stack", "output", "vllm", "--json")) as Record<string, string>;
        assert.match(vllm["spark-a"], /^vLLM 0\.31\.0\+lab\.standin \(the image nvcr\.io\/nvidia\/vllm:26\.10-py3, sha256:[0-9a-f]{64}\)$/);
        assert.match(vllm["thor-a"], /^vLLM 0\.31\.0\+lab\.standin \(the venv \/opt\/lab-venv\)$/);
    });

    it("runs no Ray on any node; the Thors run vLLM from their venv, headless", () => {
        for (const node of members) {
            assert.equal(ssh(node, `ls ${unitPath(UNITS.ray)} 2>/dev/null || true`).trim(), "", `${node} has no Ray unit`);
            assert.equal(ssh(node, "ps -eo comm= | grep -cxE 'raylet|gcs_server' || true").trim(), "0", `no Ray process on ${node}`);
        }
        for (const [node, rank] of [
            ["thor-a", 2],
            ["thor-b", 3],
        ] as const) {
            assert.match(
                ssh(node, `grep ^ExecStart= ${unitPath(UNITS.vllm)}`),
                new RegExp(`^ExecStart=/opt/lab-venv/bin/vllm serve .* --nnodes 4 --node-rank ${rank} .*--headless`),
            );
        }
        assert.match(ssh("thor-a", "cat /etc/nccl.conf"), /^NCCL_IB_DISABLE=1$/m);
    });

    it("the firewall: an outsider on the management network and on the interconnect switch reaches no internal port", async (t) => {
        // The outsider is cabled to the interconnect switch with no address: give it one in the subnet.
        ssh("outsider", "ip link set enp1s0f1np1 up && ip addr replace 192.168.100.99/24 dev enp1s0f1np1");
        const scan = scanFromOutsider([
            { node: "spark-a", addresses: ["10.77.0.11", "192.168.100.11"], open: [22, 8000] },
            { node: "spark-b", addresses: ["10.77.0.12", "192.168.100.12"], open: [22] },
            { node: "thor-a", addresses: ["10.77.0.21", "192.168.100.21"], open: [22] },
            { node: "thor-b", addresses: ["10.77.0.22", "192.168.100.22"], open: [22] },
        ]);
        t.diagnostic(`outsider scan: ${scan.tried} address:port pairs tried, all refused: ${scan.ports.join(" ")}`);
        assert.ok(scan.ports.includes("192.168.100.11:29501"), "vLLM's master port on the interconnect is among them");
        // A member reaches the same port over the interconnect.
        assert.equal(ssh("thor-a", "timeout 3 bash -c 'exec 3<>/dev/tcp/192.168.100.11/29501' && echo reached").trim(), "reached");
        const endpoint = pulumi(session, "stack", "output", "endpoint").trim();
        assert.equal((await fetch(`${endpoint}/models`, { signal: AbortSignal.timeout(10_000) })).status, 401, "the API answers 401 without the key");
        assert.match(await chat(endpoint, apiKey, "tiny-chat"), /thor-b/, "members still serve");
        ssh("outsider", "ip addr flush dev enp1s0f1np1");
    });

    it("a second up changes nothing, and destroy cleans every node", () => {
        pulumiWithConfig(session, "up", "--yes", "--skip-preview", "--expect-no-changes");
        pulumiWithConfig(session, "destroy", "--yes", "--skip-preview");
        for (const node of members) {
            assert.equal(
                ssh(
                    node,
                    `ls ${NETPLAN_PATH} ${CONFIG_DIR} ${STATE_DIR} ${unitPath(UNITS.vllm)} ${unitPath(UNITS.vllmFollow)} ${unitPath(UNITS.firewall)} 2>/dev/null || true`,
                ).trim(),
                "",
                `${node} is clean`,
            );
            assert.equal(ssh(node, "nft list tables").trim(), "", `${node} has no table of ours`);
        }
        assert.ok(fs.existsSync(session.configFile));
    });
});
