/**
 * The resource graph of a SparkCluster, read from its plan (components/plan/clusterPlan.ts) with no
 * Pulumi, no mock and no subprocess: which resources exist, their types, parents and explicit
 * dependencies, what changes when one config key changes, and where secrets go. Each scenario's
 * graph is its plan evaluated with what the mocks report (test/support/planGraph.ts, planResult),
 * in the shape Pulumi's mock monitor records it; test/mocked/materialize.test.ts checks that the
 * materializer registers exactly that, and tests what only it makes (each step's connection).
 */
import { describe, it, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHmac } from "node:crypto";
import { SECRET_PURPOSES } from "../../components/clusterSecrets";
import { RecordedResource, ScenarioResult, isSecret, occurrences, planResult, plain } from "../support/planGraph";
import { mockDerivedSecret } from "../support/graphScenarios";
import { WAIT_EXCEPTIONS, loopsIn, waitException } from "../support/waitLoops";
import { API_KEY, HF_TOKEN, MOCK_IMAGE_ID, OPEN_WEBUI_PASSWORD, RAY_TOKEN, RING, SCENARIOS } from "../support/graphScenarios";

type ScenarioName = keyof typeof SCENARIOS;

const planned = new Map<string, ScenarioResult>();

/** A scenario's graph from its plan (made once). */
function scenario(name: ScenarioName): ScenarioResult {
    const known = planned.get(name);
    if (known !== undefined) return known;
    const one = SCENARIOS[name];
    if (one === undefined) throw new Error(`no scenario ${name}`);
    const result = planResult(one);
    planned.set(name, result);
    return result;
}

// ---------------------------------------------------------------------------------------------
// Reading a recorded graph
// ---------------------------------------------------------------------------------------------

const COMPONENT = (name: string) => `spark-cluster:index:${name}`;
const COMMAND = "spark-remote:index:Step";
const RANDOM_SECRET = "spark-remote:index:RandomSecret";

function byName(result: ScenarioResult): Map<string, RecordedResource> {
    return new Map(result.resources.map((r) => [r.name, r]));
}

function get(result: ScenarioResult, name: string): RecordedResource {
    const resource = byName(result).get(name);
    assert.ok(resource, `no resource named ${name}; have ${result.resources.map((r) => r.name).join(", ")}`);
    return resource;
}

/** A command input (create/delete) as a string, secret or not. */
function commandText(resource: RecordedResource, key: "create" | "delete"): string | undefined {
    const value = plain(resource.inputs[key]);
    assert.ok(value === undefined || typeof value === "string", `${resource.name}.${key} is not a string`);
    return value;
}

/**
 * The bash script inside a remote command: `[# comment lines\n][sudo -n ]bash -c '<script>'`, with
 * the single quoting of shellQuote undone.
 */
function scriptOf(commandLine: string): { sudo: boolean; script: string } {
    const lines = commandLine.split("\n");
    let start = 0;
    while (lines[start]?.startsWith("# ")) {
        start++;
    }
    const rest = lines.slice(start).join("\n");
    const match = /^(sudo -n )?bash -c '([\s\S]*)'$/.exec(rest);
    assert.ok(match, `not a remoteCommand line: ${rest.slice(0, 80)}`);
    assert.ok(!match[2].replace(/'"'"'/g, "").includes("'"), "no quote inside but shellQuote's '\"'\"' escapes");
    return { sudo: match[1] !== undefined, script: match[2].replace(/'"'"'/g, "'") };
}

/** Names whose recorded inputs differ between two runs (or that exist in only one). */
function changedNames(a: ScenarioResult, b: ScenarioResult): string[] {
    const left = byName(a);
    const right = byName(b);
    const names = new Set([...left.keys(), ...right.keys()]);
    return [...names].filter((name) => JSON.stringify(left.get(name)?.inputs) !== JSON.stringify(right.get(name)?.inputs)).sort();
}

/**
 * The custom resources that must exist before `name` is created: its explicit dependsOn (a
 * component standing for all its descendants), and whatever its ancestors wait for (a child
 * registers only after its parent, and the parent only after its own dependsOn).
 */
function waitsFor(result: ScenarioResult, name: string): Set<string> {
    let known = waitsMemo.get(result);
    if (known === undefined) waitsMemo.set(result, (known = new Map()));
    return waitsForIn(result, known, name, new Set());
}

/** Each graph's answers so far (a ring's graph asks for the same resources many times over). */
const waitsMemo = new WeakMap<ScenarioResult, Map<string, Set<string>>>();

function waitsForIn(result: ScenarioResult, known: Map<string, Set<string>>, name: string, seen: Set<string>): Set<string> {
    const done = known.get(name);
    if (done !== undefined) return done;
    if (seen.has(name)) {
        assert.fail(`dependency cycle through ${name}`);
    }
    seen.add(name);
    const resources = byName(result);
    const childrenOf = (parent: string) => result.resources.filter((r) => r.parent === parent);
    const descendants = (parent: string): RecordedResource[] => childrenOf(parent).flatMap((c) => [c, ...descendants(c.name)]);
    const out = new Set<string>();
    const self = resources.get(name);
    assert.ok(self, `no resource ${name}`);
    for (const dep of self.dependsOn) {
        const target = resources.get(dep);
        assert.ok(target, `${name} depends on unknown ${dep}`);
        const targets = target.custom ? [target] : [target, ...descendants(dep)];
        for (const t of targets) {
            if (t.custom) {
                out.add(t.name);
            }
            for (const w of waitsForIn(result, known, t.name, seen)) {
                out.add(w);
            }
        }
    }
    if (self.parent) {
        for (const w of waitsForIn(result, known, self.parent, seen)) {
            out.add(w);
        }
    }
    seen.delete(name);
    known.set(name, out);
    return out;
}

function bashN(script: string): { status: number | null; stderr: string } {
    const result = spawnSync("bash", ["-n"], { input: script, encoding: "utf8" });
    return { status: result.status, stderr: result.stderr };
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

const RAY_PAIR: Readonly<Record<string, string>> = {
    dev: COMPONENT("SparkCluster"),
    ...Object.fromEntries(
        ["spark-a", "spark-b"].flatMap((node) => [
            [`${node}-ssh`, COMMAND],
            [`${node}-probe`, COMMAND],
            [`${node}-vllm-probe`, COMMAND],
            [`${node}-ray-probe`, COMMAND],
            [`${node}-facts`, COMMAND],
            [`${node}-interconnect`, COMPONENT("NetplanInterconnect")],
            [`${node}-interconnect-apply`, COMMAND],
            [`${node}-roce`, COMPONENT("RocePfc")],
            [`${node}-roce-apply`, COMMAND],
            [`${node}-nccl`, COMPONENT("NcclConfig")],
            [`${node}-nccl-files`, COMMAND],
            [`${node}-firewall`, COMPONENT("Firewall")],
            [`${node}-firewall-apply`, COMMAND],
        ]),
    ),
    "spark-a": COMPONENT("ClusterNode"),
    "spark-b": COMPONENT("ClusterNode"),
    "dev-node-check": COMMAND,
    "dev-vllm-check": COMMAND,
    "spark-a-ray-head": COMPONENT("RayHead"),
    "spark-a-ray-head-auth": COMMAND,
    "spark-a-ray-head-unit": COMMAND,
    "spark-a-ray-head-ready": COMMAND,
    "spark-b-ray-worker": COMPONENT("RayWorker"),
    "spark-b-ray-worker-auth": COMMAND,
    "spark-b-ray-worker-unit": COMMAND,
    "spark-a-vllm": COMPONENT("VllmServer"),
    "spark-a-vllm-secrets": COMMAND,
    "spark-a-vllm-unit": COMMAND,
    "spark-a-vllm-ready": COMMAND,
    "dev-model": COMPONENT("ModelSync"),
    "dev-model-download": COMMAND,
    "dev-model-serve": COMMAND,
    "dev-model-pull-spark-b": COMMAND,
    "dev-root-secret": RANDOM_SECRET,
};

describe("a two-Spark Ray cluster", () => {
    it("has exactly these resources, with these types", async () => {
        const result = scenario("base");
        assert.deepEqual(
            Object.fromEntries(result.resources.map((r) => [r.name, r.type]).sort(([a], [b]) => a.localeCompare(b))),
            Object.fromEntries(Object.entries(RAY_PAIR).sort(([a], [b]) => a.localeCompare(b))),
        );
    });

    it("parents each node to the cluster, each layer to its node, and each step to its layer", async () => {
        const result = scenario("base");
        const parents = Object.fromEntries(result.resources.map((r) => [r.name, r.parent ?? "(stack)"]));
        assert.deepEqual(parents, {
            dev: "(stack)",
            "dev-root-secret": "dev",
            "spark-a": "dev",
            "spark-a-ssh": "spark-a",
            "spark-a-probe": "spark-a",
            "spark-a-vllm-probe": "spark-a",
            "spark-a-ray-probe": "spark-a",
            "spark-a-facts": "spark-a",
            "spark-a-interconnect": "spark-a",
            "spark-a-interconnect-apply": "spark-a-interconnect",
            "spark-a-roce": "spark-a",
            "spark-a-roce-apply": "spark-a-roce",
            "spark-a-nccl": "spark-a",
            "spark-a-nccl-files": "spark-a-nccl",
            "spark-a-firewall": "spark-a",
            "spark-a-firewall-apply": "spark-a-firewall",
            "spark-b": "dev",
            "spark-b-ssh": "spark-b",
            "spark-b-probe": "spark-b",
            "spark-b-vllm-probe": "spark-b",
            "spark-b-ray-probe": "spark-b",
            "spark-b-facts": "spark-b",
            "spark-b-interconnect": "spark-b",
            "spark-b-interconnect-apply": "spark-b-interconnect",
            "spark-b-roce": "spark-b",
            "spark-b-roce-apply": "spark-b-roce",
            "spark-b-nccl": "spark-b",
            "spark-b-nccl-files": "spark-b-nccl",
            "spark-b-firewall": "spark-b",
            "spark-b-firewall-apply": "spark-b-firewall",
            "spark-a-ray-head": "spark-a",
            "spark-a-ray-head-auth": "spark-a-ray-head",
            "spark-a-ray-head-unit": "spark-a-ray-head",
            "spark-a-ray-head-ready": "spark-a-ray-head",
            "spark-b-ray-worker": "spark-b",
            "spark-b-ray-worker-auth": "spark-b-ray-worker",
            "spark-b-ray-worker-unit": "spark-b-ray-worker",
            "spark-a-vllm": "spark-a",
            "spark-a-vllm-secrets": "spark-a-vllm",
            "spark-a-vllm-unit": "spark-a-vllm",
            "spark-a-vllm-ready": "spark-a-vllm",
            "dev-node-check": "dev",
            "dev-vllm-check": "dev",
            "dev-model": "dev",
            "dev-model-download": "dev-model",
            "dev-model-serve": "dev-model",
            "dev-model-pull-spark-b": "dev-model",
        });
    });

    it("keeps the URNs a stack deployed before ClusterNode has: every child of a node aliases its old parent, the cluster", async () => {
        const result = scenario("base");
        const nodes = new Set(result.resources.filter((r) => r.type === COMPONENT("ClusterNode")).map((r) => r.name));
        assert.deepEqual([...nodes], ["spark-a", "spark-b"]);
        for (const r of result.resources) {
            const expected = r.parent !== undefined && nodes.has(r.parent) ? ["dev"] : [];
            assert.deepEqual(r.aliasParents, expected, r.name);
        }
    });

    it("names each node after itself and every other child `${parent}-<step>`", async () => {
        const result = scenario("base");
        for (const r of result.resources.filter((r) => r.parent !== undefined)) {
            const prefix = r.parent === "dev" ? /^(spark-[ab]|dev-model|dev-node-check|dev-vllm-check|dev-root-secret)$/ : new RegExp(`^${r.parent}-[a-z-]+$`);
            assert.match(r.name, prefix, `${r.name} (parent ${r.parent})`);
        }
    });

    it("declares these explicit dependencies", async () => {
        const result = scenario("base");
        const dependsOn = Object.fromEntries(result.resources.filter((r) => r.dependsOn.length > 0).map((r) => [r.name, r.dependsOn]));
        assert.deepEqual(dependsOn, {
            "spark-a-probe": ["spark-a-ssh"],
            "spark-a-vllm-probe": ["spark-a-ssh"],
            "spark-a-ray-probe": ["spark-a-ssh"],
            "spark-a-facts": ["spark-a-ssh"],
            // Every node's host layers wait for the cluster's vLLM check, which waits for every node's probes and the node check.
            "spark-a-firewall": ["spark-a-probe", "spark-a-vllm-probe", "spark-a-ray-probe", "spark-a-facts", "dev-vllm-check"],
            "spark-a-interconnect": ["spark-a-probe", "spark-a-vllm-probe", "spark-a-ray-probe", "spark-a-facts", "dev-vllm-check"],
            "spark-a-roce": ["spark-a-interconnect"],
            "spark-a-nccl": ["spark-a-interconnect", "spark-a-roce"],
            "spark-b-probe": ["spark-b-ssh"],
            "spark-b-vllm-probe": ["spark-b-ssh"],
            "spark-b-ray-probe": ["spark-b-ssh"],
            "spark-b-facts": ["spark-b-ssh"],
            // Every node's host layers wait for the cluster's vLLM check, which waits for every node's probes and the node check.
            "spark-b-firewall": ["spark-b-probe", "spark-b-vllm-probe", "spark-b-ray-probe", "spark-b-facts", "dev-vllm-check"],
            "spark-b-interconnect": ["spark-b-probe", "spark-b-vllm-probe", "spark-b-ray-probe", "spark-b-facts", "dev-vllm-check"],
            "spark-b-roce": ["spark-b-interconnect"],
            "spark-b-nccl": ["spark-b-interconnect", "spark-b-roce"],
            "dev-node-check": [
                "spark-a-probe",
                "spark-a-vllm-probe",
                "spark-a-ray-probe",
                "spark-a-facts",
                "spark-b-probe",
                "spark-b-vllm-probe",
                "spark-b-ray-probe",
                "spark-b-facts",
            ],
            "dev-vllm-check": [
                "spark-a-probe",
                "spark-a-vllm-probe",
                "spark-a-ray-probe",
                "spark-a-facts",
                "spark-b-probe",
                "spark-b-vllm-probe",
                "spark-b-ray-probe",
                "spark-b-facts",
                "dev-node-check",
            ],
            "spark-a-ray-head": ["spark-a-interconnect", "spark-a-nccl", "spark-a-firewall"],
            "spark-a-ray-head-unit": ["spark-a-ray-head-auth"],
            "spark-b-ray-worker-unit": ["spark-b-ray-worker-auth"],
            "spark-a-ray-head-ready": ["spark-a-ray-head-unit"],
            "spark-b-ray-worker": ["spark-b-interconnect", "spark-b-nccl", "spark-b-firewall", "spark-a-ray-head-unit"],
            // With Ray, vLLM waits for every node's Ray, and destroy stops it before any of them.
            "spark-a-vllm": ["spark-a-ray-head", "spark-b-ray-worker", "dev-model"],
            "spark-a-vllm-unit": ["spark-a-vllm-secrets"],
            "spark-a-vllm-ready": ["spark-a-vllm-unit"],
            "dev-model-download": ["spark-a-interconnect", "spark-a-nccl", "spark-a-firewall"],
            "dev-model-serve": ["dev-model-download", "spark-a-interconnect", "spark-a-nccl", "spark-a-firewall"],
            "dev-model-pull-spark-b": ["dev-model-download", "spark-b-interconnect", "spark-b-nccl", "spark-b-firewall"],
        });
    });

    it("orders the host layers and the services (transitively)", async () => {
        const result = scenario("base");
        const after = (name: string, ...before: string[]) => {
            const waits = waitsFor(result, name);
            for (const b of before) {
                assert.ok(waits.has(b), `${name} must wait for ${b}; it waits for ${[...waits].sort().join(", ")}`);
            }
        };
        const notAfter = (name: string, other: string) => assert.ok(!waitsFor(result, name).has(other), `${name} must not wait for ${other}`);
        for (const node of ["spark-a", "spark-b"]) {
            after(`${node}-probe`, `${node}-ssh`);
            after(`${node}-vllm-probe`, `${node}-ssh`);
            // Nothing changes on any node before every node's vLLM was checked.
            after(
                `${node}-interconnect-apply`,
                `${node}-probe`,
                `${node}-ray-probe`,
                `${node}-ssh`,
                "dev-vllm-check",
                "dev-node-check",
                "spark-a-facts",
                "spark-b-facts",
                "spark-a-vllm-probe",
                "spark-b-vllm-probe",
            );
            after(`${node}-firewall-apply`, "dev-vllm-check");
            after(`${node}-roce-apply`, `${node}-interconnect-apply`);
            after(`${node}-nccl-files`, `${node}-interconnect-apply`, `${node}-roce-apply`);
        }
        after("spark-a-ray-head-unit", "spark-a-nccl-files", "spark-a-interconnect-apply");
        after("spark-b-ray-worker-unit", "spark-b-nccl-files", "spark-a-ray-head-unit");
        // The head is ready only once the worker joined: a worker waiting for it would deadlock.
        notAfter("spark-b-ray-worker-unit", "spark-a-ray-head-ready");
        after("spark-a-vllm-secrets", "spark-a-ray-head-ready", "spark-a-ray-head-unit");
        after("spark-a-vllm-unit", "spark-a-vllm-secrets", "spark-a-ray-head-ready", "spark-a-nccl-files");
        after("spark-a-vllm-ready", "spark-a-vllm-unit");
        // The model is on every node before vLLM starts; the sync runs beside Ray, over the interconnect.
        after("spark-a-vllm-secrets", "dev-model-download", "dev-model-serve", "dev-model-pull-spark-b");
        after("dev-model-serve", "dev-model-download", "spark-a-interconnect-apply", "spark-a-firewall-apply");
        after("dev-model-pull-spark-b", "dev-model-download", "spark-b-interconnect-apply", "spark-b-firewall-apply");
        notAfter("dev-model-download", "spark-a-ray-head-unit");
        notAfter("spark-a-ray-head-unit", "dev-model-download");
        // The head serves while the workers pull: neither waits for the other.
        notAfter("dev-model-serve", "dev-model-pull-spark-b");
        notAfter("dev-model-pull-spark-b", "dev-model-serve");
        // Nodes converge their host layers in parallel: each waits for the other's read-only probes (the vLLM check), nothing else of it.
        const probeSteps = /-(ssh|probe|vllm-probe|ray-probe|facts)$/;
        for (const step of ["interconnect-apply", "roce-apply", "nccl-files"]) {
            const other = (n: string, prefix: string) => n.startsWith(prefix) && !probeSteps.test(n);
            assert.ok(![...waitsFor(result, `spark-a-${step}`)].some((n) => other(n, "spark-b-")), `spark-a-${step} waits for spark-b`);
            assert.ok(![...waitsFor(result, `spark-b-${step}`)].some((n) => other(n, "spark-a-")), `spark-b-${step} waits for spark-a`);
        }
    });

    it("checks every node's vLLM on the head before anything changes, and shows each node's version", async () => {
        const result = scenario("base");
        const check = scriptOf(commandText(get(result, "dev-vllm-check"), "create") ?? "").script;
        assert.match(check, new RegExp(`^echo 'spark-a: vLLM 0\\.31\\.0 \\(the image nvcr\\.io/nvidia/vllm:26\\.10-py3, ${MOCK_IMAGE_ID}\\)'$`, "m"));
        assert.match(check, /^echo 'spark-b: vLLM 0\.31\.0 /m);
        assert.doesNotMatch(check, /exit 1/, "the mocked nodes agree and run what is rendered");
    });

    it("starts each node's serving units (Ray, vLLM) by the image ID its probe found, and reads the tag back on refresh", async () => {
        const result = scenario("base");
        for (const unit of ["spark-a-ray-head-unit", "spark-b-ray-worker-unit", "spark-a-vllm-unit"]) {
            const script = scriptOf(commandText(get(result, unit), "create") ?? "").script;
            assert.match(script, new RegExp(`^ExecStart=/usr/bin/docker run .* -- ${MOCK_IMAGE_ID} `, "m"), `${unit} starts the image by its ID`);
            assert.doesNotMatch(script, /-- nvcr\.io\/nvidia\/vllm:26\.10-py3 /, `${unit} does not start the tag`);
        }
        for (const node of ["spark-a", "spark-b"]) {
            const read = plain(get(result, `${node}-vllm-probe`).inputs.read);
            assert.equal(typeof read, "string", `${node}-vllm-probe has a read-back`);
            const script = scriptOf(read as string).script;
            assert.match(script, /docker image inspect --format '\{\{\.Id\}\}' -- nvcr\.io\/nvidia\/vllm:26\.10-py3/);
            assert.match(script, new RegExp(`${node}: the tag nvcr\\.io/nvidia/vllm:26\\.10-py3 names `));
        }
    });

    it("every command line runs a script that passes bash -n, through sudo -n for a non-root user", async () => {
        const result = scenario("base");
        const commands = result.resources.filter((r) => r.type === COMMAND);
        assert.ok(commands.length > 0);
        for (const r of commands) {
            for (const key of ["create", "delete"] as const) {
                const text = commandText(r, key);
                if (text === undefined) {
                    continue;
                }
                const { sudo, script } = scriptOf(text);
                // The SSH step of a login other than root runs as that user: it proves the user can become root.
                const onSparkB = (r.name.startsWith("spark-b-") || r.name.endsWith("-spark-b")) && r.name !== "spark-b-ssh";
                assert.equal(sudo, onSparkB, `${r.name}.${key}: sudo -n exactly for the ubuntu user`);
                const check = bashN(script);
                assert.equal(check.status, 0, `${r.name}.${key}: bash -n failed:\n${check.stderr}`);
            }
        }
        assert.deepEqual(
            commands
                .filter((r) => commandText(r, "delete") === undefined)
                .map((r) => r.name)
                .sort(),
            [
                "dev-node-check",
                "dev-vllm-check",
                "spark-a-facts",
                "spark-a-probe",
                "spark-a-ray-head-ready",
                "spark-a-ray-probe",
                "spark-a-ssh",
                "spark-a-vllm-probe",
                "spark-a-vllm-ready",
                "spark-b-facts",
                "spark-b-probe",
                "spark-b-ray-probe",
                "spark-b-ssh",
                "spark-b-vllm-probe",
            ],
            "every step that changes a host has a delete that undoes it",
        );
    });

    it("every wait in every command of every scenario is sc_wait or an explicit exception (test/support/waitLoops.ts)", async () => {
        const unexplained: string[] = [];
        const used = new Set<(typeof WAIT_EXCEPTIONS)[number]>();
        for (const name of Object.keys(SCENARIOS).filter((n) => n !== "thorUnnamed")) {
            const result = scenario(name);
            for (const r of result.resources.filter((r) => r.type === COMMAND)) {
                for (const key of ["create", "delete", "read"] as const) {
                    const text = plain(r.inputs[key]);
                    if (typeof text !== "string" || text === "") continue;
                    for (const loop of loopsIn(scriptOf(text).script)) {
                        if (!loop.wait || loop.helper) continue;
                        const exception = waitException(r.name, loop);
                        if (exception === undefined) unexplained.push(`${name}: ${r.name}.${key}: ${loop.language} loop \`${loop.header}\``);
                        else used.add(exception);
                    }
                }
            }
        }
        assert.deepEqual(unexplained, [], "a wait that is neither sc_wait nor in WAIT_EXCEPTIONS");
        assert.deepEqual(
            WAIT_EXCEPTIONS.filter((e) => !used.has(e)).map((e) => `${e.step.source} ${e.header}`),
            [],
            "every exception is a loop some scenario registers",
        );
    });

    it("detects spark-b's twins and both HCAs from ibdev2netdev", async () => {
        const result = scenario("base");
        const netplan = scriptOf(commandText(get(result, "spark-b-interconnect-apply"), "create") ?? "").script;
        assert.match(netplan, /^ {4}enp1s0f1np1:\n[\s\S]*^ {8}- 192\.168\.100\.12\/24$/m);
        assert.match(netplan, /^ {4}enP2p1s0f1np1:\n[\s\S]*^ {8}- 192\.168\.101\.12\/24$/m);
        const nccl = scriptOf(commandText(get(result, "spark-b-nccl-files"), "create") ?? "").script;
        assert.match(nccl, /^NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1$/m);
        assert.match(nccl, /^VLLM_HOST_IP=192\.168\.100\.12$/m);
        const pfc = scriptOf(commandText(get(result, "spark-b-roce-apply"), "create") ?? "").script;
        assert.match(pfc, /mlnx_qos -i enp1s0f1np1 --pfc 0,0,0,1,0,0,0,0 --trust dscp/);
        assert.match(pfc, /mlnx_qos -i enP2p1s0f1np1 --pfc 0,0,0,1,0,0,0,0 --trust dscp/);
        assert.match(pfc, /mlnx_qos -i enP2p1s0f1np1 --dscp2prio set,26,3/);
        assert.match(nccl, /^NCCL_IB_TC=106$/m, "NCCL marks DSCP 26, which the map puts on PFC priority 3");
    });

    it("exports the endpoint on the head's SSH address, the transport and each node's PFC status", async () => {
        const result = scenario("base");
        const peermem = "not loaded: a spark's GB10 does not support GPUDirect RDMA (nvidia-peermem fails to load there); NCCL goes through host memory";
        const chain = { status: "enabled: test", priority: 3, trust: "dscp", dscp: 26, trafficClass: 106, peermem };
        assert.deepEqual(result.outputs.roce, { "spark-a": chain, "spark-b": chain });
        assert.equal(result.outputs.endpoint, "http://10.0.0.11:8000/v1");
        assert.equal(result.outputs.servedModel, "qwen2.5-7b");
        assert.equal(result.outputs.transport, "roce");
    });

    it("renders the same inputs on a second run (a second `pulumi up` has nothing to change)", async () => {
        assert.deepEqual(changedNames(scenario("base"), scenario("baseAgain")), []);
    });
});

describe("a ring of four Sparks (interconnect.topology: ring)", () => {
    const FABRIC_STEP = /-(forwarding|lldp-probe|cabling-check)$/;

    it("a forwarding step only where a path needs one; the cabling checked against LLDP on every node", async () => {
        const result = scenario("ring4");
        const names = result.resources.map((r) => r.name);
        assert.deepEqual(
            names.filter((n) => FABRIC_STEP.test(n)).sort(),
            [...RING.flatMap((n) => [`${n}-cabling-check`, `${n}-lldp-probe`]), "spark-a-forwarding", "spark-b-forwarding"].sort(),
        );
        for (const n of ["spark-a-forwarding", "spark-b-forwarding"]) assert.equal(byName(result).get(n)?.type, COMMAND);
    });

    it("nothing changes on any node before every node's cabling is checked; whatever crosses the ring waits for every forwarding step", async () => {
        const result = scenario("ring4");
        const waits = (name: string) => waitsFor(result, name);
        for (const node of RING) {
            const fabric = waits(`${node}-interconnect-apply`);
            for (const other of RING) assert.ok(fabric.has(`${other}-cabling-check`), `${node}-interconnect-apply waits for ${other}-cabling-check`);
            for (const step of [`${node}-check-nccl`, `${node}-vllm-unit`]) {
                const w = waits(step);
                assert.ok(w.has("spark-a-forwarding") && w.has("spark-b-forwarding"), `${step} waits for every forwarding step`);
            }
        }
        for (const pull of ["dev-model-pull-spark-c", "dev-model-pull-spark-d"]) {
            const w = waits(pull);
            assert.ok(w.has("spark-a-forwarding") && w.has("spark-b-forwarding"), `${pull} waits for every forwarding step`);
        }
        assert.ok(waits("spark-a-forwarding").has("spark-a-interconnect-apply") && waits("spark-a-forwarding").has("spark-a-firewall-apply"));
    });

    it("a pair has none of the ring's steps, and no dependency on them", async () => {
        const result = scenario("base");
        assert.deepEqual(
            result.resources.map((r) => r.name).filter((n) => FABRIC_STEP.test(n)),
            [],
        );
    });
});

describe("what one config key changes", () => {
    it("model.source: the model sync steps (replaced, the old one deleted first) and the vLLM unit with its readiness check", async () => {
        const base = scenario("base");
        const changed = changedNames(base, scenario("modelSource"));
        assert.deepEqual(changed, ["dev-model-download", "dev-model-pull-spark-b", "dev-model-serve", "spark-a-vllm-ready", "spark-a-vllm-unit"]);
        for (const name of ["dev-model-download", "dev-model-pull-spark-b", "dev-model-serve"]) {
            const step = get(base, name);
            assert.deepEqual(plain(step.inputs.triggers), ["Qwen/Qwen2.5-7B-Instruct"], `${name} is keyed on the model id`);
            assert.ok(step.deleteBeforeReplace, `${name}: the old model's step is deleted before the new one is created`);
        }
    });

    it("model.servedName: only the vLLM unit and its readiness check", async () => {
        const changed = changedNames(scenario("base"), scenario("servedName"));
        assert.deepEqual(changed, ["spark-a-vllm-ready", "spark-a-vllm-unit"]);
    });

    it("model.executor: Ray and vLLM steps only; the hardware probe and the host layers stay as they are", async () => {
        const changed = changedNames(scenario("base"), scenario("mp"));
        assert.ok(changed.includes("spark-a-vllm-unit") && changed.includes("spark-a-ray-probe"), changed.join(", "));
        const hostLayers = changed.filter((name) => /-(ssh|probe|interconnect|roce|nccl|firewall)(-|$)/.test(name) && !/-ray-probe$/.test(name));
        assert.deepEqual(hostLayers, [], "a changed probe would make every layer that reads its output an update in the preview");
    });

    it("model.engine vllm -> sglang: only the serving layer (each rank's secrets, unit, follower, rank 0's readiness) and the engine's probe and check; every host layer and the model sync keep their inputs", async () => {
        const vllm = scenario("mpVenv");
        const sglang = scenario("mpVenvSglang");
        assert.deepEqual(vllm.errors, []);
        assert.deepEqual(sglang.errors, []);
        const shape = (r: RecordedResource) => `${r.type} ${r.name} <- ${r.parent ?? ""}`;
        assert.deepEqual(
            sglang.resources.map(shape).sort(),
            [
                ...vllm.resources.map(shape),
                "spark-remote:index:Step spark-a-vllm-engine-switch <- spark-a-vllm",
                "spark-remote:index:Step spark-b-vllm-engine-switch <- spark-b-vllm",
            ].sort(),
            "the same resources, types and parents (URNs stay), and one engine-switch step per server",
        );
        assert.deepEqual(changedNames(vllm, sglang), [
            "dev-vllm-check",
            "spark-a-vllm-engine-switch",
            "spark-a-vllm-probe",
            "spark-a-vllm-ready",
            "spark-a-vllm-secrets",
            "spark-a-vllm-unit",
            "spark-b-vllm-engine-switch",
            "spark-b-vllm-follow",
            "spark-b-vllm-probe",
            "spark-b-vllm-secrets",
            "spark-b-vllm-unit",
        ]);
        // Going back to vLLM, the engine-switch step leaves the stack: its delete removes SGLang's files.
        const cleanup = get(sglang, "spark-b-vllm-engine-switch").inputs;
        assert.match(String(plain(cleanup.create)), /spark-cluster-vllm-follow\.service[\s\S]*\/etc\/spark-cluster\/vllm\.env/);
        assert.match(String(plain(cleanup.delete)), /spark-cluster-sglang-follow\.service[\s\S]*\/etc\/spark-cluster\/sglang\.yaml/);
        assert.deepEqual(get(sglang, "spark-b-vllm-secrets").dependsOn, ["spark-b-vllm-engine-switch"]);
        const unit = String(plain(get(sglang, "spark-a-vllm-unit").inputs.create));
        assert.match(unit, /-m sglang\.launch_server --model-path Qwen\/Qwen2\.5-7B-Instruct /);
        assert.match(unit, /--dist-init-addr 192\.168\.100\.11:29501 --host 0\.0\.0\.0 --port 8000 --config \/etc\/spark-cluster\/sglang\.yaml/);
        assert.doesNotMatch(unit, new RegExp(API_KEY), "the API key is not in the unit");
        assert.match(
            String(plain(get(sglang, "spark-b-vllm-unit").inputs.create)),
            /--node-rank 1 --dist-init-addr 192\.168\.100\.11:29501 --host 127\.0\.0\.1 --port 8000/,
        );
    });

    it("model.env: only the vLLM units (each rank's environment) and the readiness check that follows them", async () => {
        const base = scenario("base");
        const changed = scenario("modelEnv");
        assert.deepEqual(changedNames(base, changed), ["spark-a-vllm-ready", "spark-a-vllm-unit"]);
        assert.match(String(plain(get(changed, "spark-a-vllm-unit").inputs.create)), /VLLM_USE_FLASHINFER_MOE_FP4=1/);
    });

    it("runtime.extraOptions: only that node's serving units (Ray, vLLM) and the checks that follow them", async () => {
        const base = scenario("base");
        const changed = scenario("dockerOptions");
        assert.deepEqual(changedNames(base, changed), ["spark-a-ray-head-ready", "spark-a-ray-head-unit", "spark-a-vllm-ready", "spark-a-vllm-unit"]);
        for (const unit of ["spark-a-ray-head-unit", "spark-a-vllm-unit"])
            assert.match(String(plain(get(changed, unit).inputs.create)), / --ulimit=nofile=1048576:1048576 --cap-add=IPC_LOCK --env-file /);
    });

    it("model.readyTimeoutSeconds: only the readiness check, whose Pulumi timeout covers the longer wait", async () => {
        const base = scenario("base");
        const changed = scenario("readyTimeout");
        assert.deepEqual(changedNames(base, changed), ["spark-a-vllm-ready"]);
        assert.match(String(plain(get(changed, "spark-a-vllm-ready").inputs.create)), /sc_wait 1800 /);
        assert.equal(get(base, "spark-a-vllm-ready").createTimeout, "20m");
        assert.equal(get(changed, "spark-a-vllm-ready").createTimeout, "40m");
    });

    it("interconnect.mtu: only the netplan steps, not the NCCL files or the Ray and vLLM units", async () => {
        assert.deepEqual(changedNames(scenario("base"), scenario("mtu")), ["spark-a-interconnect-apply", "spark-b-interconnect-apply"]);
    });

    it("nccl.debug: the NCCL files, and (through the env hash) the Ray and vLLM units that read them", async () => {
        assert.deepEqual(changedNames(scenario("base"), scenario("ncclDebug")), [
            "spark-a-nccl-files",
            "spark-a-ray-head-ready",
            "spark-a-ray-head-unit",
            "spark-a-vllm-ready",
            "spark-a-vllm-unit",
            "spark-b-nccl-files",
            "spark-b-ray-worker-unit",
        ]);
    });

    it("apiKey: only vLLM's secrets step's stdin (it restarts its unit when the file changed); the readiness check runs again; no internal secret changes", async () => {
        const base = scenario("base");
        const rotated = scenario("apiKey");
        assert.deepEqual(changedNames(base, rotated), ["spark-a-vllm-ready", "spark-a-vllm-secrets"]);
        // The probe re-runs through its (secret) triggers: vLLM restarted for the new key; its script is the same.
        const ready = ["create", "triggers"].filter(
            (key) => JSON.stringify(get(base, "spark-a-vllm-ready").inputs[key]) !== JSON.stringify(get(rotated, "spark-a-vllm-ready").inputs[key]),
        );
        assert.deepEqual(ready, ["triggers"]);
        const secretsChanged = Object.keys(get(base, "spark-a-vllm-secrets").inputs).filter(
            (key) => JSON.stringify(get(base, "spark-a-vllm-secrets").inputs[key]) !== JSON.stringify(get(rotated, "spark-a-vllm-secrets").inputs[key]),
        );
        assert.deepEqual(secretsChanged, ["stdin"], "the command line itself does not change");
        assert.match(commandText(get(base, "spark-a-vllm-secrets"), "create") ?? "", /systemctl restart spark-cluster-vllm\.service/);
    });

    it("secretsGeneration: a new root secret, the steps that carry what is derived from it (the Ray token's, the model sync's), and the engine's probe (Ray restarts under it)", async () => {
        const base = scenario("base");
        const rotated = scenario("secretsGeneration");
        assert.deepEqual(changedNames(base, rotated), [
            "dev-model-pull-spark-b",
            "dev-model-serve",
            "dev-root-secret",
            "spark-a-ray-head-auth",
            "spark-a-vllm-ready",
            "spark-b-ray-worker-auth",
        ]);
        assert.deepEqual(
            ["create", "triggers"].filter(
                (key) => JSON.stringify(get(base, "spark-a-vllm-ready").inputs[key]) !== JSON.stringify(get(rotated, "spark-a-vllm-ready").inputs[key]),
            ),
            ["triggers"],
            "the probe runs again through its (secret) trigger",
        );
        assert.deepEqual(get(base, "dev-root-secret").inputs, { generation: "1" });
        assert.deepEqual(get(rotated, "dev-root-secret").inputs.generation, "2");
        for (const name of ["dev-model-pull-spark-b", "dev-model-serve", "spark-a-ray-head-auth", "spark-b-ray-worker-auth"]) {
            const changedInputs = Object.keys(get(base, name).inputs).filter(
                (key) => JSON.stringify(get(base, name).inputs[key]) !== JSON.stringify(get(rotated, name).inputs[key]),
            );
            assert.deepEqual(changedInputs, ["stdin"], `${name}: only the secret on stdin changes`);
        }
        for (const name of ["spark-a-ray-head-auth", "spark-b-ray-worker-auth"]) {
            assert.match(commandText(get(base, name), "create") ?? "", /systemctl restart spark-cluster-ray\.service/);
            assert.ok(String(plain(get(rotated, name).inputs.stdin)).includes(mockDerivedSecret(SECRET_PURPOSES.rayAuthToken, "2")), name);
        }
    });

    it("the root secret is our provider's RandomSecret, a child of the cluster, its value a secret output; nothing derives from the API key", async () => {
        const result = scenario("base");
        const roots = result.resources.filter((r) => r.type === RANDOM_SECRET);
        assert.deepEqual(
            roots.map((r) => [r.name, r.parent]),
            [["dev-root-secret", "dev"]],
        );
        assert.deepEqual(roots[0].replaceOnChanges, ["bytes", "generation"]);
        // The derivation before 2026-11-29 (issue 40): HMACs of the API key, which every client holds.
        const fromApiKey = ["ray auth token for stack dev", "open webui secret key for stack dev", "model sync for stack dev: Qwen/Qwen2.5-7B-Instruct"].map(
            (purpose) => createHmac("sha256", API_KEY).update(`spark-cluster ${purpose}`).digest("hex"),
        );
        for (const name of ["base", "openWebui"]) {
            const text = JSON.stringify(scenario(name).resources.map((r) => r.inputs));
            for (const old of fromApiKey) assert.ok(!text.includes(old), `${name}: a secret derived from the API key reaches a step`);
        }
    });

    it("a stack that carries no internal secret (mp, a local model, no Open WebUI) draws no root secret", async () => {
        const result = scenario("localModel");
        assert.deepEqual(result.errors, []);
        assert.deepEqual(
            result.resources.filter((r) => r.type === RANDOM_SECRET),
            [],
        );
    });
});

describe("model.paused", () => {
    it("ray executor: only the head's vLLM layer leaves the graph; every other resource keeps its inputs, Ray and the model sync included", async () => {
        const base = scenario("base");
        const paused = scenario("paused");
        assert.deepEqual(paused.errors, []);
        assert.deepEqual(changedNames(base, paused), ["spark-a-vllm", "spark-a-vllm-ready", "spark-a-vllm-secrets", "spark-a-vllm-unit"]);
        const names = new Set(paused.resources.map((r) => r.name));
        for (const name of ["spark-a-vllm", "spark-a-vllm-ready", "spark-a-vllm-secrets", "spark-a-vllm-unit"]) {
            assert.ok(!names.has(name), `${name} is not in the paused graph (its delete stops and removes it)`);
        }
        for (const name of ["spark-a-ray-head-unit", "spark-b-ray-worker-unit", "dev-model-download", "dev-model-pull-spark-b", "dev-vllm-check"]) {
            assert.ok(names.has(name), `${name} stays`);
        }
        assert.equal(paused.outputs.endpoint, base.outputs.endpoint, "the endpoint output names where serving resumes");
        assert.equal(paused.outputs.servedModel, base.outputs.servedModel);
    });

    it("mp executor: every rank's vLLM layer (units, follower, secrets, probe) leaves; nothing else changes", async () => {
        assert.deepEqual(changedNames(scenario("mp"), scenario("mpPaused")), [
            "spark-a-vllm",
            "spark-a-vllm-ready",
            "spark-a-vllm-secrets",
            "spark-a-vllm-unit",
            "spark-b-vllm",
            "spark-b-vllm-follow",
            "spark-b-vllm-secrets",
            "spark-b-vllm-unit",
        ]);
    });

    it("paused: false is the graph without the key: resuming re-creates exactly what pausing removed", async () => {
        assert.deepEqual(changedNames(scenario("base"), scenario("unpaused")), []);
    });
});

describe("secrets", () => {
    it("rotating a secret updates the secrets step in place: no replacement whose delete would remove the new file", async () => {
        // A step makes `triggers` replaceOnChanges; a create-before-delete replacement would
        // write /etc/spark-cluster/vllm.env, then run the old step's delete on the same path.
        const step = get(scenario("base"), "spark-a-vllm-secrets");
        const replacedOnRotation = step.inputs.triggers !== undefined && step.replaceOnChanges.includes("triggers[*]");
        assert.ok(!replacedOnRotation || step.deleteBeforeReplace, "replaced create-before-delete on every rotation");
        assert.equal(step.inputs.update, undefined, "no update command: a changed stdin re-runs create");
    });

    it("the vLLM unit stays readable (not a secret) and carries nothing derived from the secrets", async () => {
        const result = scenario("base");
        const create = get(result, "spark-a-vllm-unit").inputs.create;
        assert.ok(!isSecret(create), "the unit's create is plain, so `pulumi preview --diff` shows unit changes");
        assert.doesNotMatch(String(create), /vllm\.env: [0-9a-f]/);
    });

    for (const name of ["base", "mp", "sparkThor"] as const) {
        it(`${name}: the API key reaches only the secrets step's stdin, and the HF token only the download's, as secrets`, async () => {
            const result = scenario(name);
            const secretsSteps = result.resources.filter((r) => r.name.endsWith("-vllm-secrets")).map((r) => r.name);
            assert.ok(secretsSteps.length > 0);
            for (const needle of name === "sparkThor" ? [API_KEY] : [API_KEY, HF_TOKEN]) {
                const found = result.resources.flatMap((r) => occurrences(r.inputs, needle).map((o) => ({ resource: r.name, ...o })));
                // The HF token goes to the one download (on the head), as its stdin, and nowhere else: vLLM serves offline.
                const steps = needle === HF_TOKEN ? ["dev-model-download"] : secretsSteps;
                assert.deepEqual(
                    found.sort((a, b) => a.resource.localeCompare(b.resource)),
                    [...steps].sort().map((resource) => ({ resource, path: "stdin", secret: true })),
                    `where ${needle === API_KEY ? "the API key" : "the HF token"} appears`,
                );
                assert.ok(!JSON.stringify(result.outputs).includes(needle), "not in the cluster's outputs");
            }
            for (const step of secretsSteps) {
                const inputs = get(result, step).inputs;
                assert.ok(isSecret(inputs.stdin), `${step}.stdin is a secret`);
                assert.equal(inputs.logging, "none");
                assert.match(String(plain(inputs.stdin)), /^# Managed by spark-cluster[^\n]*\nVLLM_API_KEY=[^\n]*\n$/, "the API key alone");
            }
        });
    }

    it("the Ray token (derived from the root secret) reaches only each Ray node's auth step's stdin, as a secret", async () => {
        const result = scenario("base");
        const token = mockDerivedSecret(SECRET_PURPOSES.rayAuthToken);
        const found = result.resources.flatMap((r) => occurrences(r.inputs, token).map((o) => ({ resource: r.name, ...o })));
        assert.deepEqual(found, [
            { resource: "spark-a-ray-head-auth", path: "stdin", secret: true },
            { resource: "spark-b-ray-worker-auth", path: "stdin", secret: true },
        ]);
        assert.equal(get(result, "spark-a-ray-head-auth").inputs.logging, "none");
        assert.equal(
            String(plain(get(result, "spark-a-ray-head-auth").inputs.stdin))
                .split("\n")
                .slice(1)
                .join("\n"),
            `RAY_AUTH_MODE=token\nRAY_AUTH_TOKEN=${token}\n`,
        );
        assert.ok(!JSON.stringify(result.outputs).includes(token), "not in the cluster's outputs");
    });

    it("the model sync secret (derived from the root secret) reaches only the serve and pull steps' stdin, as a secret", async () => {
        const result = scenario("base");
        const secret = mockDerivedSecret(SECRET_PURPOSES.modelSync("Qwen/Qwen2.5-7B-Instruct"));
        const found = result.resources.flatMap((r) => occurrences(r.inputs, secret).map((o) => ({ resource: r.name, ...o })));
        assert.deepEqual(found, [
            { resource: "dev-model-serve", path: "stdin", secret: true },
            { resource: "dev-model-pull-spark-b", path: "stdin", secret: true },
        ]);
        assert.ok(!JSON.stringify(result.outputs).includes(secret), "not in the cluster's outputs");
        assert.match(scriptOf(commandText(get(result, "spark-a-vllm-unit"), "create") ?? "").script, / -e HF_HUB_OFFLINE=1 -- /, "vLLM runs offline");
    });

    it("an explicit rayAuthToken is used as it is (the way to rotate it)", async () => {
        const token = RAY_TOKEN;
        const result = scenario("rayToken");
        assert.deepEqual(
            result.resources.flatMap((r) => occurrences(r.inputs, token).map((o) => r.name + ":" + o.path)),
            ["spark-a-ray-head-auth:stdin", "spark-b-ray-worker-auth:stdin"],
        );
    });
});

describe("a Spark + Thor cluster on sockets", () => {
    it("has no RocePfc on any node and disables NET/IB everywhere", async () => {
        const result = scenario("sparkThor");
        assert.deepEqual(
            result.resources.filter((r) => r.type === COMPONENT("RocePfc")).map((r) => r.name),
            [],
        );
        assert.equal(result.outputs.transport, "socket");
        assert.deepEqual(result.outputs.roce, {
            "spark-a": { status: "skipped: the cluster uses socket transport" },
            "thor-1": { status: "skipped: the cluster uses socket transport" },
        });
        for (const node of ["spark-a", "thor-1"]) {
            const files = scriptOf(commandText(get(result, `${node}-nccl-files`), "create") ?? "").script;
            assert.match(files, /^NCCL_IB_DISABLE=1$/m);
            assert.doesNotMatch(files, /NCCL_IB_HCA/);
            assert.match(files, /^NCCL_P2P_DISABLE=1$/m, "the Spark + Thor heterogeneous settings");
            assert.deepEqual(get(result, `${node}-nccl`).dependsOn, [`${node}-interconnect`], "no PFC step to wait for");
        }
    });

    it("runs Ray on the Thor from its venv, and vLLM eagerly", async () => {
        const result = scenario("sparkThor");
        const worker = scriptOf(commandText(get(result, "thor-1-ray-worker-unit"), "create") ?? "").script;
        assert.match(worker, /^ExecStart=\/opt\/vllm-venv\/bin\/ray start --block --node-ip-address=192\.168\.100\.27 /m);
        assert.doesNotMatch(worker, /docker/);
        const vllm = scriptOf(commandText(get(result, "spark-a-vllm-unit"), "create") ?? "").script;
        assert.match(vllm, / --pipeline-parallel-size 2 /);
        assert.match(vllm, / --enforce-eager/);
    });
});

describe("the mp executor", () => {
    it("has no Ray, a VllmServer per node, and a readiness check on rank 0 only", async () => {
        const result = scenario("mp");
        const types = result.resources.map((r) => r.type);
        assert.ok(!types.includes(COMPONENT("RayHead")) && !types.includes(COMPONENT("RayWorker")));
        assert.deepEqual(
            result.resources
                .filter((r) => r.type === COMPONENT("VllmServer"))
                .map((r) => r.name)
                .sort(),
            ["spark-a-vllm", "spark-b-vllm"],
        );
        const vllmSteps = result.resources
            .filter((r) => /-vllm-/.test(r.name) && !/-vllm-(probe|check)$/.test(r.name))
            .map((r) => r.name)
            .sort();
        assert.deepEqual(vllmSteps, [
            "spark-a-vllm-ready",
            "spark-a-vllm-secrets",
            "spark-a-vllm-unit",
            "spark-b-vllm-follow",
            "spark-b-vllm-secrets",
            "spark-b-vllm-unit",
        ]);
        // The headless rank's follower is installed after its vLLM unit (and removed before it).
        assert.ok(get(result, "spark-b-vllm-follow").dependsOn.includes("spark-b-vllm-unit"), "the follower depends on rank 1's unit");
        // rank 1 restarting ends the engine on rank 0 too: rank 0's unit names rank 1's unit (so it
        // restarts after it), and its probe is triggered by rank 1's restarts.
        assert.match(commandText(get(result, "spark-a-vllm-unit"), "create") ?? "", /^# input units of ranks 1\+: [0-9a-f]{16}$/m);
        assert.doesNotMatch(commandText(get(result, "spark-b-vllm-unit"), "create") ?? "", /units of ranks/);
        assert.notEqual(get(result, "spark-a-vllm-ready").inputs.triggers, undefined, "the probe has triggers");
        assert.equal(result.outputs.dashboard, undefined);
    });

    it("makes rank 1 headless, points both at the head, and waits for each node's own host layers", async () => {
        const result = scenario("mp");
        const rank0 = scriptOf(commandText(get(result, "spark-a-vllm-unit"), "create") ?? "").script;
        const rank1 = scriptOf(commandText(get(result, "spark-b-vllm-unit"), "create") ?? "").script;
        assert.match(rank0, / --nnodes 2 --node-rank 0 --master-addr 192\.168\.100\.11 --master-port 29501 --host 0\.0\.0\.0 --port 8000/);
        assert.match(rank1, / --nnodes 2 --node-rank 1 --master-addr 192\.168\.100\.11 --master-port 29501 --headless/);
        assert.doesNotMatch(rank0 + rank1, /RAY_ADDRESS|spark-cluster-ray\.service/);
        assert.deepEqual(
            get(result, "spark-a-vllm").dependsOn.filter((d) => d !== "dev-model"),
            ["spark-a-interconnect", "spark-a-nccl", "spark-a-firewall", "spark-b-vllm"],
            "rank 0 after its own host layers and after rank 1",
        );
        assert.deepEqual(
            get(result, "spark-b-vllm").dependsOn.filter((d) => d !== "dev-model"),
            ["spark-b-interconnect", "spark-b-nccl", "spark-b-firewall"],
        );
        for (const node of ["spark-a", "spark-b"]) {
            assert.ok(get(result, `${node}-vllm`).dependsOn.includes("dev-model"), `${node}'s vLLM waits for the model on every node`);
        }
        for (const node of ["spark-a", "spark-b"]) {
            assert.match(
                scriptOf(commandText(get(result, `${node}-vllm-unit`), "create") ?? "").script,
                / -e HF_HUB_OFFLINE=1 -- /,
                `${node} runs vLLM offline`,
            );
        }
    });
});

describe("the model", () => {
    it("a Hugging Face id: downloaded once on the head, served by the head, pulled by each other node (the Thor too)", async () => {
        const result = scenario("sparkThor");
        const steps = result.resources.filter((r) => r.parent === "dev-model").map((r) => r.name);
        assert.deepEqual(steps.sort(), ["dev-model-download", "dev-model-pull-thor-1", "dev-model-serve"]);
        const download = scriptOf(commandText(get(result, "dev-model-download"), "create") ?? "").script;
        assert.match(
            download,
            /docker run --rm --name spark-cluster-model-download .* hf download Qwen\/Qwen2\.5-7B-Instruct /,
            "the head's own runtime downloads",
        );
        assert.equal(get(result, "dev-model-download").inputs.stdin, undefined, "no hfToken: nothing on stdin");
        const serve = scriptOf(commandText(get(result, "dev-model-serve"), "create") ?? "").script;
        assert.match(serve, /--address=192\.168\.100\.11 --port=8873 /);
        assert.match(serve, /^ {4}hosts allow = 192\.168\.100\.27$/m);
        const pull = scriptOf(commandText(get(result, "dev-model-pull-thor-1"), "create") ?? "").script;
        assert.match(pull, /rsync:\/\/spark-cluster@192\.168\.100\.11:8873\/model-thor-1\/ "\$repo\/"/);
    });

    it("destroy leaves the model in every cache; model.removeCacheOnDestroy changes only the deletes", async () => {
        const base = scenario("base");
        const remove = scenario("removeCache");
        for (const name of ["dev-model-download", "dev-model-pull-spark-b"]) {
            const keep = scriptOf(commandText(get(base, name), "delete") ?? "").script;
            assert.match(keep, /model caches are your data/);
            assert.doesNotMatch(keep, /rm -rf "\$repo"/);
            assert.match(scriptOf(commandText(get(remove, name), "delete") ?? "").script, /rm -rf "\$repo"/);
        }
        assert.deepEqual(changedNames(base, remove), ["dev-model-download", "dev-model-pull-spark-b"]);
        for (const name of ["dev-model-download", "dev-model-pull-spark-b"]) {
            assert.equal(commandText(get(base, name), "create"), commandText(get(remove, name), "create"), `${name}: the same create`);
        }
    });

    it("a local path: checked on every node (read-only, nothing to delete), served as it is, vLLM offline", async () => {
        const result = scenario("localModel");
        const steps = result.resources.filter((r) => r.parent === "dev-model");
        assert.deepEqual(steps.map((r) => r.name).sort(), ["dev-model-check-spark-a", "dev-model-check-spark-b"]);
        for (const step of steps) {
            assert.equal(commandText(step, "delete"), undefined);
            assert.match(scriptOf(commandText(step, "create") ?? "").script, /^path=\/models\/qwen2\.5-7b$/m);
        }
        const checkWaits = get(result, "dev-model-check-spark-b").dependsOn;
        assert.ok(
            ["spark-b-interconnect", "spark-b-nccl", "spark-b-firewall"].every((d) => checkWaits.includes(d)),
            `waits for spark-b's host layers: ${checkWaits}`,
        );
        assert.ok(!checkWaits.some((d) => d.startsWith("spark-a")), "and for nothing of spark-a's");
        const unit = scriptOf(commandText(get(result, "spark-a-vllm-unit"), "create") ?? "").script;
        assert.match(unit, / vllm serve \/models\/qwen2\.5-7b /);
        assert.match(unit, / -e HF_HUB_OFFLINE=1 -- /);
        assert.match(unit, / -v \/models\/qwen2\.5-7b:\/models\/qwen2\.5-7b:ro /, "the container sees the local model at the same path");
    });
});

test("every scenario's plan evaluates (thorUnnamed's config is refused: test/mocked/materialize.test.ts)", () => {
    for (const name of Object.keys(SCENARIOS).filter((n) => n !== "thorUnnamed")) assert.ok(scenario(name).resources.length > 10, name);
});

describe("the RDMA bandwidth test (interconnect.linkCheck.rdmaBandwidth)", () => {
    it("is absent by default; on, one step per node after its interconnect, PFC and firewall: spark-a serves both rails, spark-b connects", async () => {
        assert.ok(!scenario("base").resources.some((r) => r.name.endsWith("-rdma-bandwidth")));
        const result = scenario("withRdmaBandwidth");
        for (const [node, role] of [
            ["spark-a", "serving on port"],
            ["spark-b", "connecting from"],
        ] as const) {
            const step = get(result, `${node}-rdma-bandwidth`);
            assert.equal(step.parent, node);
            assert.deepEqual(step.dependsOn, [`${node}-interconnect`, `${node}-roce`, `${node}-firewall`]);
            const script = scriptOf(commandText(step, "create") ?? "").script;
            assert.match(script, new RegExp(`RDMA bandwidth on ${node} enp1s0f1np1 <-> .*: ${role}`));
            assert.match(script, /want at least 80 Gb\/s/);
            assert.ok(waitsFor(result, `${node}-check-nccl`).has(`${node}-rdma-bandwidth`));
        }
        assert.match(scriptOf(commandText(get(result, "spark-b-rdma-bandwidth"), "create") ?? "").script, / -p 18516 192\.168\.101\.11 /);
    });
});

describe("the NCCL check (check.enabled)", () => {
    it("runs one rank per node, head first, after the host layers and before Ray and vLLM", async () => {
        const result = scenario("withCheck");
        for (const [node, rank] of [
            ["spark-a", 0],
            ["spark-b", 1],
        ] as const) {
            assert.equal(get(result, `${node}-check`).type, COMPONENT("ClusterCheck"));
            assert.equal(get(result, `${node}-check`).parent, node);
            assert.deepEqual(get(result, `${node}-check`).dependsOn, [`${node}-interconnect`, `${node}-nccl`, `${node}-firewall`]);
            const script = scriptOf(commandText(get(result, `${node}-check-nccl`), "create") ?? "").script;
            assert.match(script, new RegExp(`--rank ${rank} --world-size 2 --master-addr 192\\.168\\.100\\.11`));
            assert.match(script, /--pass-mark 21\.875/, "NVIDIA's RoCE pass mark by default");
            assert.match(script, /--require-transport NET\/IB/, "a RoCE cluster must use NET/IB");
        }
        assert.ok(waitsFor(result, "spark-a-ray-head-unit").has("spark-a-check-nccl"));
        assert.ok(waitsFor(result, "spark-b-ray-worker-unit").has("spark-b-check-nccl"));
        assert.ok(waitsFor(result, "spark-a-vllm-unit").has("spark-b-check-nccl"));
    });

    it("with the RDMA bandwidth test on, runs after it (the two would share the links)", async () => {
        const result = scenario("withRdmaBandwidth");
        for (const node of ["spark-a", "spark-b"]) {
            assert.deepEqual(get(result, `${node}-check`).dependsOn, [`${node}-interconnect`, `${node}-nccl`, `${node}-firewall`, `${node}-rdma-bandwidth`]);
        }
    });

    it("runs again when the NCCL environment changes", async () => {
        const changed = changedNames(scenario("withCheck"), scenario("withCheckDebug"));
        assert.ok(changed.includes("spark-a-check-nccl") && changed.includes("spark-b-check-nccl"), changed.join(", "));
    });
});

describe("frontend.openWebui", () => {
    const UI_STEPS = [
        "spark-a-open-webui",
        "spark-a-open-webui-data",
        "spark-a-open-webui-env",
        "spark-a-open-webui-install",
        "spark-a-open-webui-ready",
        "spark-a-open-webui-unit",
    ];

    it("off (the default, or enabled: false) registers nothing and changes nothing", async () => {
        assert.deepEqual(changedNames(scenario("base"), scenario("openWebuiOff")), []);
        assert.equal(scenario("openWebuiOff").resources.length, scenario("base").resources.length);
    });

    it("on: only its own steps are added, under the head, after the head's vLLM; every other resource is as before", async () => {
        const [base, ui] = [scenario("base"), scenario("openWebui")];
        assert.deepEqual(ui.errors, []);
        const before = new Set(base.resources.map((r) => r.name));
        assert.deepEqual(
            ui.resources
                .filter((r) => !before.has(r.name))
                .map((r) => r.name)
                .sort(),
            UI_STEPS,
        );
        assert.deepEqual(
            changedNames(base, ui).filter((name) => before.has(name)),
            [],
            "nothing of the base stack changes",
        );
        const component = get(ui, "spark-a-open-webui");
        assert.equal(component.type, COMPONENT("OpenWebui"));
        assert.equal(component.parent, "spark-a");
        assert.deepEqual(component.dependsOn, ["spark-a-vllm"]);
        for (const step of UI_STEPS.slice(1)) assert.equal(get(ui, step).parent, "spark-a-open-webui");
        assert.deepEqual(get(ui, "spark-a-open-webui-unit").dependsOn, ["spark-a-open-webui-install", "spark-a-open-webui-data", "spark-a-open-webui-env"]);
        assert.deepEqual(get(ui, "spark-a-open-webui-ready").dependsOn, ["spark-a-open-webui-unit"]);
    });

    it("the admin password, the API key and the session key reach only the env step's stdin (and vLLM's), as secrets", async () => {
        const ui = scenario("openWebui");
        const needles: [string, string[]][] = [
            [OPEN_WEBUI_PASSWORD, ["spark-a-open-webui-env"]],
            [mockDerivedSecret(SECRET_PURPOSES.openWebuiSessionKey), ["spark-a-open-webui-env"]],
            [API_KEY, ["spark-a-open-webui-env", "spark-a-vllm-secrets"]],
        ];
        for (const [needle, steps] of needles) {
            const found = ui.resources.flatMap((r) => occurrences(r.inputs, needle).map((o) => ({ resource: r.name, ...o })));
            assert.deepEqual(
                found.sort((a, b) => a.resource.localeCompare(b.resource)),
                steps.map((resource) => ({ resource, path: "stdin", secret: true })),
            );
            assert.ok(!JSON.stringify(ui.outputs).includes(needle));
        }
        const env = get(ui, "spark-a-open-webui-env").inputs;
        assert.equal(env.logging, "none");
        assert.ok(!isSecret(get(ui, "spark-a-open-webui-unit").inputs.create), "the unit stays readable in a diff");
    });
});

describe("metrics (metrics.enabled)", () => {
    it("on: node_exporter on each node after its host layers, Prometheus on the head after every exporter and the head's vLLM; only the facts steps change (they read the packages)", async () => {
        const [base, on] = [scenario("base"), scenario("metrics")];
        assert.deepEqual(on.errors, []);
        const before = new Set(base.resources.map((r) => r.name));
        assert.deepEqual(
            on.resources
                .filter((r) => !before.has(r.name))
                .map((r) => r.name)
                .sort(),
            ["spark-a-node-exporter", "spark-a-prometheus", "spark-b-node-exporter"],
        );
        assert.deepEqual(
            changedNames(base, on).filter((name) => before.has(name)),
            ["spark-a-facts", "spark-b-facts"],
        );
        for (const node of ["spark-a", "spark-b"]) {
            const exporter = get(on, `${node}-node-exporter`);
            assert.equal(exporter.parent, node);
            assert.deepEqual(exporter.dependsOn, [`${node}-interconnect`, `${node}-firewall`]);
        }
        const prometheus = get(on, "spark-a-prometheus");
        assert.equal(prometheus.parent, "spark-a");
        assert.deepEqual(prometheus.dependsOn, ["spark-a-node-exporter", "spark-b-node-exporter", "spark-a-vllm"]);
    });
});

describe("firewall.enabled", () => {
    it("off: a warning says what listens unguarded; on (the default), no warning about it", async () => {
        const [base, off] = [scenario("base"), scenario("firewallOff")];
        assert.deepEqual(off.errors, []);
        assert.deepEqual(
            off.warnings.filter((w) => /firewall\.enabled/.test(w)),
            [
                "firewall.enabled is false: no firewall of ours guards the nodes, so Ray's ports, the engine's internal ports and NCCL's " +
                    'listen to anyone who reaches a node (docs/operations.md, "Ports"). Set it to true (the default) unless another firewall ' +
                    "keeps them to the cluster's nodes.",
            ],
        );
        assert.deepEqual(
            base.warnings.filter((w) => /firewall\.enabled/.test(w)),
            [],
        );
        assert.ok(!off.resources.some((r) => /-firewall/.test(r.name)), "no firewall step when it is off");
    });
});

describe("the API's exposure", () => {
    it("beyond loopback with no firewall.apiAllowFrom (the default), up and preview warn, naming the endpoint and the fix; with ranges, no warning", async () => {
        const [base, allowed] = [scenario("base"), scenario("apiAllowed")];
        assert.deepEqual(allowed.errors, []);
        const open = (r: ScenarioResult) => r.warnings.filter((w) => /^the API \(/.test(w));
        assert.equal(open(base).length, 1);
        assert.match(
            open(base)[0],
            /^the API \(http:\/\/10\.0\.0\.11:8000\/v1\) answers anyone who reaches spark-a on port 8000, in plain HTTP: .* Set firewall\.apiAllowFrom /,
        );
        assert.deepEqual(open(allowed), []);
        assert.equal(scenario("firewallOff").warnings.filter((w) => /^the API \(/.test(w)).length, 1, "no firewall: open too");
    });
});
