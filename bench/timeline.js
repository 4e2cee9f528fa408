// The pure part of `npm run bench`'s cost analysis (CommonJS, plain JavaScript: bench.mjs imports
// it, test/unit/benchTimeline.test.ts requires it): a run's steps read from the engine's event log,
// the critical path through them, the orchestration overhead, and the timeline as an SVG.
//
// Inputs, all in Unix seconds:
// - the event log as the bench read it: `{ t, event }` per line, `t` the wall clock when the line
//   arrived (the events' own `timestamp` is whole seconds; the bench reads the log every 0.1 s);
// - our provider's timing log (SPARK_COMMAND_TIMING_LOG): `{ urn, dial, start, end }` per
//   remote script, measured around the script itself (the SSH exec request to its exit status);
// - each resource's dependencies, from `pulumi stack export` after the run.
"use strict";

/**
 * @typedef {{ t: number, event: { resourcePreEvent?: { metadata?: EventMeta }, resOutputsEvent?: { metadata?: EventMeta } } }} TimedEvent
 * @typedef {{ urn: string, type: string, op: string }} EventMeta
 * @typedef {{ key: string, urn: string, name: string, op: string, type: string, start: number, end: number, lane?: number }} Step
 * @typedef {{ urn: string, dial?: number, start: number, end: number, failed?: boolean }} Timing
 * @typedef {Record<string, string[]>} Deps
 * @typedef {Record<string, string>} Parents
 * @typedef {{ deployment?: { resources?: { urn: string, custom?: boolean, parent?: string, dependencies?: string[],
 *   propertyDependencies?: Record<string, string[]> }[] } }} Exported
 */

/**
 * How far a script may lie outside its step's span and still be its own: the bench reads the event
 * log every 0.1 s, so a step's start may be seen after its script started.
 */
const SLACK = 0.25;

/**
 * The run's steps: one per resource and operation that the engine reported starting
 * (resourcePreEvent) and ending (resOutputsEvent), with the times those events arrived.
 * Only `spark-remote:index:Step` steps are kept unless `allTypes`.
 */
/**
 * @param {TimedEvent[]} timedEvents
 * @param {{ allTypes?: boolean }} [options]
 * @returns {Step[]}
 */
function stepsFromEvents(timedEvents, { allTypes = false } = {}) {
    /** @type {Map<string, Partial<Step> & { key: string, urn: string }>} */
    const steps = new Map();
    for (const { t, event } of timedEvents) {
        const pre = event.resourcePreEvent?.metadata;
        const post = event.resOutputsEvent?.metadata;
        const meta = pre ?? post;
        if (!meta || (!allTypes && meta.type !== "spark-remote:index:Step")) continue;
        // A replacement's create and its delete are two steps of one resource.
        const op = ["same", "update", "create", "refresh"].includes(meta.op) ? "" : `:${meta.op}`;
        const key = meta.urn + op;
        const step = steps.get(key) ?? { key, urn: meta.urn, name: meta.urn.split("::").pop() + op, op: meta.op, type: meta.type };
        if (pre) step.start ??= t;
        else step.end = t;
        steps.set(key, step);
    }
    return /** @type {Step[]} */ ([...steps.values()].filter((s) => s.start !== undefined && s.end !== undefined));
}

/**
 * Each step's script time (seconds inside its remote scripts): the timing log's entries for its URN that lie within the step (give or take SLACK).
 * @param {Step} step
 * @param {Timing[]} timings
 */
function scriptSeconds(step, timings, slack = SLACK) {
    return timings
        .filter((x) => x.urn === step.urn && x.start >= step.start - slack && x.end <= step.end + slack)
        .reduce((sum, x) => sum + (x.end - x.start), 0);
}

/**
 * The critical path: the chain of steps that decided when the run finished. From the step that
 * ended last, back through the dependency that ended last before the step started (its own, or
 * one of a component above it; a dependency on a component stands for the steps under it), to a
 * step with none.
 * `deps`: URN → the URNs it depends on (state's `dependencies`); `parents`: URN → parent URN.
 * @param {Step[]} steps
 * @param {Deps} deps
 * @param {Parents} [parents]
 * @returns {Step[]}
 */
function criticalPath(steps, deps, parents = {}, slack = 0.25) {
    if (!steps.length) return [];
    /** @type {Map<string, Step[]>} */
    const byUrn = new Map();
    for (const s of steps) byUrn.set(s.urn, [...(byUrn.get(s.urn) ?? []), s]);
    /** @type {(urn: string, ancestor: string) => boolean} */
    const under = (urn, ancestor) => {
        for (let p = parents[urn], hops = 0; p && hops < 64; p = parents[p], hops++) if (p === ancestor) return true;
        return false;
    };
    // A step waits for its own dependencies and for those of every component above it (a
    // component's dependsOn holds back its children).
    /** @type {(urn: string) => string[]} */
    const waitsFor = (urn) => {
        const all = [...(deps[urn] ?? [])];
        for (let p = parents[urn], hops = 0; p && hops < 64; p = parents[p], hops++) all.push(...(deps[p] ?? []));
        return all;
    };
    /** @type {(step: Step) => Step[]} */
    const depSteps = (step) => {
        /** @type {Step[]} */
        const out = [];
        for (const d of waitsFor(step.urn)) {
            const own = byUrn.get(d);
            if (own) out.push(...own);
            else out.push(...steps.filter((s) => under(s.urn, d)));
        }
        return out;
    };
    let cur = steps.reduce((a, b) => (b.end > a.end ? b : a));
    const path = [cur];
    const seen = new Set([cur.key]);
    for (;;) {
        const before = depSteps(cur).filter((s) => !seen.has(s.key) && s.end <= cur.start + slack);
        if (!before.length) break;
        cur = before.reduce((a, b) => (b.end > a.end ? b : a));
        seen.add(cur.key);
        path.unshift(cur);
    }
    return path;
}

/**
 * What the program, engine, provider and SSH add: the run's wall time minus the time spent inside
 * the critical path's remote scripts. Given the run's start (Unix seconds), also where it went, in
 * four parts that add up to it: `before` the path's first step (the CLI, the program's start, the
 * steps' registration), `inSteps` (the path's steps less their scripts: the engine's checkpoint
 * before and after a step, the provider, SSH), `between` the path's steps (a step waiting after
 * its last dependency ended: the program computing its inputs, the engine), and `after` the last
 * one (the outputs, the last checkpoint, the CLI's exit).
 * @param {number} wallSeconds
 * @param {Step[]} path
 * @param {Timing[]} timings
 * @param {number} [start]
 * @returns {{ wall: number, inside: number, overhead: number, parts?: { before: number, inSteps: number, between: number, after: number } }}
 */
function overhead(wallSeconds, path, timings, start) {
    const inside = path.reduce((sum, s) => sum + scriptSeconds(s, timings), 0);
    const result = { wall: wallSeconds, inside, overhead: wallSeconds - inside };
    if (start === undefined || !path.length) return result;
    const inSteps = path.reduce((sum, s) => sum + (s.end - s.start - scriptSeconds(s, timings)), 0);
    const between = path.slice(1).reduce((sum, s, i) => sum + (s.start - path[i].end), 0);
    const before = path[0].start - start;
    const after = wallSeconds - (path[path.length - 1].end - start);
    return { ...result, parts: { before, inSteps, between, after } };
}

/**
 * The node a step belongs to: the longest node name its resource name starts with, else "cluster".
 * @param {string} name
 * @param {string[]} nodes
 */
function nodeOf(name, nodes) {
    return nodes.filter((n) => name.startsWith(`${n}-`)).sort((a, b) => b.length - a.length)[0] ?? "cluster";
}

/** @param {unknown} s */
const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
/** @param {number} x */
const fmt = (x) => (Math.round(x * 100) / 100).toString();

/**
 * The timeline as an SVG: one band per node (parallel steps of a node stacked inside it), each
 * step a bar from its start to its end with its script time darker inside it, the critical path
 * outlined, and the overhead (the run's time outside the critical path's scripts) shaded across
 * the whole height. `start`/`end`: the run's wall clock.
 * @param {{ title: string, start: number, end: number, steps: Step[], path: Step[], timings: Timing[], nodes: string[] }} run
 */
function renderSvg({ title, start, end, steps, path, timings, nodes }) {
    const W = 960;
    const left = 90;
    const right = 16;
    const top = 44;
    const laneH = 12;
    /** @param {number} t */
    const x = (t) => left + ((t - start) / Math.max(end - start, 1e-9)) * (W - left - right);
    const onPath = new Set(path.map((s) => s.key));
    // Lanes: per node, steps packed greedily into sub-lanes so that none overlap.
    /** @type {{ node: string, steps: Step[], lanes: number }[]} */
    const rows = [];
    for (const node of [...nodes, "cluster"]) {
        const mine = steps.filter((s) => nodeOf(s.name, nodes) === node).sort((a, b) => a.start - b.start);
        if (!mine.length) continue;
        /** @type {number[]} */
        const lanes = [];
        for (const s of mine) {
            let i = lanes.findIndex((endAt) => endAt <= s.start);
            if (i < 0) i = lanes.push(0) - 1;
            lanes[i] = s.end;
            s.lane = i;
        }
        rows.push({ node, steps: mine, lanes: lanes.length });
    }
    let y = top;
    const parts = [];
    for (const row of rows) {
        const h = row.lanes * laneH + 6;
        parts.push(`<text x="${left - 6}" y="${fmt(y + h / 2 + 4)}" text-anchor="end" class="label">${esc(row.node)}</text>`);
        parts.push(`<line x1="${left}" x2="${W - right}" y1="${fmt(y + h)}" y2="${fmt(y + h)}" class="sep"/>`);
        for (const s of row.steps) {
            const sy = y + 3 + (s.lane ?? 0) * laneH;
            const cls = onPath.has(s.key) ? "step crit" : "step";
            parts.push(
                `<rect x="${fmt(x(s.start))}" y="${fmt(sy)}" width="${fmt(Math.max(x(s.end) - x(s.start), 0.5))}" height="${laneH - 2}" class="${cls}"><title>${esc(s.name)} ${fmt(s.end - s.start)} s</title></rect>`,
            );
            for (const r of timings.filter((r) => r.urn === s.urn && r.start >= s.start - SLACK && r.end <= s.end + SLACK)) {
                parts.push(
                    `<rect x="${fmt(x(r.start))}" y="${fmt(sy + 2)}" width="${fmt(Math.max(x(r.end) - x(r.start), 0.5))}" height="${laneH - 6}" class="${onPath.has(s.key) ? "script crit" : "script"}"/>`,
                );
            }
        }
        y += h;
    }
    const bottom = y;
    // Overhead: the run's span minus the critical path's script intervals.
    const inside = path
        .flatMap((s) => timings.filter((r) => r.urn === s.urn && r.start >= s.start - SLACK && r.end <= s.end + SLACK))
        .map((r) => /** @type {[number, number]} */ ([Math.max(r.start, start), Math.min(r.end, end)]))
        .sort((a, b) => a[0] - b[0]);
    /** @type {[number, number][]} */
    const gaps = [];
    let at = start;
    for (const [a, b] of inside) {
        if (a > at) gaps.push([at, a]);
        at = Math.max(at, b);
    }
    if (end > at) gaps.push([at, end]);
    const shade = gaps.map(
        ([a, b]) => `<rect x="${fmt(x(a))}" y="${top}" width="${fmt(Math.max(x(b) - x(a), 0.5))}" height="${fmt(bottom - top)}" class="overhead"/>`,
    );
    // Axis: a tick every 1, 2, 5, 10 or 20 s, whichever gives at most 12.
    const span = end - start;
    const every = [1, 2, 5, 10, 20, 30, 60].find((e) => span / e <= 12) ?? 120;
    const ticks = [];
    for (let s = 0; s <= span + 1e-9; s += every) {
        ticks.push(`<line x1="${fmt(x(start + s))}" x2="${fmt(x(start + s))}" y1="${top}" y2="${fmt(bottom + 4)}" class="tick"/>`);
        ticks.push(`<text x="${fmt(x(start + s))}" y="${fmt(bottom + 16)}" text-anchor="middle" class="label">${s} s</text>`);
    }
    const o = overhead(span, path, timings);
    const H = bottom + 44;
    return [
        `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${fmt(H)}" viewBox="0 0 ${W} ${fmt(H)}" font-family="sans-serif" font-size="11">`,
        "<style>.label{fill:#222}.sep{stroke:#ddd}.tick{stroke:#eee}.step{fill:#c9d6e8;stroke:none}.step.crit{fill:#f4c26b;stroke:#b5471b;stroke-width:1.2}" +
            ".script{fill:#6b8fbf}.script.crit{fill:#b5471b}.overhead{fill:#d62728;fill-opacity:0.10}</style>",
        `<text x="${left}" y="18" font-size="13" class="label">${esc(title)}</text>`,
        `<text x="${left}" y="34" class="label">wall ${fmt(o.wall)} s; inside the critical path's scripts ${fmt(o.inside)} s; overhead ${fmt(o.overhead)} s (shaded). Bars: steps; dark: their remote scripts; outlined: the critical path.</text>`,
        ...shade,
        ...ticks,
        ...parts,
        "</svg>",
        "",
    ].join("\n");
}

/**
 * Dependencies and parents of every resource, from `pulumi stack export`'s JSON.
 * @param {Exported} exported
 */
function graphFromExport(exported) {
    /** @type {Deps} */
    const deps = {};
    /** @type {Parents} */
    const parents = {};
    for (const r of exported?.deployment?.resources ?? []) {
        // What it waited for: its dependsOn and the resources whose outputs its inputs use.
        deps[r.urn] = [...new Set([...(r.dependencies ?? []), ...Object.values(r.propertyDependencies ?? {}).flat()])];
        if (r.parent) parents[r.urn] = r.parent;
    }
    return { deps, parents };
}

/**
 * How many times a cold `up` of the exported stack writes its whole state (Pulumi 3.274's
 * SnapshotManager, pkg/backend/snapshot.go): as each custom resource's create starts and ends (2),
 * as each component's starts and ends and again for its registered outputs (3). With the counts it
 * comes from, for `npm run bench`'s "Pulumi alone" runs. (The lab's 2-Spark stack: 29 custom, 16
 * components, 106 writes, as the CLI's log at -v=7 counted them, "Saved stack ... checkpoint".)
 * @param {Exported} exported
 */
function coldUpStateWrites(exported) {
    const resources = exported?.deployment?.resources ?? [];
    const custom = resources.filter((r) => r.custom).length;
    const components = resources.length - custom;
    return { resources: resources.length, custom, components, writes: 2 * custom + 3 * components };
}

/**
 * `bash`'s `times` output (shell, then children; user and system): the children's CPU seconds.
 * @param {string} timesOutput
 */
function childrenCpuSeconds(timesOutput) {
    const line = timesOutput.trim().split("\n")[1] ?? "";
    const secs = [...line.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
    if (secs.length !== 2) throw new Error(`not the output of bash's times: ${JSON.stringify(timesOutput)}`);
    return secs[0] + secs[1];
}

module.exports = { stepsFromEvents, scriptSeconds, criticalPath, overhead, nodeOf, renderSvg, graphFromExport, coldUpStateWrites, childrenCpuSeconds };
