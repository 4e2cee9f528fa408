/**
 * A tiny snapshot helper for the renderer tests: the rendered text is compared with
 * `test/<tier>/__snapshots__/<name>.snap` (beside the test file that runs), stored as the raw text (no JSON escaping), so a reviewer reads
 * the netplan file, the unit or the script exactly as a node gets it.
 *
 * - The snapshot exists: the text must equal it.
 * - The snapshot is missing: the test FAILS and says how to create it. Snapshots are written only
 *   when asked for (`UPDATE_SNAPSHOTS=1`), never silently, so CI cannot pass by writing them.
 * - `UPDATE_SNAPSHOTS=1`: the snapshot is (over)written with the text; review the diff, then commit.
 */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { findRepoRoot } from "./repoRoot";

/**
 * Where snapshots live: `__snapshots__` in the source folder of the test file this process runs
 * (build/test/unit/render.test.js reads test/unit/__snapshots__), never under build/.
 */
function snapshotDir(): string {
    const main = require.main?.filename;
    if (main === undefined) {
        throw new Error("snapshots are matched from a test file that node runs (require.main is unset)");
    }
    const root = findRepoRoot();
    const source = path.relative(path.join(root, "build"), path.dirname(main));
    if (source.startsWith("..") || path.isAbsolute(source)) {
        throw new Error(`${main} is not a compiled test under ${path.join(root, "build")}: cannot locate its snapshots`);
    }
    return path.join(root, source, "__snapshots__");
}

export const SNAPSHOT_DIR = snapshotDir();

const SNAPSHOT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** True when this run (re)writes snapshots instead of comparing with them. */
export function updatingSnapshots(): boolean {
    return process.env["UPDATE_SNAPSHOTS"] === "1";
}

/** The file of snapshot `name`. */
export function snapshotPath(name: string): string {
    if (!SNAPSHOT_NAME.test(name)) {
        throw new Error(`snapshot name ${JSON.stringify(name)} must be letters, digits, . _ - (it becomes a file name)`);
    }
    return path.join(SNAPSHOT_DIR, `${name}.snap`);
}

const used = new Set<string>();

/** Compares `actual` with snapshot `name` (or writes it under UPDATE_SNAPSHOTS=1). */
export function matchSnapshot(name: string, actual: string): void {
    const file = snapshotPath(name);
    used.add(name);
    const relative = path.relative(findRepoRoot(), file);
    if (updatingSnapshots()) {
        if (process.env["CI"]) {
            assert.fail(`UPDATE_SNAPSHOTS=1 is refused when CI is set: snapshots are written on a workstation, reviewed and committed (${relative})`);
        }
        fs.mkdirSync(SNAPSHOT_DIR, { recursive: true });
        fs.writeFileSync(file, actual);
        return;
    }
    if (!fs.existsSync(file)) {
        assert.fail(
            `snapshot ${relative} does not exist. Create it with ` +
                "`UPDATE_SNAPSHOTS=1 npm run test:unit` (or UPDATE_SNAPSHOTS=1 node --test build/test/<tier>/<file>.test.js), " +
                "read it to check it is right, and commit it.",
        );
    }
    const expected = fs.readFileSync(file, "utf8");
    assert.equal(
        actual,
        expected,
        `${relative} differs from the rendered text. If the change is intended, run the tests with UPDATE_SNAPSHOTS=1, review the diff and commit it.`,
    );
}

/**
 * Snapshot files whose name starts with `prefix` that no matchSnapshot call of this process used:
 * left behind by a renamed or removed test. Call it after every snapshot test of the file ran.
 */
export function unusedSnapshots(prefix: string): string[] {
    if (!fs.existsSync(SNAPSHOT_DIR)) {
        return [];
    }
    return fs
        .readdirSync(SNAPSHOT_DIR)
        .filter((file) => file.startsWith(prefix) && file.endsWith(".snap"))
        .map((file) => file.slice(0, -".snap".length))
        .filter((name) => !used.has(name))
        .sort();
}

/** Renders argv as snapshot text: one argument per line, JSON-quoted only where a line could not show it plainly. */
export function argvText(argv: readonly string[]): string {
    return argv.map((arg) => (arg === "" || /^\s|\s$|[\n\r\t]/.test(arg) ? JSON.stringify(arg) : arg)).join("\n") + "\n";
}
