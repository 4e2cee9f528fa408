/** Where the repository is, for tests that read its files: the same from test/ and build/test/. */
import * as fs from "node:fs";
import * as path from "node:path";

/** The nearest folder at or above `start` that holds package.json: the repository root. */
export function findRepoRoot(start: string = __dirname): string {
    let dir = start;
    while (!fs.existsSync(path.join(dir, "package.json"))) {
        const parent = path.dirname(dir);
        if (parent === dir) {
            throw new Error(`no package.json above ${start}: cannot find the repository root`);
        }
        dir = parent;
    }
    return dir;
}

/** The repository root. */
export const REPO_ROOT = findRepoRoot();
