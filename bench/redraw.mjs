#!/usr/bin/env node
// Recomputes a recorded cold up's critical path, overhead and timeline from the files `npm run
// bench` keeps (BENCH_OUT: cold-up-N-rep-R-events.jsonl, -timing.jsonl, -graph.json), without the
// lab: `node bench/redraw.mjs DIR [WALL_SECONDS]`. Prints one line per run and rewrites its SVG.
// The wall time is the `up`'s (the `cold_up` BENCH line); without it, first to last event.
import * as fs from "node:fs";
import * as path from "node:path";
import timeline from "./timeline.js";

const [dir, wallArg] = process.argv.slice(2);
if (!dir) throw new Error("usage: node bench/redraw.mjs DIR [WALL_SECONDS]");
/** @param {string} file */
const jsonl = (file) =>
    fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l));
for (const file of fs.readdirSync(dir).filter((f) => /^cold-up-\d+-rep-\d+-events\.jsonl$/.test(f))) {
    const base = path.join(dir, file.replace(/-events\.jsonl$/, ""));
    const [, n, rep] = /** @type {RegExpExecArray} */ (/cold-up-(\d+)-rep-(\d+)/.exec(file));
    const events = jsonl(`${base}-events.jsonl`);
    const timings = jsonl(`${base}-timing.jsonl`);
    const graph = JSON.parse(fs.readFileSync(`${base}-graph.json`, "utf8"));
    const steps = timeline.stepsFromEvents(events);
    const crit = timeline.criticalPath(steps, graph.deps, graph.parents);
    const end = events[events.length - 1].t;
    const start = wallArg ? end - Number(wallArg) : events[0].t;
    const o = timeline.overhead(end - start, crit, timings);
    console.log(
        `nodes=${n} rep=${rep} wall=${o.wall.toFixed(2)} critical_path_scripts=${o.inside.toFixed(2)} overhead=${o.overhead.toFixed(2)} path: ` +
            crit.map((s) => `${s.name} ${(s.end - s.start).toFixed(1)}/${timeline.scriptSeconds(s, timings).toFixed(1)}`).join(" → "),
    );
    const nodes = [...new Set(steps.map((s) => /^(thor-[a-h]|spark-[a-z0-9]+)-/.exec(s.name)?.[1] ?? ""))].filter((name) => name !== "").sort();
    const title = `Cold up, ${n} nodes (rep ${rep}), redrawn from ${path.basename(base)}`;
    fs.writeFileSync(`${base}.svg`, timeline.renderSvg({ title, start, end, steps, path: crit, timings, nodes }));
}
