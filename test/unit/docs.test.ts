/**
 * The documentation stays true to the repository: docs/configuration.md is what the generator
 * makes of the schema today, every relative link in README.md and docs/*.md reaches a file (and,
 * with a #fragment, a heading) of the repository, every file they name in inline code exists, and
 * the README stays short.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { REFERENCE_PATH, REGENERATE_COMMAND, headingAnchor, renderReference } from "../../scripts/gen-config-reference";

const ROOT = path.resolve(__dirname, "..", "..", "..");
const README_MAX_LINES = 250;

/** README.md and every Markdown file under docs/, relative to the repository root. */
function documents(): string[] {
    const docs = fs
        .readdirSync(path.join(ROOT, "docs"))
        .filter((name) => name.endsWith(".md"))
        .map((name) => `docs/${name}`);
    return ["README.md", ...docs.sort()];
}

/** Where links are checked: the documents, and the other guides they link to. */
const LINKED_GUIDES = ["ARCHITECTURE.md", "lab/README.md", "toolchain/README.md"];

/** The anchors of a Markdown file's headings (outside code blocks), with GitHub's -1, -2 for repeats. */
export function anchorsOf(markdown: string): Set<string> {
    const anchors = new Set<string>();
    const seen = new Map<string, number>();
    let fenced = false;
    for (const line of markdown.split("\n")) {
        if (/^\s*```/.test(line)) {
            fenced = !fenced;
            continue;
        }
        const heading = /^#{1,6}\s+(.*)$/.exec(line);
        if (fenced || !heading) {
            continue;
        }
        const base = headingAnchor(heading[1]);
        const count = seen.get(base) ?? 0;
        seen.set(base, count + 1);
        anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    return anchors;
}

/** Every link target `[text](target)` of a Markdown text, outside code blocks and inline code. */
export function linkTargets(markdown: string): string[] {
    const targets: string[] = [];
    let fenced = false;
    for (const line of markdown.split("\n")) {
        if (/^\s*```/.test(line)) {
            fenced = !fenced;
            continue;
        }
        if (fenced) {
            continue;
        }
        const text = line.replace(/`[^`]*`/g, "");
        for (const match of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
            targets.push(match[1]);
        }
    }
    return targets;
}

/** What is wrong with one relative link of `file`, or undefined when it reaches its target. */
export function linkProblem(root: string, file: string, target: string): string | undefined {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
        return undefined; // https:, mailto:, ...: not a file of the repository
    }
    const [filePart, fragment] = target.split("#", 2);
    const resolved = filePart === "" ? path.join(root, file) : path.resolve(path.dirname(path.join(root, file)), decodeURI(filePart));
    if (!resolved.startsWith(root + path.sep) && resolved !== root) {
        return `${file}: link ${target} leaves the repository`;
    }
    if (!fs.existsSync(resolved)) {
        return `${file}: link ${target} points to ${path.relative(root, resolved)}, which does not exist`;
    }
    if (fragment !== undefined && resolved.endsWith(".md") && !anchorsOf(fs.readFileSync(resolved, "utf8")).has(fragment)) {
        return `${file}: link ${target}: ${path.relative(root, resolved)} has no heading with the anchor #${fragment}`;
    }
    return undefined;
}

/** Directories that hold no file a document may name: dependencies, build output, local state. */
const SKIPPED_DIRS = new Set(["node_modules", "build", ".git", ".tools", ".pulumi-state", ".state"]);

/** The basename of every file of the repository's tree (dependencies, build output and local state left out). */
function repositoryBasenames(dir: string = ROOT, names: Set<string> = new Set()): Set<string> {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        if (entry.isDirectory()) {
            if (!SKIPPED_DIRS.has(entry.name)) {
                repositoryBasenames(path.join(dir, entry.name), names);
            }
        } else {
            names.add(entry.name);
        }
    }
    return names;
}

/** A path in inline code that names a file of the repository: under a top-level folder, or a bare `*.md`/`*.ts`/`*.sh`/`*.mjs` name. */
const REPO_PATH = /^(?:\.github|bench|components|config|docs|lab|scripts|stacks|test|toolchain)\/[\w./-]*$/;
const BARE_FILE = /^[\w.-]+\.(?:md|ts|sh|mjs)$/;

/**
 * Files a Markdown text names in inline code (outside code blocks) that the repository does not
 * hold: a path must exist from the root or from the document's folder; a bare name must be the
 * name of some file of the repository. Generated paths (`lab/.state/`) are left out.
 */
export function missingFileMentions(root: string, file: string, markdown: string, basenames: Set<string>): string[] {
    const missing: string[] = [];
    let fenced = false;
    for (const line of markdown.split("\n")) {
        if (/^\s*```/.test(line)) {
            fenced = !fenced;
            continue;
        }
        if (fenced) {
            continue;
        }
        for (const match of line.matchAll(/`([^`\s]+)`/g)) {
            const name = match[1];
            if (name.startsWith("lab/.state/")) {
                continue;
            }
            if (REPO_PATH.test(name)) {
                if (!fs.existsSync(path.join(root, name)) && !fs.existsSync(path.join(root, path.dirname(file), name))) {
                    missing.push(`${file}: \`${name}\` is not in the repository`);
                }
            } else if (BARE_FILE.test(name) && !basenames.has(name)) {
                missing.push(`${file}: \`${name}\` names no file of the repository`);
            }
        }
    }
    return missing;
}

describe("docs", () => {
    test(`${REFERENCE_PATH} is what the generator makes of the schema today`, () => {
        const committed = fs.readFileSync(path.join(ROOT, REFERENCE_PATH), "utf8");
        const fresh = renderReference(ROOT);
        if (committed !== fresh) {
            const a = committed.split("\n");
            const b = fresh.split("\n");
            const line = a.findIndex((text, i) => text !== b[i]);
            assert.fail(
                `${REFERENCE_PATH} is stale: run \`${REGENERATE_COMMAND}\` and commit it. ` +
                    `First difference at line ${line + 1}:\n  committed: ${a[line]}\n  generated: ${b[line]}`,
            );
        }
    });

    test("every relative link in README.md, docs/*.md and the other guides reaches a file (and heading) of the repository", () => {
        const problems: string[] = [];
        let checked = 0;
        for (const file of [...documents(), ...LINKED_GUIDES]) {
            for (const target of linkTargets(fs.readFileSync(path.join(ROOT, file), "utf8"))) {
                checked += 1;
                const problem = linkProblem(ROOT, file, target);
                if (problem) {
                    problems.push(problem);
                }
            }
        }
        assert.ok(checked > 0, "no links found: the link reader is broken");
        assert.deepEqual(problems, []);
    });

    test("every file README.md and docs/*.md name in inline code is in the repository", () => {
        const basenames = repositoryBasenames();
        const missing = documents().flatMap((file) => missingFileMentions(ROOT, file, fs.readFileSync(path.join(ROOT, file), "utf8"), basenames));
        assert.deepEqual(missing, []);
    });

    test("the link check catches a missing file and a missing heading", () => {
        assert.match(linkProblem(ROOT, "README.md", "docs/no-such-file.md") ?? "", /does not exist/);
        assert.match(linkProblem(ROOT, "README.md", "docs/configuration.md#no-such-heading") ?? "", /no heading/);
        assert.equal(linkProblem(ROOT, "README.md", "docs/configuration.md#top-level-keys"), undefined);
        assert.equal(linkProblem(ROOT, "README.md", "https://example.com/x"), undefined);
        assert.deepEqual(linkTargets("see [a](b.md) and `[c](d.md)`\n```\n[e](f.md)\n```\n[g](h.md#i)"), ["b.md", "h.md#i"]);
        assert.equal(headingAnchor("`nodes[].ssh` (kind: docker)"), "nodesssh-kind-docker");
        const basenames = new Set(["demo.sh"]);
        assert.deepEqual(missingFileMentions(ROOT, "README.md", "see `config.ts`, `DESIGN.md`, `demo.sh`, `lab/no-such.sh`, `lab/lab.sh`", basenames), [
            "README.md: `config.ts` names no file of the repository",
            "README.md: `DESIGN.md` names no file of the repository",
            "README.md: `lab/no-such.sh` is not in the repository",
        ]);
    });

    test(`README.md has at most ${README_MAX_LINES} lines`, () => {
        const lines = fs.readFileSync(path.join(ROOT, "README.md"), "utf8").split("\n").length - 1;
        assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines; move detail under docs/`);
    });
});
