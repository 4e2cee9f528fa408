// The toolchain as docs/development.md ("Toolchain") promises it: pinned versions that agree with
// each other, a project-local Pulumi CLI with its plugins, and a preview of the
// lab stack that runs on the local backend without contacting any host.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const root = path.resolve(__dirname, "..", "..", "..");
const tools = path.join(root, ".tools", "bin");

function versionsEnv(): Record<string, string> {
    const text = fs.readFileSync(path.join(root, "toolchain", "versions.env"), "utf8");
    const entries = text
        .split("\n")
        .filter((line) => /^[A-Z_]+=/.test(line))
        .map((line) => line.split("=", 2) as [string, string]);
    return Object.fromEntries(entries);
}

describe("toolchain versions", () => {
    const versions = versionsEnv();
    const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));

    // The Node.js SDK (npm) and the CLI + Go SDK (Go module proxy) are pinned separately: npm's
    // newest @pulumi/pulumi (3.270.0 on 2026-11-25) was older than the proxy's newest CLI.
    it("@pulumi/pulumi in package.json and package-lock.json matches the Node.js SDK version", () => {
        assert.equal(pkg.dependencies["@pulumi/pulumi"], versions.PULUMI_NODEJS_SDK_VERSION);
        const lock = JSON.parse(fs.readFileSync(path.join(root, "package-lock.json"), "utf8"));
        assert.equal(lock.packages[""].dependencies["@pulumi/pulumi"], versions.PULUMI_NODEJS_SDK_VERSION);
        // One copy of the SDK, at the pinned version.
        const copies = Object.entries(lock.packages as Record<string, { version: string }>).filter(([key]) => key.endsWith("node_modules/@pulumi/pulumi"));
        assert.deepEqual(
            copies.map(([key, entry]) => [key, entry.version]),
            [["node_modules/@pulumi/pulumi", versions.PULUMI_NODEJS_SDK_VERSION]],
        );
    });

    it("the Node.js SDK is the CLI's major version and no newer than the CLI", () => {
        const parse = (v: string | undefined): number[] => {
            assert.match(v ?? "", /^\d+\.\d+\.\d+$/);
            return (v as string).split(".").map(Number);
        };
        const sdk = parse(versions.PULUMI_NODEJS_SDK_VERSION);
        const cli = parse(versions.PULUMI_VERSION);
        assert.equal(sdk[0], cli[0]);
        const order = sdk[1] - cli[1] || sdk[2] - cli[2];
        assert.ok(order <= 0, `@pulumi/pulumi ${versions.PULUMI_NODEJS_SDK_VERSION} is newer than the CLI ${versions.PULUMI_VERSION}`);
    });

    it("the program's SDK of our provider asks for the version bootstrap builds, and no @pulumi/command is installed", () => {
        const sdk = fs.readFileSync(path.join(root, "components", "sparkRemote.ts"), "utf8");
        assert.match(sdk, new RegExp(`^export const VERSION = "${versions.SPARK_REMOTE_VERSION.replace(/\./g, "\\.")}";$`, "m"));
        const go = fs.readFileSync(path.join(root, "toolchain", "plugins", "internal", "commandprovider", "provider.go"), "utf8");
        assert.match(go, new RegExp(`^var Version = "${versions.SPARK_REMOTE_VERSION.replace(/\./g, "\\.")}"$`, "m"), "the plugin's own default");
        // Pulumi's command SDK is not a dependency: nothing registers its types (README.md says why).
        assert.equal(pkg.dependencies["@pulumi/command"], undefined);
        const lock = JSON.parse(fs.readFileSync(path.join(root, "package-lock.json"), "utf8"));
        assert.equal(lock.packages["node_modules/@pulumi/command"], undefined);
    });

    it("the CLI wrapper module and the plugins module build against the same Pulumi version", () => {
        const cliMod = fs.readFileSync(path.join(root, "toolchain", "pulumi-cli", "go.mod"), "utf8");
        const pluginsMod = fs.readFileSync(path.join(root, "toolchain", "plugins", "go.mod"), "utf8");
        assert.match(cliMod, new RegExp(`github.com/pulumi/pulumi/pkg/v3 v${versions.PULUMI_VERSION}\\b`));
        assert.match(cliMod, new RegExp(`github.com/pulumi/pulumi/sdk/v3 v${versions.PULUMI_VERSION}\\b`));
        assert.match(pluginsMod, new RegExp(`github.com/pulumi/pulumi/sdk/v3 v${versions.PULUMI_VERSION}\\b`));
    });
});

describe("project-local Pulumi toolchain", () => {
    const versions = versionsEnv();

    it("pulumi version prints the pinned version, or a newer one of its major version (one on PATH, scripts/pulumi-on-path.sh)", () => {
        const out = execFileSync(path.join(tools, "pulumi"), ["version"], { encoding: "utf8" }).trim();
        const have = /^v(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(out)?.slice(1).map(Number);
        const want = versions.PULUMI_VERSION.split(".").map(Number);
        assert.ok(have, `pulumi version printed ${out}`);
        assert.equal(have[0], want[0], `${out}: the major version of ${versions.PULUMI_VERSION}`);
        const order = have[1] - want[1] || have[2] - want[2];
        assert.ok(order > 0 || (order === 0 && !out.includes("-")), `${out} is older than ${versions.PULUMI_VERSION}`);
    });

    it("the language host sits next to the CLI and our provider in the project's Pulumi home, under its own name", () => {
        const cliDir = path.dirname(fs.realpathSync(path.join(tools, "pulumi")));
        fs.accessSync(path.join(cliDir, "pulumi-language-nodejs"), fs.constants.X_OK);
        const plugins = path.join(root, ".tools", "pulumi-home", "plugins");
        const pluginDir = path.join(plugins, `resource-spark-remote-v${versions.SPARK_REMOTE_VERSION}`);
        fs.accessSync(path.join(pluginDir, "pulumi-resource-spark-remote"), fs.constants.X_OK);
        // No plugin installed as another package's: the CLI could load it for a stack that names that package.
        assert.deepEqual(
            fs
                .readdirSync(plugins, { withFileTypes: true })
                .filter((entry) => entry.isDirectory() && entry.name.startsWith("resource-"))
                .map((entry) => entry.name),
            [`resource-spark-remote-v${versions.SPARK_REMOTE_VERSION}`],
        );
        // `pulumi plugin ls` lists it under our name.
        const ls = execFileSync(path.join(root, "scripts", "pulumi.sh"), ["plugin", "ls", "--json"], { cwd: root, encoding: "utf8" });
        assert.deepEqual(
            (JSON.parse(ls) as { name: string; kind: string; version: string }[]).map((p) => [p.name, p.kind, p.version]),
            [["spark-remote", "resource", versions.SPARK_REMOTE_VERSION]],
        );
        // Nothing on the project's PATH that the CLI would take as an ambient plugin.
        assert.deepEqual(
            fs.readdirSync(tools).filter((name) => name.startsWith("pulumi-")),
            [],
        );
    });

    it("pulumi preview --stack dev runs on the local backend with no network but loopback", () => {
        // If the preview tried to reach any host (Pulumi Cloud, a plugin download, a node), it
        // would fail here: offlinePreview runs it with only loopback up.
        const r = offlinePreview((config) => config);
        assert.equal(r.status, 0, r.output);
        const out = r.output;
        assert.match(out, /Previewing update \(dev\)/);
        assert.match(out, /pulumi:pulumi:Stack/);
        assert.match(out, /spark-cluster:index:SparkCluster/);
        assert.match(out, /\+ \d+ to create/);
        // Plugins are installed where the CLI looks: it warns about none taken from $PATH.
        assert.doesNotMatch(out, /warning: using pulumi-/);
        // Secrets of the lab stack are configured but never printed.
        const apiKey = labApiKey();
        assert.ok(apiKey.length >= 16, "the lab stack has an API key");
        assert.ok(!out.includes(apiKey), "the API key must not appear in preview output");
    });
});

describe("scripts/pulumi.sh with --config-file", () => {
    it("creates the stack with its encryption salt in that file and leaves no Pulumi.<stack>.yaml at the root", () => {
        const backend = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-backend-"));
        const stack = `salt-check-${process.pid}`;
        const rootFile = path.join(root, `Pulumi.${stack}.yaml`);
        try {
            const configFile = path.join(backend, `Pulumi.${stack}.yaml`);
            fs.copyFileSync(path.join(root, "stacks", "Pulumi.spark-pair.yaml"), configFile);
            assert.doesNotMatch(fs.readFileSync(configFile, "utf8"), /^encryptionsalt:/m, "the committed stack file has no salt yet");
            const run = (...args: string[]) =>
                execFileSync(path.join(root, "scripts", "pulumi.sh"), ["--stack", stack, "--config-file", configFile, ...args], {
                    cwd: root,
                    encoding: "utf8",
                    env: { ...process.env, PULUMI_BACKEND_URL: `file://${backend}`, PULUMI_CONFIG_PASSPHRASE: "salt-check", PULUMI_CONFIG_PASSPHRASE_FILE: "" },
                    stdio: ["ignore", "pipe", "pipe"],
                }).trim();
            run("config", "set", "--secret", "spark-cluster:apiKey", "salt-check-key-0123456789");
            assert.ok(!fs.existsSync(rootFile), `${rootFile} was left behind`);
            assert.equal(fs.readFileSync(configFile, "utf8").match(/^encryptionsalt:/gm)?.length, 1, "one salt, in the stack's file");
            assert.equal(run("config", "get", "spark-cluster:apiKey"), "salt-check-key-0123456789");
        } finally {
            fs.rmSync(rootFile, { force: true });
            fs.rmSync(backend, { recursive: true, force: true });
        }
    });
});

describe("scripts/pulumi.sh --stack", () => {
    it("selects the stack it is given, and skips `stack select` when the stack is selected already", () => {
        const backend = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-backend-"));
        const url = `file://${backend}?metadata=skip`;
        const env = { ...process.env, PULUMI_BACKEND_URL: url, PULUMI_CONFIG_PASSPHRASE: "select-check", PULUMI_CONFIG_PASSPHRASE_FILE: "" };
        const [first, second] = [`select-a-${process.pid}`, `select-b-${process.pid}`];
        const configFile = (stack: string) => path.join(backend, `Pulumi.${stack}.yaml`);
        const run = (stack: string, ...args: string[]) =>
            execFileSync(path.join(root, "scripts", "pulumi.sh"), ["--stack", stack, "--config-file", configFile(stack), ...args], {
                cwd: root,
                encoding: "utf8",
                env,
                stdio: ["ignore", "pipe", "pipe"],
            }).trim();
        /** The stack a plain `pulumi` command would use now. */
        const selected = () => execFileSync("bash", ["-c", "source scripts/env.sh && pulumi stack --show-name"], { cwd: root, encoding: "utf8", env }).trim();
        // Where the CLI keeps the selection (the workspace of this checkout's Pulumi.yaml); `stack
        // select` writes it each time it runs.
        const digest = execFileSync("sha1sum", { input: path.join(root, "Pulumi.yaml"), encoding: "utf8" }).slice(0, 40);
        const workspace = path.join(root, ".tools", "pulumi-home", "workspaces", `spark-cluster-${digest}-workspace.json`);
        const written = () => fs.statSync(workspace).mtimeMs;
        try {
            for (const stack of [first, second]) fs.writeFileSync(configFile(stack), "config: {}\n");
            run(first, "config", "set", "spark-cluster:probe", "one");
            assert.equal(selected(), first);
            assert.ok(fs.readFileSync(workspace, "utf8").includes(`"${url}": "organization/spark-cluster/${first}"`));

            const before = written();
            assert.equal(run(first, "config", "get", "spark-cluster:probe"), "one");
            assert.equal(written(), before, "the stack was selected already: no `stack select`");

            run(second, "config", "set", "spark-cluster:probe", "two");
            assert.equal(selected(), second);
            const switched = written();
            assert.equal(run(first, "config", "get", "spark-cluster:probe"), "one");
            assert.equal(selected(), first, "selected again");
            assert.notEqual(written(), switched);
        } finally {
            fs.rmSync(backend, { recursive: true, force: true });
        }
    });
});

describe("scripts/pulumi.sh on a stack deployed before our provider had its own name", () => {
    it("moves it to spark-remote before the command (a state rewrite, with a backup), once", () => {
        const work = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-migrate-"));
        const stack = `migrate-${process.pid}`;
        const rootFile = path.join(root, `Pulumi.${stack}.yaml`);
        const backups = path.join(root, ".pulumi-state-backups");
        const before = fs.existsSync(backups) ? fs.readdirSync(backups) : [];
        try {
            // A real export of such a stack (test/unit/migrateProvider.test.ts; its secrets under the
            // throwaway passphrase "x"), as stack `stack`.
            const fixture = fs.readFileSync(path.join(root, "test", "unit", "fixtures", "migrate", "command-1.2.1-export.json"), "utf8");
            fs.writeFileSync(
                path.join(work, "old.json"),
                fixture.replace(/urn:pulumi:dev::/g, `urn:pulumi:${stack}::`).replace(/spark-cluster-dev/g, `spark-cluster-${stack}`),
            );
            const env = {
                ...process.env,
                PULUMI_BACKEND_URL: `file://${work}/state?metadata=skip`,
                PULUMI_CONFIG_PASSPHRASE: "x",
                PULUMI_CONFIG_PASSPHRASE_FILE: "",
            };
            fs.mkdirSync(path.join(work, "state"));
            const cli = (script: string) =>
                execFileSync("bash", ["-c", `source scripts/env.sh && ${script}`], {
                    cwd: root,
                    encoding: "utf8",
                    env: { ...env, PULUMI_BACKEND_URL: env.PULUMI_BACKEND_URL },
                });
            cli(`pulumi stack init ${stack} --non-interactive >/dev/null && pulumi stack import --stack ${stack} --file ${work}/old.json >/dev/null`);
            const wrapper = (...args: string[]) =>
                spawnSync(path.join(root, "scripts", "pulumi.sh"), ["--stack", stack, ...args], { cwd: root, encoding: "utf8", env });
            const first = wrapper("stack", "export");
            assert.equal(first.status, 0, first.stderr);
            assert.match(first.stderr, /was deployed before our provider had its own name; moving it/);
            const types = (JSON.parse(first.stdout) as { deployment: { resources: { type: string }[] } }).deployment.resources.map((r) => r.type);
            assert.deepEqual([...new Set(types)].sort(), [
                "pulumi:providers:spark-remote",
                "pulumi:pulumi:Stack",
                "spark-cluster:index:ClusterNode",
                "spark-remote:index:Step",
            ]);
            const made = fs.readdirSync(backups).filter((f) => !before.includes(f));
            assert.equal(made.length, 1, "one backup");
            assert.match(fs.readFileSync(path.join(backups, made[0]), "utf8"), /"type": "command:remote:Command"/, "the backup is the state before");
            const second = wrapper("stack", "export");
            assert.equal(second.status, 0, second.stderr);
            assert.doesNotMatch(second.stderr, /moving it/, "nothing left to move");
            assert.equal(fs.readdirSync(backups).filter((f) => !before.includes(f)).length, 1);
        } finally {
            if (fs.existsSync(backups)) {
                for (const f of fs.readdirSync(backups).filter((f) => !before.includes(f))) fs.rmSync(path.join(backups, f));
                if (fs.readdirSync(backups).length === 0) fs.rmdirSync(backups);
            }
            fs.rmSync(rootFile, { force: true });
            fs.rmSync(work, { recursive: true, force: true });
        }
    });
});

/**
 * `pulumi preview --diff` of the lab stack's config passed through `adapt`, with a throwaway file
 * backend (the user's stacks are never touched), a throwaway SSH key, and a fresh network
 * namespace with only loopback up.
 */
function offlinePreview(adapt: (config: string) => string): { status: number | null; output: string } {
    const backend = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-backend-"));
    try {
        const key = path.join(backend, "id_ed25519");
        execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", key]);
        const configFile = path.join(backend, "Pulumi.dev.yaml");
        const config = fs.readFileSync(path.join(root, "Pulumi.dev.yaml"), "utf8").replace(/^(\s*spark-cluster:sshPrivateKeyPath:).*$/m, `$1 ${key}`);
        fs.writeFileSync(configFile, adapt(config));
        const script = [
            "ip link set lo up",
            `export PULUMI_BACKEND_URL=file://${backend}`,
            `./scripts/pulumi.sh --stack dev preview --non-interactive --diff --config-file ${configFile} 2>&1`,
        ].join("\n");
        const r = spawnSync("unshare", ["--net", "bash", "-c", script], {
            cwd: root,
            encoding: "utf8",
            timeout: 300_000,
            env: { ...process.env, PULUMI_CONFIG_PASSPHRASE: "", PULUMI_CONFIG_PASSPHRASE_FILE: "" },
        });
        return { status: r.status, output: r.stdout + r.stderr };
    } finally {
        fs.rmSync(backend, { recursive: true, force: true });
    }
}

describe("the fit check at preview", () => {
    it("refuses a model that cannot fit, with a plan that does, and contacts no host", () => {
        // The lab stack, serving Llama 3.1 405B in BF16 on its two Sparks: it needs FP4.
        const size = "    size: {paramsB: 405, dtype: bf16, layers: 126, hiddenSize: 16384, attentionHeads: 128, kvHeads: 8, vocabSize: 128256}";
        const r = offlinePreview((config) => {
            const adapted = config.replace(/^(\s*)source: lab\/tiny-chat$/m, "$1source: meta-llama/Llama-3.1-405B-Instruct\n" + size + "\n$1maxModelLen: 8192");
            assert.match(adapted, /paramsB: 405/);
            return adapted;
        });
        assert.notEqual(r.status, 0, "the preview fails");
        assert.match(
            r.output,
            /invalid stack configuration:\s+spark-cluster:model: meta-llama\/Llama-3\.1-405B-Instruct \(405B, bf16 weights\) with TP=2 PP=1 does not fit/,
        );
        assert.match(r.output, /It fits with model\.quantization: \(unset\) → modelopt_fp4/);
        assert.doesNotMatch(r.output, /spark-remote:index:Step/, "no resource was registered");
    });
});

/** The lab's API key, decrypted from Pulumi.dev.yaml by the lab passphrase. */
function labApiKey(): string {
    const backend = fs.mkdtempSync(path.join(os.tmpdir(), "spark-cluster-backend-"));
    try {
        return execFileSync(path.join(root, "scripts", "pulumi.sh"), ["--stack", "dev", "config", "get", "spark-cluster:apiKey"], {
            cwd: root,
            encoding: "utf8",
            env: { ...process.env, PULUMI_BACKEND_URL: `file://${backend}`, PULUMI_CONFIG_PASSPHRASE: "", PULUMI_CONFIG_PASSPHRASE_FILE: "" },
            stdio: ["ignore", "pipe", "pipe"],
        }).trim();
    } finally {
        fs.rmSync(backend, { recursive: true, force: true });
    }
}
