/**
 * The materializer (components/materialize.ts) on Pulumi's mock monitor: for a few scenarios that
 * between them use every kind of planned resource (each engine and executor, both runtimes, a Thor,
 * a ring, Open WebUI, metrics, the checks), SparkCluster registers exactly the graph its plan says
 * (test/support/planGraph.ts, planResult; test/unit/graph.test.ts reads every scenario's graph from
 * the plan alone); and what only the materializer makes: each step's connection (the host key it
 * pins, the unreachable hint, the SSH key), and a config refused before any resource exists. Each
 * scenario runs in a store of its own (Pulumi's mocks live in the SDK's store), in one of two
 * processes: see test/mocked/graphHarness.ts, which installs test/support/mockHarness.ts before it
 * loads the components.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { NO_LOCAL_STORAGE_EXIT, RecordedResource, ScenarioResult } from "./graphHarness";
import { isSecret, occurrences, plain, planResult } from "../support/planGraph";
import { MOCK_HOST_KEY, ModelValues, SCENARIOS, SECRET_KEYS, SSH_KEY_BODY, Scenario, withChange } from "../support/graphScenarios";

/** The scenarios built on the mocks: every resource type and option of the plan, and the connections' cases. */
const MOCKED = [
    "base", // Ray on docker, the model sync, the root secret
    "mp", // the mp executor: headless ranks and their followers
    "mpVenvSglang", // SGLang on the venv runtime
    "sparkThor", // a Thor on sockets, pipeline parallel
    "ring4", // a ring: forwarding steps, LLDP
    "openWebui",
    "metrics",
    "withCheck", // the NCCL check
    "withRdmaBandwidth",
    "pinnedHostKey", // a configured host key
    "hostKeyUnknown", // a node with no known key
    "thorUnnamed", // a config refused
] as const satisfies readonly (keyof typeof SCENARIOS)[];
type MockedName = (typeof MOCKED)[number];

/**
 * The scenarios in two batches (the machine has few cores): each batch one process that builds its
 * scenarios one after the other, each in a store of its own (graphHarness.ts, `--batch`). Where the
 * SDK cannot do that, each scenario of the batch runs in its own process, one at a time.
 */
const HARNESS = path.join(__dirname, "graphHarness.js");
const BATCHES = Math.max(1, Math.min(2, os.availableParallelism()));
const results = new Map<string, Promise<ScenarioResult>>();

function readResult(name: string, file: string, err: Error | null, output: string): ScenarioResult {
    if (!fs.existsSync(file)) throw new Error(`scenario ${name} wrote no result (${err?.message ?? "no error"}):\n${output}`);
    return JSON.parse(fs.readFileSync(file, "utf8")) as ScenarioResult;
}

/** `node graphHarness.js ARGS` with `input` on stdin: its error (if any) and its stdout and stderr. */
function harness(args: string[], input: string, timeoutMs: number): Promise<{ err: (Error & { code?: unknown }) | null; output: string }> {
    return new Promise((resolve) => {
        const child = execFile(process.execPath, [HARNESS, ...args], { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
            resolve({ err, output: `${stdout}\n${stderr}` }),
        );
        child.stdin?.end(input);
    });
}

async function runBatch(batch: Readonly<Record<string, Scenario>>): Promise<Map<string, ScenarioResult>> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "graph-"));
    const names = Object.keys(batch);
    try {
        const { err, output } = await harness(["--batch", dir], JSON.stringify(batch), 60_000 * names.length);
        const found = new Map<string, ScenarioResult>();
        if (err?.code === NO_LOCAL_STORAGE_EXIT) {
            for (const name of names) {
                const file = path.join(dir, `${name}.json`);
                const one = await harness([file], JSON.stringify(batch[name]), 60_000);
                found.set(name, readResult(name, file, one.err, one.output));
            }
        } else {
            for (const name of names) found.set(name, readResult(name, path.join(dir, `${name}.json`), err, output));
        }
        return found;
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

// Start every mocked scenario now; the tests await the one they need.
for (let b = 0; b < BATCHES; b++) {
    const batch = MOCKED.filter((_, i) => i % BATCHES === b);
    const done = runBatch(Object.fromEntries(batch.map((name) => [name, SCENARIOS[name]])));
    for (const name of batch)
        results.set(
            name,
            done.then((found) => found.get(name) as ScenarioResult),
        );
}
for (const result of results.values()) result.catch(() => undefined);

function scenario(name: MockedName): Promise<ScenarioResult> {
    return results.get(name) as Promise<ScenarioResult>;
}

/** A scenario of one test only, in a process of its own. */
async function runAlone(name: string, one: Scenario): Promise<ScenarioResult> {
    return (await runBatch({ [name]: one })).get(name) as ScenarioResult;
}

const COMMAND = "spark-remote:index:Step";
const RANDOM_SECRET = "spark-remote:index:RandomSecret";

/** A recorded resource without its connection (the plan has none: the materializer makes it from the node's config). */
function withoutConnection(r: RecordedResource): RecordedResource {
    const { connection: _connection, ...inputs } = r.inputs;
    return { ...r, inputs };
}

const BUILT = MOCKED.filter((n) => n !== "thorUnnamed" && n !== "hostKeyUnknown");

describe("every mocked scenario builds with the expected resource types only", () => {
    for (const name of BUILT) {
        it(name, async () => {
            const result = await scenario(name);
            assert.deepEqual(result.unexpectedTypes, []);
            assert.deepEqual(result.errors, []);
            for (const r of result.resources) {
                assert.match(r.type, /^(spark-cluster:index:[A-Za-z]+|spark-remote:index:(Step|RandomSecret))$/);
                assert.equal(r.custom, r.type === COMMAND || r.type === RANDOM_SECRET, `${r.name}: only steps and the root secret are custom resources`);
            }
        });
    }
});

describe("the materializer registers exactly what the plan says (components/materialize.ts)", () => {
    for (const name of BUILT) {
        it(name, async () => {
            const result = await scenario(name);
            const planned = planResult(SCENARIOS[name]);
            const steps = result.resources.filter((r) => r.type === COMMAND);
            assert.ok(steps.length > 10 && steps.every((r) => isSecret(r.inputs.connection)), "every step registers its connection, as a secret");
            // Resource by resource, in the order they register: type, name, parent, options, and every input but the connection.
            assert.deepEqual(result.resources.map(withoutConnection), planned.resources);
            assert.deepEqual([...result.warnings].sort(), [...planned.warnings].sort(), "the same warnings");
            assert.deepEqual(result.outputs, planned.outputs, "the same cluster outputs");
        });
    }
});

describe("what only the materializer makes", () => {
    it("the vLLM check runs on the head, over its pinned connection", async () => {
        const result = await scenario("base");
        const byName = new Map(result.resources.map((r) => [r.name, r]));
        assert.deepEqual(byName.get("dev-vllm-check")?.inputs.connection, byName.get("spark-a-probe")?.inputs.connection);
    });

    it("every command but the SSH step checks the host key the SSH step recorded on first contact", async () => {
        const result = await scenario("base");
        for (const r of result.resources.filter((r) => r.type === COMMAND)) {
            const connection = plain(r.inputs.connection) as { hostKey?: string };
            assert.equal(connection.hostKey, r.name.endsWith("-ssh") ? undefined : MOCK_HOST_KEY, r.name);
        }
    });

    it("a stack deployed before keys were recorded keeps the printed key; a node with no known key runs nothing after its SSH step, naming the fix", async () => {
        const result = await scenario("hostKeyUnknown");
        assert.ok(
            result.errors.some((e) => e.includes("no SSH host key is known for node spark-b") && e.includes("nodes[].ssh.hostKey")),
            `errors: ${JSON.stringify(result.errors)}`,
        );
        const commands = result.resources.filter((r) => r.type === COMMAND);
        const onA = commands.filter((r) => r.name.startsWith("spark-a-") && !r.name.endsWith("-ssh"));
        assert.ok(onA.length > 0, "spark-a's later steps register");
        for (const r of onA) assert.equal((plain(r.inputs.connection) as { hostKey?: string }).hostKey, MOCK_HOST_KEY, r.name);
        assert.deepEqual(
            commands.filter((r) => (plain(r.inputs.connection) as { host: string }).host === "10.0.0.12").map((r) => r.name),
            ["spark-b-ssh"],
            "no step but the SSH step reaches spark-b",
        );
    });

    it("every command's connection says what to do when its node cannot be reached: which node, retired, --continue-on-error", async () => {
        const result = await scenario("base");
        const nodeAt: Record<string, string> = { "10.0.0.11": "spark-a (root@10.0.0.11:22)", "10.0.0.12": "spark-b (ubuntu@10.0.0.12:22)" };
        const commands = result.resources.filter((r) => r.type === COMMAND);
        assert.ok(commands.length > 10);
        for (const r of commands) {
            const connection = plain(r.inputs.connection) as { host: string; unreachableHint?: string };
            const hint = connection.unreachableHint ?? "";
            assert.ok(hint.startsWith(`spark-cluster: node ${nodeAt[connection.host]} could not be reached over SSH. What to do next:`), `${r.name}: ${hint}`);
            for (const part of [
                "`pulumi up --continue-on-error`",
                "`pulumi destroy --continue-on-error`",
                "set `retired: true` on the node named",
                "`pulumi destroy --run-program`",
            ])
                assert.ok(hint.includes(part), `${r.name}: the hint lacks ${part}`);
        }
    });

    it("a configured host key is checked by every command, the SSH step included", async () => {
        const result = await scenario("pinnedHostKey");
        const pinned = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIConfiguredConfiguredConfiguredConfigured";
        for (const r of result.resources.filter((r) => r.type === COMMAND && r.name.startsWith("spark-a-"))) {
            assert.equal((plain(r.inputs.connection) as { hostKey?: string }).hostKey, pinned, r.name);
        }
        const outputs = result.outputs as { hostKeys?: Record<string, string> };
        assert.ok(outputs.hostKeys === undefined || /^SHA256:/.test(outputs.hostKeys["spark-a"]));
    });

    it("the SSH private key reaches only the connections, as a secret", async () => {
        const result = await scenario("base");
        const found = result.resources.flatMap((r) => occurrences(r.inputs, SSH_KEY_BODY).map((o) => ({ resource: r.name, ...o })));
        const commands = result.resources.filter((r) => r.type === COMMAND).map((r) => r.name);
        assert.deepEqual(found.map((f) => f.resource).sort(), [...commands].sort());
        assert.ok(found.every((f) => f.path === "connection.privateKey" && f.secret));
    });

    it("a Thor whose interface name is left out is refused before any resource exists", async () => {
        // A Thor has no RoCE, so ibdev2netdev (the only detection) could not find its interface.
        const result = await scenario("thorUnnamed");
        assert.deepEqual(result.unexpectedTypes, []);
        assert.deepEqual(result.resources, []);
        assert.ok(
            result.errors.some((e) => /spark-cluster:nodes\[1\]\.interconnect\[0\]\.name: is required on a thor/.test(e)),
            `errors: ${JSON.stringify(result.errors)}`,
        );
    });
    it("a paused value that is not a boolean is refused before any resource exists, naming the key", async () => {
        const result = await await runAlone("pausedText", {
            clusterName: "dev",
            values: withChange((v) => ((v.model as ModelValues).paused = "yes")),
            secretKeys: SECRET_KEYS,
        });
        assert.deepEqual(result.resources, []);
        assert.ok(
            result.errors.some((e) => /spark-cluster:model\.paused: /.test(e)),
            result.errors.join("\n"),
        );
    });
});
