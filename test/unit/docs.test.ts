/**
 * The documentation stays true to the repository: docs/configuration.md is what the generator
 * makes of the schema today, every relative link in README.md and docs/*.md reaches a file (and,
 * with a #fragment, a heading) of the repository, and the README stays short.
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

    test("every relative link in README.md and docs/*.md reaches a file (and heading) of the repository", () => {
        const problems: string[] = [];
        let checked = 0;
        for (const file of documents()) {
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

    test("the link check catches a missing file and a missing heading", () => {
        assert.match(linkProblem(ROOT, "README.md", "docs/no-such-file.md") ?? "", /does not exist/);
        assert.match(linkProblem(ROOT, "README.md", "docs/configuration.md#no-such-heading") ?? "", /no heading/);
        assert.equal(linkProblem(ROOT, "README.md", "docs/configuration.md#top-level-keys"), undefined);
        assert.equal(linkProblem(ROOT, "README.md", "https://example.com/x"), undefined);
        assert.deepEqual(linkTargets("see [a](b.md) and `[c](d.md)`\n```\n[e](f.md)\n```\n[g](h.md#i)"), ["b.md", "h.md#i"]);
        assert.equal(headingAnchor("`nodes[].ssh` (kind: docker)"), "nodesssh-kind-docker");
    });

    test(`README.md has at most ${README_MAX_LINES} lines`, () => {
        const lines = fs.readFileSync(path.join(ROOT, "README.md"), "utf8").split("\n").length - 1;
        assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines; move detail under docs/`);
    });
});
