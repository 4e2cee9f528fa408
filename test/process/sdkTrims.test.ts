// The SDK trims of toolchain/ts-register.js change how fast the program starts, never what it
// registers: `pulumi preview --json` of the lab stack with every trim off (SPARK_SDK_TRIMS=0), with
// them on, and with them on over a copy of the SDK in which every module a trim names has moved
// (renamed, and the file that requires it changed to match, as a new SDK release might do), has
// the same resources with the same inputs, parents, dependencies and options. With the SDK as
// installed every trim finds its require (SPARK_SDK_TRIMS_REPORT), so a new SDK that moves one is
// noticed here; with the moved copy none does, and the preview is the same.
//
// Each preview runs in a copy of the program (index.ts, stackConfig.ts, config/, components/, the
// toolchain's loader) whose node_modules links to this checkout's, but for the SDK where it is a
// copy; the project's CLI and provider, a throwaway backend and SSH key, nothing contacted.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const root = path.resolve(__dirname, "..", "..", "..");
const SDK = path.join(root, "node_modules", "@pulumi", "pulumi");

interface Trim {
    name: string;
    requires: { request: string; from: string }[];
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { TRIMS } = require(path.join(root, "toolchain", "ts-register.js")) as { TRIMS: Trim[] };

/** A copy of the program that loads `@pulumi/pulumi` from `sdk` (a directory, linked or copied). */
function programCopy(work: string, sdk: "linked" | "copied"): string {
    const dir = path.join(work, `program-${sdk}`);
    fs.mkdirSync(path.join(dir, "toolchain"), { recursive: true });
    for (const entry of ["index.ts", "stackConfig.ts", "package.json", "Pulumi.yaml", "config", "components"]) {
        fs.cpSync(path.join(root, entry), path.join(dir, entry), { recursive: true });
    }
    for (const file of ["ts-register.js", "code-cache.js"]) fs.copyFileSync(path.join(root, "toolchain", file), path.join(dir, "toolchain", file));
    const modules = path.join(dir, "node_modules");
    fs.mkdirSync(path.join(modules, "@pulumi"), { recursive: true });
    for (const entry of fs.readdirSync(path.join(root, "node_modules"))) {
        if (entry === "@pulumi" || entry === ".cache") continue;
        fs.symlinkSync(path.join(root, "node_modules", entry), path.join(modules, entry));
    }
    for (const entry of fs.readdirSync(path.join(root, "node_modules", "@pulumi"))) {
        if (entry === "pulumi") continue;
        fs.symlinkSync(path.join(root, "node_modules", "@pulumi", entry), path.join(modules, "@pulumi", entry));
    }
    if (sdk === "linked") fs.symlinkSync(SDK, path.join(modules, "@pulumi", "pulumi"));
    else fs.cpSync(SDK, path.join(modules, "@pulumi", "pulumi"), { recursive: true });
    const key = path.join(dir, "id_ed25519");
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", key]);
    const config = fs.readFileSync(path.join(root, "Pulumi.dev.yaml"), "utf8").replace(/^(\s*spark-cluster:sshPrivateKeyPath:).*$/m, `$1 ${key}`);
    fs.writeFileSync(path.join(dir, "Pulumi.dev.yaml"), config);
    return dir;
}

/**
 * In the SDK copy under `program`, every module a trim names moves: a file of the SDK `x.js`
 * becomes `x-moved.js` (the old name left as a link, for the SDK's other files that require it),
 * a package is reached through a file of the SDK's own (`moved-packages/...`), and the file the trim
 * names asks for the new name. Returns what moved.
 */
function moveTrimmedModules(program: string): string[] {
    const sdk = path.join(program, "node_modules", "@pulumi", "pulumi");
    const moved: string[] = [];
    for (const trim of TRIMS) {
        for (const { request, from } of trim.requires) {
            const requirer = path.join(program, "node_modules", from);
            const text = fs.readFileSync(requirer, "utf8");
            const quoted = `require("${request}")`;
            assert.ok(text.includes(quoted), `${from} requires ${request} (the trim ${trim.name} names it)`);
            let target: string;
            if (request.startsWith(".")) {
                target = `${request}-moved`;
                // A file (x.js) or a directory (x/index.js).
                const base = path.resolve(path.dirname(requirer), request);
                const [old, now] = fs.existsSync(`${base}.js`) ? [`${base}.js`, `${base}-moved.js`] : [base, `${base}-moved`];
                if (!fs.existsSync(now)) {
                    fs.renameSync(old, now);
                    fs.symlinkSync(now, old);
                }
            } else {
                const shim = path.join(sdk, "moved-packages", `${request.replace(/[/@]/g, "_")}.js`);
                fs.mkdirSync(path.dirname(shim), { recursive: true });
                fs.writeFileSync(shim, `module.exports = require(${JSON.stringify(request)});\n`);
                target = path.relative(path.dirname(requirer), shim).replace(/\.js$/, "");
                if (!target.startsWith(".")) target = `./${target}`;
            }
            fs.writeFileSync(requirer, text.split(quoted).join(`require("${target}")`));
            moved.push(`${from}: ${request} -> ${target}`);
        }
    }
    return moved;
}

interface Step {
    urn: string;
    op: string;
    newState?: {
        type: string;
        custom?: boolean;
        parent?: string;
        provider?: string;
        inputs?: unknown;
        dependencies?: string[];
        propertyDependencies?: Record<string, string[]>;
        [key: string]: unknown;
    };
}

/** `pulumi preview --json` of the copy's lab stack under `env`: its steps, and which trims found their require. */
function preview(program: string, env: NodeJS.ProcessEnv): { steps: Step[]; report: { enabled: string[]; applied: string[] } } {
    const backend = path.join(program, `backend-${Date.now()}`);
    const report = path.join(program, "trims.json");
    fs.mkdirSync(backend);
    fs.rmSync(report, { force: true });
    const script = [
        `source ${JSON.stringify(path.join(root, "scripts", "env.sh"))}`,
        `cd ${JSON.stringify(program)}`,
        "pulumi stack init dev --non-interactive >/dev/null",
        "pulumi preview --stack dev --json --non-interactive",
    ].join(" && ");
    const r = spawnSync("bash", ["-c", script], {
        encoding: "utf8",
        timeout: 300_000,
        maxBuffer: 64 * 2 ** 20,
        env: {
            ...process.env,
            ...env,
            PULUMI_BACKEND_URL: `file://${backend}`,
            PULUMI_CONFIG_PASSPHRASE: "spark-cluster-lab-only",
            PULUMI_CONFIG_PASSPHRASE_FILE: "",
            SPARK_SDK_TRIMS_REPORT: report,
        },
    });
    assert.equal(r.status, 0, `preview failed:\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`);
    const parsed = JSON.parse(r.stdout) as { steps: Step[] };
    return { steps: parsed.steps, report: JSON.parse(fs.readFileSync(report, "utf8")) };
}

/** What a preview registers, as sets where the engine's order varies: no source positions or stack frames (they name the loader's lines). */
function registered(steps: Step[]): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const step of steps) {
        const s: NonNullable<Step["newState"]> = step.newState ?? { type: "" };
        const { sourcePosition: _p, stackTrace: _t, dependencies, propertyDependencies, ...rest } = s;
        out[step.urn] = {
            op: step.op,
            ...rest,
            dependencies: [...(dependencies ?? [])].sort(),
            propertyDependencies: Object.fromEntries(
                Object.entries(propertyDependencies ?? {})
                    .sort(([a], [b]) => a.localeCompare(b))
                    .map(([k, v]) => [k, [...v].sort()]),
            ),
        };
    }
    return out;
}

describe("the SDK trims change nothing the program registers", { timeout: 900_000 }, () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-trims-"));
    after(() => fs.rmSync(work, { recursive: true, force: true }));
    const { SPARK_SDK_TRIMS: _a, SPARK_SOURCE_MAPS: _b, SPARK_SDK_DEBUG_LOG: _c, PULUMI_DEBUG_PROMISE_LEAKS: _d, ...env } = process.env;
    const names = TRIMS.map((t) => t.name).sort();
    let off: Record<string, unknown> = {};

    it("every trim off, and every trim on: the same preview, and each trim found its require in the SDK as installed", () => {
        const program = programCopy(work, "linked");
        const without = preview(program, { ...env, SPARK_SDK_TRIMS: "0" });
        assert.deepEqual(without.report, { enabled: [], applied: [] });
        const withTrims = preview(program, env);
        assert.deepEqual(withTrims.report.enabled.sort(), names);
        assert.deepEqual(withTrims.report.applied, names, "a trim that no longer finds its require: the SDK moved it (update TRIMS, or drop the trim)");
        off = registered(without.steps);
        assert.ok(Object.keys(off).length > 40, `the lab stack registers its resources (${Object.keys(off).length})`);
        assert.ok(
            Object.keys(off).some((urn) => urn.includes("$spark-remote:index:Step::spark-a-vllm-unit")),
            "its steps among them",
        );
        assert.deepEqual(registered(withTrims.steps), off);
    });

    it("with every trimmed module moved in the SDK: no trim applies, and the preview is the same", (t) => {
        const program = programCopy(work, "copied");
        const moved = moveTrimmedModules(program);
        t.diagnostic(moved.join("; "));
        const result = preview(program, env);
        assert.deepEqual(result.report.enabled.sort(), names);
        assert.deepEqual(result.report.applied, []);
        assert.deepEqual(registered(result.steps), off);
    });
});
