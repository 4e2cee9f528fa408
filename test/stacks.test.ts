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
import { CONFIG_NAMESPACE, Config, RawConfig, parseConfig } from "../config";

const STACKS_DIR = path.resolve(__dirname, "..", "..", "stacks");
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
            assert.deepEqual(
                [config.model.tensorParallel, config.model.pipelineParallel],
                [expected.tensorParallel, expected.pipelineParallel],
            );
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
            assert.ok(
                text.includes(`./scripts/pulumi.sh --stack ${expected.stack} --config-file stacks/Pulumi.${expected.stack}.yaml preview`),
                "the comment shows the preview command",
            );
            assert.ok(text.includes("config set --secret spark-cluster:apiKey"), "the comment shows how to set the API key");
            assert.ok(!/^\s*[^#\n]*~\//m.test(text), "no ~ in a value: pulumi does not expand it");
        });
    }
});
