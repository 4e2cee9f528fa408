/**
 * The `tryIt` output is pasted into bash: it is run here, in bash, as the unprivileged user
 * nobody, with `curl` and `./scripts/pulumi.sh` replaced by stubs that record their argv. A served
 * name built to break out of its quoting must reach curl exactly, and nothing else may run.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { stackConfigFile, tryItCommand } from "../../components/render/tryIt";

const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => fs.existsSync(p));

/** A stub that writes its argv, NUL-separated, to `out`. */
function stub(file: string, out: string, stdout = ""): void {
    fs.writeFileSync(file, `#!/bin/bash\nprintf '%s\\0' "$@" > ${out}\nprintf '%s' '${stdout}'\n`, { mode: 0o755 });
}

/** Runs `command` in bash as nobody in a fresh directory with the stubs; returns their argv and what the directory holds after. */
function runAsNobody(command: string): { curl: string[]; pulumi: string[]; files: string[]; status: number | null; stderr: string } {
    assert.ok(SETPRIV, "setpriv is needed to run the line as nobody");
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tryit-"));
    try {
        fs.mkdirSync(path.join(dir, "bin"));
        fs.mkdirSync(path.join(dir, "scripts"));
        fs.mkdirSync(path.join(dir, "out"));
        stub(path.join(dir, "bin", "curl"), path.join(dir, "out", "curl.argv"));
        stub(path.join(dir, "scripts", "pulumi.sh"), path.join(dir, "out", "pulumi.argv"), "sk-stub-key");
        fs.chmodSync(dir, 0o777);
        fs.chmodSync(path.join(dir, "out"), 0o777);
        const run = spawnSync(SETPRIV, ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/bin/bash", "-c", command], {
            cwd: dir,
            env: { PATH: `${path.join(dir, "bin")}:/usr/bin:/bin`, HOME: dir, LANG: "C.UTF-8" },
            encoding: "utf8",
        });
        const argv = (name: string) => {
            const file = path.join(dir, "out", name);
            return fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\0").slice(0, -1) : [];
        };
        const files = fs
            .readdirSync(dir, { recursive: true })
            .map(String)
            .filter((f) => !["bin", "bin/curl", "scripts", "scripts/pulumi.sh", "out", "out/curl.argv", "out/pulumi.argv"].includes(f));
        return { curl: argv("curl.argv"), pulumi: argv("pulumi.argv"), files, status: run.status, stderr: run.stderr };
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

const NASTY = [`x'$(touch pwned1)'`, "`touch pwned2`", `a"b\\c$HOME;touch pwned3 #`, `'"'"'; touch pwned4; echo '`, "${IFS}$(touch${IFS}pwned5)!!", "é€😀%s%n"];

describe("tryIt: the curl line is safe to paste into bash", () => {
    for (const name of NASTY) {
        it(`sends the served name ${JSON.stringify(name)} exactly, and runs nothing else`, () => {
            const line = tryItCommand({
                endpoint: "http://10.0.0.11:8000/v1",
                servedModel: name,
                stack: "spark-pair",
            });
            const run = runAsNobody(line);
            assert.equal(run.status, 0, run.stderr);
            assert.deepEqual(run.files, [], "the line left files behind: something in it ran");
            // scripts/pulumi.sh finds stacks/Pulumi.spark-pair.yaml itself (test/integration/dgxOs.test.ts runs the quickstart's commands through it).
            assert.deepEqual(run.pulumi, ["--stack", "spark-pair", "config", "get", "spark-cluster:apiKey"]);
            assert.deepEqual(run.curl, [
                "-s",
                "http://10.0.0.11:8000/v1/chat/completions",
                "-H",
                "Authorization: Bearer sk-stub-key",
                "-H",
                "Content-Type: application/json",
                "-d",
                JSON.stringify({ model: name, messages: [{ role: "user", content: "Hello" }] }),
            ]);
            assert.equal((JSON.parse(run.curl[7]) as { model: string }).model, name);
        });
    }

    it("the dev stack at the project's root needs no --config-file; a stack under stacks/ names its file", () => {
        const files = new Set(["Pulumi.dev.yaml", "stacks/Pulumi.spark-pair.yaml"]);
        const exists = (f: string) => files.has(f);
        assert.equal(stackConfigFile("dev", exists), undefined);
        assert.equal(stackConfigFile("spark-pair", exists), "stacks/Pulumi.spark-pair.yaml");
        assert.equal(stackConfigFile("elsewhere", exists), undefined);
        const dev = runAsNobody(tryItCommand({ endpoint: "http://h:8000/v1", servedModel: "qwen", stack: "dev" }));
        assert.deepEqual(dev.pulumi, ["--stack", "dev", "config", "get", "spark-cluster:apiKey"]);
    });

    it("the repository's stacks are where stackConfigFile looks", () => {
        const root = path.resolve(__dirname, "..", "..", "..");
        for (const file of fs.readdirSync(path.join(root, "stacks")).filter((f) => /^Pulumi\..+\.yaml$/.test(f))) {
            const stack = file.slice("Pulumi.".length, -".yaml".length);
            assert.equal(
                stackConfigFile(stack, (f) => fs.existsSync(path.join(root, f))),
                `stacks/${file}`,
            );
        }
        assert.equal(
            stackConfigFile("dev", (f) => fs.existsSync(path.join(root, f))),
            undefined,
        );
    });
});
