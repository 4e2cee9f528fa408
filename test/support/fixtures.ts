// Fixtures the renderer tests share: the runtimes as the config defaults them.
import { DEFAULT_VLLM_IMAGE, type DockerRuntime, type VenvRuntime } from "../../config";
import assert from "node:assert/strict";
import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { type VllmServeSpec, vllmServeArgv } from "../../components/render/vllm";

/** A node's docker runtime with the seeds' defaults (privileged, memlock, /dev/infiniband, 16g shm). */
export const DOCKER_DEFAULT: DockerRuntime = {
    kind: "docker",
    image: DEFAULT_VLLM_IMAGE,
    privileged: true,
    memlockUnlimited: true,
    infiniband: true,
    shmSize: "16g",
};

/** A venv runtime (a Thor's source-built vLLM). */
export const VENV: VenvRuntime = { kind: "venv", path: "/opt/vllm-venv" };

/** `vllm serve` settings for the mp executor, before a node's rank is added. */
export const VLLM_MP_BASE: Omit<VllmServeSpec, "multiNode"> = {
    source: "/models/qwen2.5-7b-instruct",
    servedName: "qwen2.5-7b",
    tensorParallel: 1,
    pipelineParallel: 2,
    executor: "mp",
    apiHost: "0.0.0.0",
    apiPort: 8000,
    gpuMemoryUtilization: 0.9,
    enforceEager: false,
    trustRemoteCode: false,
    extraArgs: [],
    env: {},
    readyTimeoutSeconds: 600,
};

/** `vllm serve` settings with every optional flag on. */
const EVERY_OPTIONAL: VllmServeSpec = {
    source: "/models/m",
    servedName: "m",
    tensorParallel: 2,
    pipelineParallel: 2,
    executor: "ray",
    apiHost: "0.0.0.0",
    apiPort: 8000,
    gpuMemoryUtilization: 0.8,
    maxModelLen: 4096,
    maxNumSeqs: 8,
    quantization: "fp8",
    kvCacheDtype: "fp8",
    enforceEager: true,
    attentionBackend: "FLASHINFER",
    trustRemoteCode: true,
    extraArgs: [],
    env: {},
    readyTimeoutSeconds: 600,
};
const SPECS: Record<string, VllmServeSpec> = {
    "ray, rank 0": EVERY_OPTIONAL,
    "mp, rank 0": { ...EVERY_OPTIONAL, executor: "mp", multiNode: { nnodes: 2, rank: 0, masterAddr: "10.0.0.1", masterPort: 29501 } },
    "mp, headless rank 1": { ...EVERY_OPTIONAL, executor: "mp", multiNode: { nnodes: 2, rank: 1, masterAddr: "10.0.0.1", masterPort: 29501 } },
    "a fixed KV-cache budget": { ...EVERY_OPTIONAL, kvCacheMemoryBytes: 1 << 30 },
};

/** The options among `vllm serve <model> …` (values never start with "-" in these specs). */
function optionsOf(argv: string[]): string[] {
    assert.deepEqual(argv.slice(0, 2), ["vllm", "serve"]);
    return argv.slice(3).filter((w) => w.startsWith("-"));
}

/** Every flag the renderer can emit (vllmServeArgv), sorted: the Ray executor, and rank 0 and a headless rank of the mp executor. */
export const RENDERABLE_VLLM_FLAGS: string[] = [...new Set(Object.values(SPECS).flatMap((s) => optionsOf(vllmServeArgv(s))))].sort();

/**
 * Runs a probe script (made from the venv's path) against a throwaway venv whose `bin/python` is
 * `python` (a shell script), then removes the venv.
 */
export function runProbeInFakeVenv(python: string, script: (venv: VenvRuntime) => string): SpawnSyncReturns<string> {
    const venv = fs.mkdtempSync(path.join(os.tmpdir(), "probe-venv-"));
    try {
        fs.mkdirSync(path.join(venv, "bin"));
        fs.writeFileSync(path.join(venv, "bin", "python"), python, { mode: 0o755 });
        return spawnSync("bash", ["-c", script({ kind: "venv", path: venv })], { encoding: "utf8" });
    } finally {
        fs.rmSync(venv, { recursive: true, force: true });
    }
}

/** The lab's two Sparks: spark-a names its twins, spark-b has them detected and logs in as ubuntu (sudo). */
export function sparkPair(): Record<string, unknown>[] {
    return [
        {
            name: "spark-a",
            kind: "spark",
            head: true,
            ssh: { host: "10.0.0.11" },
            interconnect: [
                { name: "enp1s0f1np1", address: "192.168.100.11/24" },
                { name: "enP2p1s0f1np1", address: "192.168.101.11/24" },
            ],
        },
        {
            name: "spark-b",
            kind: "spark",
            ssh: { host: "10.0.0.12", user: "ubuntu" },
            interconnect: [{ address: "192.168.100.12/24" }, { address: "192.168.101.12/24" }],
        },
    ];
}
