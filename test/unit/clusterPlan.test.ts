/**
 * The cluster's plan (components/plan/clusterPlan.ts) as data, without Pulumi, for every config of
 * the graph tests (test/support/graphScenarios.ts): a well-formed graph (each name once, each
 * parent and each step it runs after planned before it, each value it uses made), its values
 * resolved from fixtures of what the nodes report (test/support/planGraph.ts), and the orderings
 * the cluster relies on. test/unit/graph.test.ts reads the graph's details from the same plan;
 * test/mocked/materialize.test.ts checks that the materializer registers exactly this plan.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type Config, parseConfig } from "../../config";
import { clusterPlan } from "../../components/plan/clusterPlan";
import type { ClusterPlan, Ref } from "../../components/plan/types";
import { isDerived } from "../../components/plan/types";
import { MOCK_HOST_KEY, RING, SCENARIOS, type Scenario, mockStdout } from "../support/graphScenarios";
import { evaluatePlan } from "../support/planGraph";

function planned(scenario: Scenario): { config: Config; plan: ClusterPlan } {
    const config = parseConfig({ values: scenario.values, secretKeys: new Set(scenario.secretKeys) });
    return { config, plan: clusterPlan(scenario.clusterName, config) };
}

function evaluated(scenario: Scenario) {
    const { config, plan } = planned(scenario);
    return evaluatePlan(plan, scenario.clusterName, config, {
        stdout: (step) => mockStdout(scenario, step),
        hostKey: () => MOCK_HOST_KEY,
        secret: (key) => `secret ${key}`,
        derived: (purpose) => `derived ${purpose}`,
    });
}

/**
 * Every name `name` waits for, directly or through what it waits for, its parents' waits included;
 * waiting for a component is waiting for everything under it (Pulumi's dependsOn on a component).
 */
function waitsFor(plan: ClusterPlan, name: string): Set<string> {
    const byName = new Map(plan.items.map((item) => [item.name, item]));
    const children = new Map<string, string[]>();
    for (const item of plan.items)
        if (item.kind !== "secret" && item.parent !== undefined) children.set(item.parent, [...(children.get(item.parent) ?? []), item.name]);
    const seen = new Set<string>();
    const wait = (n: string) => {
        if (seen.has(n)) return;
        seen.add(n);
        for (const child of children.get(n) ?? []) wait(child);
        visit(n);
    };
    const visit = (n: string) => {
        const item = byName.get(n);
        if (item === undefined || item.kind === "secret") return;
        for (const before of item.after) wait(before);
        if (item.parent !== undefined) visit(item.parent);
    };
    visit(name);
    return seen;
}

describe("the plan of every config is a well-formed graph", () => {
    for (const [name, scenario] of Object.entries(SCENARIOS).filter(([n]) => n !== "thorUnnamed")) {
        it(name, () => {
            const { plan } = planned(scenario);
            const seen = new Set<string>();
            const uses = (refs: readonly Ref[], where: string) => {
                for (const r of refs) {
                    if (r.startsWith("value:")) assert.ok(r.slice("value:".length) in plan.values, `${where} uses ${r}, which the plan does not make`);
                    if (r.startsWith("step:")) assert.ok(seen.has(r.split(":")[1]), `${where} uses ${r}, not planned before it`);
                }
            };
            for (const item of plan.items) {
                assert.ok(!seen.has(item.name), `${item.name} is planned once`);
                if (item.kind !== "secret") {
                    for (const before of item.after) assert.ok(seen.has(before), `${item.name} runs after ${before}, which is planned before it`);
                    if (item.parent !== undefined) assert.ok(seen.has(item.parent), `${item.name}'s parent ${item.parent} is planned before it`);
                }
                if (item.kind === "step") {
                    for (const value of Object.values(item.spec).flat()) if (isDerived(value as never)) uses((value as { uses: Ref[] }).uses, item.name);
                }
                seen.add(item.name);
            }
            // An output is a value, never the text of a reference to one.
            const reference = /^(step|secret|derived|value):/;
            for (const item of plan.items) {
                if (item.kind !== "component") continue;
                for (const [key, value] of Object.entries(item.outputs))
                    assert.ok(!(typeof value === "string" && reference.test(value)), `${item.name}.${key}: ${String(value)}`);
            }
            for (const [key, value] of Object.entries(plan.outputs))
                assert.ok(!(typeof value === "string" && reference.test(value)), `${key}: ${String(value)}`);
            // Every value resolves from what the nodes report, and every script is text.
            const { resources } = evaluated(scenario);
            for (const r of resources.filter((x) => x.kind === "step")) assert.ok(typeof r.inputs.create === "string" && r.inputs.create.length > 0, r.name);
        });
    }
});

describe("the orderings the cluster relies on, read from the plan", () => {
    it("nothing changes on any node before the cluster's checks, which wait for every node's probes", () => {
        const { plan } = planned(SCENARIOS.base);
        const probes = ["spark-a", "spark-b"].flatMap((n) => [`${n}-probe`, `${n}-vllm-probe`, `${n}-ray-probe`, `${n}-facts`]);
        for (const p of probes) assert.ok(waitsFor(plan, "dev-vllm-check").has(p), `the engine check waits for ${p}`);
        assert.ok(waitsFor(plan, "dev-vllm-check").has("dev-node-check"));
        for (const item of plan.items.filter((i) => i.kind === "step" && /-(firewall|interconnect|roce|nccl)-/.test(i.name))) {
            assert.ok(waitsFor(plan, item.name).has("dev-vllm-check"), `${item.name} waits for the engine check`);
        }
    });

    it("a ring: nothing crosses it before every node's forwarding step, and nothing changes before every cabling check", () => {
        const { plan } = planned(SCENARIOS.ring4);
        for (const node of RING) {
            for (const other of RING) assert.ok(waitsFor(plan, `${node}-interconnect-apply`).has(`${other}-cabling-check`));
            for (const step of [`${node}-check-nccl`, `${node}-vllm-unit`]) {
                const waits = waitsFor(plan, step);
                assert.ok(waits.has("spark-a-forwarding") && waits.has("spark-b-forwarding"), `${step} waits for every forwarding step`);
            }
        }
    });

    it("the engine starts after the model is on every node, and its readiness after its unit", () => {
        const { plan } = planned(SCENARIOS.base);
        const waits = waitsFor(plan, "spark-a-vllm-ready");
        for (const step of ["dev-model-download", "dev-model-serve", "dev-model-pull-spark-b", "spark-a-vllm-unit", "spark-a-ray-head-ready"]) {
            assert.ok(waits.has(step), `spark-a-vllm-ready waits for ${step}`);
        }
    });

    it("paused: no server, every other layer as it was", () => {
        const base = planned(SCENARIOS.base).plan.items.map((i) => i.name);
        const paused = planned(SCENARIOS.paused).plan.items.map((i) => i.name);
        assert.deepEqual(
            base.filter((n) => !paused.includes(n)),
            base.filter((n) => /-vllm(-|$)/.test(n) && !/-vllm-(probe|check)$/.test(n)),
        );
    });

    it("the warnings: the API open to everyone by default, none with source ranges", () => {
        assert.ok(evaluated(SCENARIOS.base).warnings.some((w) => /answers anyone who reaches spark-a on port 8000/.test(w)));
        assert.ok(!evaluated(SCENARIOS.apiAllowed).warnings.some((w) => /answers anyone/.test(w)));
    });

    it("the modelSync output: per node what the last sync did there, read from each pull step's output", () => {
        const pulled =
            "[spark-cluster] spark-b holds Qwen/Qwen2.5-7B-Instruct: 15G in /root/.cache/huggingface/hub/models--Qwen--Qwen2.5-7B-Instruct; pulled 14570 MiB in 38 s (402.1 MB/s, 4 stream(s))\n";
        const { config, plan } = planned(SCENARIOS.base);
        const outputs = evaluatePlan(plan, "dev", config, {
            stdout: (step) => (step === "dev-model-pull-spark-b" ? pulled : mockStdout(SCENARIOS.base, step)),
            hostKey: () => MOCK_HOST_KEY,
            secret: (key) => `secret ${key}`,
            derived: (purpose) => `derived ${purpose}`,
        }).outputs;
        assert.deepEqual(outputs.modelSync, {
            "spark-a": "the head: downloads the model and serves it to the other nodes",
            "spark-b": "pulled 14570 MiB in 38 s (402.1 MB/s, 4 stream(s))",
        });
        assert.deepEqual(evaluated(SCENARIOS.base).outputs.modelSync, {
            "spark-a": "the head: downloads the model and serves it to the other nodes",
            "spark-b": "not pulled yet",
        });
        for (const text of Object.values(evaluated(SCENARIOS.localModel).outputs.modelSync as Record<string, string>))
            assert.equal(text, "a local path: checked on the node, nothing copied");
    });
});
