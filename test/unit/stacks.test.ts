/**
 * The real-hardware stack files in stacks/ parse with parseConfig and resolve to what their
 * comments promise (transport, parallelism, head). Secrets are not in the files: the test
 * supplies fake ones, as `pulumi config set --secret` would.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { CONFIG_NAMESPACE, Config, RawConfig, parseConfig } from "../../config";

const STACKS_DIR = path.resolve(__dirname, "..", "..", "..", "stacks");
const FAKE_SECRETS: Readonly<Record<string, string>> = {
    apiKey: "test-api-key-0123456789abcdef",
};

/**
 * Turns a stack file's `config:` map into parseConfig's input: keys lose the namespace prefix;
 * values Pulumi holds encrypted (`{ secure: ... }`) and the fake secrets become secret keys.
 */
function rawConfigOf(file: string): RawConfig {
    const doc = yaml.load(fs.readFileSync(file, "utf8"), { filename: file });
    assert.ok(isRecord(doc) && isRecord(doc["config"]), `${file} has no config: map`);
    const values: Record<string, unknown> = {};
    const secretKeys = new Set<string>();
    for (const [fullKey, value] of Object.entries(doc["config"])) {
        const prefix = `${CONFIG_NAMESPACE}:`;
        assert.ok(fullKey.startsWith(prefix), `${file}: key ${fullKey} is outside the ${CONFIG_NAMESPACE} namespace`);
        const key = fullKey.slice(prefix.length);
        if (isRecord(value) && typeof value["secure"] === "string") {
            values[key] = "encrypted-in-the-stack-file-0123456789";
            secretKeys.add(key);
        } else {
            values[key] = value;
        }
    }
    for (const [key, value] of Object.entries(FAKE_SECRETS)) {
        if (secretKeys.has(key)) {
            continue; // set encrypted in the file (the lab stack's API key)
        }
        assert.equal(values[key], undefined, `${file}: ${key} must not be in the file in plaintext`);
        values[key] = value;
        secretKeys.add(key);
    }
    return { values, secretKeys };
}

function isRecord(value: unknown): value is Record<string, unknown> {
    return typeof value === "object" && value !== null && !Array.isArray(value);
}

interface StackExpectation {
    stack: string;
    check: (config: Config) => void;
    transport: Config["transport"];
    tensorParallel: number;
    pipelineParallel: number;
    head: string;
    nodeKinds: string[];
}

const STACKS: readonly StackExpectation[] = [
    {
        stack: "spark-pair",
        transport: "roce",
        tensorParallel: 2,
        pipelineParallel: 1,
        head: "spark-a",
        nodeKinds: ["spark", "spark"],
        check: (config) => {
            assert.equal(config.interconnect.topology, "pair");
            assert.deepEqual(
                config.nodes[0].interconnect.map((i) => [i.name, i.subnet]),
                [
                    ["enp1s0f1np1", "192.168.100.0/24"],
                    ["enP2p1s0f1np1", "192.168.101.0/24"],
                ],
            );
            assert.deepEqual(config.nccl.ibHca, ["rocep1s0f1", "roceP2p1s0f1"]);
            assert.equal(config.model.enforceEager, false);
        },
    },
    {
        stack: "spark-workstation",
        transport: "roce",
        tensorParallel: 2,
        pipelineParallel: 1,
        head: "spark",
        nodeKinds: ["spark", "workstation"],
        check: (config) => {
            assert.equal(config.interconnect.topology, "pair");
            assert.equal(config.nodes[1].interconnect[0].name, undefined, "the workstation's interface is detected");
            assert.ok(config.nodes.every((n) => n.runtime.kind === "docker"));
        },
    },
    {
        stack: "sparks-thors",
        transport: "socket",
        tensorParallel: 1,
        pipelineParallel: 4,
        head: "spark-1",
        nodeKinds: ["spark", "spark", "thor", "thor"],
        check: (config) => {
            assert.equal(config.interconnect.topology, "switch");
            assert.equal(config.totalGpus, 4);
            assert.equal(config.model.enforceEager, true);
            assert.equal(config.model.attentionBackend, "TRITON_ATTN");
            assert.deepEqual(
                config.nodes.map((n) => n.runtime.kind),
                ["docker", "docker", "venv", "venv"],
            );
        },
    },
];

describe("stacks/*.yaml", () => {
    test("every stack file has expectations here, and every expectation a file", () => {
        const files = fs.readdirSync(STACKS_DIR).filter((f) => f.endsWith(".yaml"));
        assert.deepEqual(files.sort(), STACKS.map((s) => `Pulumi.${s.stack}.yaml`).sort());
    });

    for (const expected of STACKS) {
        const file = path.join(STACKS_DIR, `Pulumi.${expected.stack}.yaml`);

        test(`${expected.stack}: parses and resolves as documented`, () => {
            const config = parseConfig(rawConfigOf(file));
            assert.equal(config.transport, expected.transport);
            assert.deepEqual([config.model.tensorParallel, config.model.pipelineParallel], [expected.tensorParallel, expected.pipelineParallel]);
            assert.ok(config.model.tensorParallel * config.model.pipelineParallel <= config.totalGpus);
            assert.equal(config.head.name, expected.head);
            assert.deepEqual(
                config.nodes.map((n) => n.kind),
                expected.nodeKinds,
            );
            assert.equal(config.apiKey.reveal(), FAKE_SECRETS["apiKey"]);
            expected.check(config);
        });

        test(`${expected.stack}: opens with how to use it`, () => {
            const text = fs.readFileSync(file, "utf8");
            assert.ok(text.startsWith("#"), "the file starts with a comment block");
            // scripts/pulumi.sh finds stacks/Pulumi.<stack>.yaml by the stack's name: no --config-file.
            assert.ok(text.includes(`./scripts/pulumi.sh --stack ${expected.stack} preview`), "the comment shows the preview command");
            assert.ok(text.includes(`npm run doctor -- --stack ${expected.stack}`), "the comment shows doctor");
            assert.ok(text.includes("config set --secret spark-cluster:apiKey"), "the comment shows how to set the API key");
            assert.ok(!/^\s*[^#\n]*~\//m.test(text), "no ~ in a value: pulumi does not expand it");
        });
    }
});

/** The decisions resolve.ts makes for a stack, in a form a reader can check against the file. */
function decisions(config: Config) {
    return {
        head: config.head.name,
        workers: config.workers.map((n) => n.name),
        hasThor: config.hasThor,
        transport: config.transport,
        parallelism: `tp=${config.model.tensorParallel} pp=${config.model.pipelineParallel}`,
        nodes: Object.fromEntries(
            config.nodes.map((n) => [
                n.name,
                { ip: n.ip, roce: n.roce.enabled ? "enabled" : n.roce.reason, peers: n.peers.map((p) => `${p.node} ${p.ip} via [${p.via}]`) },
            ]),
        ),
    };
}

const PAIR_NODES = {
    "spark-a": { ip: "192.168.100.11", roce: "enabled", peers: ["spark-b 192.168.100.12 via [0]", "spark-b 192.168.101.12 via [1]"] },
    "spark-b": { ip: "192.168.100.12", roce: "enabled", peers: ["spark-a 192.168.100.11 via [0]", "spark-a 192.168.101.11 via [1]"] },
};
const SOCKET = "skipped: the cluster uses socket transport";

/** The resolution step's output for the dev stack and every stack in stacks/. */
const DECISIONS: Readonly<Record<string, ReturnType<typeof decisions>>> = {
    "Pulumi.dev.yaml": { head: "spark-a", workers: ["spark-b"], hasThor: false, transport: "roce", parallelism: "tp=2 pp=1", nodes: PAIR_NODES },
    "stacks/Pulumi.spark-pair.yaml": { head: "spark-a", workers: ["spark-b"], hasThor: false, transport: "roce", parallelism: "tp=2 pp=1", nodes: PAIR_NODES },
    "stacks/Pulumi.spark-workstation.yaml": {
        head: "spark",
        workers: ["workstation"],
        hasThor: false,
        transport: "roce",
        parallelism: "tp=2 pp=1",
        nodes: {
            spark: { ip: "192.168.100.11", roce: "enabled", peers: ["workstation 192.168.100.21 via [0]"] },
            workstation: { ip: "192.168.100.21", roce: "enabled", peers: ["spark 192.168.100.11 via [0]"] },
        },
    },
    "stacks/Pulumi.sparks-thors.yaml": {
        head: "spark-1",
        workers: ["spark-2", "thor-1", "thor-2"],
        hasThor: true,
        transport: "socket",
        parallelism: "tp=1 pp=4",
        nodes: {
            "spark-1": {
                ip: "192.168.100.11",
                roce: SOCKET,
                peers: ["spark-2 192.168.100.12 via [0]", "spark-2 192.168.101.12 via [1]", "thor-1 192.168.100.27 via [0]", "thor-2 192.168.100.26 via [0]"],
            },
            "spark-2": {
                ip: "192.168.100.12",
                roce: SOCKET,
                peers: ["spark-1 192.168.100.11 via [0]", "spark-1 192.168.101.11 via [1]", "thor-1 192.168.100.27 via [0]", "thor-2 192.168.100.26 via [0]"],
            },
            "thor-1": {
                ip: "192.168.100.27",
                roce: SOCKET,
                peers: ["spark-1 192.168.100.11 via [0]", "spark-2 192.168.100.12 via [0]", "thor-2 192.168.100.26 via [0]"],
            },
            "thor-2": {
                ip: "192.168.100.26",
                roce: SOCKET,
                peers: ["spark-1 192.168.100.11 via [0]", "spark-2 192.168.100.12 via [0]", "thor-1 192.168.100.27 via [0]"],
            },
        },
    },
};

describe("the resolution step decides once, for the dev stack and every stack in stacks/", () => {
    for (const [file, expected] of Object.entries(DECISIONS)) {
        test(file, () => {
            assert.deepEqual(decisions(parseConfig(rawConfigOf(path.join(STACKS_DIR, "..", file)))), expected);
        });
    }
});
