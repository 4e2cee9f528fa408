// The one thing the runtime changes: how a unit's ExecStart runs a program (a
// container with the seeds' docker flags, or the venv's own binaries), and how
// a one-off command runs beside it.
import type { DockerRuntime, Runtime } from "../../../config";
import { shellJoin } from "./shell";

/** What a unit runs: its argv, in which runtime, with which env files (in order, later wins). */
export interface ExecSpec {
    runtime: Runtime;
    container: string;
    argv: string[];
    envFiles: string[];
    environment: Record<string, string>;
    /** Host directories the container sees at the same path, read-only (a local model). Defaults to none. */
    readOnlyMounts?: string[];
}

/** docker run flags from the seeds; privileged, memlock and /dev/infiniband are configuration: real Sparks want them for RDMA, a VM (the lab) cannot grant them. */
export function dockerRunArgv(
    runtime: DockerRuntime,
    container: string,
    envFiles: string[],
    environment: Record<string, string> = {},
    readOnlyMounts: readonly string[] = [],
): string[] {
    const argv = [
        "/usr/bin/docker",
        "run",
        "--rm",
        "--name",
        container,
        "--network",
        "host",
        "--ipc",
        "host",
        // The host's PID namespace: Ray's driver (vLLM, in its own container) finds the node's
        // raylet by its process (ray/_private/services.py find_node_ids, Ray 2.60), as it would
        // on a host without containers.
        "--pid",
        "host",
        "--gpus",
        "all",
        `--shm-size=${runtime.shmSize}`,
        "--ulimit",
        "stack=67108864",
    ];
    if (runtime.privileged) argv.push("--privileged");
    if (runtime.memlockUnlimited) argv.push("--ulimit", "memlock=-1");
    if (runtime.infiniband) argv.push("-v", "/dev/infiniband:/dev/infiniband");
    argv.push(
        "-v",
        "/root/.cache/huggingface:/root/.cache/huggingface",
        // Ray's session directory (raylet and object store sockets): the vLLM
        // container's Ray driver reaches the Ray container's node through it.
        "-v",
        "/tmp/ray:/tmp/ray",
    );
    // config refuses a local model path with `:` or `,`, which -v would read as separators.
    for (const dir of readOnlyMounts) argv.push("-v", `${dir}:${dir}:ro`);
    for (const file of envFiles) argv.push("--env-file", file);
    for (const [key, value] of Object.entries(environment)) argv.push("-e", `${key}=${value}`);
    // `--` ends docker's options: the image (validated, never starting with -) is not read as one.
    return [...argv, "--", runtime.image];
}

/** The unit's ExecStart argv: the only thing that differs between runtimes. */
export function execStartArgv(spec: ExecSpec): string[] {
    if (spec.runtime.kind === "docker") {
        return [...dockerRunArgv(spec.runtime, spec.container, spec.envFiles, spec.environment, spec.readOnlyMounts), ...spec.argv];
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
