/**
 * Lab test of unified memory (a Spark's GPU and OS share one pool): the model sync's own steps
 * (components/render/modelSync.ts modelSyncPlan: the head's serve, spark-b's pull, over rsync as
 * `up` runs them) copy a model onto spark-b, and the pull leaves its files in spark-b's page cache.
 * vLLM's start-up memory check (the stand-in's, which reads free memory as cudaMemGetInfo reports
 * it on a Spark, the model files' cached pages counted as used: lab/vllm_standin/vllm_standin/memory.py)
 * then fails when vLLM is started without the memory step, and passes when the product's vLLM
 * unit starts it, on the first start and on a restart after the cache filled again. The unit's
 * journal shows MemFree and MemAvailable before and after the eviction.
 *
 * The pool is played small (LAB_VLLM_GPU_MEMORY_TOTAL_MIB=1024, utilization 0.75, so 768 MiB must
 * be free) and the model carries one 512 MiB file: cached, 512 MiB are free; evicted, 1024.
 * The head holds the model as its download step leaves it (written there by the test: the lab
 * hub has no 512 MiB model); the sync runs over the management addresses (no netplan here).
 * Needs root; about 2 min.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";

import { installUnitScript } from "../../components/render/host/files";
import { modelSyncPlan } from "../../components/render/modelSync";
import { renderVllmUnit, vllmServeArgv, type VllmServeSpec } from "../../components/render/vllm";
import { CONFIG_DIR, HF_HUB_DIR, RUNTIME_ENV_PATH, UNITS, VLLM_SECRETS_PATH } from "../../config/hostPaths";
import { lab, shQuote, ssh, sshRun, startScript, startUnit, unitLog, unitState, waitFor, withExclusiveLab } from "./lab-harness";

const repoId = "lab/uma-pagecache";
const repoDir = `${HF_HUB_DIR}/models--lab--uma-pagecache`;
const revision = "0123456789abcdef0123456789abcdef01234567";
const bigFileMiB = 512;
const poolEnv = { LAB_VLLM_GPU_MEMORY_TOTAL_MIB: "1024" };
const apiKey = randomBytes(16).toString("hex");

const spec: VllmServeSpec = {
    source: repoId,
    servedName: "uma-test",
    tensorParallel: 1,
    pipelineParallel: 1,
    executor: "mp",
    apiHost: "0.0.0.0",
    apiPort: 8000,
    gpuMemoryUtilization: 0.75,
    enforceEager: true,
    trustRemoteCode: false,
    extraArgs: [],
    env: poolEnv,
    readyTimeoutSeconds: 600,
    unifiedMemory: true,
};
const venv = { kind: "venv", path: "/opt/lab-venv" } as const;
const syncSecret = randomBytes(16).toString("hex");

/**
 * MiB of the model's files that NODE holds in its page cache: fincore (util-linux) where the node
 * has it, else mincore(2) through the stand-in's helper (lab/vllm_standin/vllm_standin/memory.py).
 */
function cachedMiB(node: string): number {
    const out = ssh(
        node,
        `if command -v fincore >/dev/null; then find ${repoDir}/blobs -type f -print0 | xargs -0 fincore --bytes --noheadings --raw -o RES | awk '{ s += $1 } END { print s + 0 }'; ` +
            `else /opt/lab-venv/bin/python3 -c 'import sys; from vllm_standin.memory import model_page_cache_bytes; print(model_page_cache_bytes([sys.argv[1]]))' ${repoDir}/blobs; fi`,
    );
    return Number(out.trim()) / 2 ** 20;
}

withExclusiveLab({ setUp: () => void lab(["up"]) });

describe("unified memory: the model sync fills the page cache, the unit's memory step empties it", () => {
    test("after the model sync, vLLM's start-up check fails without the eviction and passes with it, on start and restart; the journal shows memory before and after", async (t) => {
        // The head holds the model as its download leaves it: the stand-in hub's tiny model plus one 512 MiB weights file.
        ssh(
            "spark-a",
            [
                "set -euo pipefail",
                'src=$(dirname "$(find /var/lib/lab-sim/hub -name config.json | head -n 1)")',
                `mkdir -p ${repoDir}/refs ${repoDir}/blobs ${repoDir}/snapshots/${revision}`,
                `printf %s ${revision} > ${repoDir}/refs/main`,
                `cp "$src"/* ${repoDir}/snapshots/${revision}/`,
                `head -c ${bigFileMiB}M /dev/urandom > ${repoDir}/blobs/big`,
                `ln -s ../../blobs/big ${repoDir}/snapshots/${revision}/model-00001-of-00001.safetensors`,
            ].join("\n"),
        );
        assert.equal(ssh("spark-b", `ls -d ${repoDir} 2>/dev/null || true`).trim(), "", "spark-b starts without the model");

        // The model sync's serve (head) and pull (spark-b) steps, as up runs them: side by side, the sync secret on stdin.
        const nodeSpec = (node: string, ip: string) => ({ node, ip, ips: [ip], runtime: venv });
        const plan = modelSyncPlan({
            source: repoId,
            localModel: false,
            removeCacheOnDestroy: false,
            syncStreams: 4,
            withToken: false,
            head: nodeSpec("spark-a", "10.77.0.11"),
            workers: [nodeSpec("spark-b", "10.77.0.12")],
        });
        assert.deepEqual(
            plan.map((step) => step.name),
            ["download", "serve", "pull-spark-b"],
        );
        const stepUnit = (name: string) => `uma-sync-${name}`;
        for (const step of plan.filter((s) => s.name !== "download")) {
            assert.equal(step.stdin, "syncSecret");
            startScript(step.node, stepUnit(step.name), step.create, syncSecret);
        }
        for (const step of plan.filter((s) => s.name !== "download")) {
            await waitFor(`the model sync's ${step.name} step`, 120_000, () => (unitState(step.node, stepUnit(step.name)).running ? undefined : true));
            const log = unitLog(step.node, stepUnit(step.name));
            assert.equal(unitState(step.node, stepUnit(step.name)).status, 0, log);
            t.diagnostic(`${step.name} on ${step.node}:\n${log.trim()}`);
        }
        assert.match(
            unitLog("spark-b", stepUnit("pull-spark-b")),
            /spark-b holds lab\/uma-pagecache: \S+ in \/root\/\.cache\/huggingface\/hub\/models--lab--uma-pagecache; pulled 51\d MiB in \d+ s \([\d.]+ MB\/s, 4 stream\(s\)\)/,
        );
        assert.match(unitLog("spark-a", stepUnit("serve")), /every other node holds lab\/uma-pagecache; stopped serving it/);
        const written = cachedMiB("spark-b");
        assert.ok(written >= bigFileMiB - 16, `the pull left ${written} MiB of the model in spark-b's page cache`);

        // What the unit runs, started without its memory step: the check fails.
        const env = Object.entries({ ...poolEnv, HF_HUB_OFFLINE: "1" })
            .map(([k, v]) => `${k}=${v}`)
            .join(" ");
        const argv = vllmServeArgv(spec);
        startUnit("spark-b", "uma-no-eviction", `env ${env} /opt/lab-venv/bin/${argv.map(shQuote).join(" ")}`);
        await waitFor("vLLM started without the eviction to exit", 60_000, () => (unitState("spark-b", "uma-no-eviction").running ? undefined : true));
        const refused = unitLog("spark-b", "uma-no-eviction");
        assert.notEqual(unitState("spark-b", "uma-no-eviction").status, 0, refused);
        assert.match(
            refused,
            /Free memory on device cuda:0 \(0\.[45]\d*\/1\.0 GiB\) on startup is less than desired GPU memory utilization \(0\.75, 0\.75 GiB\)/,
            refused,
        );

        // The product's unit: its memory step evicts the model's pages, then the check passes.
        ssh("spark-b", `mkdir -p ${CONFIG_DIR} && : > ${RUNTIME_ENV_PATH} && umask 077 && printf 'VLLM_API_KEY=%s\\n' ${apiKey} > ${VLLM_SECRETS_PATH}`);
        const unit = renderVllmUnit(spec, venv, "lab");
        assert.match(unit, /^ExecStartPre=\/bin\/bash -c .* unified-memory \/root\/\.cache\/huggingface\/hub\/models--lab--uma-pagecache$/m);
        const installed = sshRun("spark-b", installUnitScript(UNITS.vllm, unit));
        assert.equal(installed.status, 0, `${installed.stdout}\n${installed.stderr}\n${unitLog("spark-b", UNITS.vllm)}`);
        const healthy = () => sshRun("spark-b", "curl -s -o /dev/null -w %{http_code} -m 3 http://127.0.0.1:8000/health").stdout === "200";
        await waitFor("vLLM on spark-b to answer /health after the eviction", 90_000, () => (healthy() ? true : undefined));
        const started = unitLog("spark-b", UNITS.vllm);
        const mem = /MemFree (\d+\.\d\d) GiB, MemAvailable (\d+\.\d\d) GiB/;
        const beforeLine = /^unified memory: MemFree \d+\.\d\d GiB, MemAvailable \d+\.\d\d GiB before evicting the model's files from the page cache$/m.exec(
            started,
        );
        const afterLine = /^unified memory: MemFree \d+\.\d\d GiB, MemAvailable \d+\.\d\d GiB after$/m.exec(started);
        assert.ok(beforeLine && afterLine, started);
        // The lab's /proc/meminfo is the host's (shared with everything else on it): its figures are shown, not asserted.
        const [b, a] = [mem.exec(beforeLine[0]), mem.exec(afterLine[0])];
        t.diagnostic(`host MemFree ${b?.[1]} -> ${a?.[1]} GiB, MemAvailable ${b?.[2]} -> ${a?.[2]} GiB around the eviction of ${bigFileMiB} MiB`);
        assert.match(started, /^unified memory: evicted [1-9]\d* file\(s\) under \/root\/\.cache\/huggingface\/hub\/models--lab--uma-pagecache$/m, started);
        assert.match(started, /Free memory on device cuda:0 at start: (0\.9\d|1\.00)\/1\.00 GiB \(unified memory/, started);
        assert.ok(cachedMiB("spark-b") < 16, "the model's pages left the page cache");

        // The cache fills again (the files are read); a restart evicts again before the check.
        ssh("spark-b", `cat ${repoDir}/blobs/big > /dev/null`);
        assert.ok(cachedMiB("spark-b") >= bigFileMiB - 16);
        ssh("spark-b", `systemctl restart ${UNITS.vllm}.service`);
        await waitFor("vLLM on spark-b to answer /health after a restart", 90_000, () => (healthy() ? true : undefined));
        const restarted = unitLog("spark-b", UNITS.vllm, 400);
        assert.ok(
            (restarted.match(/^unified memory: MemFree \d+\.\d\d GiB, MemAvailable \d+\.\d\d GiB after$/gm) ?? []).length >= 2,
            `the memory step ran on the restart too:\n${restarted}`,
        );
        assert.ok(cachedMiB("spark-b") < 16);
    });
});
