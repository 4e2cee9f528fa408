// V8's code cache for the modules the program loads (the SDK, gRPC, zod, the program itself), so
// that a run whose modules did not change does not compile them again. toolchain/ts-register.js
// installs it when Node.js runs the program (Pulumi.yaml's nodeargs); SPARK_CODE_CACHE=0 turns it
// off.
//
// Why: compiling is a fixed part of every `pulumi up`, `preview` and no-op: Node.js compiles each
// module's top level as it loads, and each function when it is first called. The SDK and what it
// loads are about 730 modules; their compiling was 0.1 of the program's 0.7 CPU s on the lab's
// 2 cores (docs/speed.md, "What the program itself costs"). The cache is written when the process
// exits, after the run, so it holds the functions the run compiled as well as the top levels
// (`vm.Script#createCachedData`); a cache taken as each module is compiled (what
// v8-compile-cache-lib does) holds only the top levels, and measured no faster.
//
// Freshness: an entry is used only when it carries the SHA-256 of the module's path and text, with
// Node.js's and V8's versions; otherwise the module is compiled from its text and the entry
// replaced at exit. V8 checks a cache against the source's length only, so an edited module that
// kept its length would otherwise run with the code of its old text. One entry per module path
// (named by a hash of the path), so the cache does not grow with edits; entries are written to a
// temporary file and renamed, so two runs at once never read half an entry. A cache that cannot be
// read or written is passed over: the module is compiled as usual.
//
// What loads differently: each module is compiled with vm.Script (Node.js's own wrapper) instead
// of Node.js's internal compile, and gets a `require` built from the module as Node.js builds it
// (`require.resolve`, `.resolve.paths`, `.main`, `.extensions`, `.cache`). Left to Node.js itself:
// the main module (whose compile holds Node.js's stat cache for the requires under it), ES modules
// (`format` "module", and a `.js` file that only parses as one), modules that may call `import()`
// (DYNAMIC_IMPORT below), and every module under a policy or `--inspect-brk` (the cache is then
// not installed). Code a cached module builds at run time and evals with an `import()` whose
// text is not in the module (`eval("imp" + "ort(x)")`) would fail; nothing the program loads
// does that. A stack trace's columns on a module's first line are shifted by the wrapper's
// length; lines are unchanged.
"use strict";

const crypto = require("node:crypto");
const fs = require("node:fs");
const Module = require("node:module");
const path = require("node:path");
const v8 = require("node:v8");
const vm = require("node:vm");

/**
 * Node.js's CommonJS loader, with the internals this file uses (lib/internal/modules/cjs/loader.js).
 * @typedef {typeof Module & {
 *   _resolveFilename(request: string, parent: NodeJS.Module, isMain: boolean, options?: { paths?: string[] }): string,
 *   _resolveLookupPaths(request: string, parent: NodeJS.Module): string[] | null,
 *   _extensions: NodeJS.RequireExtensions,
 *   _cache: Record<string, NodeJS.Module>,
 *   wrap(content: string): string,
 * }} Loader
 * @typedef {NodeJS.Module & { _compile(content: string, fileName: string, ...rest: unknown[]): unknown }} CompilableModule
 * @typedef {{ file: string, key: Buffer, script: vm.Script }} PendingEntry
 */
const loader = /** @type {Loader} */ (Module);
const modulePrototype = /** @type {CompilableModule} */ (Module.prototype);

/** Bump when an entry's layout changes. */
const FORMAT = "spark-cluster-code-cache v1";
/** An entry: this many bytes of SHA-256 (see entryKey), then V8's cached data. */
const KEY_BYTES = 32;

/**
 * A cache directory: the one `envName` names, else node_modules/.cache/`name` beside this project.
 * Shared with ts-register.js, whose transpiled modules are kept the same way.
 * @param {string} envName
 * @param {string} name
 */
function cacheDirFrom(envName, name) {
    return process.env[envName] || path.join(__dirname, "..", "node_modules", ".cache", name);
}

/** Where the entries are kept: SPARK_CODE_CACHE_DIR, else node_modules/.cache beside this project. */
function cacheDir() {
    return cacheDirFrom("SPARK_CODE_CACHE_DIR", "spark-cluster-v8");
}

/**
 * The key an entry must carry to stand for `content` at `fileName` under this Node.js.
 * @param {string} fileName
 * @param {string} content
 */
function entryKey(fileName, content) {
    return crypto.createHash("sha256").update(`${FORMAT}\0${process.version}\0${process.versions.v8}\0${fileName}\0`).update(content).digest();
}

/**
 * The entry's path for a module file: named by a hash of its path, so one entry per file.
 * @param {string} dir
 * @param {string} fileName
 */
function entryPath(dir, fileName, extension = ".v8") {
    return path.join(dir, `${crypto.createHash("sha256").update(fileName).digest("hex").slice(0, 32)}${extension}`);
}

/**
 * Writes `data` to `file` through a temporary file and a rename, so no reader sees half of it.
 * @param {string} file
 * @param {string | Uint8Array} data
 */
function writeWhole(file, data) {
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, data);
    fs.renameSync(tmp, file);
}

/**
 * V8's cached data for `fileName` when its entry carries `key`, else undefined.
 * @param {string} file
 * @param {Buffer} key
 */
function readEntry(file, key) {
    try {
        const data = fs.readFileSync(file);
        if (data.length > KEY_BYTES && data.subarray(0, KEY_BYTES).equals(key)) {
            return data.subarray(KEY_BYTES);
        }
    } catch {
        // no entry yet, or none readable
    }
    return undefined;
}

/**
 * Writes each script's cached data (with its key) to its entry; what cannot be written is skipped.
 * @param {string} dir
 * @param {PendingEntry[]} pending
 */
function writeEntries(dir, pending) {
    if (!pending.length) return;
    try {
        fs.mkdirSync(dir, { recursive: true });
    } catch {
        return;
    }
    for (const { file, key, script } of pending) {
        try {
            writeWhole(file, Buffer.concat([key, script.createCachedData()]));
        } catch {
            // not cached this time; the next run compiles it again
        }
    }
}

/**
 * The `require` Node.js hands a module (lib/internal/modules/helpers.js, makeRequireFunction).
 * @param {NodeJS.Module} module
 */
function requireFor(module) {
    /** @param {string} id */
    const require = (id) => module.require(id);
    /**
     * @param {string} request
     * @param {{ paths?: string[] }} [options]
     */
    const resolve = (request, options) => loader._resolveFilename(request, module, false, options);
    /** @param {string} request */
    resolve.paths = (request) => loader._resolveLookupPaths(request, module);
    require.resolve = resolve;
    require.main = process.mainModule;
    require.extensions = loader._extensions;
    require.cache = loader._cache;
    return require;
}

/** Whether this Node.js has the loader internals the cache needs (else it is not installed). */
function loaderHasInternals() {
    return (
        typeof modulePrototype._compile === "function" &&
        typeof loader.wrap === "function" &&
        typeof loader._resolveFilename === "function" &&
        typeof loader._resolveLookupPaths === "function" &&
        typeof loader._extensions === "object" &&
        typeof loader._cache === "object"
    );
}

/** Node.js's flags under which its own compile does more than compile (a debugger, a policy). */
function nodeFlagsNeedOwnCompile() {
    const flags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)];
    return flags.some((f) => f.startsWith("--inspect-brk") || f.startsWith("--experimental-policy"));
}

/**
 * A module that may call `import()`: its text has `import(` (also inside a string it evals, as the
 * SDK's launcher does). A vm.Script hands such a call to Node.js's loader only with vm's
 * USE_MAIN_CONTEXT_DEFAULT_LOADER, which Node.js 20 calls experimental (a warning on the
 * program's output) and loses when the script comes from cached data; these few modules are
 * compiled by Node.js itself, uncached.
 */
const DYNAMIC_IMPORT = /\bimport\s*\(/;

/**
 * Compiles CommonJS modules through the cache from now on. Counts what it did in `stats` (hits:
 * entries used; compiled: modules compiled from their text, whose entries are written at exit).
 * Does nothing under SPARK_CODE_CACHE=0, under `--inspect-brk` or a policy, and on a Node.js
 * whose loader lacks an internal it uses (loaderHasInternals).
 */
function install(dir = cacheDir()) {
    const stats = { hits: 0, compiled: 0, installed: false };
    if (process.env.SPARK_CODE_CACHE === "0" || nodeFlagsNeedOwnCompile() || !loaderHasInternals()) {
        return stats;
    }
    stats.installed = true;
    // The SDK sets this flag as it loads (runtime/closure/v8.js), and V8 rejects code cached
    // under other flags than the current ones: set first, every module is compiled, cached and
    // read back under the same flags. It only lets V8 parse `%Name(...)` calls, which are not
    // valid JavaScript without it, so no valid module parses differently.
    v8.setFlagsFromString("--allow-natives-syntax");
    /** @type {PendingEntry[]} */
    const pending = [];
    const compile = modulePrototype._compile;
    /**
     * @this {CompilableModule}
     * @param {string} content
     * @param {string} fileName
     * @param {unknown} [format] Node.js's module format ("commonjs", "module", ...; undefined before it knows)
     * @param {unknown[]} rest what else a later Node.js passes, handed on as it is
     */
    modulePrototype._compile = function compileCached(content, fileName, format, ...rest) {
        if ((format !== undefined && format !== "commonjs") || this.id === "." || DYNAMIC_IMPORT.test(content)) {
            return compile.call(this, content, fileName, format, ...rest);
        }
        const key = entryKey(fileName, content);
        const file = entryPath(dir, fileName);
        const cachedData = readEntry(file, key);
        let script;
        try {
            script = new vm.Script(loader.wrap(content), { filename: fileName, cachedData });
        } catch (err) {
            // Not CommonJS (an ES module in a `.js` file): Node.js's own compile decides.
            if (err instanceof SyntaxError) return compile.call(this, content, fileName, format, ...rest);
            throw err;
        }
        if (cachedData && !script.cachedDataRejected) {
            stats.hits++;
        } else {
            stats.compiled++;
            pending.push({ file, key, script });
        }
        const wrapper = script.runInThisContext({ displayErrors: true });
        return wrapper.call(this.exports, this.exports, requireFor(this), this, fileName, path.dirname(fileName));
    };
    process.once("exit", () => writeEntries(dir, pending));
    return stats;
}

module.exports = { install, entryKey, entryPath, cacheDirFrom, writeWhole };
