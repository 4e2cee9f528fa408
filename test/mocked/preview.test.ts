/**
 * "See what changed" without the hosts, the SSH key or the secrets:
 *
 * - the program at preview puts a placeholder where a key *file*'s text goes and has the engine
 *   ignore it (`ignoreChanges: ["connection.privateKey"]` on every step), so a
 *   converged stack previews with no change; at `up` it reads the file and ignores nothing.
 *   Checked on Pulumi's mock monitor: this file is also its own harness (mocks are
 *   process-global), run as `node build/test/mocked/preview.test.js` with SPARK_PREVIEW_HARNESS_OUT set;
 * - scripts/preview-diff.sh previews every stack in stacks/ in a network namespace with only
 *   loopback, with no key file, and prints neither a placeholder nor a real secret;
 * - actionlint accepts the workflow that posts those diffs on pull requests; its every action is
 *   pinned by a commit, the job that runs for forks' pull requests has no secret, and the one with
 *   secrets runs in a protected environment for this repository's branches only;
 * - scripts/preview-comment.js keeps one comment per stack (the workflow's two jobs both run it).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import * as yaml from "js-yaml";
import {
    LAB_IBDEV2NETDEV,
    MOCK_HOST_KEY,
    SECRET_SIG,
    SECRET_SIG_KEY,
    allRegistered,
    message,
    runProgramInStack,
    setCommandMocks,
} from "../support/mockHarness";

const root = path.resolve(__dirname, "..", "..", "..");
const tools = path.join(root, ".tools", "bin");
const stacksDir = path.join(root, "stacks");
const workflow = path.join(root, ".github", "workflows", "preview.yml");
const ciDoc = path.join(root, "docs", "ci-previews.md");
const commentScript = path.join(root, "scripts", "preview-comment.js");

const API_KEY = "preview-test-api-key-0123456789abcdef";

// ---------------------------------------------------------------------------------------------
// The harness: the program (index.ts) on the mock monitor, preview or up
// ---------------------------------------------------------------------------------------------

/** What the harness writes back. */
interface HarnessResult {
    /** Every step: its connection input as the engine receives it, and its ignoreChanges. */
    commands: Record<string, { connection?: unknown; ignoreChanges: string[] }>;
    /** ignoreChanges of every other resource that has any. */
    otherIgnoreChanges: Record<string, string[]>;
    errors: string[];
}

const HARNESS_OUT = "SPARK_PREVIEW_HARNESS_OUT";
const HARNESS_MODE = "SPARK_PREVIEW_HARNESS_MODE";

/**
 * The `stdout` a mocked step reports (like the lab: a Spark's twins are Up). The SSH step prints the
 * host key and records no `presentedHostKey`, as one last run before the provider recorded it: its
 * later steps are pinned to the printed key at preview as at up (an output a state lacks is unknown
 * in a preview; components/materialize.ts, recordedPresentedKey).
 */
function mockStdout(name: string): string {
    if (name.endsWith("-ssh")) {
        return `host-key=${MOCK_HOST_KEY}\n`;
    }
    if (name.endsWith("-probe")) {
        return name.startsWith("thor-") ? "" : LAB_IBDEV2NETDEV;
    }
    return name.endsWith("-roce-apply") ? "status=enabled: test" : "";
}

async function runHarness(out: string, preview: boolean): Promise<void> {
    const result: HarnessResult = { commands: {}, otherIgnoreChanges: {}, errors: [] };
    process.on("unhandledRejection", (err) => result.errors.push(message(err)));
    await setCommandMocks({
        stdout: mockStdout,
        onResource: (args) => {
            if (args.type === "spark-remote:index:Step") {
                result.commands[args.name] = { ignoreChanges: result.commands[args.name]?.ignoreChanges ?? [], connection: args.inputs.connection };
            }
        },
        stack: process.env.SPARK_PREVIEW_HARNESS_STACK ?? "dev",
        preview,
    });
    const created: pulumi.Resource[] = [];
    // The program as the language host loads it; this transformation sees the final options.
    await runProgramInStack((args) => {
        created.push(args.resource);
        const ignore = args.opts.ignoreChanges ?? [];
        if (args.type === "spark-remote:index:Step") {
            result.commands[args.name] = { ...result.commands[args.name], ignoreChanges: ignore };
        } else if (ignore.length > 0) {
            result.otherIgnoreChanges[args.name] = ignore;
        }
        return undefined;
    }, result.errors);
    // Every registration has reached the mocks once every URN is known (bounded).
    if (!(await allRegistered(created, 15_000)) && result.errors.length === 0) {
        result.errors.push("not every resource registered within 15 s");
    }
    fs.writeFileSync(out, JSON.stringify(result));
    process.exit(0);
}

/** Runs the program of `stackFile`'s config on the mocks; `values` override keys (no prefix), `secrets` are set as secrets. */
function program(mode: "preview" | "up", stackFile: string, values: Record<string, unknown>, secrets: Record<string, string>): HarnessResult {
    const stackConfig = (yaml.load(fs.readFileSync(stackFile, "utf8")) as { config: Record<string, unknown> }).config;
    const config: Record<string, string> = {};
    for (const [key, value] of Object.entries({ ...stackConfig, ...prefixed(values), ...prefixed(secrets) })) {
        if (value !== undefined) {
            config[key] = typeof value === "string" ? value : JSON.stringify(value);
        }
    }
    const stack = path.basename(stackFile).replace(/^Pulumi\.|\.yaml$/g, "");
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-preview-harness-"));
    try {
        const out = path.join(dir, "result.json");
        const run = spawnSync(process.execPath, [__filename], {
            cwd: root,
            encoding: "utf8",
            timeout: 60_000,
            env: {
                ...process.env,
                [HARNESS_OUT]: out,
                [HARNESS_MODE]: mode,
                SPARK_PREVIEW_HARNESS_STACK: stack,
                PULUMI_CONFIG: JSON.stringify(config),
                PULUMI_CONFIG_SECRET_KEYS: JSON.stringify(Object.keys(prefixed(secrets))),
            },
        });
        assert.ok(fs.existsSync(out), `the harness wrote no result (exit ${run.status}):\n${run.stderr}`);
        return JSON.parse(fs.readFileSync(out, "utf8")) as HarnessResult;
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

function prefixed(values: Record<string, unknown>): Record<string, unknown> {
    return Object.fromEntries(Object.entries(values).map(([k, v]) => [`spark-cluster:${k}`, v]));
}

/** A serialized secret's value (and that it was one). */
function unsecret(value: unknown): Record<string, unknown> {
    assert.ok(typeof value === "object" && value !== null, "connection is an object");
    const wrapped = value as Record<string, unknown>;
    assert.equal(wrapped[SECRET_SIG_KEY], SECRET_SIG, "the connection is a secret");
    return wrapped.value as Record<string, unknown>;
}

function stackFiles(): string[] {
    return fs
        .readdirSync(stacksDir)
        .filter((f) => /^Pulumi\..+\.yaml$/.test(f))
        .sort()
        .map((f) => path.join(stacksDir, f));
}

function stackName(file: string): string {
    return path.basename(file).replace(/^Pulumi\.|\.yaml$/g, "");
}

// ---------------------------------------------------------------------------------------------
// The workflow (.github/workflows/preview.yml) as js-yaml reads it
// ---------------------------------------------------------------------------------------------

interface WorkflowStep {
    name?: string;
    id?: string;
    uses?: string;
    run?: string;
    env?: Record<string, unknown>;
    with?: Record<string, unknown>;
}

interface WorkflowJob {
    if?: string;
    environment?: string | { name?: string };
    needs?: string | string[];
    permissions?: unknown;
    uses?: string;
    secrets?: unknown;
    steps?: WorkflowStep[];
}

interface Workflow {
    on: unknown;
    permissions?: unknown;
    jobs: Record<string, WorkflowJob>;
}

/** The condition that keeps a job to pull requests from this repository's own branches. */
const SAME_REPOSITORY = "github.event.pull_request.head.repo.full_name == github.repository";

function readWorkflow(): Workflow {
    return yaml.load(fs.readFileSync(workflow, "utf8")) as Workflow;
}

/** Whether the job runs only for a same-repository pull request: its `if:` requires SAME_REPOSITORY, with no `||` beside it. */
function sameRepositoryOnly(job: WorkflowJob): boolean {
    const condition = typeof job.if === "string" ? job.if : "";
    return condition.includes(SAME_REPOSITORY) && !condition.includes("||");
}

/** Whether a part of the workflow reads the `secrets` context (`${{ secrets.X }}`, `toJSON(secrets)`) or passes them on (`secrets: inherit`). */
function readsSecrets(part: unknown): boolean {
    const text = JSON.stringify(part ?? null);
    return /\$\{\{[^}]*\bsecrets\b/.test(text) || (typeof part === "object" && part !== null && "secrets" in part);
}

function environmentName(job: WorkflowJob): string | undefined {
    return typeof job.environment === "string" ? job.environment : job.environment?.name;
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

function tests(): void {
    describe("preview needs no SSH key file (components/nodeConnection.ts)", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-preview-key-"));
        const keyFile = path.join(dir, "id_ed25519");
        const missing = path.join(dir, "no-such-key");

        it("a preview reads no key file; up reads it; after ignoreChanges the preview's connection is up's (no diff)", (t) => {
            execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", keyFile]);
            const keyText = fs.readFileSync(keyFile, "utf8");
            t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
            for (const file of stackFiles()) {
                const stack = stackName(file);
                const preview = program("preview", file, { sshPrivateKeyPath: missing }, { apiKey: API_KEY });
                const up = program("up", file, { sshPrivateKeyPath: keyFile }, { apiKey: API_KEY });
                assert.deepEqual(preview.errors, [], `${stack}: preview without the key file`);
                assert.deepEqual(up.errors, [], `${stack}: up with the key file`);
                const names = Object.keys(up.commands).sort();
                assert.ok(names.length > 5, `${stack}: the program registers its commands`);
                assert.deepEqual(Object.keys(preview.commands).sort(), names, `${stack}: the same commands at preview and up`);
                assert.deepEqual(preview.otherIgnoreChanges, {}, `${stack}: only commands ignore anything`);
                assert.deepEqual(up.otherIgnoreChanges, {});
                for (const name of names) {
                    const atPreview = unsecret(preview.commands[name].connection);
                    const atUp = unsecret(up.commands[name].connection);
                    assert.deepEqual(preview.commands[name].ignoreChanges, ["connection.privateKey"], `${stack}/${name}: ignored at preview`);
                    assert.deepEqual(up.commands[name].ignoreChanges, [], `${stack}/${name}: nothing ignored at up`);
                    assert.equal(atUp.privateKey, keyText, `${stack}/${name}: up sends the key file's text`);
                    assert.notEqual(atPreview.privateKey, keyText);
                    assert.match(String(atPreview.privateKey), /not read in a preview/);
                    // What the engine does with ignoreChanges before the provider's Diff: the old
                    // (converged) value at that path replaces the new one. Then nothing differs,
                    // so the provider (which diffs `connection` as a whole) reports no change.
                    assert.deepEqual({ ...atPreview, privateKey: atUp.privateKey }, atUp, `${stack}/${name}: no diff after ignoreChanges`);
                }
            }
        });

        it("up without the key file fails, naming the key and the file", () => {
            const file = path.join(stacksDir, "Pulumi.spark-pair.yaml");
            const up = program("up", file, { sshPrivateKeyPath: missing }, { apiKey: API_KEY });
            assert.ok(
                up.errors.some((e) => e.includes("spark-cluster:sshPrivateKeyPath") && e.includes(missing)),
                `errors: ${JSON.stringify(up.errors)}`,
            );
        });

        it("a key given as secret text (sshPrivateKey) is used at preview too, and nothing is ignored", () => {
            const keyText = "-----BEGIN OPENSSH PRIVATE KEY-----\npreviewtestkeybody0123456789\n-----END OPENSSH PRIVATE KEY-----\n";
            const file = path.join(stacksDir, "Pulumi.spark-pair.yaml");
            const preview = program("preview", file, { sshPrivateKeyPath: undefined }, { apiKey: API_KEY, sshPrivateKey: keyText });
            assert.deepEqual(preview.errors, []);
            const commands = Object.values(preview.commands);
            assert.ok(commands.length > 5);
            for (const command of commands) {
                assert.equal(unsecret(command.connection).privateKey, keyText);
                assert.deepEqual(command.ignoreChanges, []);
            }
        });
    });

    describe("CI preview diffs (scripts/preview-diff.sh, .github/workflows/preview.yml)", () => {
        it("actionlint accepts the workflow, which runs scripts/preview-diff.sh", () => {
            const actionlint = path.join(tools, "actionlint");
            fs.accessSync(actionlint, fs.constants.X_OK);
            execFileSync(actionlint, ["-no-color", workflow], { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
            assert.match(fs.readFileSync(workflow, "utf8"), /\.\/scripts\/preview-diff\.sh/);
        });

        it("workflow: every action is pinned by a commit SHA, its version in a comment", () => {
            const text = fs.readFileSync(workflow, "utf8");
            const parsed = readWorkflow();
            const lines = text.split("\n").filter((line) => /^\s*(?:-\s+)?uses:/.test(line));
            // Every `uses:` of the parse is one of these lines (none in a form the lines miss).
            const used = Object.values(parsed.jobs).flatMap((job) => [job.uses, ...(job.steps ?? []).map((step) => step.uses)].filter((u) => u !== undefined));
            assert.equal(lines.length, used.length, `uses: lines ${JSON.stringify(lines)} against ${JSON.stringify(used)}`);
            assert.ok(lines.length > 0);
            for (const line of lines) {
                const m = /^\s*(?:-\s+)?uses:\s*(["']?)([^\s"'#]+)\1\s*(#.*)?$/.exec(line);
                assert.ok(m, `cannot read ${line}`);
                const [, , ref, comment = ""] = m;
                if (ref.startsWith("./") || /^#\s*not pinned:\s*\S/.test(comment)) {
                    continue; // this repository's own action, or one that says why it is not pinned
                }
                assert.match(ref, /^[\w.-]+\/[\w./-]+@[0-9a-f]{40}$/, `${line.trim()}: not pinned by a 40-hex commit SHA`);
                assert.match(comment, /^#\s*v\d+(?:\.\d+)*\b/, `${line.trim()}: no "# v1.2.3" comment`);
            }
        });

        it("workflow: a job that can run for a fork's pull request reads no secret, and one such job previews every stack", () => {
            const parsed = readWorkflow();
            const on = typeof parsed.on === "string" ? { [parsed.on]: null } : (parsed.on as Record<string, unknown>);
            // These run a fork's code with the base repository's secrets and a write token.
            assert.deepEqual(Object.keys(on), ["pull_request"], "pull_request only (never pull_request_target or workflow_run)");
            const forFork = Object.entries(parsed.jobs).filter(([, job]) => !sameRepositoryOnly(job));
            assert.ok(
                forFork.some(([, job]) => (job.steps ?? []).some((step) => step.run?.includes("./scripts/preview-diff.sh"))),
                "a job that runs for every pull request runs scripts/preview-diff.sh",
            );
            for (const [name, job] of forFork) {
                assert.ok(!readsSecrets(job), `job ${name} can run for a fork's pull request and reads a secret`);
                for (const step of job.steps ?? []) {
                    assert.ok(!readsSecrets(step), `job ${name}, step ${step.name ?? step.uses ?? step.run}: reads a secret`);
                }
            }
        });

        it("workflow: the job with secrets runs in a protected environment, for same-repository pull requests only, after the one without", () => {
            const parsed = readWorkflow();
            const withSecrets = Object.entries(parsed.jobs).filter(([, job]) => readsSecrets(job));
            assert.ok(withSecrets.length > 0, "a job gets the secrets (for the exact diff)");
            const doc = fs.readFileSync(ciDoc, "utf8");
            for (const [name, job] of withSecrets) {
                const environment = environmentName(job);
                assert.ok(environment, `job ${name} reads secrets outside an environment`);
                assert.ok(doc.includes(`\`${environment}\``), `docs/ci-previews.md says how to create the environment ${environment}`);
                assert.ok(sameRepositoryOnly(job), `job ${name}: its if: (${job.if}) must require ${SAME_REPOSITORY}`);
                // Only the preview itself gets them, through its step's env.
                const { steps = [], ...rest } = job;
                assert.ok(!readsSecrets(rest), `job ${name}: secrets outside its steps`);
                for (const step of steps.filter((s) => readsSecrets(s))) {
                    assert.equal(step.run, "./scripts/preview-diff.sh", `job ${name}, step ${step.name}: only the preview gets secrets`);
                    const { env, ...other } = step;
                    assert.ok(readsSecrets(env) && !readsSecrets(other), `job ${name}, step ${step.name}: secrets in its env only`);
                }
                // One comment per stack: this job's replaces the secret-less one's, never at the same time.
                const needs = typeof job.needs === "string" ? [job.needs] : (job.needs ?? []);
                for (const [other, otherJob] of Object.entries(parsed.jobs).filter(([, j]) => !readsSecrets(j))) {
                    if ((otherJob.steps ?? []).some((s) => String(s.with?.script ?? "").includes("preview-comment.js"))) {
                        assert.ok(needs.includes(other), `job ${name} must need ${other}, which comments too`);
                    }
                }
            }
        });

        it("workflow: no permission by default; each job asks for contents: read and pull-requests: write at most", () => {
            const parsed = readWorkflow();
            assert.deepEqual(parsed.permissions, {}, "top-level permissions: {}");
            for (const [name, job] of Object.entries(parsed.jobs)) {
                assert.ok(typeof job.permissions === "object" && job.permissions !== null, `job ${name} says its permissions`);
                for (const [scope, level] of Object.entries(job.permissions)) {
                    assert.ok(
                        level === "read" || level === "none" || (scope === "pull-requests" && level === "write"),
                        `job ${name}: ${scope}: ${String(level)}`,
                    );
                }
            }
        });

        it("scripts/preview-comment.js: one comment per stack, edited in place; a fork's pull request gets the job summary only", async () => {
            // eslint-disable-next-line @typescript-eslint/no-require-imports
            const previewComment = require(commentScript) as (args: { github: unknown; context: unknown; core: unknown }) => Promise<unknown>;
            const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-preview-comment-"));
            const saved = { dir: process.env.PREVIEW_DIFF_DIR, artifact: process.env.PREVIEW_ARTIFACT, note: process.env.PREVIEW_NOTE };
            try {
                for (const [stack, ok] of [
                    ["spark-pair", true],
                    ["new-stack", false],
                ] as const) {
                    const meta = { stack, ok, exitCode: ok ? 0 : 1, secrets: "placeholders", backend: "throwaway", counts: ok ? { "to create": 27 } : {} };
                    fs.writeFileSync(path.join(dir, `${stack}.json`), JSON.stringify(meta));
                    fs.writeFileSync(path.join(dir, `${stack}.diff`), `+ diff of ${stack}\n`);
                }
                process.env.PREVIEW_DIFF_DIR = dir;
                process.env.PREVIEW_ARTIFACT = "preview-diff";
                process.env.PREVIEW_NOTE = "a note under the heading";
                const marker = (stack: string) => `<!-- spark-cluster preview-diff stack=${stack} -->`;
                const existing = [
                    { id: 1, user: { type: "Bot" }, body: `${marker("spark-pair")}\nthe last push's diff` },
                    { id: 2, user: { type: "Bot" }, body: `${marker("removed")}\nold` },
                    { id: 3, user: { type: "User" }, body: `quoting ${marker("new-stack")}` },
                ];
                const run = async (headRepo: string) => {
                    const calls: { call: string; id?: unknown; body: string }[] = [];
                    const summary: string[] = [];
                    const summaryApi = {
                        addRaw: (text: string) => (summary.push(text), summaryApi),
                        addEOL: () => summaryApi,
                        write: async () => undefined,
                    };
                    const github = {
                        paginate: async () => (calls.push({ call: "list", body: "" }), existing),
                        rest: {
                            issues: {
                                listComments: {},
                                updateComment: async (p: { comment_id: number; body: string }) =>
                                    calls.push({ call: "update", id: p.comment_id, body: p.body }),
                                createComment: async (p: { issue_number: number; body: string }) =>
                                    calls.push({ call: "create", id: p.issue_number, body: p.body }),
                            },
                        },
                    };
                    const context = {
                        payload: { pull_request: { number: 7, head: { sha: "0123456789abcdef", repo: { full_name: headRepo } } } },
                        repo: { owner: "owner", repo: "spark-cluster" },
                        serverUrl: "https://github.com",
                        runId: 42,
                    };
                    await previewComment({ github, context, core: { summary: summaryApi } });
                    return { calls, summary };
                };

                const same = await run("owner/spark-cluster");
                assert.deepEqual(
                    same.calls.map((c) => [c.call, c.id]),
                    [
                        ["list", undefined],
                        ["create", 7], // new-stack: the user's comment that quotes the marker is not ours
                        ["update", 1], // spark-pair: its comment, edited in place
                        ["update", 2], // removed: no longer in stacks/
                    ],
                );
                assert.match(same.calls[1].body, /^<!-- spark-cluster preview-diff stack=new-stack -->\n### ❌ .*stack `new-stack`: failed \(exit 1\)/);
                assert.match(same.calls[2].body, /^<!-- spark-cluster preview-diff stack=spark-pair -->\n### ✅ .*stack `spark-pair`: 27 to create\n/);
                assert.match(
                    same.calls[2].body,
                    /Commit 0123456, diffed against nothing .*secrets: placeholders.*\(https:\/\/github\.com\/owner\/spark-cluster\/actions\/runs\/42\)/,
                );
                assert.match(same.calls[2].body, /\n\na note under the heading\n/);
                assert.match(same.calls[2].body, /````diff\n\+ diff of spark-pair\n/);
                assert.match(same.calls[3].body, /stack=removed -->\n### Stack `removed` is no longer in stacks\/ \(commit 0123456\)/);
                assert.equal(same.summary.length, 2);

                const fork = await run("someone/spark-cluster");
                assert.deepEqual(fork.calls, [], "a fork's read-only token: no API call");
                assert.equal(fork.summary.length, 2);
                assert.ok(!fork.summary.some((s) => s.includes("<!-- spark-cluster")), "the summary has no marker");
                assert.match(fork.summary.join("\n"), /stack `spark-pair`: 27 to create/);
            } finally {
                for (const [name, value] of [
                    ["PREVIEW_DIFF_DIR", saved.dir],
                    ["PREVIEW_ARTIFACT", saved.artifact],
                    ["PREVIEW_NOTE", saved.note],
                ] as const) {
                    if (value === undefined) {
                        delete process.env[name];
                    } else {
                        process.env[name] = value;
                    }
                }
                fs.rmSync(dir, { recursive: true, force: true });
            }
        });

        it("previews every stack with only loopback, no key file and no secret, and prints a diff for each", () => {
            const out = fs.mkdtempSync(path.join(os.tmpdir(), "spark-preview-out-"));
            const before = repoSnapshot();
            try {
                const stacks = stackFiles();
                for (const file of stacks) {
                    // The committed stacks name key files that do not exist here.
                    const keyPath = (yaml.load(fs.readFileSync(file, "utf8")) as { config: Record<string, unknown> }).config["spark-cluster:sshPrivateKeyPath"];
                    assert.ok(typeof keyPath !== "string" || !fs.existsSync(keyPath), `${keyPath} must not exist for this test`);
                }
                const text = previewDiff(out, {});
                for (const file of stacks) {
                    const stack = stackName(file);
                    assert.match(
                        text,
                        new RegExp(
                            `==== preview-diff: stack ${stack} \\(secrets: placeholders, backend: throwaway\\) ====\\nPreviewing update \\(${stack}\\):`,
                        ),
                    );
                    assert.match(text, new RegExp(`==== preview-diff: stack ${stack}: ok ====`));
                    const diff = fs.readFileSync(path.join(out, `${stack}.diff`), "utf8");
                    assert.match(diff, /\+ spark-remote:index:Step: \(create\)/, `${stack}: the diff shows the commands`);
                    assert.match(diff, /connection\s+: \[secret\]/, `${stack}: the connection is shown as a secret`);
                    const summary = JSON.parse(fs.readFileSync(path.join(out, `${stack}.json`), "utf8"));
                    assert.equal(summary.ok, true);
                    assert.ok(summary.counts["to create"] > 5, `${stack}: ${JSON.stringify(summary.counts)}`);
                }
                assert.doesNotMatch(text, /preview-placeholder/, "no placeholder secret is printed");
                assert.doesNotMatch(text, /throwaway-[0-9a-f]{8}/, "the throwaway passphrase is not printed");
                assert.deepEqual(repoSnapshot(), before, "the committed stack files are untouched and no stack file appeared");
            } finally {
                fs.rmSync(out, { recursive: true, force: true });
            }
        });

        it("with the passphrase, the stack file's real (encrypted) secrets are used and never printed", () => {
            const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spark-preview-real-"));
            try {
                const stacks = path.join(dir, "stacks");
                fs.mkdirSync(stacks);
                fs.copyFileSync(path.join(stacksDir, "Pulumi.spark-pair.yaml"), path.join(stacks, "Pulumi.spark-pair.yaml"));
                const passphrase = crypto.randomBytes(12).toString("hex");
                const apiKey = `real-api-key-${crypto.randomBytes(16).toString("hex")}`;
                const hfToken = `hf_${crypto.randomBytes(16).toString("hex")}`;
                // Encrypt them into the copy as a user would commit them (config set --secret).
                fs.copyFileSync(path.join(root, "Pulumi.yaml"), path.join(dir, "Pulumi.yaml"));
                const env: NodeJS.ProcessEnv = {
                    ...process.env,
                    PULUMI_HOME: path.join(root, ".tools", "pulumi-home"),
                    PULUMI_SKIP_UPDATE_CHECK: "true",
                    PULUMI_BACKEND_URL: `file://${dir}`,
                    PULUMI_CONFIG_PASSPHRASE: passphrase,
                };
                delete env.PULUMI_CONFIG_PASSPHRASE_FILE;
                const pulumiCli = (args: string[], input?: string) =>
                    execFileSync(path.join(tools, "pulumi"), args, { cwd: root, env, input, stdio: ["pipe", "pipe", "pipe"] });
                pulumiCli(["-C", dir, "stack", "init", "spark-pair", "--secrets-provider", "passphrase", "--non-interactive"]);
                const cfg = ["--stack", "spark-pair", "--non-interactive", "--config-file", path.join(stacks, "Pulumi.spark-pair.yaml")];
                pulumiCli(["config", "set", "--secret", "spark-cluster:apiKey", ...cfg], apiKey);
                pulumiCli(["config", "set", "--secret", "spark-cluster:hfToken", ...cfg], hfToken);
                const committed = fs.readFileSync(path.join(stacks, "Pulumi.spark-pair.yaml"), "utf8");
                assert.match(committed, /secure: v1:/);
                assert.ok(!committed.includes(apiKey));

                const out = path.join(dir, "out");
                const text = previewDiff(out, { PREVIEW_STACKS_DIR: stacks, PULUMI_CONFIG_PASSPHRASE: passphrase });
                assert.match(text, /==== preview-diff: stack spark-pair \(secrets: real, backend: throwaway\) ====/);
                assert.match(text, /==== preview-diff: stack spark-pair: ok ====/);
                for (const secret of [apiKey, hfToken, passphrase]) {
                    assert.ok(!text.includes(secret), "a real secret is printed");
                    assert.ok(!fs.readFileSync(path.join(out, "spark-pair.diff"), "utf8").includes(secret));
                }
                assert.equal(fs.readFileSync(path.join(stacks, "Pulumi.spark-pair.yaml"), "utf8"), committed, "the stack file is untouched");
            } finally {
                fs.rmSync(dir, { recursive: true, force: true });
            }
        });
    });
}

/**
 * Runs scripts/preview-diff.sh in a fresh network namespace with only loopback up (so it can
 * reach no host), with no passphrase and no backend unless `env` gives them; stdout+stderr.
 */
function previewDiff(out: string, env: Record<string, string>): string {
    const script = ["set -euo pipefail", "ip link set lo up", "exec ./scripts/preview-diff.sh 2>&1"].join("\n");
    const base: NodeJS.ProcessEnv = { ...process.env, PREVIEW_DIFF_DIR: out, PREVIEW_ISOLATE: "1" };
    for (const name of ["PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE", "PREVIEW_STACKS_DIR"]) {
        delete base[name];
    }
    for (const name of Object.keys(base).filter((n) => n.startsWith("SPARK_API_KEY_") || n.startsWith("SPARK_HF_TOKEN_"))) {
        delete base[name];
    }
    const run = spawnSync("unshare", ["--net", "bash", "-c", script], { cwd: root, encoding: "utf8", timeout: 240_000, env: { ...base, ...env } });
    assert.equal(run.status, 0, `preview-diff.sh failed (exit ${run.status}):\n${run.stdout}${run.stderr}`);
    return run.stdout;
}

/** The committed stack files' hashes and the Pulumi.*.yaml files at the root (stack init must add none). */
function repoSnapshot(): Record<string, string> {
    const files = [
        ...stackFiles(),
        ...fs
            .readdirSync(root)
            .filter((f) => /^Pulumi\..*\.yaml$/.test(f))
            .map((f) => path.join(root, f)),
    ];
    return Object.fromEntries(files.map((f) => [path.relative(root, f), crypto.createHash("sha256").update(fs.readFileSync(f)).digest("hex")]));
}

const harnessOut = process.env[HARNESS_OUT];
if (harnessOut) {
    void runHarness(harnessOut, process.env[HARNESS_MODE] === "preview");
} else {
    tests();
}
