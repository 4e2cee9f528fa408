/**
 * The model layer's renderers (components/render/modelSync.ts): the download on the head, the
 * head's rsync daemon and its config, a worker's pull, the deletes that keep (or remove) the
 * cache, and the local-path check. Pinned by snapshots (test/unit/__snapshots__/modelSync.*.snap),
 * every script through `bash -n`, and the properties the design rests on: the HF token and the
 * sync secret never in a script, the daemon bound to the head's interconnect address and open to
 * each worker's addresses only, the cache left unless model.removeCacheOnDestroy.
 */
import { describe, it, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseConfig } from "../../config";
import { SECRET_PURPOSES, deriveSecret } from "../../components/clusterSecrets";
import { HOST_LIB } from "../../components/render/host/lib";
import { dockerRunArgv } from "../../components/render/host/runtime";
import {
    HF_HOME_DIR,
    MODEL_SYNC_PORT,
    ModelServeSpec,
    hubRepoDirName,
    isLocalModelPath,
    localModelCheckScript,
    modelCacheRemovalScript,
    modelDownloadScript,
    modelPullScript,
    modelServeRemovalScript,
    modelServeScript,
    pullSummary,
    renderModelRsyncdConf,
} from "../../components/render/modelSync";
import { renderVllmUnit } from "../../components/render/vllm";
import { DOCKER_DEFAULT, VENV, VLLM_MP_BASE } from "../support/fixtures";
import { matchSnapshot, unusedSnapshots } from "../support/snapshot";

const REPO = "Qwen/Qwen2.5-7B-Instruct";
const SERVE: ModelServeSpec = {
    repoId: REPO,
    node: "spark-a",
    headIp: "192.168.100.11",
    workers: [
        { node: "spark-b", ips: ["192.168.100.12", "192.168.101.12"] },
        { node: "thor-1", ips: ["192.168.100.27"] },
    ],
};
const API_KEY = "model-sync-test-api-key-0123456789";

const SCRIPTS: readonly { name: string; script: string }[] = [
    { name: "download.docker-token.sh", script: modelDownloadScript({ repoId: REPO, node: "spark-a", runtime: DOCKER_DEFAULT, withToken: true }) },
    { name: "download.venv.sh", script: modelDownloadScript({ repoId: REPO, node: "thor-1", runtime: VENV, withToken: false }) },
    { name: "serve.sh", script: modelServeScript(SERVE) },
    { name: "serve-delete.sh", script: modelServeRemovalScript(REPO) },
    { name: "pull.spark-b.sh", script: modelPullScript({ repoId: REPO, node: "spark-b", head: "spark-a", headIp: "192.168.100.11", streams: 4 }) },
    { name: "cache-keep.sh", script: modelCacheRemovalScript({ repoId: REPO, node: "spark-b", remove: false }) },
    { name: "cache-remove.sh", script: modelCacheRemovalScript({ repoId: REPO, node: "spark-b", remove: true }) },
    { name: "local-check.sh", script: localModelCheckScript("/models/qwen2.5-7b", "spark-b") },
];

function bashN(script: string): { status: number | null; stderr: string } {
    const result = spawnSync("bash", ["-n"], { input: script, encoding: "utf8" });
    return { status: result.status, stderr: result.stderr };
}

describe("snapshots", () => {
    for (const { name, script } of SCRIPTS) {
        it(name, () => matchSnapshot(`modelSync.${name}`, script));
    }
    it("rsyncd.conf", () => matchSnapshot("modelSync.rsyncd.conf", renderModelRsyncdConf(SERVE)));
});

describe("every script", () => {
    for (const { name, script } of SCRIPTS) {
        it(`${name} passes bash -n and runs in strict mode`, () => {
            const check = bashN(script);
            assert.equal(check.status, 0, check.stderr);
            assert.match(script, /^set -euo pipefail\n/);
        });
    }
});

describe("sources and names", () => {
    test("a Hugging Face id is downloaded, an absolute path is served as it is", () => {
        assert.equal(isLocalModelPath("/models/qwen"), true);
        assert.equal(isLocalModelPath("Qwen/Qwen2.5-7B-Instruct"), false);
    });

    test("the cache directory is huggingface_hub's models--ORG--NAME", () => {
        assert.equal(hubRepoDirName("Qwen/Qwen2.5-7B-Instruct"), "models--Qwen--Qwen2.5-7B-Instruct");
        assert.equal(hubRepoDirName("lab/tiny-chat"), "models--lab--tiny-chat");
    });

    test("the download writes where the container runtime mounts the cache", () => {
        const argv = dockerRunArgv(DOCKER_DEFAULT, "x", []);
        assert.ok(argv.includes(`${HF_HOME_DIR}:${HF_HOME_DIR}`), `dockerRunArgv mounts ${HF_HOME_DIR}: ${argv.join(" ")}`);
    });
});

describe("secrets stay out of scripts, argv and output", () => {
    test("the HF token comes on stdin and reaches hf through the environment only", () => {
        const docker = modelDownloadScript({ repoId: REPO, node: "spark-a", runtime: DOCKER_DEFAULT, withToken: true });
        assert.match(docker, /^token=\$\(cat\)$/m);
        // `-e HF_TOKEN` without a value: docker takes it from its own environment.
        assert.match(docker, / -e HF_TOKEN -- nvcr\.io\/nvidia\/vllm:26\.10-py3 hf download Qwen\/Qwen2\.5-7B-Instruct /);
        assert.match(docker, /^HF_TOKEN="\$token" docker run --rm --name spark-cluster-model-download /m);
        assert.doesNotMatch(docker, /--token|HF_TOKEN=[^"]/);
        const venv = modelDownloadScript({ repoId: REPO, node: "thor-1", runtime: VENV, withToken: true });
        assert.match(venv, /HF_TOKEN="\$token" \/opt\/vllm-venv\/bin\/hf download Qwen\/Qwen2\.5-7B-Instruct /);
        // Without a token there is no stdin to read and nothing to hand over.
        const none = modelDownloadScript({ repoId: REPO, node: "spark-a", runtime: DOCKER_DEFAULT, withToken: false });
        assert.match(none, /^token=$/m);
        assert.doesNotMatch(none, /HF_TOKEN/);
    });

    test("whatever the download prints goes through redact, which replaces the token", () => {
        const script = modelDownloadScript({ repoId: REPO, node: "spark-a", runtime: DOCKER_DEFAULT, withToken: true });
        const redact = /^redact\(\) \{.*\}$/m.exec(script)?.[0];
        assert.ok(redact, "the script defines redact");
        const token = "hf_SECRETsecret123";
        const out = spawnSync("bash", ["-c", `token=${token}\n${redact}\nprintf 'a %s b\\nno token\\n%s' "$token" "$token" | redact`], { encoding: "utf8" });
        assert.equal(out.status, 0, out.stderr);
        assert.equal(out.stdout, "a [hfToken] b\nno token\n[hfToken]\n");
        for (const line of script.split("\n").filter((l) => /tail -n 20 "\$log"|tail -c 2000 "\$log"/.test(l))) {
            assert.match(line, /\| redact/, `printed without redact: ${line}`);
        }
    });

    test("the head forgets the mark of a node that left (back later, it is served again); a member's mark keeps it from being waited for", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "model-serve-"));
        try {
            const repo = path.join(dir, "hub", hubRepoDirName(REPO));
            fs.mkdirSync(path.join(repo, "refs"), { recursive: true });
            fs.mkdirSync(path.join(repo, "snapshots", "abc"), { recursive: true });
            fs.writeFileSync(path.join(repo, "refs", "main"), "abc");
            fs.writeFileSync(path.join(repo, "snapshots", "abc", "config.json"), "{}");
            const done = path.join(dir, "sync", `${hubRepoDirName(REPO)}.done`);
            fs.mkdirSync(done, { recursive: true });
            for (const node of ["spark-b", "thor-1", "thor-2"]) fs.writeFileSync(path.join(done, node), "");
            const script = modelServeScript(SERVE)
                .replace(/^repo=.*$/m, `repo=${repo}`)
                .replace(/^sync_dir=.*$/m, `sync_dir=${path.join(dir, "sync")}`);
            const r = spawnSync("bash", ["-c", script], { encoding: "utf8", input: "s3cret", env: { ...process.env, SC_STATE: path.join(dir, "state") } });
            assert.equal(r.status, 0, r.stdout + r.stderr);
            assert.deepEqual(fs.readdirSync(done).sort(), ["spark-b", "thor-1"], "thor-2 left: its mark is gone");
            assert.match(
                r.stdout,
                /^\[spark-cluster\] thor-2 is no longer a node of the cluster: forgot that it held Qwen\/Qwen2\.5-7B-Instruct \(it pulls again if it comes back\)$/m,
            );
            assert.match(r.stdout, /every other node holds .*: nothing to serve/);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    test("the sync secret comes on stdin; the daemon reads it from a root-only file, the pull from RSYNC_PASSWORD", () => {
        const root = "0123456789abcdef".repeat(4);
        const secret = deriveSecret(root, SECRET_PURPOSES.modelSync(REPO));
        assert.match(secret, /^[0-9a-f]{64}$/);
        assert.notEqual(secret, deriveSecret(root, SECRET_PURPOSES.modelSync("Qwen/Qwen2.5-14B-Instruct")), "one secret per model");
        assert.notEqual(secret, deriveSecret(`${root}0`, SECRET_PURPOSES.modelSync(REPO)), "rotated with the root secret");
        const serve = modelServeScript(SERVE);
        const pull = modelPullScript({ repoId: REPO, node: "spark-b", head: "spark-a", headIp: "192.168.100.11" });
        for (const script of [serve, pull, ...SCRIPTS.map((s) => s.script)]) {
            assert.ok(!script.includes(secret) && !script.includes(API_KEY));
        }
        assert.match(serve, /^secret=\$\(cat\)$/m);
        assert.match(serve, /^\( umask 077; printf '%s:%s\\n' spark-cluster "\$secret" > "\$serve\/secrets" \)$/m);
        assert.match(pull, /^export RSYNC_PASSWORD=\$secret$/m);
        assert.doesNotMatch(pull, /--password-file|rsync:\/\/[^ ]*:[^@ ]*@/);
    });
});

describe("serving", () => {
    test("the daemon binds to the head's interconnect address and each worker's modules admit only its addresses", () => {
        const serve = modelServeScript(SERVE);
        assert.match(
            serve,
            new RegExp(`rsync --daemon --no-detach --config="\\$serve/rsyncd.conf" --address=192\\.168\\.100\\.11 --port=${MODEL_SYNC_PORT} &`),
        );
        const conf = renderModelRsyncdConf(SERVE);
        const modules = conf.split(/^(?=\[)/m).slice(1);
        assert.deepEqual(
            modules.map((m) => m.split("\n")[0]),
            ["[model-spark-b]", "[done-spark-b]", "[model-thor-1]", "[done-thor-1]"],
        );
        for (const m of modules) {
            assert.match(m, /^ {4}read only = yes$/m);
            assert.match(m, /^ {4}hosts deny = \*$/m);
            assert.match(m, /^ {4}auth users = spark-cluster$/m);
            const allowed = m.startsWith("[model-spark-b]") || m.startsWith("[done-spark-b]") ? "192.168.100.12 192.168.101.12" : "192.168.100.27";
            assert.match(m, new RegExp(`^ {4}hosts allow = ${allowed.replace(/\./g, "\\.")}$`, "m"));
        }
        assert.match(conf, /^\[model-spark-b\]\n {4}path = \/root\/\.cache\/huggingface\/hub\/models--Qwen--Qwen2\.5-7B-Instruct$/m);
        assert.match(conf, /^use chroot = yes$/m);
    });

    test("every wait is bounded and reports at least every 10 s", () => {
        for (const { name, script } of SCRIPTS.filter((s) => /download|serve\.sh|pull/.test(s.name))) {
            // The script's own loops, without the shared library (whose sc_wait has both lines too).
            assert.ok(script.includes(HOST_LIB), `${name} carries the host library`);
            const own = script.replace(HOST_LIB, "");
            assert.match(own, /\b(while|for|until)\b/, `${name} has a wait loop of its own`);
            assert.match(own, /-ge 10 \]/, `${name} reports every 10 s`);
            assert.match(own, /gave up after \d+ s/, `${name} is bounded`);
        }
        assert.match(modelServeScript(SERVE), /^timeout --kill-after=10 \d+ rsync --daemon/m, "the daemon dies on its own at the latest");
    });
});

describe("the pull's summary (the modelSync output)", () => {
    test("reads each form a pull step prints", () => {
        // As the pull prints them (test/process/modelPull.test.ts runs it), the older form before the rate, the unchanged copy.
        const cases: [string, string][] = [
            [
                "[spark-cluster] pulling lab/pull-test from head (127.0.0.1) in 16 streams: 2 MiB in 4 lists\n[spark-cluster] worker holds lab/pull-test: 2.1M in /root/.cache/huggingface/hub/models--lab--pull-test; pulled 2 MiB in 1 s (1.5 MB/s, 16 stream(s))\n",
                "pulled 2 MiB in 1 s (1.5 MB/s, 16 stream(s))",
            ],
            [
                "[spark-cluster] spark-b holds lab/tiny-chat: 1.2M in /root/.cache/huggingface/hub/models--lab--tiny-chat, pulled in 3 s\n",
                "pulled in 3 s (before the rate was recorded)",
            ],
            ["[spark-cluster] spark-b already holds lab/tiny-chat (1.2M, unchanged since it was copied): nothing to copy\n", "held it already: nothing copied"],
            ["", "not pulled yet"],
        ];
        for (const [stdout, summary] of cases) assert.equal(pullSummary(stdout), summary);
        assert.equal(pullSummary(undefined), "not pulled yet");
    });
});

describe("destroy", () => {
    test("leaves the model in the cache by default, removes it with model.removeCacheOnDestroy", () => {
        const keep = modelCacheRemovalScript({ repoId: REPO, node: "spark-b", remove: false });
        assert.doesNotMatch(keep, /rm -rf/);
        assert.match(keep, /left \$model in \$repo on spark-b: model caches are your data/);
        const remove = modelCacheRemovalScript({ repoId: REPO, node: "spark-b", remove: true });
        assert.match(remove, /rm -rf "\$repo" \/root\/\.cache\/huggingface\/hub\/\.locks\/models--Qwen--Qwen2\.5-7B-Instruct/);
        for (const script of [keep, remove, modelServeRemovalScript(REPO)]) {
            assert.match(script, /sc_cleanup_state/, "our state directory goes when empty");
        }
    });

    test("model.removeCacheOnDestroy is a boolean, off unless set", () => {
        const base = {
            nodes: [
                { name: "spark-a", kind: "spark", head: true, ssh: { host: "10.0.0.11" }, interconnect: [{ address: "192.168.100.11/24" }] },
                { name: "spark-b", kind: "spark", ssh: { host: "10.0.0.12" }, interconnect: [{ address: "192.168.100.12/24" }] },
            ],
            sshPrivateKeyPath: "/home/you/.ssh/id_ed25519",
            apiKey: API_KEY,
        };
        const parse = (model: Record<string, unknown>) => parseConfig({ values: { ...base, model }, secretKeys: new Set(["apiKey"]) });
        assert.equal(parse({ source: REPO }).model.removeCacheOnDestroy, undefined);
        assert.equal(parse({ source: REPO, removeCacheOnDestroy: true }).model.removeCacheOnDestroy, true);
        assert.throws(() => parse({ source: REPO, removeCacheOnDestroy: "yes" }), /spark-cluster:model\.removeCacheOnDestroy: .*Example: false/);
    });
});

describe("a local path", () => {
    test("is checked on every node, naming model.source and the node when it is missing", () => {
        const script = localModelCheckScript("/models/qwen2.5-7b", "spark-b");
        const missing = spawnSync("bash", ["-c", script.replace("path=/models/qwen2.5-7b", "path=/nonexistent/model-dir")], { encoding: "utf8" });
        assert.equal(missing.status, 1);
        assert.match(
            missing.stderr,
            /^spark-cluster:model\.source: \/models\/qwen2\.5-7b does not exist on spark-b\. A local path is served as it is, from the same path on every node/,
        );
    });
});

describe("vLLM runs offline", () => {
    test("every vLLM unit carries HF_HUB_OFFLINE=1, in both runtimes", () => {
        const spec = { ...VLLM_MP_BASE, source: REPO, servedName: "qwen", tensorParallel: 2, pipelineParallel: 1 };
        const docker = renderVllmUnit(spec, DOCKER_DEFAULT, "0123456789abcdef");
        assert.match(docker, / -e HF_HUB_OFFLINE=1 -- nvcr\.io\/nvidia\/vllm:26\.10-py3 vllm serve /);
        const venv = renderVllmUnit(spec, VENV, "0123456789abcdef", "192.168.100.11:6379");
        assert.match(venv, /^Environment="HF_HUB_OFFLINE=1"$/m);
        assert.match(venv, /^Environment="RAY_ADDRESS=192\.168\.100\.11:6379"$/m);
    });
});

test("no snapshot of this file is left unused", () => {
    assert.deepEqual(unusedSnapshots("modelSync."), []);
});
