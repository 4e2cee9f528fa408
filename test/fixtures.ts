// Fixtures the renderer tests share: the runtimes as the config defaults them.
import type { DockerRuntime, VenvRuntime } from "../config";

/** A node's docker runtime with the seeds' defaults (privileged, memlock, /dev/infiniband, 16g shm). */
export const DOCKER_DEFAULT: DockerRuntime = {
    kind: "docker",
    image: "nvcr.io/nvidia/vllm:25.09-py3",
    privileged: true,
    memlockUnlimited: true,
    infiniband: true,
    shmSize: "16g",
};

/** A venv runtime (a Thor's source-built vLLM). */
export const VENV: VenvRuntime = { kind: "venv", path: "/opt/vllm-venv" };
