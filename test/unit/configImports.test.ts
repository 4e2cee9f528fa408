// The import graph of config/: facts before rules before resolve, no phase importing a later
// one, nothing from outside config/, and no cycle; and of components/render/ (its host/ folder
// included): no cycle; and of components/plan/: no cycle, and no Pulumi reached from it. Read from
// the sources, so a new import that breaks the order fails here.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { findRepoRoot } from "../support/repoRoot";

const CONFIG_DIR = path.join(findRepoRoot(), "config");
const RENDER_DIR = path.join(findRepoRoot(), "components", "render");

/** The phase of each config module; a module not named here is phase 0 (schema, field checks, pure helpers). */
const PHASES: Record<string, number> = {
    facts: 1,
    rules: 2,
    cablingRules: 2,
    portRules: 2,
    frontendRules: 2,
    secretRules: 2,
    fitRule: 2,
    resolve: 3,
    fabric: 3,
    index: 4,
};

/** Every relative import and re-export of a source text, type-only ones included. */
export function importsOf(source: string): string[] {
    const specifiers = [...source.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+"([^"]+)"/gms), ...source.matchAll(/^\s*import\s+"([^"]+)"/gm)].map(
        (m) => m[1],
    );
    return specifiers.filter((s) => s.startsWith("."));
}

/**
 * The module graph of a folder (and its subfolders): module name (path under `dir`, no extension)
 * → the names it imports (an import from outside `dir` starts with `../`).
 */
function moduleGraph(dir: string): Map<string, string[]> {
    const graph = new Map<string, string[]>();
    const walk = (folder: string): void => {
        for (const entry of fs.readdirSync(folder, { withFileTypes: true })) {
            const file = path.join(folder, entry.name);
            if (entry.isDirectory()) walk(file);
            else if (entry.name.endsWith(".ts")) {
                const name = path.relative(dir, file).slice(0, -3).replace(/\\/g, "/");
                const source = fs.readFileSync(file, "utf8");
                graph.set(
                    name,
                    importsOf(source).map((s) => path.relative(dir, path.resolve(folder, s)).replace(/\\/g, "/")),
                );
            }
        }
    };
    walk(dir);
    return graph;
}

/** A cycle in `graph` as a path of names, or undefined. */
export function findCycle(graph: Map<string, string[]>): string[] | undefined {
    const state = new Map<string, "open" | "done">();
    const stack: string[] = [];
    const visit = (node: string): string[] | undefined => {
        if (state.get(node) === "done") return undefined;
        if (state.get(node) === "open") return [...stack.slice(stack.indexOf(node)), node];
        state.set(node, "open");
        stack.push(node);
        for (const next of graph.get(node) ?? []) {
            if (!graph.has(next)) continue;
            const cycle = visit(next);
            if (cycle) return cycle;
        }
        stack.pop();
        state.set(node, "done");
        return undefined;
    };
    for (const node of graph.keys()) {
        const cycle = visit(node);
        if (cycle) return cycle;
    }
    return undefined;
}

describe("config/ import graph", () => {
    const graph = moduleGraph(CONFIG_DIR);

    it("reads the modules and their imports", () => {
        assert.ok(graph.size >= 10, `config modules: ${[...graph.keys()].join(", ")}`);
        assert.ok(graph.get("index")?.includes("resolve"), "index imports resolve");
        assert.ok(graph.get("rules")?.includes("facts"), "rules import facts");
    });

    it("has no cycle", () => {
        assert.equal(findCycle(graph)?.join(" → "), undefined);
    });

    it("finds a cycle when there is one", () => {
        const cyclic = new Map([
            ["a", ["b"]],
            ["b", ["c"]],
            ["c", ["a"]],
        ]);
        assert.deepEqual(findCycle(cyclic), ["a", "b", "c", "a"]);
        assert.equal(
            findCycle(
                new Map([
                    ["a", ["b"]],
                    ["b", []],
                ]),
            ),
            undefined,
        );
    });

    it("reads type-only imports, re-exports and multi-line imports", () => {
        const source = ['import type { A } from "./a";', "import {", "    B,", '} from "./b";', 'export * from "./c";', 'import { z } from "zod";'].join("\n");
        assert.deepEqual(importsOf(source), ["./a", "./b", "./c"]);
    });

    it("imports nothing from outside config/, and no later phase: facts before rules before resolve", () => {
        const wrong: string[] = [];
        for (const [name, imports] of graph) {
            for (const target of imports) {
                if (target.startsWith("../")) {
                    wrong.push(`${name} imports ${target} from outside config/`);
                    continue;
                }
                if (!graph.has(target)) continue; // a JSON table
                if ((PHASES[target] ?? 0) > (PHASES[name] ?? 0)) wrong.push(`${name} (phase ${PHASES[name] ?? 0}) imports ${target} (phase ${PHASES[target]})`);
            }
        }
        assert.deepEqual(wrong, []);
    });

    it("the rules do not import resolve", () => {
        for (const rule of ["rules", "portRules", "secretRules", "fitRule", "valueRules", "facts"]) {
            assert.ok(graph.has(rule), `${rule}.ts exists`);
            assert.ok(!graph.get(rule)?.includes("resolve"), `${rule} imports resolve`);
        }
    });
});

describe("components/render/ import graph", () => {
    const graph = moduleGraph(RENDER_DIR);

    it("reads the renderers, host/ included, and their imports", () => {
        assert.ok(graph.size >= 20, `render modules: ${[...graph.keys()].join(", ")}`);
        assert.ok(graph.get("engine")?.includes("vllm"), "engine imports vllm");
        assert.ok(graph.get("vllm")?.includes("host/shell"), "vllm imports host/shell");
        assert.ok(graph.get("host/envFile")?.includes("host/runtime"), "host/envFile imports host/runtime");
    });

    it("has no cycle", () => {
        assert.equal(findCycle(graph)?.join(" → "), undefined);
    });
});

describe("components/plan/: the cluster as data", () => {
    const PLAN_DIR = path.join(findRepoRoot(), "components", "plan");
    const graph = moduleGraph(PLAN_DIR);

    it("reads the plan's modules", () => {
        assert.ok(graph.get("clusterPlan")?.includes("types"), `plan modules: ${[...graph.keys()].join(", ")}`);
    });

    it("imports no Pulumi, directly or through what it imports from components/ (the materializer makes resources)", () => {
        const reached = new Set<string>();
        const visit = (file: string): void => {
            if (reached.has(file)) return;
            reached.add(file);
            const source = fs.readFileSync(file, "utf8");
            assert.doesNotMatch(source, /from\s+"@pulumi\//, `${path.relative(findRepoRoot(), file)} imports Pulumi`);
            for (const spec of importsOf(source)) {
                const target = path.resolve(path.dirname(file), spec);
                const candidate = [`${target}.ts`, path.join(target, "index.ts")].find((f) => fs.existsSync(f));
                if (candidate !== undefined && candidate.startsWith(path.join(findRepoRoot(), "components"))) visit(candidate);
            }
        };
        for (const name of graph.keys()) visit(path.join(PLAN_DIR, `${name}.ts`));
        assert.ok(reached.size > graph.size, "the plan's imports were followed");
    });

    it("has no cycle", () => {
        assert.equal(findCycle(graph)?.join(" → "), undefined);
    });
});
