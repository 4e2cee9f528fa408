// The pull-request side of .github/workflows/preview.yml: after scripts/preview-diff.sh has
// written <stack>.diff and <stack>.json under $PREVIEW_DIFF_DIR, writes each stack's diff to the
// job summary and keeps one comment per stack on the pull request, found again by its marker and
// edited in place. Both jobs of the workflow run it (through actions/github-script:
// `await require("./scripts/preview-comment.js")({ github, context, core })`); the job with the
// secrets runs after the one without, so its comment replaces the placeholder one (same marker).
//
// It comments only where the token can: a pull request from a branch of this repository. A fork's
// pull request gets a read-only token, and its diffs go to the job summary (and the artifact) only.
// From the environment:
//   PREVIEW_DIFF_DIR    where preview-diff.sh wrote the files (required)
//   PREVIEW_ARTIFACT    the name of the artifact that holds the whole diffs (default preview-diff)
//   PREVIEW_NOTE        a line under each heading (optional), e.g. what the job was not given

/**
 * The part of actions/github-script's arguments this uses.
 * @typedef {{ id: number, body?: string, user?: { type?: string } | null }} IssueComment
 * @typedef {{ owner: string, repo: string }} Repo
 * @typedef {{ number: number, head: { sha: string, repo: { full_name: string } | null } }} PullRequest
 * @typedef {{ payload: { pull_request?: PullRequest }, repo: Repo, serverUrl: string, runId: number }} Context
 * @typedef {{
 *   paginate: (method: unknown, params: Record<string, unknown>) => Promise<IssueComment[]>,
 *   rest: { issues: {
 *     listComments: unknown,
 *     updateComment: (params: Record<string, unknown>) => Promise<unknown>,
 *     createComment: (params: Record<string, unknown>) => Promise<unknown>,
 *   } },
 * }} GitHub
 * @typedef {{ addRaw: (text: string) => Summary, addEOL: () => Summary, write: () => Promise<unknown> }} Summary
 * @typedef {{ summary: Summary }} Core
 * @typedef {{ stack: string, ok: boolean, exitCode: number, secrets: string, backend: string, counts: Record<string, number> }} Meta
 */

const fs = require("fs");
const path = require("path");

const MARKER = "<!-- spark-cluster preview-diff stack=";
const LIMIT = 60000; // a comment holds 65536 characters

/**
 * @param {{ github: GitHub, context: Context, core: Core }} args
 * @returns {Promise<{ stacks: string[], commented: boolean }>}
 */
module.exports = async function previewComment({ github, context, core }) {
    const dir = process.env.PREVIEW_DIFF_DIR;
    if (!dir) {
        throw new Error("PREVIEW_DIFF_DIR is not set");
    }
    const artifact = process.env.PREVIEW_ARTIFACT || "preview-diff";
    const note = process.env.PREVIEW_NOTE || "";
    const pr = context.payload.pull_request;
    if (!pr) {
        throw new Error("not a pull_request event");
    }
    const canComment = pr.head.repo?.full_name === `${context.repo.owner}/${context.repo.repo}`;
    const sha = pr.head.sha.slice(0, 7);
    const run = `${context.serverUrl}/${context.repo.owner}/${context.repo.repo}/actions/runs/${context.runId}`;
    const stacks = fs.existsSync(dir)
        ? fs
              .readdirSync(dir)
              .filter((f) => f.endsWith(".json"))
              .map((f) => f.slice(0, -5))
              .sort()
        : [];
    const comments = canComment ? await github.paginate(github.rest.issues.listComments, { ...context.repo, issue_number: pr.number, per_page: 100 }) : [];
    /** @param {string} stack */
    const ours = (stack) => comments.find((c) => c.user?.type === "Bot" && c.body?.includes(`${MARKER}${stack} -->`));
    /** @param {string} stack @param {string} body */
    const upsert = async (stack, body) => {
        const existing = ours(stack);
        if (existing) {
            await github.rest.issues.updateComment({ ...context.repo, comment_id: existing.id, body });
        } else {
            await github.rest.issues.createComment({ ...context.repo, issue_number: pr.number, body });
        }
    };
    for (const stack of stacks) {
        /** @type {Meta} */
        const meta = JSON.parse(fs.readFileSync(path.join(dir, `${stack}.json`), "utf8"));
        let diff = fs.readFileSync(path.join(dir, `${stack}.diff`), "utf8");
        if (diff.length > LIMIT) {
            diff = `${diff.slice(0, LIMIT)}\n... cut at ${LIMIT} characters: the whole diff is in the run's "${artifact}" artifact`;
        }
        const counts =
            Object.entries(meta.counts)
                .map(([what, n]) => `${n} ${what}`)
                .join(", ") || "no summary";
        const against =
            meta.backend === "PULUMI_BACKEND_URL" ? "the deployed stack (PULUMI_BACKEND_URL)" : "nothing (throwaway backend: everything is a create)";
        /** @type {Record<string, string>} */
        const secretKinds = { real: "the stack's real secrets", placeholders: "placeholders for secrets not given (shown as [secret])", none: "none" };
        const secrets = secretKinds[meta.secrets] ?? meta.secrets;
        const body = [
            `${MARKER}${stack} -->`,
            `### ${meta.ok ? "✅" : "❌"} \`pulumi preview --diff\` of stack \`${stack}\`: ${meta.ok ? counts : `failed (exit ${meta.exitCode})`}`,
            `Commit ${sha}, diffed against ${against}; secrets: ${secrets}. No host was contacted and no SSH key was read. [Run](${run})`,
            ...(note ? ["", note] : []),
            "",
            "<details><summary>Diff</summary>",
            "",
            "````diff",
            diff.replace(/`{4,}/g, "```"),
            "````",
            "</details>",
        ].join("\n");
        await core.summary
            .addRaw(body.replace(`${MARKER}${stack} -->`, ""))
            .addEOL()
            .write();
        if (canComment) {
            await upsert(stack, body);
        }
    }
    // A stack removed by this pull request: say so in its old comment.
    if (canComment) {
        for (const c of comments) {
            const m = c.user?.type === "Bot" ? c.body?.match(/<!-- spark-cluster preview-diff stack=(\S+) -->/) : null;
            if (m && !stacks.includes(m[1])) {
                await upsert(m[1], `${MARKER}${m[1]} -->\n### Stack \`${m[1]}\` is no longer in stacks/ (commit ${sha})`);
            }
        }
    }
    return { stacks, commented: canComment };
};
