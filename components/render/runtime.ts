// argv of the long-running processes and the one thing the runtime changes:
// how a unit's ExecStart runs them (a container or the venv's binaries).
import type { DockerRuntime, Runtime } from "../../config";
import { shellJoin } from "./shell";

export interface RayStartSpec {
    role: "head" | "worker";
    nodeIp: string;
    headIp: string;
    port: number;
    gpus: number;
    numCpus?: number;
    objectStoreMemoryMb?: number;
    dashboardHost: string;
    dashboardPort: number;
}

/** `ray start --block …` pinned to the node's interconnect address. */
export function rayStartArgv(spec: RayStartSpec): string[] {
    const argv = ["ray", "start", "--block", `--node-ip-address=${spec.nodeIp}`, `--num-gpus=${spec.gpus}`];
    if (spec.role === "head") {
        argv.push(
            "--head",
            `--port=${spec.port}`,
            "--include-dashboard=true",
            `--dashboard-host=${spec.dashboardHost}`,
            `--dashboard-port=${spec.dashboardPort}`,
        );
    } else {
        argv.push(`--address=${spec.headIp}:${spec.port}`);
    }
    if (spec.numCpus !== undefined) {
        argv.push(`--num-cpus=${spec.numCpus}`);
    }
    if (spec.objectStoreMemoryMb !== undefined) {
        argv.push(`--object-store-memory=${spec.objectStoreMemoryMb * 1024 * 1024}`);
    }
    return argv;
}

export interface VllmServeSpec {
    source: string;
    servedName: string;
    tensorParallel: number;
    pipelineParallel: number;
    executor: "ray" | "mp";
    host: string;
    port: number;
    gpuMemoryUtilization: number;
    maxModelLen?: number;
    maxNumSeqs?: number;
    quantization?: string;
    kvCacheDtype?: string;
    enforceEager: boolean;
    attentionBackend?: string;
    trustRemoteCode: boolean;
    extraArgs: string[];
    /** mp executor only: this node's rank and the head's address. */
    multiNode?: { nnodes: number; rank: number; masterAddr: string; masterPort: number };
}

/**
 * `vllm serve …`. The API key is NOT here: vLLM reads it from VLLM_API_KEY in
 * the unit's root-only environment file, so it never shows in argv or ps.
 */
export function vllmServeArgv(spec: VllmServeSpec): string[] {
    const argv = [
        "vllm", "serve", spec.source,
        "--served-model-name", spec.servedName,
        "--tensor-parallel-size", String(spec.tensorParallel),
        "--pipeline-parallel-size", String(spec.pipelineParallel),
        "--distributed-executor-backend", spec.executor,
        "--gpu-memory-utilization", String(spec.gpuMemoryUtilization),
    ];
    const rank = spec.multiNode?.rank ?? 0;
    if (spec.multiNode) {
        argv.push(
            "--nnodes", String(spec.multiNode.nnodes),
            "--node-rank", String(rank),
            "--master-addr", spec.multiNode.masterAddr,
            "--master-port", String(spec.multiNode.masterPort),
        );
    }
    if (rank > 0) {
        argv.push("--headless");
    } else {
        argv.push("--host", spec.host, "--port", String(spec.port));
    }
    if (spec.maxModelLen !== undefined) argv.push("--max-model-len", String(spec.maxModelLen));
    if (spec.maxNumSeqs !== undefined) argv.push("--max-num-seqs", String(spec.maxNumSeqs));
    if (spec.quantization !== undefined) argv.push("--quantization", spec.quantization);
    if (spec.kvCacheDtype !== undefined) argv.push("--kv-cache-dtype", spec.kvCacheDtype);
    if (spec.enforceEager) argv.push("--enforce-eager");
    if (spec.attentionBackend !== undefined) argv.push("--attention-backend", spec.attentionBackend);
    if (spec.trustRemoteCode) argv.push("--trust-remote-code");
    return [...argv, ...spec.extraArgs];
}

/** Container names of our units, so ExecStop and `docker exec` find them. */
export const CONTAINER_NAMES = { ray: "spark-cluster-ray", vllm: "spark-cluster-vllm" } as const;

/** What a unit runs: its argv, in which runtime, with which env files (in order, later wins). */
export interface ExecSpec {
    runtime: Runtime;
    container: string;
    argv: string[];
    envFiles: string[];
    environment: Record<string, string>;
}

/** docker run flags from the seeds; privileged and memlock are configuration (DESIGN.md). */
export function dockerRunArgv(runtime: DockerRuntime, container: string, envFiles: string[], environment: Record<string, string> = {}): string[] {
    const argv = [
        "/usr/bin/docker", "run", "--rm", "--name", container,
        "--network", "host", "--ipc", "host",
        "--gpus", "all",
        `--shm-size=${runtime.shmSize}`,
        "--ulimit", "stack=67108864",
    ];
    if (runtime.privileged) argv.push("--privileged");
    if (runtime.memlockUnlimited) argv.push("--ulimit", "memlock=-1");
    if (runtime.infiniband) argv.push("-v", "/dev/infiniband:/dev/infiniband");
    argv.push(
        "-v", "/root/.cache/huggingface:/root/.cache/huggingface",
        // Ray's session directory (raylet and object store sockets): the vLLM
        // container's Ray driver reaches the Ray container's node through it.
        "-v", "/tmp/ray:/tmp/ray",
    );
    for (const file of envFiles) argv.push("--env-file", file);
    for (const [key, value] of Object.entries(environment)) argv.push("-e", `${key}=${value}`);
    return [...argv, runtime.image];
}

/** The unit's ExecStart argv: the only thing that differs between runtimes. */
export function execStartArgv(spec: ExecSpec): string[] {
    if (spec.runtime.kind === "docker") {
        return [...dockerRunArgv(spec.runtime, spec.container, spec.envFiles, spec.environment), ...spec.argv];
    }
    const [program, ...args] = spec.argv;
    return [`${spec.runtime.path}/bin/${program}`, ...args];
}

/** How to run a one-off command next to a unit's process (readiness checks). */
export function execBeside(runtime: Runtime, container: string, argv: string[]): string {
    if (runtime.kind === "docker") {
        return shellJoin(["docker", "exec", container, ...argv]);
    }
    const [program, ...args] = argv;
    return shellJoin([`${runtime.path}/bin/${program}`, ...args]);
}
