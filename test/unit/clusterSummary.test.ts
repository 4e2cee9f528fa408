// The stack's `cluster` output: everything a user needs to see, no secret.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseConfig } from "../../config";
import { clusterSummary } from "../../components/clusterSummary";

const apiKey = "summary-test-api-key-0123456789";
const privateKey = "-----BEGIN OPENSSH PRIVATE KEY-----\nsummary-test-key\n-----END OPENSSH PRIVATE KEY-----";

const config = parseConfig({
    values: {
        nodes: [
            {
                name: "spark-a",
                kind: "spark",
                head: true,
                ssh: { host: "10.0.0.11" },
                interconnect: [{ name: "enp1s0f1np1", address: "192.168.100.11/24" }],
            },
            {
                name: "spark-b",
                kind: "spark",
                ssh: { host: "10.0.0.12", user: "ubuntu" },
                runtime: { kind: "venv", path: "/opt/vllm" },
                interconnect: [{ address: "192.168.100.12/24" }],
            },
        ],
        model: { source: "Qwen/Qwen2.5-7B-Instruct" },
        sshPrivateKey: privateKey,
        apiKey,
    },
    secretKeys: new Set(["sshPrivateKey", "apiKey"]),
});

describe("clusterSummary", () => {
    const summary = clusterSummary(config);

    it("describes nodes, transport and the model with defaults resolved", () => {
        assert.deepEqual(summary, {
            head: "spark-a",
            totalGpus: 2,
            transport: "roce",
            topology: "pair",
            mtu: 9000,
            nodes: [
                {
                    name: "spark-a",
                    kind: "spark",
                    head: true,
                    ssh: { user: "root", host: "10.0.0.11", port: 22 },
                    gpus: 1,
                    runtime: {
                        kind: "docker",
                        image: "nvcr.io/nvidia/vllm:26.10-py3",
                        privileged: true,
                        memlockUnlimited: true,
                        infiniband: true,
                        shmSize: "16g",
                    },
                    interconnect: ["enp1s0f1np1 192.168.100.11/24"],
                },
                {
                    name: "spark-b",
                    kind: "spark",
                    head: false,
                    ssh: { user: "ubuntu", host: "10.0.0.12", port: 22 },
                    gpus: 1,
                    runtime: { kind: "venv", path: "/opt/vllm" },
                    interconnect: ["(detected) 192.168.100.12/24"],
                },
            ],
            model: {
                source: "Qwen/Qwen2.5-7B-Instruct",
                servedName: "Qwen2.5-7B-Instruct",
                executor: "mp",
                tensorParallel: 2,
                pipelineParallel: 1,
                apiPort: 8000,
            },
        });
    });

    it("holds no secret", () => {
        const text = JSON.stringify(summary);
        assert.ok(!text.includes(apiKey));
        assert.ok(!text.includes("summary-test-key"));
    });
});
