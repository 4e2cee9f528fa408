// toolchain/ts-register.js, how `pulumi` loads the program (Pulumi.yaml, nodeargs): a `.ts` module
// is transpiled once and then served from the cache while its text is unchanged; an edited file is
// run as edited, even when the edit keeps its length and its mtime.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { findRepoRoot } from "../support/repoRoot";

const ROOT = findRepoRoot();
const REGISTER = path.join(ROOT, "toolchain", "ts-register.js");

interface Register {
    compiled(source: string, fileName: string, dir?: string): { code: string; hit: boolean };
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const register = require(REGISTER) as Register;

/** Runs `main` as the language host does (node --require ts-register.js), with its own caches; its stdout. */
function runProgram(main: string, cache: string): string {
    return execFileSync(process.execPath, ["--require", REGISTER, main], {
        encoding: "utf8",
        env: { ...process.env, SPARK_TS_CACHE_DIR: cache, SPARK_CODE_CACHE_DIR: `${cache}-v8` },
        timeout: 30_000,
    }).trim();
}

/** Runs `script` (node -e) under ts-register.js from the project's root; its stdout's lines. */
function runScript(script: string, env: NodeJS.ProcessEnv = process.env): string[] {
    return execFileSync(process.execPath, ["--require", REGISTER, "-e", script], { cwd: ROOT, encoding: "utf8", env, timeout: 60_000 }).trim().split("\n");
}

/** The JSON of the last line `script` prints (see runScript). */
function lastJson(script: string, env: NodeJS.ProcessEnv = process.env): unknown {
    return JSON.parse(runScript(script, env).pop() ?? "");
}

/**
 * Script lines that make `name`, a module standing for the SDK's file `sdkFile`, to load another
 * module as that file would: `Module._load(request, name, false)`.
 */
function sdkModule(name: string, sdkFile: string): string[] {
    return [
        'const Module = require("node:module");',
        `const ${name} = new Module(require.resolve("@pulumi/pulumi/${sdkFile}"));`,
        `${name}.filename = ${name}.id; ${name}.paths = Module._nodeModulePaths(require("node:path").dirname(${name}.id));`,
    ];
}

describe("ts-register: transpile once, always the current source", () => {
    it("runs an edited module as edited, though the edit keeps its length and its mtime", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ts-register-test-"));
        try {
            const cache = path.join(dir, "cache");
            const lib = path.join(dir, "lib.ts");
            const main = path.join(dir, "main.ts");
            fs.writeFileSync(lib, "export const answer: number = 1;\n");
            fs.writeFileSync(main, 'import { answer } from "./lib";\nconst label: string = "answer";\nconsole.log(`${label}=${answer}`);\n');
            assert.equal(runProgram(main, cache), "answer=1");
            assert.equal(fs.readdirSync(cache).length, 2, "one cache entry per module");

            const { mtime, atime } = fs.statSync(lib);
            fs.writeFileSync(lib, "export const answer: number = 2;\n");
            fs.utimesSync(lib, atime, mtime);
            assert.equal(runProgram(main, cache), "answer=2");
            assert.equal(fs.readdirSync(cache).length, 2, "the edited module's entry was replaced, not added");
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("serves an unchanged source from the cache, and transpiles again after a change or a damaged entry", () => {
        const cache = fs.mkdtempSync(path.join(os.tmpdir(), "ts-register-cache-"));
        try {
            const file = path.join(cache, "x.ts");
            const first = register.compiled("export const x: number = 1;\n", file, cache);
            assert.equal(first.hit, false);
            assert.match(first.code, /exports\.x = x|const x = 1/);
            assert.doesNotMatch(first.code, /: number/);
            assert.deepEqual(register.compiled("export const x: number = 1;\n", file, cache), { code: first.code, hit: true });

            const changed = register.compiled("export const x: number = 3;\n", file, cache);
            assert.equal(changed.hit, false);
            assert.match(changed.code, /= 3/);

            const [entry] = fs.readdirSync(cache).filter((f) => f.endsWith(".js"));
            fs.writeFileSync(path.join(cache, entry), fs.readFileSync(path.join(cache, entry), "utf8").slice(0, 40));
            const repaired = register.compiled("export const x: number = 3;\n", file, cache);
            assert.deepEqual(repaired, { code: changed.code, hit: false });
        } finally {
            fs.rmSync(cache, { recursive: true, force: true });
        }
    });

    it("loads the SDK's function-serialization packages only when a function is serialized", () => {
        const script = [
            "const loaded = (part) => Object.keys(require.cache).some((k) => k.includes(part));",
            'const pulumi = require("@pulumi/pulumi");',
            'const before = [loaded("/typescript/lib/"), loaded("/@npmcli/arborist/")];',
            "pulumi.runtime.serializeFunction(function f() { return 1 + 1; }).then((r) =>",
            "    pulumi.runtime.computeCodePaths(new Map(), []).then(() =>",
            '        console.log(JSON.stringify({ before, after: [loaded("/typescript/lib/"), loaded("/@npmcli/arborist/")], text: r.text.includes("1 + 1") }))));',
        ].join("\n");
        assert.deepEqual(lastJson(script), { before: [false, false], after: [true, true], text: true });
    });

    it("loads normalize-package-data and the Automation API at their first use, each as the SDK would use it", () => {
        const script = [
            ...sdkModule("codePaths", "runtime/closure/codePaths.js"),
            "const loaded = (part) => Object.keys(require.cache).some((k) => k.includes(part));",
            'const pulumi = require("@pulumi/pulumi");',
            'const before = [loaded("/normalize-package-data/"), loaded("/@pulumi/pulumi/automation/")];',
            "// codePaths.js's require, through TypeScript's __importDefault as codePaths.js has it.",
            'const npd = Module._load("normalize-package-data", codePaths, false);',
            "const viaDefault = npd && npd.__esModule ? npd : { default: npd };",
            'const data = { dependencies: { a: "^1.0.0" }, repository: "github:o/r" };',
            "viaDefault.default(data);",
            'const real = { dependencies: { a: "^1.0.0" }, repository: "github:o/r" };',
            'require("normalize-package-data")(real);',
            "const workspace = typeof pulumi.automation.LocalWorkspace;",
            'const after = [loaded("/normalize-package-data/"), loaded("/@pulumi/pulumi/automation/")];',
            "console.log(JSON.stringify({ before, after, same: JSON.stringify(data) === JSON.stringify(real), workspace }));",
        ].join("\n");
        assert.deepEqual(lastJson(script), {
            before: [false, false],
            after: [true, true],
            same: true,
            workspace: "function",
        });
    });

    it("skips the SDK launcher's source-map-support, unless SPARK_SOURCE_MAPS=1", () => {
        // The launcher's require, made as the launcher makes it (its module as the parent).
        const script = [
            ...sdkModule("launcher", "cmd/run/index.js"),
            "const before = Error.prepareStackTrace; // Node.js's own, where it has one",
            'Module._load("source-map-support/register", launcher, false);',
            'const loaded = Object.keys(require.cache).some((k) => k.includes("/source-map-support/"));',
            "console.log(JSON.stringify({ installed: Error.prepareStackTrace !== before, loaded }));",
        ].join("\n");
        const run = (env: NodeJS.ProcessEnv) => lastJson(script, env);
        const { SPARK_SOURCE_MAPS: _, ...env } = process.env;
        assert.deepEqual(run(env), { installed: false, loaded: false });
        assert.deepEqual(run({ ...env, SPARK_SOURCE_MAPS: "1" }), { installed: true, loaded: true });
    });

    it("gives the launcher's wait for V8's debugger nothing to wait for, unless SPARK_EAGER_SDK=1; the closure code still gets the real module", () => {
        const script = [
            ...sdkModule("launcher", "cmd/run/index.js"),
            'const loaded = () => Object.keys(require.cache).some((k) => k.endsWith("/runtime/closure/v8Hooks.js"));',
            'const hooks = Module._load("../../runtime/closure/v8Hooks", launcher, false);',
            "const before = loaded();",
            "hooks.isInitializedAsync().then(() => {",
            "    const launcherLoaded = loaded();",
            '    const pulumi = require("@pulumi/pulumi");',
            "    return pulumi.runtime.serializeFunction(function f() { return 2 + 2; }).then((r) =>",
            "        console.log(JSON.stringify({ before, launcherLoaded, after: loaded(), text: r.text.includes('2 + 2') })));",
            "});",
        ].join("\n");
        const run = (env: NodeJS.ProcessEnv) => lastJson(script, env);
        const { SPARK_EAGER_SDK: _, ...env } = process.env;
        assert.deepEqual(run(env), { before: false, launcherLoaded: false, after: true, text: true });
        assert.deepEqual(run({ ...env, SPARK_EAGER_SDK: "1" }), { before: true, launcherLoaded: true, after: true, text: true });
    });

    it("loads the launcher's Zipkin tracing only when tracing starts, unless SPARK_EAGER_SDK=1; spans before and after as the real module makes them", () => {
        // run.js's require and calls, in run.js's order: a span, then `start` (under --tracing), a span.
        const script = [
            ...sdkModule("runJs", "cmd/run/run.js"),
            'const loaded = () => Object.keys(require.cache).some((k) => k.includes("/@opentelemetry/sdk-trace-node/"));',
            'const tracing = Module._load("./tracing", runJs, false);',
            "const first = tracing.newSpan('language-runtime.run');",
            "first.end();",
            "const before = { loaded: loaded(), esModule: tracing.__esModule === true, recording: first.isRecording(), valid: first.spanContext().traceId !== '0'.repeat(32) };",
            "tracing.start('http://127.0.0.1:9/api/v2/spans');",
            "const second = tracing.newSpan('language-runtime.runProgram');",
            "const after = { loaded: loaded(), recording: second.isRecording(), valid: second.spanContext().traceId !== '0'.repeat(32) };",
            "second.end();",
            "tracing.stop();",
            "console.log(JSON.stringify({ before, after }));",
            "process.exit(0); // the exporter would try to send the spans",
        ].join("\n");
        const run = (env: NodeJS.ProcessEnv) => lastJson(script, env);
        const { SPARK_EAGER_SDK: _, TRACEPARENT: __, ...env } = process.env;
        // No tracer before `start`: OpenTelemetry's no-op span, as the real module gives; after it, Zipkin's recording spans.
        const expected = { loaded: false, recording: false, valid: false };
        assert.deepEqual(run(env), { before: { ...expected, esModule: true }, after: { loaded: true, recording: true, valid: true } });
        assert.deepEqual(run({ ...env, SPARK_EAGER_SDK: "1" }), {
            before: { ...expected, loaded: true, esModule: true },
            after: { loaded: true, recording: true, valid: true },
        });
    });

    it("takes no stack for the SDK's tracked promises, unless PULUMI_DEBUG_PROMISE_LEAKS or SPARK_EAGER_SDK=1; the leak tracking itself unchanged", () => {
        const script = [
            'require("@pulumi/pulumi");',
            'const debuggable = require("@pulumi/pulumi/runtime/debuggable");',
            'const state = require("@pulumi/pulumi/runtime/state");',
            "const p = new Promise((resolve) => setTimeout(resolve, 10, 42));",
            'const tracked = debuggable.debuggablePromise(p, "a test promise");',
            "const pending = state.getStore().leakCandidates.has(p);",
            "tracked.then((value) => console.log(JSON.stringify({",
            "    frames: /\\n\\s+at /.test(p._debugStackTrace), limit: Error.stackTraceLimit, value, pending,",
            "    leftAfter: state.getStore().leakCandidates.has(p), ctx: p._debugCtx })));",
        ].join("\n");
        const run = (env: NodeJS.ProcessEnv) => lastJson(script, env);
        const { SPARK_EAGER_SDK: _, PULUMI_DEBUG_PROMISE_LEAKS: __, ...env } = process.env;
        const tracking = { limit: 10, value: 42, pending: true, leftAfter: false, ctx: "a test promise" };
        assert.deepEqual(run(env), { ...tracking, frames: false });
        assert.deepEqual(run({ ...env, PULUMI_DEBUG_PROMISE_LEAKS: "1" }), { ...tracking, frames: true });
        assert.deepEqual(run({ ...env, SPARK_EAGER_SDK: "1" }), { ...tracking, frames: true });
    });

    it("drops the SDK's debug messages about registrations, unless SPARK_SDK_DEBUG_LOG=1; its other messages, and other modules' debug messages, as before", () => {
        // runtime/resource.js's require of the log module, made as it makes it; with no engine and
        // excessiveDebugOutput on, the SDK's log.debug prints what it would have sent to the engine.
        const script = [
            ...sdkModule("resourceJs", "runtime/resource.js"),
            'const pulumi = require("@pulumi/pulumi");',
            'require("@pulumi/pulumi/runtime/settings").excessiveDebugOutput = true;',
            'const log = Module._load("../log", resourceJs, false);',
            'log.debug("from resource.js").then(() => pulumi.log.debug("from the program")).then(() =>',
            "    console.log(JSON.stringify({ warn: log.warn === pulumi.log.warn, esModule: log.__esModule === true, errors: log.hasErrors() })));",
        ].join("\n");
        const run = (env: NodeJS.ProcessEnv) => runScript(script, env);
        const { SPARK_SDK_DEBUG_LOG: _, SPARK_EAGER_SDK: __, ...env } = process.env;
        const end = JSON.stringify({ warn: true, esModule: true, errors: false });
        assert.deepEqual(run(env), ["debug: [runtime] from the program", end]);
        const all = ["debug: [runtime] from resource.js", "debug: [runtime] from the program", end];
        assert.deepEqual(run({ ...env, SPARK_SDK_DEBUG_LOG: "1" }), all);
        assert.deepEqual(run({ ...env, SPARK_EAGER_SDK: "1" }), all);
    });

    it("is how Pulumi.yaml has the program loaded", () => {
        const project = fs.readFileSync(path.join(ROOT, "Pulumi.yaml"), "utf8");
        assert.match(project, /^ {4}typescript: false$/m);
        assert.match(project, /^ {4}nodeargs: --require \.\/toolchain\/ts-register\.js$/m);
    });
});
