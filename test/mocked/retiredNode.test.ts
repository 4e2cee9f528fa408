/**
 * A node that is gone (docs/operations.md, "A node that is gone"), without the lab:
 *
 * - `nodes[].ssh.connectTimeoutSeconds` becomes the provider's own dial settings: the most tries
 *   of 5 s that fit, with the provider's pauses between them, in the bound (table);
 * - `nodes[].retired: true` keeps every resource of the node where it was (same names, same
 *   parents: the same URNs), and turns each command that connects to it (its ClusterNode's and
 *   its model sync step) into one that runs nothing and leaves the stack without its delete:
 *   `retainOnDelete`, `ignoreChanges: ["*"]`, empty create and delete. The other node's commands
 *   are untouched;
 * - no command asks for the previous run's output in its environment (`addPreviousOutputInEnv`,
 *   which our provider defaults to false, TestCheckDefaultsAndValidation in toolchain/plugins):
 *   sshd refuses it without AcceptEnv, and the provider warned about it in every destroy.
 *
 * Checked on Pulumi's mock monitor with the program itself (index.ts, inside a stack as the
 * language host runs it). Mocks are process-global: this file is also its own harness, run as
 * `node build/test/mocked/retiredNode.test.js` with SPARK_RETIRED_HARNESS_OUT set.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import * as yaml from "js-yaml";
import { LAB_IBDEV2NETDEV, MOCK_HOST_KEY, SECRET_SIG_KEY, allRegistered, message, runProgramInStack, setCommandMocks } from "../support/mockHarness";

const root = path.resolve(__dirname, "..", "..", "..");
const HARNESS_OUT = "SPARK_RETIRED_HARNESS_OUT";
const API_KEY = "retired-node-test-api-key-0123456789";

/** One registered resource, as the engine would receive it. */
interface Registered {
    type: string;
    name: string;
    parent?: string;
    /** Steps (spark-remote:index:Step) only. */
    command?: {
        host: string;
        dialErrorLimit: number;
        perDialTimeout: number;
        create: unknown;
        delete: unknown;
        addPreviousOutputInEnv: unknown;
        retainOnDelete: boolean;
        ignoreChanges: string[];
    };
}

interface HarnessResult {
    resources: Registered[];
    errors: string[];
}

/** A serialized secret's value. */
function unsecret(value: unknown): Record<string, unknown> {
    const wrapped = value as Record<string, unknown>;
    return (wrapped && SECRET_SIG_KEY in wrapped ? wrapped.value : wrapped) as Record<string, unknown>;
}

/**
 * The mocked steps answer like the lab's Sparks (both twins Up, the 25.09 image's vLLM). A retired
 * node's steps answer the same: its commands ignore every change, so they keep the output the node
 * gave before it was retired.
 */
function mockStdout(name: string): string {
    if (name.endsWith("-ssh")) {
        // The host key the node's later steps are pinned to.
        return `host-key=${MOCK_HOST_KEY}\n`;
    }
    if (name.endsWith("-vllm-probe")) {
        return "vllm-version=0.10.1.1+lab.standin\nimage-id=sha256:mock\n";
    }
    if (name.endsWith("-probe")) {
        return LAB_IBDEV2NETDEV;
    }
    return name.endsWith("-roce-apply") ? "status=enabled: test" : "";
}

async function runHarness(out: string): Promise<void> {
    const result: HarnessResult = { resources: [], errors: [] };
    const inputs = new Map<string, Record<string, unknown>>();
    process.on("unhandledRejection", (err) => result.errors.push(message(err)));
    await setCommandMocks({ stdout: mockStdout, onResource: (args) => void inputs.set(args.name, args.inputs) });
    const created: { resource: pulumi.Resource; record: Registered; opts: pulumi.CustomResourceOptions }[] = [];
    // The program as the language host loads it; this transformation sees the final options.
    await runProgramInStack((args) => {
        const record: Registered = { type: args.type, name: args.name, parent: args.opts.parent ? pulumi.resourceName(args.opts.parent) : undefined };
        created.push({ resource: args.resource, record, opts: args.opts as pulumi.CustomResourceOptions });
        return undefined;
    }, result.errors);
    if (
        !(await allRegistered(
            created.map((c) => c.resource),
            15_000,
        )) &&
        result.errors.length === 0
    ) {
        result.errors.push("not every resource registered within 15 s");
    }
    for (const { record, opts } of created) {
        const registered = inputs.get(record.name);
        if (record.type === "spark-remote:index:Step" && registered) {
            const connection = unsecret(registered.connection);
            record.command = {
                host: String(connection.host),
                dialErrorLimit: Number(connection.dialErrorLimit),
                perDialTimeout: Number(connection.perDialTimeout),
                create: registered.create,
                delete: registered.delete,
                addPreviousOutputInEnv: registered.addPreviousOutputInEnv,
                retainOnDelete: opts.retainOnDelete === true,
                ignoreChanges: opts.ignoreChanges ?? [],
            };
        }
        result.resources.push(record);
    }
    fs.writeFileSync(out, JSON.stringify(result));
    process.exit(0);
}

/** Runs index.ts on the mocks with the lab stack's config, `adapt` applied to its nodes and model. */
function program(adapt: (config: Record<string, unknown>) => void): HarnessResult & { stderr: string } {
    const stackConfig = (yaml.load(fs.readFileSync(path.join(root, "Pulumi.dev.yaml"), "utf8")) as { config: Record<string, unknown> }).config;
    const values: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(stackConfig)) {
        values[key.replace(/^spark-cluster:/, "")] = value;
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-retired-harness-"));
    try {
        const keyFile = path.join(dir, "id_ed25519");
        execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", keyFile]);
        values.sshPrivateKeyPath = keyFile;
        values.apiKey = API_KEY;
        adapt(values);
        const config = Object.fromEntries(Object.entries(values).map(([k, v]) => [`spark-cluster:${k}`, typeof v === "string" ? v : JSON.stringify(v)]));
        const out = path.join(dir, "result.json");
        const run = spawnSync(process.execPath, [__filename], {
            cwd: root,
            encoding: "utf8",
            timeout: 60_000,
            env: {
                ...process.env,
                [HARNESS_OUT]: out,
                PULUMI_CONFIG: JSON.stringify(config),
                PULUMI_CONFIG_SECRET_KEYS: JSON.stringify(["spark-cluster:apiKey"]),
            },
        });
        assert.ok(fs.existsSync(out), `the harness wrote no result (exit ${run.status}):\n${run.stderr}`);
        return { ...(JSON.parse(fs.readFileSync(out, "utf8")) as HarnessResult), stderr: `${run.stdout}\n${run.stderr}` };
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

type Nodes = { name: string; ssh: Record<string, unknown>; retired?: boolean }[];

function retire(name: string, extra: Record<string, unknown> = {}): (values: Record<string, unknown>) => void {
    return (values) => {
        for (const node of values.nodes as Nodes) {
            if (node.name === name) {
                node.retired = true;
                Object.assign(node.ssh, extra);
            }
        }
    };
}

const SPARK_B = "10.77.0.12";

function commands(result: HarnessResult): (Registered & { command: NonNullable<Registered["command"]> })[] {
    return result.resources.filter((r): r is Registered & { command: NonNullable<Registered["command"]> } => r.command !== undefined);
}

function tests(): void {
    describe("a node's SSH connection gives up within ssh.connectTimeoutSeconds (components/nodeConnection.ts)", () => {
        it("the most 5 s tries that fit, with the provider's pauses (0.1 s growing 1.5x, at most 5 s)", async () => {
            // Loaded here, not at the top: the harness half of this file must load it after the mocks.
            const { sshDialBudget } = await import("../../components/nodeConnection");
            const table: [number, number, number, number][] = [
                // bound, tries, per try, worst case
                [5, 1, 5, 5],
                [10, 1, 5, 5],
                [11, 2, 5, 10.1],
                [30, 5, 5, 25.8],
                [60, 10, 5, 57.5],
                [120, 16, 5, 116.3],
                [300, 34, 5, 296.3],
                [3600, 364, 5, 3596.3],
            ];
            for (const [bound, tries, perTry, worst] of table) {
                assert.deepEqual(sshDialBudget(bound), { dialErrorLimit: tries, perDialTimeout: perTry, worstCaseSeconds: worst }, `${bound} s`);
                assert.ok(sshDialBudget(bound).worstCaseSeconds <= bound);
            }
        });
    });

    for (const executor of ["ray", "mp"] as const) {
        describe(`nodes[].retired on the lab's Spark pair (${executor} executor)`, () => {
            const withExecutor = (values: Record<string, unknown>) => {
                (values.model as Record<string, unknown>).executor = executor;
            };
            const live = program(withExecutor);
            const retired = program((values) => {
                withExecutor(values);
                retire("spark-b", { connectTimeoutSeconds: 30 })(values);
            });

            it("builds without errors, with the same resources (names, types, parents) as before", () => {
                assert.deepEqual(live.errors, []);
                assert.deepEqual(retired.errors, []);
                const shape = (r: HarnessResult) => r.resources.map((x) => `${x.type} ${x.name} < ${x.parent ?? "(stack)"}`).sort();
                assert.ok(live.resources.length > 20, "the program registers the cluster");
                assert.deepEqual(shape(retired), shape(live));
            });

            it("every command on the retired node runs nothing, keeps its state's inputs and leaves without its delete", () => {
                const onB = commands(retired).filter((c) => c.command.host === SPARK_B);
                const names = onB.map((c) => c.name);
                assert.ok(names.includes("spark-b-ssh") && names.includes("spark-b-interconnect-apply"), names.join(", "));
                assert.ok(names.includes("dev-model-pull-spark-b"), "the model sync's step on spark-b is the retired node's too");
                assert.ok(names.includes(executor === "ray" ? "spark-b-ray-worker-unit" : "spark-b-vllm-unit"), names.join(", "));
                for (const c of onB) {
                    assert.equal(c.command.retainOnDelete, true, `${c.name}: retainOnDelete`);
                    assert.deepEqual(c.command.ignoreChanges, ["*"], `${c.name}: ignores every input change`);
                    assert.equal(c.command.create, "", `${c.name}: creates nothing`);
                    assert.equal(c.command.delete, "", `${c.name}: deletes nothing`);
                }
                // Every command of spark-b's ClusterNode (the SSH step included) connects to spark-b.
                const childrenOfB = new Set(["spark-b"]);
                for (const r of retired.resources) {
                    if (r.parent && childrenOfB.has(r.parent)) childrenOfB.add(r.name);
                }
                for (const c of commands(retired).filter((x) => childrenOfB.has(x.name))) {
                    assert.equal(c.command.host, SPARK_B, `${c.name} is spark-b's`);
                }
            });

            it("the other node's commands are exactly what they are without a retired node", () => {
                const before = new Map(commands(live).map((c) => [c.name, c.command]));
                const others = commands(retired).filter((c) => c.command.host !== SPARK_B);
                assert.ok(others.length > 10);
                for (const c of others) {
                    assert.deepEqual(c.command, before.get(c.name), `${c.name} unchanged`);
                    assert.equal(c.command.retainOnDelete, false);
                    assert.deepEqual(c.command.ignoreChanges, []);
                }
            });

            it("warns, naming the node and how to finish", () => {
                assert.match(retired.stderr, /spark-b is retired \(nodes\[1\]\.retired\): nothing runs on it/);
                assert.match(retired.stderr, /After an up with it retired, remove it from nodes and run up/);
                assert.match(retired.stderr, /pulumi destroy --run-program/);
                assert.doesNotMatch(live.stderr, /is retired/);
            });

            it("each node dials within its own bound (60 s by default), and no command asks sshd for PULUMI_COMMAND_STDOUT", () => {
                for (const c of commands(live)) {
                    assert.notEqual(c.command.addPreviousOutputInEnv, true, c.name);
                    assert.deepEqual([c.command.dialErrorLimit, c.command.perDialTimeout], [10, 5], `${c.name}: 60 s`);
                }
                for (const c of commands(retired).filter((x) => x.command.host === SPARK_B)) {
                    // Retired: its inputs are the state's (ignoreChanges), whatever the program says.
                    assert.deepEqual([c.command.dialErrorLimit, c.command.perDialTimeout], [5, 5], `${c.name}: 30 s`);
                }
            });
        });
    }
}

function headTests(): void {
    describe("nodes[].retired on the head", () => {
        const result = program(retire("spark-a"));

        it("the head's commands, the model's download and serve among them, are retired; the worker's are not", () => {
            assert.deepEqual(result.errors, []);
            const retiredNames = commands(result)
                .filter((c) => c.command.retainOnDelete)
                .map((c) => c.name);
            assert.ok(retiredNames.includes("dev-model-download") && retiredNames.includes("dev-model-serve"), retiredNames.join(", "));
            for (const c of commands(result)) {
                const onHead = c.command.host === "10.77.0.11";
                assert.equal(c.command.retainOnDelete, onHead, `${c.name} (${c.command.host})`);
                assert.deepEqual(c.command.ignoreChanges, onHead ? ["*"] : [], c.name);
            }
            assert.ok(!retiredNames.includes("dev-model-pull-spark-b"), "the worker's pull is the worker's");
        });
    });
}

/**
 * The engine's side, with the project's CLI and provider: a command that is not in the
 * program any more leaves the stack without its delete once {@link retiredCommand} marked it (by
 * an `up`, or by `destroy --run-program`), and `up` on a retired command changes nothing even when
 * the program's inputs for it changed. Its connection points at a closed local port: any attempt to
 * run something fails the operation at once ("failed to connect").
 */
function engineTests(): void {
    describe("the engine drops a retired node's commands without their delete (real CLI, no host)", () => {
        const tools = path.join(root, ".tools", "bin");
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-retired-engine-"));
        const nodeConnection = path.join(__dirname, "..", "..", "components", "nodeConnection.js");
        const sparkRemote = path.join(__dirname, "..", "..", "components", "sparkRemote.js");
        const port = (() => {
            // A port nothing listens on: connecting is refused at once.
            const r = spawnSync(
                process.execPath,
                ["-e", "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close();})"],
                {
                    encoding: "utf8",
                },
            );
            return Number(r.stdout.trim());
        })();
        fs.writeFileSync(
            path.join(dir, "Pulumi.yaml"),
            "name: retired-engine-test\nruntime:\n  name: nodejs\n  options:\n    typescript: false\nmain: index.js\n",
        );
        fs.symlinkSync(path.join(root, "node_modules"), path.join(dir, "node_modules"));
        fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "retired-engine-test", private: true }));
        // Commands "a" and "b"; config `retired` lists those the program marks, `gone` those it drops.
        fs.writeFileSync(
            path.join(dir, "index.js"),
            [
                `const pulumi = require("@pulumi/pulumi");`,
                `const { Step } = require(${JSON.stringify(sparkRemote)});`,
                `const { retiredCommand } = require(${JSON.stringify(nodeConnection)});`,
                `const config = new pulumi.Config();`,
                `const retired = (config.get("retired") || "").split(",");`,
                `const gone = (config.get("gone") || "").split(",");`,
                `const connection = { host: "127.0.0.1", port: ${port}, user: "root", password: "not used", dialErrorLimit: 1, perDialTimeout: 2 };`,
                `for (const name of ["a", "b"]) {`,
                `    if (gone.includes(name)) continue;`,
                `    const isRetired = retired.includes(name);`,
                `    new Step(name, { connection, create: "", delete: "echo deleted", triggers: [isRetired ? "the program changed" : "t1"] },`,
                `        isRetired ? { transformations: [retiredCommand] } : {});`,
                `}`,
                ``,
            ].join("\n"),
        );
        const env: NodeJS.ProcessEnv = {
            ...process.env,
            PULUMI_HOME: path.join(root, ".tools", "pulumi-home"),
            PULUMI_IGNORE_AMBIENT_PLUGINS: "true",
            PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
            PULUMI_SKIP_UPDATE_CHECK: "true",
            PULUMI_BACKEND_URL: `file://${path.join(dir, "state")}`,
            PULUMI_CONFIG_PASSPHRASE: "retired-engine-test",
        };
        delete env.PULUMI_CONFIG_PASSPHRASE_FILE;
        fs.mkdirSync(path.join(dir, "state"));
        const cli = (...args: string[]) => {
            const r = spawnSync(path.join(tools, "pulumi"), [...args, "--non-interactive"], { cwd: dir, env, encoding: "utf8", timeout: 120_000 });
            return { status: r.status, output: `${r.stdout}\n${r.stderr}` };
        };
        const ok = (...args: string[]) => {
            const r = cli(...args);
            assert.equal(r.status, 0, `pulumi ${args.join(" ")}:\n${r.output}`);
            return r.output;
        };
        const state = () =>
            (JSON.parse(ok("stack", "export")).deployment.resources ?? [])
                .filter((r: { type: string }) => r.type === "spark-remote:index:Step")
                .map((r: { urn: string; retainOnDelete?: boolean; inputs: { delete?: string } }) => ({
                    name: r.urn.split("::").pop(),
                    retainOnDelete: r.retainOnDelete === true,
                    delete: r.inputs.delete,
                }))
                .sort((x: { name: string }, y: { name: string }) => x.name.localeCompare(y.name));

        after(() => fs.rmSync(dir, { recursive: true, force: true }));

        it("up records the mark without running anything; removing the command then drops it, no delete", () => {
            ok("stack", "init", "dev");
            ok("up", "--yes", "--skip-preview");
            ok("config", "set", "retired", "a");
            const up = ok("up", "--yes", "--skip-preview");
            // The program's new inputs for the retired command are ignored: no update, no replace.
            assert.match(up, /Resources:\s*\n\s*3 unchanged\s*\n/, up);
            assert.deepEqual(state(), [
                { name: "a", retainOnDelete: true, delete: "echo deleted" },
                { name: "b", retainOnDelete: false, delete: "echo deleted" },
            ]);
            ok("config", "set", "gone", "a");
            const dropped = ok("up", "--yes", "--skip-preview");
            assert.match(dropped, /1 deleted/);
            assert.doesNotMatch(dropped, /failed to connect/);
            assert.deepEqual(
                state().map((r: { name: string }) => r.name),
                ["b"],
            );

            // Without the mark, the delete runs: it cannot connect, and the operation fails.
            ok("config", "set", "gone", "a,b");
            const failed = cli("up", "--yes", "--skip-preview");
            assert.notEqual(failed.status, 0);
            assert.match(failed.output, /failed to connect to host root@127\.0\.0\.1:\d+ after 1 attempt\(s\)/);
            ok("config", "set", "gone", "");
        });

        it("destroy --run-program takes the mark from the program: one step, no delete run", () => {
            ok("config", "set", "retired", "b");
            const destroy = ok("destroy", "--yes", "--skip-preview", "--run-program");
            assert.doesNotMatch(destroy, /failed to connect/);
            assert.deepEqual(state(), []);
        });
    });
}

if (process.env[HARNESS_OUT]) {
    void runHarness(process.env[HARNESS_OUT]);
} else {
    tests();
    headTests();
    engineTests();
}
