// Fixtures the renderer tests share: the runtimes as the config defaults them.
import { DEFAULT_VLLM_IMAGE, type DockerRuntime, type VenvRuntime } from "../config";
import type { VllmServeSpec } from "../components/render/vllm";

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
};
