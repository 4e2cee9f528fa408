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

interface Trim {
    name: string;
    requires: { request: string; from: string }[];
    keptBy?: string;
    apply(load: () => unknown, parent: unknown): { exports: unknown; trimmed: boolean };
}
interface Register {
    compiled(source: string, fileName: string, dir?: string): { code: string; hit: boolean };
    enabledTrims(env: NodeJS.ProcessEnv): Trim[];
    lazyModule(load: () => unknown, overrides?: Record<string, unknown>): unknown;
    TRIMS: Trim[];
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

    it("gives the launcher's wait for V8's debugger nothing to wait for, unless SPARK_SDK_TRIMS=0; the closure code still gets the real module", () => {
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
        const { SPARK_SDK_TRIMS: _, ...env } = process.env;
        assert.deepEqual(run(env), { before: false, launcherLoaded: false, after: true, text: true });
        assert.deepEqual(run({ ...env, SPARK_SDK_TRIMS: "0" }), { before: true, launcherLoaded: true, after: true, text: true });
        assert.deepEqual(run({ ...env, SPARK_SDK_TRIMS: "-debugger-wait" }), { before: true, launcherLoaded: true, after: true, text: true });
    });

    it("loads the launcher's Zipkin tracing and the Automation API as the SDK has them (no trim: docs/speed.md says what that costs)", () => {
        const script = [
            ...sdkModule("runJs", "cmd/run/run.js"),
            "const loaded = (part) => Object.keys(require.cache).some((k) => k.includes(part));",
            'const tracing = Module._load("./tracing", runJs, false);',
            'const pulumi = require("@pulumi/pulumi");',
            'console.log(JSON.stringify({ tracing: loaded("/@opentelemetry/sdk-trace-node/"), start: typeof tracing.start, automation: loaded("/@pulumi/pulumi/automation/index.js"), workspace: typeof pulumi.automation.LocalWorkspace }));',
        ].join("\n");
        assert.deepEqual(lastJson(script), { tracing: true, start: "function", automation: true, workspace: "function" });
    });

    it("takes no stack for the SDK's tracked promises, unless PULUMI_DEBUG_PROMISE_LEAKS or SPARK_SDK_TRIMS=0; the leak tracking itself unchanged", () => {
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
        const { SPARK_SDK_TRIMS: _, PULUMI_DEBUG_PROMISE_LEAKS: __, ...env } = process.env;
        const tracking = { limit: 10, value: 42, pending: true, leftAfter: false, ctx: "a test promise" };
        assert.deepEqual(run(env), { ...tracking, frames: false });
        assert.deepEqual(run({ ...env, PULUMI_DEBUG_PROMISE_LEAKS: "1" }), { ...tracking, frames: true });
        assert.deepEqual(run({ ...env, SPARK_SDK_TRIMS: "0" }), { ...tracking, frames: true });
    });

    it("drops the SDK's debug messages about registrations, unless SPARK_SDK_DEBUG_LOG=1 or SPARK_SDK_TRIMS=0; its other messages, and other modules' debug messages, as before", () => {
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
        const { SPARK_SDK_DEBUG_LOG: _, SPARK_SDK_TRIMS: __, ...env } = process.env;
        const end = JSON.stringify({ warn: true, esModule: true, errors: false });
        assert.deepEqual(run(env), ["debug: [runtime] from the program", end]);
        const all = ["debug: [runtime] from resource.js", "debug: [runtime] from the program", end];
        assert.deepEqual(run({ ...env, SPARK_SDK_DEBUG_LOG: "1" }), all);
        assert.deepEqual(run({ ...env, SPARK_SDK_TRIMS: "0" }), all);
    });

    it("SPARK_SDK_TRIMS: 0 turns every trim off, -name,... all but those; the keep switches turn theirs off", () => {
        const names = (env: NodeJS.ProcessEnv) => register.enabledTrims(env).map((t) => t.name);
        const all = ["source-maps", "closure-packages", "debugger-wait", "registration-debug", "promise-stacks"];
        assert.deepEqual(
            register.TRIMS.map((t) => t.name),
            all,
        );
        assert.deepEqual(names({}), all);
        assert.deepEqual(names({ SPARK_SDK_TRIMS: "0" }), []);
        assert.deepEqual(names({ SPARK_SDK_TRIMS: "-source-maps, -promise-stacks" }), ["closure-packages", "debugger-wait", "registration-debug"]);
        assert.deepEqual(names({ SPARK_SOURCE_MAPS: "1", SPARK_SDK_DEBUG_LOG: "1" }), ["closure-packages", "debugger-wait", "promise-stacks"]);
    });

    it("is how Pulumi.yaml has the program loaded", () => {
        const project = fs.readFileSync(path.join(ROOT, "Pulumi.yaml"), "utf8");
        assert.match(project, /^ {4}typescript: false$/m);
        assert.match(project, /^ {4}nodeargs: --require \.\/toolchain\/ts-register\.js$/m);
    });
});

/**
 * Each trim fails safe: a require it names that moved, a module shaped otherwise than it expects, a
 * new use of the module, or a trim that throws, and the SDK gets (or reaches) the real module. The
 * scripts run with the trims off (SPARK_SDK_TRIMS=0) and install the ones they test themselves.
 */
describe("ts-register: the SDK trims fail safe", () => {
    const { SPARK_SDK_TRIMS: _, ...base } = process.env;
    const off = { ...base, SPARK_SDK_TRIMS: "0" };
    /** Like sdkModule, for any file of the SDK, there or not (one that moved); `Module` declared by the script. */
    const at = (name: string, sdkFile: string) => [
        `const ${name} = new Module(require("node:path").join(require("node:path").dirname(require.resolve("@pulumi/pulumi/package.json")), ${JSON.stringify(sdkFile)}));`,
        `${name}.filename = ${name}.id; ${name}.paths = Module._nodeModulePaths(require("node:path").dirname(${name}.id));`,
    ];
    const install = (names: string) =>
        `const register = require(${JSON.stringify(REGISTER)}); register.installTrims(register.TRIMS.filter((t) => ${JSON.stringify(names.split(","))}.includes(t.name)));`;

    it("a trimmed require made from another file (the SDK moved it) loads the real module", () => {
        const script = [
            install("debugger-wait,registration-debug"),
            'const Module = require("node:module");',
            ...at("moved", "cmd/run/moved-index.js"),
            ...at("resourceJs", "runtime/moved-resource.js"),
            'const loaded = () => Object.keys(require.cache).some((k) => k.endsWith("/runtime/closure/v8Hooks.js"));',
            'const hooks = Module._load("../../runtime/closure/v8Hooks", moved, false);',
            'const log = Module._load("../log", resourceJs, false);',
            'console.log(JSON.stringify({ loaded: loaded(), real: hooks === require("@pulumi/pulumi/runtime/closure/v8Hooks"), log: log === require("@pulumi/pulumi/log") }));',
        ].join("\n");
        assert.deepEqual(lastJson(script, off), { loaded: true, real: true, log: true });
    });

    it("the debugger-wait stand-in hands every other member to the real module, loaded at that first use", () => {
        const script = [
            install("debugger-wait"),
            ...sdkModule("launcher", "cmd/run/index.js"),
            'const loaded = () => Object.keys(require.cache).some((k) => k.endsWith("/runtime/closure/v8Hooks.js"));',
            'const hooks = Module._load("../../runtime/closure/v8Hooks", launcher, false);',
            "const before = loaded();",
            "const getSession = hooks.getSessionAsync; // a member the stand-in does not change",
            'const real = require("@pulumi/pulumi/runtime/closure/v8Hooks");',
            "console.log(JSON.stringify({ before, after: loaded(), same: getSession === real.getSessionAsync, keys: Object.keys(hooks).sort().join() === Object.keys(real).sort().join() }));",
        ].join("\n");
        assert.deepEqual(lastJson(script, off), { before: false, after: true, same: true, keys: true });
    });

    it("registration-debug sees what the log module defines after the require, and leaves a module that is not an ES module as it is; promise-stacks leaves a debuggable module whose export cannot be replaced", () => {
        const trim = (name: string) => register.TRIMS.find((t) => t.name === name) as Trim;
        // The log module is still loading when resource.js requires it: what it defines later is seen.
        const loading: Record<string, unknown> = { __esModule: true };
        const result = trim("registration-debug").apply(() => loading, undefined);
        assert.equal(result.trimmed, true);
        const trimmed = result.exports as Record<string, () => unknown>;
        loading.debug = () => "sent";
        loading.warn = () => "warned";
        assert.equal(trimmed.warn(), "warned");
        assert.equal(trimmed.debug() instanceof Promise, true, "debug does nothing");
        const notEsModule = { debug: () => undefined };
        assert.deepEqual(
            trim("registration-debug").apply(() => notEsModule, undefined),
            { exports: notEsModule, trimmed: false },
        );
        const original = () => "tracked";
        const getterOnly = Object.defineProperty({ debugPromiseLeaks: false }, "debuggablePromise", { get: () => original, enumerable: true });
        assert.deepEqual(
            trim("promise-stacks").apply(() => getterOnly, undefined),
            { exports: getterOnly, trimmed: false },
        );
        assert.equal((getterOnly as unknown as { debuggablePromise: unknown }).debuggablePromise, original);
        const otherShape = { debuggablePromise: original }; // no debugPromiseLeaks: not the module it knows
        assert.deepEqual(
            trim("promise-stacks").apply(() => otherShape, undefined),
            { exports: otherShape, trimmed: false },
        );
        assert.equal(otherShape.debuggablePromise, original);
    });

    it("a trim that throws: the require gets the real module", () => {
        const script = [
            "const register = require(" + JSON.stringify(REGISTER) + ");",
            'const applied = register.installTrims([{ name: "throws", requires: [{ request: "../log", from: "@pulumi/pulumi/runtime/resource.js" }], apply: () => { throw new Error("a broken trim"); } }]);',
            'const Module = require("node:module");',
            ...at("resourceJs", "runtime/resource.js"),
            'const log = Module._load("../log", resourceJs, false);',
            'console.log(JSON.stringify({ real: log === require("@pulumi/pulumi/log"), applied: [...applied] }));',
        ].join("\n");
        assert.deepEqual(lastJson(script, off), { real: true, applied: [] });
    });

    it("a module loaded at its first use works as the module would: members, `in`, keys, default interop, a call, `new`", () => {
        let loads = 0;
        class Real {
            static answer = 42;
            readonly made = "made";
        }
        const fn = Object.assign((x: number) => x + 1, { answer: 42 });
        const lazyFn = register.lazyModule(() => (loads++, fn)) as typeof fn & { __esModule: boolean; default: unknown };
        const lazyClass = register.lazyModule(() => Real) as unknown as typeof Real;
        const lazyObject = register.lazyModule(() => (loads++, { __esModule: true, default: "esm default", value: 7 })) as Record<string, unknown>;
        assert.equal(loads, 0, "nothing loaded before a use");
        assert.equal(lazyFn.__esModule, true, "says __esModule, so __importStar keeps it");
        assert.equal(loads, 0);
        assert.equal(lazyFn(1), 2);
        assert.equal(lazyFn.answer, 42);
        assert.equal(lazyFn.default, fn, "a CommonJS module is its own default");
        assert.equal(new lazyClass().made, "made");
        assert.equal(lazyObject.default, "esm default");
        assert.ok("value" in lazyObject);
        assert.deepEqual(Object.keys(lazyObject).sort(), ["__esModule", "default", "value"]);
        assert.equal(loads, 2, "each loaded once");
    });
});
