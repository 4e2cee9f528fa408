// The runtime strategies: what differs between running in a container (docker,
// with the docker flags a Spark's vLLM container needs) and running a venv's own binaries: a unit's
// ExecStart and its lines around it, a one-off command beside a unit, a
// throwaway Python, the env files' reader, the model download.
import type { DockerRuntime, Runtime, VenvRuntime } from "../../../config";
import { HF_HOME_DIR } from "../../../config/hostPaths";
import { shellJoin, shellQuote } from "./shell";
import { journalTailLine } from "./journal";

/** Who reads an environment file (host/envFile.ts renders one for each): systemd's EnvironmentFile= or docker's --env-file. */
export type EnvFileReader = "systemd" | "docker";

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

/**
 * docker run flags for a Spark's vLLM container; privileged, memlock and /dev/infiniband are
 * configuration: real Sparks want them for RDMA, a VM (the lab) cannot grant them. `extraOptions`
 * (runtime.extraOptions, validated against the allow-list) come after the project's own flags.
 */
export function dockerRunArgv(
    runtime: DockerRuntime,
    container: string,
    envFiles: string[],
    environment: Record<string, string> = {},
    readOnlyMounts: readonly string[] = [],
    extraOptions: readonly string[] = [],
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
    // RDMA's devices: privileged, the guides' bind mount; without privilege a bind mount gives no
    // access to the device nodes (the container's device cgroup), so docker adds each device under
    // /dev/infiniband (uverbs*, rdma_cm), with IPC_LOCK for the memory RDMA registers (pins).
    if (runtime.infiniband) {
        if (runtime.privileged) argv.push("-v", "/dev/infiniband:/dev/infiniband");
        else argv.push("--device=/dev/infiniband", "--cap-add=IPC_LOCK");
    }
    argv.push(
        "-v",
        `${HF_HOME_DIR}:${HF_HOME_DIR}`,
        // Ray's session directory (raylet and object store sockets): the vLLM
        // container's Ray driver reaches the Ray container's node through it.
        "-v",
        "/tmp/ray:/tmp/ray",
    );
    // config refuses a local model path with `:` or `,`, which -v would read as separators.
    for (const dir of readOnlyMounts) argv.push("-v", `${dir}:${dir}:ro`);
    // The user's options from the allow-list (config/dockerOptions.ts), each one `--flag=value` token.
    argv.push(...extraOptions);
    for (const file of envFiles) argv.push("--env-file", file);
    for (const [key, value] of Object.entries(environment)) argv.push("-e", `${key}=${value}`);
    // `--` ends docker's options: the image (validated, never starting with -) is not read as one.
    return [...argv, "--", runtime.image];
}

/** A process of ours in the node's runtime, as a unit's ExecStart or a throwaway run. */
export interface RuntimeProcess {
    container: string;
    argv: string[];
    envFiles: string[];
    environment: Record<string, string>;
    /** Host directories the container sees at the same path, read-only (a local model). Defaults to none. */
    readOnlyMounts?: readonly string[];
}

/**
 * Everything that differs between the runtimes, behind one interface: renderers and components
 * call it and never ask which runtime a node has. Adding a runtime is adding one object here.
 */
export interface RuntimeStrategy {
    /** Where the runtime is, in the user's words, for messages: `the image …`, `the venv …`. */
    readonly label: string;
    /** The container image (its tag can name different images on different nodes); undefined for a runtime without one. */
    readonly image: string | undefined;
    /** Who reads the env files the units name: docker (--env-file) or systemd (EnvironmentFile=). */
    readonly envFileReader: EnvFileReader;
    /** A unit's ExecStart argv. */
    execStart(process: RuntimeProcess): string[];
    /** A one-off command next to a unit's process (readiness checks), as shell. */
    execBeside(container: string, argv: string[]): string;
    /** {@link execBeside} with OPENAI_API_KEY of the calling shell handed to the command by name (never its value in argv). */
    execBesideWithApiKey(container: string, argv: string[]): string;
    /**
     * Lines that wait (`sc_wait`, at most `seconds`) until `unit`'s container runs, so that
     * {@link execBeside} right after the unit started finds it; they end the script, the unit's
     * log printed, if it does not. None for a runtime without containers.
     */
    awaitContainer(container: string, unit: string, seconds: number): string[];
    /** The runtime's units: extra [Unit] lines, whether systemd reads the env files, and the lines around ExecStart. */
    unit(container: string): { after: string[]; requires: string[]; systemdReadsEnvFiles: boolean; preStart: string[]; stop: string[] };
    /** Shell that prints the PID (in the node's PID namespace) of the process `unit` runs in the runtime, empty or 0 when none runs. */
    enginePid(container: string, unit: string): string;
    /** Shell that runs Python `code` in the runtime without touching anything (no network for a container). */
    pythonOneOff(code: string): string;
    /** Probe lines that print `<prefix><id>` of the image the node would run; none for a runtime without an image. */
    imageIdLines(prefix: string): string[];
    /**
     * The runtime as a serving unit starts it: a docker runtime's image by `imageId` (the ID the
     * engine probe found at the last up, {@link isImageId}), so that a tag re-pointed later (a
     * `docker pull` of a republished tag, a re-tag) cannot change what a restart runs. Itself for a
     * runtime without an image, or without an ID (not probed yet).
     */
    pinned(imageId: string | undefined): Runtime;
    /**
     * Read-back lines (`$last`: the probe's last output, with `<prefix><id>`) that print one line per
     * difference between the image the tag names now and the one the probe found: another ID, or
     * that image gone from the node. None for a runtime without an image.
     */
    imageDriftLines(node: string, prefix: string): string[];
    /** Shell that runs the Python script at `scriptPath` with `args`, the env file as the units read it, and `environment` on top. */
    pythonScript(spec: { container: string; scriptPath: string; args: string[]; envFile: string; environment: Record<string, string> }): string;
    /** Lines that remove a throwaway container left by an interrupted run; none for a runtime without containers. */
    removeThrowaway(container: string): string[];
    /** The Hugging Face download of `repoId` into `hfHome`, with the runtime's own `hf` (HF_TOKEN from the shell's `$token` when `withToken`). */
    hfDownload(spec: { container: string; hfHome: string; repoId: string; withToken: boolean }): string;
    /** The download tool: where it runs (for messages), the shell test that it is there, and what to say when it is not. */
    hfTool(node: string): { where: string; present: string; missing: string };
}

function dockerStrategy(runtime: DockerRuntime): RuntimeStrategy {
    const pythonIn = (extra: string[], tail: string[]) => ["docker", "run", "--rm", ...extra, "--entrypoint", "python3", "--", runtime.image, ...tail];
    return {
        label: `the image ${runtime.image}`,
        image: runtime.image,
        envFileReader: "docker",
        // Only the serving units get runtime.extraOptions: the NCCL check and the download run with the project's flags.
        execStart: (p) => [...dockerRunArgv(runtime, p.container, p.envFiles, p.environment, p.readOnlyMounts, runtime.extraOptions), ...p.argv],
        execBeside: (container, argv) => shellJoin(["docker", "exec", container, ...argv]),
        // `-e NAME` without a value: docker copies it from this shell's environment.
        execBesideWithApiKey: (container, argv) => shellJoin(["docker", "exec", "-e", "OPENAI_API_KEY", container, ...argv]),
        // `systemctl start` returns once the unit's `docker run` is forked: its container may not be
        // created or started yet, and `docker exec` into it fails at once ("No such container", "is
        // not running").
        awaitContainer: (container, unit, seconds) => [
            `container_runs() { [ "$(docker inspect --format '{{.State.Running}}' "$1" 2>/dev/null)" = true ]; }`,
            `if ! sc_wait ${seconds} ${shellQuote(`${unit}.service to run its container ${container}`)} container_runs ${shellQuote(container)}; then`,
            `  ${journalTailLine(unit, 40)}`,
            "  exit 1",
            "fi",
        ],
        unit: (container) => ({
            after: ["docker.service"],
            requires: ["docker.service"],
            // The container runtime hands the env files to docker (--env-file): systemd must not read them too.
            systemdReadsEnvFiles: false,
            preStart: [`ExecStartPre=-/usr/bin/docker rm -f ${container}`],
            stop: [`ExecStop=/usr/bin/docker stop ${container}`],
        }),
        // The container's first process, as the node sees it (docker's State.Pid; 0 when it is not running).
        enginePid: (container) => `docker inspect --format '{{.State.Pid}}' ${shellQuote(container)} 2>/dev/null`,
        // A throwaway container of the same image, no network: nothing else is touched.
        pythonOneOff: (code) => shellJoin(pythonIn(["--network", "none"], ["-c", code])),
        imageIdLines: (prefix) => [`echo "${prefix}$(${shellJoin(["docker", "image", "inspect", "--format", "{{.Id}}", "--", runtime.image])})"`],
        // By ID: docker runs `sha256:…` as it stands, and never pulls it.
        pinned: (imageId) => (imageId !== undefined && isImageId(imageId) ? { ...runtime, image: imageId } : runtime),
        imageDriftLines: (node, prefix) => [
            `deployed=$(printf '%s\\n' "$last" | grep -m 1 -e ${shellQuote(`^${prefix}`)} || true)`,
            `deployed=\${deployed#${shellQuote(prefix)}}`,
            `if [ -n "$deployed" ]; then`,
            `  now=$(${shellJoin(["docker", "image", "inspect", "--format", "{{.Id}}", "--", runtime.image])} 2>/dev/null) || now=""`,
            `  if [ "$now" != "$deployed" ]; then`,
            `    echo ${shellQuote(`${node}: the tag ${runtime.image} names `)}"\${now:-no image}"${shellQuote(" now, not ")}"$deployed"${shellQuote(
                " as when up last probed it; up --refresh probes it again",
            )}`,
            `  fi`,
            `  if ! docker image inspect -- "$deployed" >/dev/null 2>&1; then`,
            `    echo ${shellQuote(`${node}: `)}"$deployed"${shellQuote(", the image its units start, is no longer on the node: their next start fails")}`,
            `  fi`,
            `fi`,
        ],
        pythonScript: (spec) => {
            // A throwaway container with the units' docker flags; `-i` feeds the script on stdin to the image's own python3.
            const run = dockerRunArgv(runtime, spec.container, [spec.envFile], spec.environment);
            const image = run.lastIndexOf("--");
            const argv = [...run.slice(0, 2), "-i", ...run.slice(2, image), "--entrypoint", "python3", ...run.slice(image), "-", ...spec.args];
            return `${shellJoin(argv)} < ${shellQuote(spec.scriptPath)}`;
        },
        removeThrowaway: (container) => [`docker rm -f ${container} >/dev/null 2>&1 || true`],
        hfDownload: (spec) => {
            const argv = ["docker", "run", "--rm", "--name", spec.container, "--network", "host", "-v", `${spec.hfHome}:${spec.hfHome}`];
            // `-e NAME` without a value: docker copies it from its own environment, so the token is in no argv.
            argv.push(
                "-e",
                "HF_HUB_DISABLE_PROGRESS_BARS=1",
                ...(spec.withToken ? ["-e", "HF_TOKEN"] : []),
                "--",
                runtime.image,
                "hf",
                "download",
                spec.repoId,
            );
            return `${spec.withToken ? 'HF_TOKEN="$token" ' : ""}${shellJoin(argv)}`;
        },
        hfTool: (node) => ({
            where: `a throwaway container of ${runtime.image}`,
            present: "command -v docker >/dev/null",
            missing: `docker is not installed on ${node}`,
        }),
    };
}

function venvStrategy(runtime: VenvRuntime): RuntimeStrategy {
    const bin = (program: string) => `${runtime.path}/bin/${program}`;
    const run = (argv: string[]) => {
        const [program, ...args] = argv;
        return [bin(program), ...args];
    };
    return {
        label: `the venv ${runtime.path}`,
        image: undefined,
        envFileReader: "systemd",
        execStart: (p) => run(p.argv),
        execBeside: (_container, argv) => shellJoin(run(argv)),
        // The variable is exported by the calling shell: the venv's program inherits it.
        execBesideWithApiKey: (_container, argv) => shellJoin(run(argv)),
        awaitContainer: () => [],
        unit: () => ({ after: [], requires: [], systemdReadsEnvFiles: true, preStart: [], stop: [] }),
        // The unit runs the venv's program itself: its main process.
        enginePid: (_container, unit) => `systemctl show -p MainPID --value ${shellQuote(`${unit}.service`)}`,
        pythonOneOff: (code) => shellJoin([bin("python"), "-c", code]),
        imageIdLines: () => [],
        pinned: () => runtime,
        imageDriftLines: () => [],
        pythonScript: (spec) => {
            // The venv's python loads the env file itself, as systemd would.
            const overrides = Object.entries(spec.environment).flatMap(([key, value]) => ["--env", `${key}=${value}`]);
            return shellJoin([bin("python"), spec.scriptPath, "--env-file", spec.envFile, "--env-format", "systemd", ...overrides, ...spec.args]);
        },
        removeThrowaway: () => [],
        hfDownload: (spec) => {
            const env = `HF_HOME=${spec.hfHome} HF_HUB_DISABLE_PROGRESS_BARS=1${spec.withToken ? ' HF_TOKEN="$token"' : ""}`;
            return `${env} ${shellJoin([bin("hf"), "download", spec.repoId])}`;
        },
        hfTool: (node) => ({
            where: `the venv ${runtime.path}`,
            present: `[ -x ${shellQuote(bin("hf"))} ]`,
            missing: `${bin("hf")} is missing on ${node} (huggingface_hub >= 0.34 provides it: ${bin("pip")} install -U huggingface_hub)`,
        }),
    };
}

/** An image's ID as `docker image inspect --format '{{.Id}}'` prints it (`sha256:` and 64 hex digits): what a unit may start by ID. */
export function isImageId(text: string): boolean {
    return /^sha256:[0-9a-f]{64}$/.test(text);
}

/** The strategy of a node's runtime: the one place that tells the runtimes apart. */
export function runtimeStrategy(runtime: Runtime): RuntimeStrategy {
    switch (runtime.kind) {
        case "docker":
            return dockerStrategy(runtime);
        case "venv":
            return venvStrategy(runtime);
        default: {
            const never: never = runtime;
            throw new Error(`unknown runtime ${JSON.stringify(never)}`);
        }
    }
}

/** The unit's ExecStart argv: the only thing that differs between runtimes. */
export function execStartArgv(spec: ExecSpec): string[] {
    return runtimeStrategy(spec.runtime).execStart(spec);
}

/** How to run a one-off command next to a unit's process (readiness checks). */
export function execBeside(runtime: Runtime, container: string, argv: string[]): string {
    return runtimeStrategy(runtime).execBeside(container, argv);
}
