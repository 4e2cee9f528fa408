// bench/timeline.js, the pure part of `npm run bench`'s cost analysis, on a fixed 2-node cold `up`
// (test/unit/fixtures/bench): its steps from the event log, the critical path, the overhead and
// the SVG.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { findRepoRoot } from "../support/repoRoot";

const ROOT = findRepoRoot();
const FIXTURES = path.join(ROOT, "test", "unit", "fixtures", "bench");

interface Step {
    key: string;
    urn: string;
    name: string;
    start: number;
    end: number;
}
interface Timing {
    urn: string;
    start: number;
    end: number;
}
interface Timeline {
    stepsFromEvents(events: { t: number; event: unknown }[], opts?: { allTypes?: boolean }): Step[];
    scriptSeconds(step: Step, timings: Timing[]): number;
    criticalPath(steps: Step[], deps: Record<string, string[]>, parents?: Record<string, string>): Step[];
    overhead(
        wall: number,
        path: Step[],
        timings: Timing[],
        start?: number,
    ): { wall: number; inside: number; overhead: number; parts?: { before: number; inSteps: number; between: number; after: number } };
    nodeOf(name: string, nodes: string[]): string;
    renderSvg(args: { title: string; start: number; end: number; steps: Step[]; path: Step[]; timings: Timing[]; nodes: string[] }): string;
    graphFromExport(exported: unknown): { deps: Record<string, string[]>; parents: Record<string, string> };
    coldUpStateWrites(exported: unknown): { resources: number; custom: number; components: number; writes: number };
    childrenCpuSeconds(times: string): number;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const timeline = require(path.join(ROOT, "bench", "timeline.js")) as Timeline;

const jsonl = <T>(file: string): T[] =>
    fs
        .readFileSync(path.join(FIXTURES, file), "utf8")
        .split("\n")
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l) as T);
const events = jsonl<{ t: number; event: unknown }>("cold-up-events.jsonl");
const timings = jsonl<Timing>("cold-up-timing.jsonl");
const graph = timeline.graphFromExport(JSON.parse(fs.readFileSync(path.join(FIXTURES, "cold-up-export.json"), "utf8")));
const steps = timeline.stepsFromEvents(events);
const names = (list: Step[]) => list.map((s) => s.name);

describe("bench timeline: a 2-node cold up", () => {
    it("reads the remote commands' steps, with the times their events arrived", () => {
        assert.deepEqual(names(steps).sort(), ["thor-a-ray-head-ready", "thor-a-ray-head-unit", "thor-a-ssh", "thor-b-ray-worker-unit", "thor-b-ssh"]);
        const unit = steps.find((s) => s.name === "thor-a-ray-head-unit");
        assert.deepEqual([unit?.start, unit?.end], [1002.7, 1005.0]);
        // The component's own events are not steps unless asked for.
        assert.equal(timeline.stepsFromEvents(events, { allTypes: true }).length, 6);
    });

    it("follows the dependency that ended last, through a component to its child", () => {
        const crit = timeline.criticalPath(steps, graph.deps, graph.parents);
        // thor-b-ray-worker-unit depends on the RayHead component: its child head-unit (ended 1005.0)
        // decided its start, not thor-b-ssh (ended 1002.8).
        assert.deepEqual(names(crit), ["thor-a-ssh", "thor-a-ray-head-unit", "thor-b-ray-worker-unit", "thor-a-ray-head-ready"]);
        // Without the graph's parents the component dependency leads nowhere: the path stops there.
        assert.deepEqual(names(timeline.criticalPath(steps, graph.deps)), ["thor-b-ssh", "thor-b-ray-worker-unit", "thor-a-ray-head-ready"]);
    });

    it("follows a dependency of a component above the step (a component's dependsOn holds back its children)", () => {
        const urn = (name: string) => `urn:pulumi:dev::p::spark-remote:index:Step::${name}`;
        const component = "urn:pulumi:dev::p::p:index:Server::srv";
        const at = (name: string, start: number, end: number): Step => ({ key: urn(name), urn: urn(name), name, start, end });
        const s = [at("pull", 0, 5), at("ssh", 0, 1), at("unit", 5.1, 6)];
        const crit = timeline.criticalPath(s, { [urn("unit")]: [urn("ssh")], [component]: [urn("pull")] }, { [urn("unit")]: component });
        assert.deepEqual(names(crit), ["pull", "unit"]);
    });

    it("counts as overhead the wall time outside the critical path's scripts", () => {
        const crit = timeline.criticalPath(steps, graph.deps, graph.parents);
        const o = timeline.overhead(10, crit, timings);
        // Scripts on the path: 0.3 + 2.0 + 0.6 + 3.1 s.
        assert.ok(Math.abs(o.inside - 6.0) < 1e-9, `inside ${o.inside}`);
        assert.ok(Math.abs(o.overhead - 4.0) < 1e-9, `overhead ${o.overhead}`);
        assert.equal(o.parts, undefined, "no parts without the run's start");
        // Given the start, four parts that add up to the overhead.
        const start = crit[0].start - 1.5;
        const parts = timeline.overhead(10, crit, timings, start).parts;
        assert.ok(parts);
        assert.ok(Math.abs(parts.before - 1.5) < 1e-9, `before ${parts.before}`);
        const sum = parts.before + parts.inSteps + parts.between + parts.after;
        assert.ok(Math.abs(sum - 4.0) < 1e-9, `parts add up to ${sum}`);
        const last = crit[crit.length - 1];
        assert.ok(Math.abs(parts.after - (10 - (last.end - start))) < 1e-9, `after ${parts.after}`);
        assert.ok(parts.between >= 0 && parts.inSteps >= 0, JSON.stringify(parts));
        // A script outside its step's span (another run's, the same URN) is not the step's.
        assert.equal(timeline.scriptSeconds(crit[0], [{ ...timings[0], start: 900, end: 901 }]), 0);
    });

    it("draws each node's steps, the critical path and the overhead", () => {
        const crit = timeline.criticalPath(steps, graph.deps, graph.parents);
        const svg = timeline.renderSvg({ title: "cold up, 2 nodes", start: 1000, end: 1010, steps, path: crit, timings, nodes: ["thor-a", "thor-b"] });
        assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
        assert.match(svg, />thor-a<\/text>/);
        assert.match(svg, />thor-b<\/text>/);
        assert.equal((svg.match(/class="step crit"/g) ?? []).length, 4);
        assert.equal((svg.match(/class="step"/g) ?? []).length, 1);
        assert.equal((svg.match(/class="script crit"/g) ?? []).length, 4);
        assert.match(svg, /overhead 4 s \(shaded\)/);
        // Shaded: 1000-1002.2, 1002.5-1002.9, 1004.9-1005.3, 1005.9-1006.3 and 1009.4-1010: five bands.
        assert.equal((svg.match(/class="overhead"/g) ?? []).length, 5);
        // The x axis spans the run: 0 s at the left edge, 10 s at the right.
        assert.match(svg, /<text x="90" y="[\d.]+" text-anchor="middle" class="label">0 s<\/text>/);
        assert.match(svg, /<text x="944" y="[\d.]+" text-anchor="middle" class="label">10 s<\/text>/);
        assert.match(timeline.renderSvg({ title: "<&>", start: 0, end: 1, steps: [], path: [], timings: [], nodes: [] }), /&lt;&amp;&gt;/);
    });

    it("names a step's node by the longest node name it starts with", () => {
        assert.equal(timeline.nodeOf("spark-a1-ssh", ["spark-a", "spark-a1"]), "spark-a1");
        assert.equal(timeline.nodeOf("dev-model-download", ["thor-a"]), "cluster");
    });

    it("counts a cold up's state writes: 2 per custom resource, 3 per component", () => {
        const exported = {
            deployment: {
                resources: [
                    { urn: "stack", type: "pulumi:pulumi:Stack" },
                    { urn: "provider", type: "pulumi:providers:command", custom: true },
                    { urn: "head", type: "spark-cluster:index:RayHead", custom: false },
                    { urn: "unit", type: "spark-remote:index:Step", custom: true },
                    { urn: "ready", type: "spark-remote:index:Step", custom: true },
                ],
            },
        };
        assert.deepEqual(timeline.coldUpStateWrites(exported), { resources: 5, custom: 3, components: 2, writes: 12 });
        assert.deepEqual(timeline.coldUpStateWrites({}), { resources: 0, custom: 0, components: 0, writes: 0 });
    });

    it("reads the children's CPU seconds from bash's times", () => {
        assert.equal(timeline.childrenCpuSeconds("0m0.004s 0m0.002s\n1m2.500s 0m0.750s\n"), 63.25);
        assert.throws(() => timeline.childrenCpuSeconds("nonsense"), /times/);
    });
});
