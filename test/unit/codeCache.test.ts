// toolchain/code-cache.js, V8's code cache for the modules the program loads (installed by
// toolchain/ts-register.js): an unchanged module is served from the cache, an edited one runs as
// edited even when the edit keeps its length and its mtime, a damaged or foreign entry is compiled
// again, and a module loads as it does without the cache.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { findRepoRoot } from "../support/repoRoot";

const ROOT = findRepoRoot();
const CODE_CACHE = path.join(ROOT, "toolchain", "code-cache.js");

interface CodeCache {
    entryKey(fileName: string, content: string): Buffer;
    entryPath(dir: string, fileName: string): string;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const codeCache = require(CODE_CACHE) as CodeCache;

interface Run {
    /** What the module exported, as JSON. */
    value: unknown;
    stats: { hits: number; compiled: number; installed: boolean };
}

/** Installs the cache (in `cache`) in a new Node.js, requires `lib` and reports both. */
function load(lib: string, cache: string, env: NodeJS.ProcessEnv = {}): Run {
    const script = [
        `const stats = require(${JSON.stringify(CODE_CACHE)}).install(${JSON.stringify(cache)});`,
        `Promise.resolve(require(${JSON.stringify(lib)})).then((value) =>`,
        "    process.stdout.write(JSON.stringify({ value, stats: { ...stats } })));",
    ].join("\n");
    const out = execFileSync(process.execPath, ["-e", script], { encoding: "utf8", env: { ...process.env, ...env }, timeout: 30_000 });
    return JSON.parse(out) as Run;
}

function withDir(fn: (dir: string) => void): void {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "code-cache-test-"));
    try {
        fn(dir);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

describe("code-cache: compile once, always the current source", () => {
    it("serves an unchanged module from the cache, and runs an edited one as edited though it keeps its length and mtime", () => {
        withDir((dir) => {
            const cache = path.join(dir, "cache");
            const lib = path.join(dir, "lib.js");
            fs.writeFileSync(lib, "module.exports = { answer: 1, twice: ((x) => x * 2)(21) };\n");
            assert.deepEqual(load(lib, cache), { value: { answer: 1, twice: 42 }, stats: { hits: 0, compiled: 1, installed: true } });
            assert.deepEqual(fs.readdirSync(cache), [path.basename(codeCache.entryPath(cache, lib))], "one entry, written at exit");
            assert.deepEqual(load(lib, cache).stats, { hits: 1, compiled: 0, installed: true });

            const { atime, mtime } = fs.statSync(lib);
            fs.writeFileSync(lib, "module.exports = { answer: 2, twice: ((x) => x * 3)(21) };\n");
            fs.utimesSync(lib, atime, mtime);
            assert.deepEqual(load(lib, cache), { value: { answer: 2, twice: 63 }, stats: { hits: 0, compiled: 1, installed: true } });
            assert.equal(fs.readdirSync(cache).length, 1, "the edited module's entry was replaced, not added");
            assert.deepEqual(load(lib, cache), { value: { answer: 2, twice: 63 }, stats: { hits: 1, compiled: 0, installed: true } });
        });
    });

    it("compiles again, and replaces, an entry that is cut short or that V8 rejects", () => {
        withDir((dir) => {
            const cache = path.join(dir, "cache");
            const lib = path.join(dir, "lib.js");
            const source = "module.exports = 'x'.repeat(3);\n";
            fs.writeFileSync(lib, source);
            load(lib, cache);
            const entry = codeCache.entryPath(cache, lib);

            fs.writeFileSync(entry, fs.readFileSync(entry).subarray(0, 10));
            assert.deepEqual(load(lib, cache), { value: "xxx", stats: { hits: 0, compiled: 1, installed: true } });
            assert.equal(load(lib, cache).stats.hits, 1);

            // The right key, but data V8 cannot use (as after a Node.js upgrade under the same key).
            fs.writeFileSync(entry, Buffer.concat([codeCache.entryKey(lib, source), Buffer.from("not V8's cached data")]));
            assert.deepEqual(load(lib, cache), { value: "xxx", stats: { hits: 0, compiled: 1, installed: true } });
            assert.equal(load(lib, cache).stats.hits, 1);
        });
    });

    it("gives a module what Node.js gives it: require and its helpers, its names, and its lines in a stack trace", () => {
        withDir((dir) => {
            const cache = path.join(dir, "cache");
            const lib = path.join(dir, "lib.js");
            fs.writeFileSync(path.join(dir, "dep.js"), "exports.name = 'dep';\n");
            fs.writeFileSync(
                lib,
                [
                    "const dep = require('./dep');",
                    "const thisIsExports = this === module.exports;",
                    "function where() {",
                    "    return new Error('here').stack.split('\\n')[1];",
                    "}",
                    "const p = require('node:path');",
                    "module.exports = {",
                    "    dep: dep.name,",
                    "    resolved: require.resolve('./dep') === p.join(__dirname, 'dep.js'),",
                    "    paths: Array.isArray(require.resolve.paths('x')),",
                    "    cached: require.cache[__filename] === module,",
                    "    thisIsExports,",
                    "    main: require.main === process.mainModule,",
                    "    extensions: require.extensions === require('node:module')._extensions,",
                    "    file: __filename === " + JSON.stringify(lib) + " && __dirname === " + JSON.stringify(dir) + ",",
                    "    where: where().trim(),",
                    "};",
                    "",
                ].join("\n"),
            );
            const expected = {
                dep: "dep",
                resolved: true,
                paths: true,
                cached: true,
                thisIsExports: true,
                main: true,
                extensions: true,
                file: true,
                where: `at where (${lib}:4:12)`,
            };
            const first = load(lib, cache);
            assert.deepEqual(first, { value: expected, stats: { hits: 0, compiled: 2, installed: true } });
            assert.deepEqual(load(lib, cache), { value: expected, stats: { hits: 2, compiled: 0, installed: true } });
            assert.deepEqual(load(lib, cache, { SPARK_CODE_CACHE: "0" }), { value: expected, stats: { hits: 0, compiled: 0, installed: false } });
        });
    });

    it("leaves an ES module, a syntax error and a module that calls import() to Node.js, with the same outcome as without the cache", () => {
        withDir((dir) => {
            const cache = path.join(dir, "cache");
            const esm = path.join(dir, "esm.mjs");
            const broken = path.join(dir, "broken.js");
            const dynamic = path.join(dir, "dynamic.js");
            fs.writeFileSync(esm, "export const answer = 42;\n");
            fs.writeFileSync(broken, "module.exports = {;\n");
            // As the SDK's launcher does it: import() inside a string it evals.
            fs.writeFileSync(
                dynamic,
                'const load = (0, eval)("u => import(u)");\nexports.sep = require("node:path").sep;\nload("node:os").then((os) => console.log(typeof os.cpus));\n',
            );
            const run = (lib: string, env: NodeJS.ProcessEnv = {}) => {
                const r = spawnSync(
                    process.execPath,
                    [
                        "-e",
                        `require(${JSON.stringify(CODE_CACHE)}).install(${JSON.stringify(cache)}); console.log(JSON.stringify(require(${JSON.stringify(lib)})))`,
                    ],
                    { encoding: "utf8", env: { ...process.env, ...env }, timeout: 30_000 },
                );
                // The error's first lines (its place, the offending line, its message), without the stack.
                return { status: r.status, stdout: r.stdout, error: r.stderr.split("\n").slice(0, 5).join("\n") };
            };
            for (const lib of [esm, broken, dynamic]) {
                assert.deepEqual(run(lib), run(lib, { SPARK_CODE_CACHE: "0" }), path.basename(lib));
            }
            assert.equal(run(esm).stdout, '{"answer":42}\n');
            assert.match(run(broken).error, /broken\.js:1[\s\S]*SyntaxError/);
            // Twice: a second run would find an entry, had the first written one.
            for (let i = 0; i < 2; i++) assert.deepEqual(run(dynamic), { status: 0, stdout: '{"sep":"/"}\nfunction\n', error: "" });
            assert.equal(fs.existsSync(cache), false, "nothing cached for any of them");
        });
    });

    it("runs on when the cache cannot be written", () => {
        withDir((dir) => {
            const lib = path.join(dir, "lib.js");
            fs.writeFileSync(lib, "module.exports = 7;\n");
            const notADir = path.join(dir, "file");
            fs.writeFileSync(notADir, "");
            assert.deepEqual(load(lib, path.join(notADir, "cache")), { value: 7, stats: { hits: 0, compiled: 1, installed: true } });
        });
    });

    it("is installed by ts-register.js, in SPARK_CODE_CACHE_DIR when set", () => {
        withDir((dir) => {
            const cache = path.join(dir, "cache");
            const lib = path.join(dir, "lib.js");
            fs.writeFileSync(lib, "module.exports = 1;\n");
            execFileSync(process.execPath, ["--require", path.join(ROOT, "toolchain", "ts-register.js"), "-e", `require(${JSON.stringify(lib)})`], {
                env: { ...process.env, SPARK_CODE_CACHE_DIR: cache, SPARK_TS_CACHE_DIR: path.join(dir, "ts") },
                timeout: 30_000,
            });
            // The lib's entry (and the -e script's own: Node.js compiles it as a module too).
            assert.ok(fs.readdirSync(cache).includes(path.basename(codeCache.entryPath(cache, lib))));
        });
    });
});
