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
// (the SDK's and the program's), so that an unchanged run compiles none of them again.
"use strict";

const crypto = require("node:crypto");
const fs = require("node:fs");
const Module = require("node:module");
const path = require("node:path");
const codeCache = require("./code-cache");

/** Sucrase's options: CommonJS with the default-import helper, ES2022 left as it is (Node.js >= 20). */
const OPTIONS = { transforms: ["typescript", "imports"], disableESTransforms: true };
/** Bump when the cache entry's layout changes. */
const FORMAT = "spark-cluster-ts-cache v1";
const KEY_PREFIX = "// spark-cluster-ts-cache ";

/** Where the transpiled modules are kept: SPARK_TS_CACHE_DIR, else node_modules/.cache beside this project. */
function cacheDir() {
    return codeCache.cacheDirFrom("SPARK_TS_CACHE_DIR", "spark-cluster-ts");
}

let sucraseVersion;
/** Sucrase's version, read from its package.json (cheap) so that a cache hit never loads Sucrase. */
function transpilerVersion() {
    if (sucraseVersion === undefined) {
        const pkg = require.resolve("sucrase/package.json", { paths: [__dirname] });
        sucraseVersion = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
    }
    return sucraseVersion;
}

/** The hash a cache entry must carry to stand for `source`. */
function sourceKey(source) {
    return crypto
        .createHash("sha256")
        .update(`${FORMAT}\0${transpilerVersion()}\0${JSON.stringify(OPTIONS)}\0`)
        .update(source)
        .digest("hex");
}

/** Sucrase's CommonJS for `source` (loaded only on a cache miss). */
function transpile(source, fileName) {
    const { transform } = require("sucrase");
    return transform(source, { ...OPTIONS, filePath: fileName }).code;
}

/**
 * The JavaScript for `fileName`: from the cache when its entry carries the hash of `source`,
 * else transpiled now and stored. A cache that cannot be written (read-only checkout) is skipped.
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

/**
 * Takes back the SDK launcher's source-map-support (`@pulumi/pulumi/cmd/run` installs it before it
 * loads the program): with it, every stack trace the SDK captures (one per resource, with no depth
 * limit, and one per promise it tracks) has each frame looked up in the SDK's own source maps,
 * about 0.6 s of the program's CPU at 8 nodes. Without it, the program's frames are unchanged (its
 * modules have no source maps; Sucrase keeps their lines) and the SDK's name its .js files.
 * SPARK_SOURCE_MAPS=1 keeps it. Where loadOnFirstUse runs, the launcher's install never happens
 * (SKIPPED_SDK_REQUIRES); this undoes it where it does.
 */
function dropSdkSourceMaps() {
    if (process.env.SPARK_SOURCE_MAPS !== "1" && typeof Error.prepareStackTrace === "function") {
        Error.prepareStackTrace = undefined;
    }
}

/**
 * What `@pulumi/pulumi` requires as it loads for what this program never calls:
 * - to serialize functions (`pulumi.runtime.serializeFunction`): TypeScript's compiler, for
 *   parsing a function's text, and npm's Arborist and normalize-package-data, for the packages a
 *   closure needs; about 0.35 s of CPU before the program starts on the lab's 2 cores;
 * - the Automation API (`pulumi.automation`, for driving the CLI from a program), about 0.02 s.
 */
const LOADED_WHEN_USED = [
    { request: "../../typescript-shim", from: ["@pulumi", "pulumi", "runtime", "closure", "parseFunction.js"] },
    { request: "@npmcli/arborist", from: ["@pulumi", "pulumi", "runtime", "closure", "codePaths.js"] },
    { request: "normalize-package-data", from: ["@pulumi", "pulumi", "runtime", "closure", "codePaths.js"] },
    { request: "./automation", from: ["@pulumi", "pulumi", "index.js"] },
];

/**
 * The launcher's own install of source-map-support (see dropSdkSourceMaps): skipped, so that the
 * stack traces the launcher takes before the program's first module (the root stack resource's,
 * its first log calls) do not read and sort the SDK's source maps either, about 50 ms of CPU.
 */
const SKIPPED_SDK_REQUIRES = [{ request: "source-map-support/register", from: ["@pulumi", "pulumi", "cmd", "run", "index.js"] }];

/**
 * The launcher's wait for V8's debugger before it runs the program (`initializeHooks`): the SDK
 * opens an inspector session and enables the debugger so that, should the program serialize a
 * function, it can name the file each function came from. With the debugger on, every script
 * V8 parses is reported to that session; about 0.1 s of the program's CPU at 8 nodes, less at 2
 * (docs/speed.md). The launcher gets a stand-in that has nothing to wait for; the SDK's closure
 * code (runtime/closure/v8.js) requires the real module, which opens the session at its first
 * use. The files of scripts parsed before then are not known to it: a function that cannot be
 * serialized is reported without its file. This program serializes none.
 */
const LAUNCHER_DEBUGGER_WAIT = {
    request: "../../runtime/closure/v8Hooks",
    from: ["@pulumi", "pulumi", "cmd", "run", "index.js"],
    standIn: { isInitializedAsync: () => Promise.resolve() },
};

/**
 * The launcher's Zipkin tracing (`cmd/run/tracing.js`, used only under `pulumi up --tracing URL`):
 * as it loads, it requires OpenTelemetry's trace SDK, its Zipkin exporter and its gRPC
 * instrumentation, about 370 modules and 0.05 s of the program's CPU at every run with the code
 * cache (docs/speed.md), which only its `start` uses. The launcher's require (`cmd/run/run.js`)
 * gets tracingStandIn: `start` loads the real module and hands on to it, and so do `newSpan` and
 * `stop` from then on; before, `newSpan` makes its span as the real one does before `start`
 * (OpenTelemetry's API, which the SDK loads anyway, with no root span), and `stop` has nothing to
 * stop.
 */
const LAUNCHER_TRACING = { request: "./tracing", from: ["@pulumi", "pulumi", "cmd", "run", "run.js"] };

/** The stand-in for LAUNCHER_TRACING (see there); `loadReal` loads the real module; `parent` is run.js. */
function tracingStandIn(loadReal, parent) {
    let real;
    let api;
    return {
        __esModule: true,
        start: (destinationUrl) => (real ??= loadReal()).start(destinationUrl),
        stop: () => real?.stop(),
        newSpan(name) {
            if (real) return real.newSpan(name);
            api ??= Module.createRequire(parent.filename)("@opentelemetry/api");
            const tracer = api.trace.getTracer("nodejs-runtime");
            return tracer.startSpan(name, undefined, api.trace.setSpan(api.context.active(), api.trace.getActiveSpan()));
        },
    };
}

/**
 * The SDK's debug messages about each resource's registration (`runtime/resource.js`, about four
 * per resource: "Registering resource", "RegisterResource RPC prepared", "... finished", "Resource
 * RPC serialization requested"). Each is a Log call to the engine, one after the other, and the
 * engine drops them unless `pulumi up --debug` asked to show them: at 8 nodes, 522 calls, about
 * 0.3 s of the program's CPU and 0.05 s of the CLI's in a `preview` (docs/speed.md).
 * runtime/resource.js gets the SDK's log module with a `debug` that does nothing;
 * SPARK_SDK_DEBUG_LOG=1 keeps them (for `--debug`). Every other module's messages, the program's
 * among them, go to the engine as before.
 */
const SDK_REGISTRATION_DEBUG = { request: "../log", from: ["@pulumi", "pulumi", "runtime", "resource.js"] };

/**
 * The SDK's promise tracking (`runtime/debuggable.js`, `debuggablePromise`, several promises per
 * resource): it keeps each promise's `new Error().stack`, which only the leak report under
 * PULUMI_DEBUG_PROMISE_LEAKS prints. Collecting and formatting those stacks was about 0.1 s of
 * the program's CPU at 8 nodes (docs/speed.md). Without that variable the tracking takes its stack
 * with Error.stackTraceLimit at 0 (no frames); with it, as before. The rest of what it does (the
 * leak detection itself) is unchanged.
 */
const SDK_PROMISE_TRACKING = { requests: ["./debuggable", "../runtime/debuggable"], under: `${path.sep}@pulumi${path.sep}pulumi${path.sep}` };

/** Wraps the debuggable module's `debuggablePromise` as SDK_PROMISE_TRACKING says, once. */
function withoutPromiseStacks(debuggable) {
    const track = debuggable?.debuggablePromise;
    if (typeof track !== "function" || !("debugPromiseLeaks" in debuggable) || track.withoutStacks) return;
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
    debuggable.debuggablePromise = wrapped;
}

/**
 * Hands the requires in LOADED_WHEN_USED a stand-in that loads the real module at its first use
 * (any property read, `in`, or key listing), so a program that serializes a function still gets
 * it, and one that does not never pays for it. The stand-in says `__esModule`, so the SDK's
 * `__importStar` keeps it as it is instead of copying every key (which would load the module at
 * once). The requests in SKIPPED_SDK_REQUIRES get an empty module, LAUNCHER_DEBUGGER_WAIT and
 * LAUNCHER_TRACING their stand-ins, SDK_REGISTRATION_DEBUG the log module without `debug`, and
 * SDK_PROMISE_TRACKING's module its wrapper. Anything else, and these requests from any other
 * module, load as usual.
 */
function loadOnFirstUse() {
    const bySuffix = (list) => list.map(({ request, from }) => ({ request, suffix: path.sep + from.join(path.sep) }));
    const suffixes = bySuffix(LOADED_WHEN_USED);
    const skipped = process.env.SPARK_SOURCE_MAPS === "1" ? [] : bySuffix(SKIPPED_SDK_REQUIRES);
    const [debuggerWait, tracing, registrationDebug] = bySuffix([LAUNCHER_DEBUGGER_WAIT, LAUNCHER_TRACING, SDK_REGISTRATION_DEBUG]);
    const dropRegistrationDebug = process.env.SPARK_SDK_DEBUG_LOG !== "1";
    const load = Module._load;
    Module._load = function loadMaybeLater(request, parent, isMain) {
        const from = parent?.filename ?? "";
        const is = (l) => l.request === request && from.endsWith(l.suffix);
        if (skipped.some(is)) {
            return {};
        }
        if (is(debuggerWait)) {
            return LAUNCHER_DEBUGGER_WAIT.standIn;
        }
        if (dropRegistrationDebug && is(registrationDebug)) {
            return Object.create(load.apply(this, arguments), { debug: { value: () => Promise.resolve() } });
        }
        if (is(tracing)) {
            return tracingStandIn(() => load.call(Module, request, parent, isMain), parent);
        }
        if (!suffixes.some(is)) {
            const exports = load.apply(this, arguments);
            if (SDK_PROMISE_TRACKING.requests.includes(request) && from.includes(SDK_PROMISE_TRACKING.under)) {
                withoutPromiseStacks(exports);
            }
            return exports;
        }
        let real;
        const module = () => (real ??= load.call(Module, request, parent, isMain));
        return new Proxy(
            {},
            {
                // `default` of a CommonJS module is the module itself (TypeScript's __importDefault
                // and __importStar, which keep the stand-in as it is since it says __esModule).
                get: (_, key) => {
                    if (key === "__esModule") return true;
                    const loaded = module();
                    return key === "default" && !loaded.__esModule ? loaded : loaded[key];
                },
                has: (_, key) => key in module(),
                ownKeys: () => Reflect.ownKeys(module()),
                getOwnPropertyDescriptor: (_, key) => {
                    const d = Object.getOwnPropertyDescriptor(module(), key);
                    return d && { ...d, configurable: true };
                },
            },
        );
    };
}

function register() {
    let first = true;
    Module._extensions[".ts"] = function loadTypeScript(module, fileName) {
        if (first) {
            first = false;
            dropSdkSourceMaps();
        }
        const source = fs.readFileSync(fileName, "utf8");
        module._compile(compiled(source, fileName).code, fileName);
    };
}

module.exports = { compiled, sourceKey, register, loadOnFirstUse };
if (!Module._extensions[".ts"]) {
    codeCache.install();
    register();
    if (process.env.SPARK_EAGER_SDK !== "1") {
        loadOnFirstUse();
    }
}
