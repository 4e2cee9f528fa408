/**
 * No file of the repository cites a path of the repository that is not there (a comment that
 * names a test file after the file moved), or a source outside the repository (the design
 * workspace's "shared" folder, which a clone does not have: cite the public source itself).
 * test/unit/docs.test.ts checks the links and inline code of the Markdown documents; this reads
 * every text file, code comments included.
 *
 * A cited path is a word that starts with one of the repository's top-level folders and ends in a
 * file name with an extension (`config/fitPlanner.ts`, `lab/README.md`); paths the project
 * generates (`lab/.state/…`, `bench/out/…`) and the README's example of a stack file the user
 * copies are not checked. Any word that starts with the workspace's folder and a slash is a
 * citation of the workspace.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { findRepoRoot } from "../support/repoRoot";

const ROOT = findRepoRoot();

/** Folders that hold no file of the repository: dependencies, build output, local state. */
const SKIPPED_DIRS = new Set(["node_modules", "build", ".git", ".tools", ".pulumi-state", ".state", "test-artifacts"]);
/** Generated data, not text anyone cites from. */
const SKIPPED_FILES = new Set(["package-lock.json"]);
const SKIPPED_UNDER = ["config/vllmFlags/", "config/sglangFlags/"];
/** Extensions of the files a citation names. */
const EXTENSIONS = ["ts", "js", "mjs", "cjs", "md", "sh", "py", "json", "yaml", "yml", "env", "go", "snap", "txt", "conf", "toml", "mod", "sum"];
/** Paths that are cited on purpose though they are not in the repository. */
const NOT_CHECKED = [
    /^lab\/\.state\//, // the lab's state, made by lab/lab.sh
    /^bench\/out\//, // the benchmark's output
    /^stacks\/Pulumi\.my-pair\.yaml$/, // the README's example of the copy a user makes of a stack file
    /(^|\/)no-such[\w.-]*$/, // tests' examples of a missing file
    // Rendered into the head's rsyncd.conf (components/render/modelSync.ts), text on the hosts of
    // deployed stacks: changing it would change their model sync step. The model sync's steps are
    // planned in components/plan/clusterPlan.ts since.
    /^components\/modelSync\.ts$/,
];
/** Outside the repository: the workspace the project was designed in. */
const WORKSPACE = "shared";

/** The repository's top-level folders. */
function topFolders(root: string): string[] {
    return fs
        .readdirSync(root, { withFileTypes: true })
        .filter((e) => e.isDirectory() && !SKIPPED_DIRS.has(e.name))
        .map((e) => e.name);
}

/** A pattern for the cited paths under `folders` (see the file's comment), and any word under the workspace's folder. */
export function citationPattern(folders: readonly string[]): RegExp {
    const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const file = `(?:${folders.map(escape).join("|")})/[\\w.-]*(?:/[\\w.-]+)*\\.(?:${EXTENSIONS.join("|")})(?![\\w/-])`;
    const workspace = `${WORKSPACE}/[\\w.-]*(?:/[\\w.-]+)*`;
    return new RegExp(`(?<![\\w./@-])(${file}|${workspace})`, "g");
}

/** What is wrong with the paths one file's text cites (`file` relative to `root`). */
export function missingCitations(root: string, file: string, text: string, pattern: RegExp): string[] {
    const problems: string[] = [];
    text.split("\n").forEach((line, i) => {
        for (const match of line.matchAll(pattern)) {
            const cited = match[1].replace(/\.+$/, ""); // a sentence's full stop is not part of the path
            const where = `${file}:${i + 1}`;
            if (cited.startsWith(`${WORKSPACE}/`)) {
                problems.push(`${where}: cites ${cited}, which is outside the repository (cite the public source itself)`);
            } else if (
                !NOT_CHECKED.some((re) => re.test(cited)) &&
                !fs.existsSync(path.join(root, cited)) &&
                !fs.existsSync(path.join(root, path.dirname(file), cited))
            ) {
                problems.push(`${where}: cites ${cited}, which is not in the repository`);
            }
        }
    });
    return problems;
}

/** Every text file of the repository, relative to `root` (binary files: those with a NUL byte). */
function textFiles(root: string, dir = ""): string[] {
    const out: string[] = [];
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
        const rel = dir === "" ? entry.name : `${dir}/${entry.name}`;
        if (entry.isDirectory()) {
            if (!SKIPPED_DIRS.has(entry.name)) out.push(...textFiles(root, rel));
        } else if (entry.isFile() && !SKIPPED_FILES.has(entry.name) && !SKIPPED_UNDER.some((p) => rel.startsWith(p))) {
            const bytes = fs.readFileSync(path.join(root, rel));
            if (!bytes.includes(0)) out.push(rel);
        }
    }
    return out;
}

describe("cited paths", () => {
    test("no file cites a path of the repository that is not there, or the design workspace", () => {
        const pattern = citationPattern(topFolders(ROOT));
        const files = textFiles(ROOT);
        assert.ok(files.length > 200, `only ${files.length} text files found: the walk is broken`);
        const problems = files.flatMap((file) => missingCitations(ROOT, file, fs.readFileSync(path.join(ROOT, file), "utf8"), pattern));
        assert.deepEqual(problems, []);
    });

    test("the check catches a moved file and a citation of the workspace, and passes what exists", () => {
        const pattern = citationPattern(["config", "test", "lab"]);
        // Built from parts, so that this file does not cite them itself.
        const moved = ["test", "unit", "noSuchFile.test.ts"].join("/");
        const facts = [WORKSPACE, "FACTS.md"].join("/");
        const seeds = [WORKSPACE, "seeds"].join("/");
        const text = [
            `see ${moved} and config/fitPlanner.ts,`,
            `(${facts}, "Unified memory") and ${seeds}.`,
            "vLLM's vllm/config/model.py and https://example.com/config/x.md are not ours; lab/.state/id_ed25519 is made by the lab",
        ].join("\n");
        assert.deepEqual(missingCitations(ROOT, "config/no-such-file.ts", text, pattern), [
            `config/no-such-file.ts:1: cites ${moved}, which is not in the repository`,
            `config/no-such-file.ts:2: cites ${facts}, which is outside the repository (cite the public source itself)`,
            `config/no-such-file.ts:2: cites ${seeds}, which is outside the repository (cite the public source itself)`,
        ]);
    });
});
