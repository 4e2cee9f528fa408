// How `pulumi` loads the program's TypeScript: Pulumi.yaml runs Node.js with
// `--require ./toolchain/ts-register.js` (runtime option `nodeargs`, `typescript: false`), and this
// hook turns each `.ts` module into CommonJS with Sucrase as Node.js requires it, keeping the
// output in a cache so that a run whose sources did not change transpiles nothing.
//
// Freshness: every run reads each `.ts` file it loads and hashes its text (SHA-256, with the
// Sucrase version and the options below); the cached JavaScript is used only when its recorded
// hash is that one, otherwise the file is transpiled again and the entry replaced. An edited file
// is therefore always run as edited, whatever its mtime; hashing the program's ~100 files costs
// a few milliseconds. One entry per source path (named by a hash of the path), so the cache does
// not grow with edits; entries are written to a temporary file and renamed, so two runs at once
// never read half an entry.
//
// Why not ts-node (what `typescript: true` does): the SDK's launcher then loads TypeScript's
// compiler to read the tsconfig and registers ts-node, whose source-map-support rewrites every
// stack trace; the SDK captures one per resource and per promise (`debuggablePromise`, the
// resource's source position), about 0.35 s of an 8-node program on the lab's 2 cores. Sucrase
// keeps line numbers (docs/speed.md, "The program's start"), so a stack trace names the `.ts` file
// and line without source maps. Types are only stripped; `tsc -p tsconfig.json` type-checks.
//
// It also installs toolchain/code-cache.js, V8's code cache for every module the program loads
// (the SDK's and the program's), so that an unchanged run compiles none of them again; and the
// SDK trims below (TRIMS).
"use strict";

const crypto = require("node:crypto");
const fs = require("node:fs");
const Module = require("node:module");
const path = require("node:path");
const codeCache = require("./code-cache");

/**
 * Node.js's CommonJS loader, with the internals this file uses (lib/internal/modules/cjs/loader.js):
 * `_load` (every require goes through it) and `_extensions` (a loader per file extension).
 * @typedef {typeof Module & {
 *   _load: (request: string, parent: NodeJS.Module | null | undefined, isMain: boolean) => unknown,
 *   _extensions: Record<string, (module: NodeJS.Module & { _compile(code: string, fileName: string): unknown }, fileName: string) => void>,
 * }} Loader
 */
const loader = /** @type {Loader} */ (Module);

/** Sucrase's options: CommonJS with the default-import helper, ES2022 left as it is (Node.js >= 20). */
const OPTIONS = { transforms: /** @type {import("sucrase").Transform[]} */ (["typescript", "imports"]), disableESTransforms: true };
/** Bump when the cache entry's layout changes. */
const FORMAT = "spark-cluster-ts-cache v1";
const KEY_PREFIX = "// spark-cluster-ts-cache ";

/** Where the transpiled modules are kept: SPARK_TS_CACHE_DIR, else node_modules/.cache beside this project. */
function cacheDir() {
    return codeCache.cacheDirFrom("SPARK_TS_CACHE_DIR", "spark-cluster-ts");
}

/** @type {string | undefined} */
let sucraseVersion;
/** Sucrase's version, read from its package.json (cheap) so that a cache hit never loads Sucrase. */
function transpilerVersion() {
    if (sucraseVersion === undefined) {
        const pkg = require.resolve("sucrase/package.json", { paths: [__dirname] });
        sucraseVersion = /** @type {{ version: string }} */ (JSON.parse(fs.readFileSync(pkg, "utf8"))).version;
    }
    return sucraseVersion;
}

/**
 * The hash a cache entry must carry to stand for `source`.
 * @param {string} source
 */
function sourceKey(source) {
    return crypto
        .createHash("sha256")
        .update(`${FORMAT}\0${transpilerVersion()}\0${JSON.stringify(OPTIONS)}\0`)
        .update(source)
        .digest("hex");
}

/**
 * Sucrase's CommonJS for `source` (loaded only on a cache miss).
 * @param {string} source
 * @param {string} fileName
 */
function transpile(source, fileName) {
    const { transform } = require("sucrase");
    return transform(source, { ...OPTIONS, filePath: fileName }).code;
}

/**
 * The JavaScript for `fileName`: from the cache when its entry carries the hash of `source`,
 * else transpiled now and stored. A cache that cannot be written (read-only checkout) is skipped.
 * @param {string} source
 * @param {string} fileName
 * @param {string} [dir]
 * @returns {{ code: string, hit: boolean }}
 */
function compiled(source, fileName, dir = cacheDir()) {
    const key = sourceKey(source);
    const entry = codeCache.entryPath(dir, fileName, ".js");
    try {
        const cached = fs.readFileSync(entry, "utf8");
        const newline = cached.indexOf("\n");
        if (newline > 0 && cached.slice(0, newline) === KEY_PREFIX + key) {
            return { code: cached.slice(newline + 1), hit: true };
        }
    } catch {
        // no entry yet
    }
    const code = transpile(source, fileName);
    try {
        fs.mkdirSync(dir, { recursive: true });
        codeCache.writeWhole(entry, `${KEY_PREFIX}${key}\n${code}`);
    } catch {
        // not cached this time; the run goes on
    }
    return { code, hit: false };
}

// --- The SDK trims -------------------------------------------------------------------------------
//
// What `@pulumi/pulumi` does at every run for features this program never uses, left out (each
// measured in docs/speed.md). Each trim names one require made by one file of the SDK (the request
// as the file writes it, and the file by its path under node_modules), and changes only what that
// require returns. They fail safe:
// - a trim whose file or request is not there (the SDK moved or dropped it) matches nothing, and
//   every module loads as the SDK has it;
// - what a trim returns forwards everything it does not change to the real module (loaded when
//   first needed), so a new use of the module by the SDK reaches the real one;
// - a trim that finds the module not shaped as it expects (not an ES module, a member missing or
//   not writable), or that throws, returns the real module unchanged, and does not count as having
//   taken effect (below).
// test/unit/tsRegister.test.ts checks each trim and its fallbacks; test/process/sdkTrims.test.ts
// previews the lab stack with every trim off, on, and with an SDK whose trimmed modules moved, and
// compares the previews. Switches: SPARK_SDK_TRIMS=0 turns every trim off (the SDK as Pulumi ships
// it); SPARK_SDK_TRIMS=-name,... every trim but those; SPARK_SOURCE_MAPS=1 keeps source-maps,
// SPARK_SDK_DEBUG_LOG=1 keeps registration-debug, PULUMI_DEBUG_PROMISE_LEAKS keeps the promise
// stacks. SPARK_SDK_TRIMS_REPORT=FILE writes, at exit, which trims took effect.

/**
 * @typedef {object} Trim
 * @property {string} name
 * @property {{ request: string, from: string }[]} requires each require it changes: the request,
 *   and the requiring file's path below node_modules (`/`-separated)
 * @property {string} [keptBy] the variable that, set to 1, keeps what the trim leaves out
 * @property {(load: () => unknown, parent: NodeJS.Module) => { exports: unknown, trimmed: boolean }} apply
 *   what the require returns instead (`load` loads the real module), and whether that trims
 *   anything (false: the module was not shaped as the trim expects, and is returned as it is)
 */

/**
 * A stand-in for a module, loaded at its first use: any property read, `in`, key listing, call or
 * `new` loads the real module and hands on to it; `overrides` are served without loading it. It
 * says `__esModule`, so TypeScript's `__importStar` and `__importDefault` keep it as it is instead
 * of copying its keys (which would load the module at once); `default` of a CommonJS module is the
 * module itself, as their interop has it. Its target is a bound function (no own `prototype`), so
 * it can be called and constructed like a module that is a function; `typeof` says "function".
 * @param {() => unknown} load
 * @param {Record<string, unknown>} [overrides]
 * @returns {unknown}
 */
function lazyModule(load, overrides = {}) {
    /** @type {any} */
    let real;
    const module = () => (real ??= load());
    const target = function lazy() {}.bind(null);
    return new Proxy(target, {
        get: (_, key) => {
            if (typeof key === "string" && Object.prototype.hasOwnProperty.call(overrides, key)) return overrides[key];
            if (key === "__esModule") return true;
            const loaded = module();
            return key === "default" && !loaded?.__esModule ? loaded : loaded[key];
        },
        has: (_, key) => key in module(),
        ownKeys: () => Reflect.ownKeys(module()),
        getOwnPropertyDescriptor: (_, key) => {
            const d = Object.getOwnPropertyDescriptor(module(), key);
            return d && { ...d, configurable: true };
        },
        getPrototypeOf: () => Reflect.getPrototypeOf(module()),
        set: (_, key, value) => Reflect.set(module(), key, value),
        defineProperty: (_, key, d) => Reflect.defineProperty(module(), key, d),
        deleteProperty: (_, key) => Reflect.deleteProperty(module(), key),
        apply: (_, self, args) => Reflect.apply(module(), self, args),
        construct: (_, args) => Reflect.construct(module(), args),
    });
}

/** @type {Trim[]} */
const TRIMS = [
    {
        // The SDK launcher installs source-map-support (`cmd/run/index.js`) before it loads the
        // program: every stack trace the SDK captures (one per resource, with no depth limit, and
        // one per promise it tracks) then has each frame looked up in the SDK's own source maps.
        // Its require gets an empty module (it exports nothing; requiring it is what installs it),
        // and the first `.ts` module takes back an install made elsewhere (takeBackSourceMaps).
        // The program's frames are unchanged (no source maps; Sucrase keeps lines); the SDK's
        // name its .js files.
        name: "source-maps",
        requires: [{ request: "source-map-support/register", from: "@pulumi/pulumi/cmd/run/index.js" }],
        keptBy: "SPARK_SOURCE_MAPS",
        apply: () => ({ exports: {}, trimmed: true }),
    },
    {
        // For function serialization (`pulumi.runtime.serializeFunction`), which this program
        // never calls, the SDK loads TypeScript's compiler (parsing a function's text) and npm's
        // Arborist (the packages a closure needs) as it loads. Loaded at their first use instead.
        name: "closure-packages",
        requires: [
            { request: "../../typescript-shim", from: "@pulumi/pulumi/runtime/closure/parseFunction.js" },
            { request: "@npmcli/arborist", from: "@pulumi/pulumi/runtime/closure/codePaths.js" },
        ],
        apply: (load) => ({ exports: lazyModule(load), trimmed: true }),
    },
    {
        // The launcher waits for V8's debugger before it runs the program (`initializeHooks`):
        // the SDK opens an inspector session so that, should the program serialize a function, it
        // can name the file each function came from, and with the debugger on, every script V8
        // parses is reported to that session. The launcher's require gets the module with an
        // `isInitializedAsync` that has nothing to wait for; anything else of it loads the real
        // module. The closure code (runtime/closure/v8.js) requires the real module, which opens
        // the session at its first use; the files of scripts parsed before then are not known to
        // it, so a function that cannot be serialized is reported without its file.
        name: "debugger-wait",
        requires: [{ request: "../../runtime/closure/v8Hooks", from: "@pulumi/pulumi/cmd/run/index.js" }],
        apply: (load) => ({ exports: lazyModule(load, { isInitializedAsync: () => Promise.resolve() }), trimmed: true }),
    },
    {
        // The SDK's debug messages about each registration (`runtime/resource.js`, about four per
        // resource). Each is a Log call to the engine, one after the other, and the engine shows
        // them only under `pulumi up --debug`. resource.js gets an object whose `debug` does
        // nothing and whose prototype is the log module (so every other member is the module's;
        // members the module defines later, as it is still loading when resource.js requires it in
        // a run under the launcher, are seen too);
        // every other module's messages, the program's among them, go as before. Only for an ES
        // module (__esModule, the first thing TypeScript's output sets: __importStar keeps it as it
        // is); another module is returned as it is.
        name: "registration-debug",
        requires: [{ request: "../log", from: "@pulumi/pulumi/runtime/resource.js" }],
        keptBy: "SPARK_SDK_DEBUG_LOG",
        apply: (load) => {
            const log = /** @type {Record<string, unknown>} */ (load());
            return log?.__esModule === true
                ? { exports: Object.create(log, { debug: { value: () => Promise.resolve() } }), trimmed: true }
                : { exports: log, trimmed: false };
        },
    },
    {
        // The SDK's promise tracking (`runtime/debuggable.js`, `debuggablePromise`, several
        // promises per resource) keeps each promise's `new Error().stack`, which only the leak
        // report under PULUMI_DEBUG_PROMISE_LEAKS prints. Without that variable its stack is taken
        // with Error.stackTraceLimit at 0 (no frames); the leak tracking itself is unchanged.
        name: "promise-stacks",
        requires: ["runtime/callbacks.js", "runtime/invoke.js", "runtime/resource.js", "runtime/rpc.js", "runtime/settings.js"]
            .map((file) => ({ request: "./debuggable", from: `@pulumi/pulumi/${file}` }))
            .concat([{ request: "../runtime/debuggable", from: "@pulumi/pulumi/automation/server.js" }]),
        apply: (load) => {
            // The module may still be loading at this require (no debuggablePromise yet): a later
            // require of it, once it is loaded, wraps it; the callers read the export at each call.
            const debuggable = /** @type {Record<string, any>} */ (load());
            return { exports: debuggable, trimmed: withoutPromiseStacks(debuggable) };
        },
    },
];

/**
 * Wraps the debuggable module's `debuggablePromise` as the promise-stacks trim says, once; leaves
 * a module of another shape, or whose export cannot be replaced, as it is. Returns whether the
 * export is the wrapper now.
 * @param {Record<string, any>} debuggable
 * @returns {boolean}
 */
function withoutPromiseStacks(debuggable) {
    const track = debuggable?.debuggablePromise;
    if (typeof track !== "function" || !("debugPromiseLeaks" in debuggable)) return false;
    if (track.withoutStacks) return true;
    /** @type {((p: Promise<unknown>, ctx: unknown) => unknown) & { withoutStacks?: boolean }} */
    const wrapped = function debuggablePromise(p, ctx) {
        if (debuggable.debugPromiseLeaks) return track(p, ctx);
        const limit = Error.stackTraceLimit;
        Error.stackTraceLimit = 0;
        try {
            return track(p, ctx);
        } finally {
            Error.stackTraceLimit = limit;
        }
    };
    wrapped.withoutStacks = true;
    try {
        debuggable.debuggablePromise = wrapped;
    } catch {
        // a getter-only export: left as the SDK has it
    }
    return debuggable.debuggablePromise === wrapped;
}

/**
 * The trims SPARK_SDK_TRIMS and the keep switches leave on.
 * @param {NodeJS.ProcessEnv} env
 * @returns {Trim[]}
 */
function enabledTrims(env = process.env) {
    const setting = (env.SPARK_SDK_TRIMS ?? "").trim();
    if (setting === "0") return [];
    const off = new Set(
        setting
            .split(",")
            .map((s) => s.trim())
            .filter((s) => s.startsWith("-"))
            .map((s) => s.slice(1)),
    );
    return TRIMS.filter((t) => !off.has(t.name) && !(t.keptBy && env[t.keptBy] === "1"));
}

/**
 * The SDK launcher's source-map-support, taken back if it was installed (by a launcher whose
 * require the source-maps trim did not find): Error.prepareStackTrace back to Node.js's own.
 */
function takeBackSourceMaps() {
    if (typeof Error.prepareStackTrace === "function") {
        /** @type {{ prepareStackTrace?: unknown }} */ (Error).prepareStackTrace = undefined;
    }
}

/**
 * Installs `trims` in Node.js's loader: a require that a trim names gets what the trim returns;
 * every other require, and these requests from any other file, load as usual. Returns the names
 * of the trims that took effect so far (found their require, and the module as they expect it).
 * @param {Trim[]} trims
 * @returns {Set<string>}
 */
function installTrims(trims) {
    const applied = new Set();
    if (trims.length === 0 || typeof loader._load !== "function") return applied;
    const sep = path.sep;
    /** @type {Map<string, { trim: Trim, suffix: string }[]>} */
    const byRequest = new Map();
    for (const trim of trims) {
        for (const { request, from } of trim.requires) {
            const list = byRequest.get(request) ?? [];
            list.push({ trim, suffix: `${sep}node_modules${sep}${from.split("/").join(sep)}` });
            byRequest.set(request, list);
        }
    }
    const load = loader._load;
    /** @this {unknown} @type {Loader["_load"]} */
    loader._load = function loadTrimmed(request, parent, isMain) {
        const candidates = byRequest.get(request);
        const from = parent?.filename;
        const match = candidates && from ? candidates.find((c) => from.endsWith(c.suffix)) : undefined;
        if (!match || !parent) {
            return load.call(this, request, parent, isMain);
        }
        const loadReal = () => load.call(loader, request, parent, isMain);
        try {
            const { exports, trimmed } = match.trim.apply(loadReal, parent);
            if (trimmed) applied.add(match.trim.name);
            return exports;
        } catch {
            return loadReal();
        }
    };
    return applied;
}

/**
 * Loads `.ts` modules through the transpile cache; the first one takes back source-map-support
 * when the source-maps trim is on.
 * @param {boolean} sourceMapsTrimmed
 */
function register(sourceMapsTrimmed = true) {
    let first = true;
    loader._extensions[".ts"] = function loadTypeScript(module, fileName) {
        if (first) {
            first = false;
            if (sourceMapsTrimmed) takeBackSourceMaps();
        }
        const source = fs.readFileSync(fileName, "utf8");
        module._compile(compiled(source, fileName).code, fileName);
    };
}

module.exports = { compiled, sourceKey, register, installTrims, enabledTrims, lazyModule, TRIMS };
if (!loader._extensions[".ts"]) {
    codeCache.install();
    const trims = enabledTrims();
    register(trims.some((t) => t.name === "source-maps"));
    const applied = installTrims(trims);
    const report = process.env.SPARK_SDK_TRIMS_REPORT;
    if (report) {
        process.once("exit", () => {
            fs.writeFileSync(report, JSON.stringify({ enabled: trims.map((t) => t.name), applied: [...applied].sort() }) + "\n");
        });
    }
}
