// `runtime.extraOptions` of the docker runtime: extra `docker run` options for the node's
// serving containers (Ray, vLLM), from an allow-list. Each option is one argv token
// `--flag=value`, checked here against the flag's own grammar (docker CLI 28, cli/opts), so
// what the config accepts reaches docker as one argument and parses as the user meant.
import { CONFIG_DIR, HF_HOME_DIR, STATE_DIR } from "./hostPaths";

/** A problem with one option: what is wrong, and a right example. */
export interface DockerOptionProblem {
    message: string;
    example: string;
}

/**
 * A path docker takes in an option: absolute, letters, digits and `. _ / @ + -` only (no `:` or
 * `,`, which separate fields; no spaces, quotes, `$` or `%`), no `.`/`..` or empty segments, at
 * most 4095 bytes.
 */
const SAFE_PATH = /^\/[A-Za-z0-9._@+-]+(\/[A-Za-z0-9._@+-]+)*$/;

function pathProblem(path: string, what: string): string | undefined {
    if (!SAFE_PATH.test(path) || path.length > 4095) {
        return `${what} must be an absolute path of letters, digits and . _ / @ + - (no spaces, : or ,; no trailing /)`;
    }
    if (path.split("/").some((part) => part === "." || part === "..")) return `${what} must not contain . or .. segments`;
    return undefined;
}

/** Whether `path` is `dir` or lies inside it. */
function within(path: string, dir: string): boolean {
    return path === dir || path.startsWith(dir + "/");
}

/** Container paths the project mounts itself (the HF cache, Ray's sockets, RDMA devices): a mount there would hide or clash with ours. */
const OUR_CONTAINER_PATHS = [HF_HOME_DIR, "/tmp/ray", "/dev/infiniband"];
/** Host paths that must not go into a container: the project's own files (secrets among them) and Docker's socket (root on the host). */
const REFUSED_HOST_PATHS: readonly { dir: string; why: string }[] = [
    { dir: CONFIG_DIR, why: "holds the project's own files, secrets among them" },
    { dir: STATE_DIR, why: "holds the project's own state" },
    { dir: "/var/run/docker.sock", why: "is Docker's socket: root on the host for anything in the container" },
    { dir: "/run/docker.sock", why: "is Docker's socket: root on the host for anything in the container" },
    { dir: "/proc", why: "is the host's kernel interface" },
    { dir: "/sys", why: "is the host's kernel interface" },
    { dir: "/dev", why: "holds devices: give one with --device=/dev/NAME" },
];

/**
 * Where a mount's host directory may come from: the places data lives on a Spark or a workstation
 * (FHS's /home, /mnt, /media, /srv, /opt, and the usual data roots). The system's own directories
 * (/, /etc, /run, /root, /usr, /var, /boot, …) are refused: a container would read or change the
 * host's configuration, credentials or running state.
 */
export const MOUNT_SOURCE_ROOTS: readonly string[] = ["/data", "/home", "/media", "/mnt", "/models", "/opt", "/raid", "/scratch", "/srv", "/workspace"];
/** Path segments under an allowed root that still hold credentials. */
const CREDENTIAL_DIRS: readonly string[] = [".ssh", ".gnupg"];

/** The fields of a bind `--mount`: type=bind, source, target, and readonly. */
export interface BindMount {
    source: string;
    target: string;
    readonly: boolean;
}

/** Parses `--mount`'s value as docker's CSV (a bind mount only; fields without quotes). */
export function parseBindMount(value: string): BindMount | string {
    const fields = new Map<string, string | undefined>();
    for (const field of value.split(",")) {
        const eq = field.indexOf("=");
        const key = eq < 0 ? field : field.slice(0, eq);
        const canonical = { src: "source", dst: "target", destination: "target", ro: "readonly" }[key] ?? key;
        if (!["type", "source", "target", "readonly"].includes(canonical)) {
            return `has the field ${JSON.stringify(key)}; a mount takes type=bind, source=, target= and readonly only`;
        }
        if (fields.has(canonical)) return `names ${canonical} twice`;
        fields.set(canonical, eq < 0 ? undefined : field.slice(eq + 1));
    }
    if (fields.get("type") !== "bind") return "must be a bind mount of a host directory: type=bind";
    const source = fields.get("source");
    const target = fields.get("target");
    if (source === undefined || target === undefined) return "needs source= (a host directory) and target= (where the container sees it)";
    const ro = fields.has("readonly") ? fields.get("readonly") : "false";
    if (ro !== undefined && ro !== "true" && ro !== "false") return "takes readonly alone, or readonly=true or readonly=false";
    return { source, target, readonly: ro === undefined || ro === "true" };
}

function mountProblem(value: string): string | undefined {
    const mount = parseBindMount(value);
    if (typeof mount === "string") return mount;
    const problem = pathProblem(mount.source, "source") ?? pathProblem(mount.target, "target");
    if (problem) return problem;
    const host = REFUSED_HOST_PATHS.find((refused) => within(mount.source, refused.dir));
    if (host) return `has the source ${mount.source}, which ${host.why}`;
    // Under /home, a directory in a user's home: a whole home holds that user's .ssh.
    const homeTooHigh = within(mount.source, "/home") && mount.source.split("/").length < 4;
    if (!MOUNT_SOURCE_ROOTS.some((root) => within(mount.source, root)) || homeTooHigh) {
        return `has the source ${mount.source}, outside the directories a mount may come from (${MOUNT_SOURCE_ROOTS.filter((r) => r !== "/home").join(", ")} or a directory in one, or a directory in a user's home, /home/USER/DIR): the system's own directories and whole homes are not mounted into a container`;
    }
    const credentials = mount.source.split("/").find((part) => CREDENTIAL_DIRS.includes(part));
    if (credentials) return `has the source ${mount.source}, which lies in ${credentials}, a directory of credentials`;
    const ours = OUR_CONTAINER_PATHS.find((dir) => within(mount.target, dir) || within(dir, mount.target));
    if (ours) return `has the target ${mount.target}, where the project mounts ${ours} itself`;
    if (["/proc", "/sys", "/dev"].some((dir) => within(mount.target, dir))) return `has the target ${mount.target}, a kernel file system in the container`;
    return undefined;
}

/** `ulimit` names docker knows (go-units), less memlock (runtime.memlockUnlimited) and stack (the project renders 64 MiB). */
const ULIMIT_NAMES = ["core", "cpu", "data", "fsize", "locks", "msgqueue", "nice", "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending"];
const LIMIT = /^(-1|0|[1-9][0-9]{0,17})$/;

function ulimitProblem(value: string): string | undefined {
    const match = /^([a-z]+)=([^:]*)(?::(.*))?$/.exec(value);
    if (!match) return "must be NAME=SOFT or NAME=SOFT:HARD";
    const [, name, soft, hard] = match;
    if (name === "memlock") return "sets memlock, which runtime.memlockUnlimited renders; set that instead";
    if (name === "stack") return "sets stack, which the project renders (64 MiB)";
    if (!ULIMIT_NAMES.includes(name)) return `names no limit docker knows; the names are ${ULIMIT_NAMES.join(", ")}`;
    if (!LIMIT.test(soft) || (hard !== undefined && !LIMIT.test(hard))) return "must give whole numbers (at most 18 digits) or -1 (unlimited)";
    if (hard !== undefined && (soft === "-1") !== (hard === "-1")) return "must give -1 (unlimited) for both limits or for neither";
    if (hard !== undefined && hard !== "-1" && BigInt(soft) > BigInt(hard)) return "must give a soft limit no greater than the hard limit";
    return undefined;
}

function deviceProblem(value: string): string | undefined {
    const parts = value.split(":");
    if (parts.length > 3) return "must be /dev/HOST[:/dev/CONTAINER][:PERMISSIONS]";
    const mode = (text: string) => /^(?!.*(.).*\1)[rwm]{1,3}$/.test(text);
    const [source, second, third] = parts;
    const target = second !== undefined && !(parts.length === 2 && mode(second)) ? second : undefined;
    const permissions = parts.length === 3 ? third : parts.length === 2 && mode(second) ? second : undefined;
    const problem = pathProblem(source, "the device") ?? (target === undefined ? undefined : pathProblem(target, "the container path"));
    if (problem) return problem;
    if (!within(source, "/dev") || source === "/dev") return "must name a device under /dev";
    if (permissions !== undefined && !mode(permissions)) return "must give permissions of r, w and m, each at most once";
    return undefined;
}

/** Capabilities a serving container may be given beyond docker's default set, without `--privileged`. */
const CAPABILITIES = ["IPC_LOCK", "SYS_NICE", "SYS_PTRACE", "SYS_RESOURCE"];

function capabilityProblem(value: string): string | undefined {
    const name = value.replace(/^CAP_/, "");
    if (name === "ALL" || name === "SYS_ADMIN") return `would make the container as good as privileged; set runtime.privileged instead`;
    if (!CAPABILITIES.includes(name)) return `is not a capability on the allow-list (${CAPABILITIES.join(", ")})`;
    return undefined;
}

function groupProblem(value: string): string | undefined {
    return /^([a-z_][a-z0-9_-]{0,31}|0|[1-9][0-9]{0,9})$/.test(value) ? undefined : "must be a group name (lowercase letters, digits, _ and -) or a group id";
}

/** One allowed option: its form, why it is allowed, an example, and the check of its value. */
export interface AllowedDockerOption {
    form: string;
    why: string;
    example: string;
    problem: (value: string) => string | undefined;
}

/**
 * The allow-list. Each takes a value and changes only what the serving containers may use; none
 * changes how the project reaches, names, networks or stops them.
 */
export const ALLOWED_DOCKER_OPTIONS: Readonly<Record<string, AllowedDockerOption>> = {
    "--mount": {
        form: "--mount=type=bind,source=/HOST/DIR,target=/CONTAINER/DIR[,readonly]",
        why: "a host directory in the container (models, chat templates, compile caches); a bind --mount fails when the host directory is missing, where -v would create it and leave it behind after destroy",
        example: "--mount=type=bind,source=/data/templates,target=/templates,readonly",
        problem: mountProblem,
    },
    "--device": {
        form: "--device=/dev/HOST[:/dev/CONTAINER][:rwm]",
        why: "one device without --privileged (e.g. /dev/infiniband/uverbs0 for RDMA with runtime.privileged off)",
        example: "--device=/dev/infiniband/uverbs0",
        problem: deviceProblem,
    },
    "--ulimit": {
        form: "--ulimit=NAME=SOFT[:HARD]",
        why: "a resource limit other than memlock (runtime.memlockUnlimited) and stack (rendered), e.g. more open files",
        example: "--ulimit=nofile=1048576:1048576",
        problem: ulimitProblem,
    },
    "--cap-add": {
        form: `--cap-add=${CAPABILITIES.join("|")}`,
        why: "one capability without --privileged (IPC_LOCK: pinned memory for RDMA; SYS_NICE: NUMA and priorities; SYS_PTRACE: py-spy and debuggers)",
        example: "--cap-add=IPC_LOCK",
        problem: capabilityProblem,
    },
    "--group-add": {
        form: "--group-add=GROUP",
        why: "a supplementary group, for a device node that is group-readable",
        example: "--group-add=video",
        problem: groupProblem,
    },
};

/** Options refused by name, with why and what to do instead. */
export const REFUSED_DOCKER_OPTIONS: Readonly<Record<string, string>> = {
    "--privileged": "is rendered from runtime.privileged; set that instead",
    "--shm-size": "is rendered from runtime.shmSize; set that instead",
    "--volume": "creates a missing host directory, which destroy would leave behind; use --mount=type=bind,source=…,target=…[,readonly]",
    "--gpus": "is rendered: the container gets all of the node's GPUs",
    "--network": "is rendered: host networking (Ray, NCCL and the API use the node's addresses); open ports with firewall.allowPorts",
    "--net": "is rendered: host networking (Ray, NCCL and the API use the node's addresses)",
    "--ipc": "is rendered: the host's IPC namespace (NCCL's shared memory)",
    "--pid": "is rendered: the host's PID namespace (Ray finds its raylet by its process)",
    "--uts": "would change the host namespaces the project renders",
    "--userns": "would change the host namespaces the project renders",
    "--cgroupns": "would change the host namespaces the project renders",
    "--publish": "has no effect with host networking; the API port is model.apiPort, other ports firewall.allowPorts",
    "--publish-all": "has no effect with host networking",
    "--expose": "has no effect with host networking",
    "--user": "would stop vLLM reading the Hugging Face cache and the env files, which belong to root",
    "--entrypoint": "would replace the program the unit runs (vllm serve, ray start)",
    "--workdir": "would change where the unit's program runs",
    "--env": "sets environment: use model.env (vLLM) or nccl.overrides (NCCL, everywhere)",
    "--env-file": "sets environment: use model.env (vLLM) or nccl.overrides (NCCL, everywhere)",
    "--name": "is rendered: the unit stops and removes the container by its name",
    "--rm": "is rendered: the unit's container is removed when it ends",
    "--detach": "would end the unit's process at once: systemd supervises the container in the foreground",
    "--restart": "would fight systemd, which restarts the unit",
    "--init": "would change the container's PID 1, which systemd's stop signal reaches",
    "--security-opt": "would change the container's confinement; set runtime.privileged instead",
    "--cap-drop": "would take capabilities vLLM and NCCL need",
    "--device-cgroup-rule": "grants devices by number; give each device with --device=/dev/NAME",
    "--log-driver": "would take the containers' output out of the journal, where `journalctl -u` and the readiness check read it",
    "--log-opt": "would change the containers' log, which the journal keeps",
    "--volumes-from": "would tie the container to another container's life",
    "--link": "has no effect with host networking",
    "--runtime": "would change the OCI runtime the GPUs were set up for",
    "--platform": "would run another architecture of the image than the node's",
    "--pull": "would pull at every start; the image is pulled once by the probe",
    "--tmpfs": "would hide the container's own files at that path",
};

/** Right examples for the refused options that have a key of their own. */
const REFUSED_EXAMPLES: Readonly<Record<string, string>> = {
    "--privileged": "runtime: { kind: docker, privileged: true }",
    "--shm-size": "runtime: { kind: docker, shmSize: 32g }",
    "--env": 'model: { env: { VLLM_USE_FLASHINFER_MOE_FP4: "1" } }',
    "--env-file": 'model: { env: { VLLM_USE_FLASHINFER_MOE_FP4: "1" } }',
    "--network": "firewall: { allowPorts: [8080] }",
    "--publish": "firewall: { allowPorts: [8080] }",
    "--security-opt": "runtime: { kind: docker, privileged: true }",
};

/** docker's one-letter options, spelled out (one token `-v=…` would still be read). */
const SHORT_OPTIONS: Readonly<Record<string, string>> = {
    v: "--volume",
    e: "--env",
    p: "--publish",
    P: "--publish-all",
    u: "--user",
    w: "--workdir",
    d: "--detach",
    h: "--hostname",
    l: "--label",
    m: "--memory",
    c: "--cpu-shares",
    i: "--interactive",
    t: "--tty",
};

/** The --mount option a `-v`/`--volume` value means, for the example in its refusal. */
function mountFor(volume: string): string {
    const [source, target, mode] = volume.split(":");
    if (!source?.startsWith("/") || !target?.startsWith("/")) return ALLOWED_DOCKER_OPTIONS["--mount"].example;
    return `--mount=type=bind,source=${source},target=${target}${mode === "ro" ? ",readonly" : ""}`;
}

const ALLOWED_LIST = Object.keys(ALLOWED_DOCKER_OPTIONS).join(", ");

/**
 * Why one element of `runtime.extraOptions` is refused, or undefined: it must be one token
 * `--flag=value` of a flag on {@link ALLOWED_DOCKER_OPTIONS}, with a value of the flag's form.
 */
export function dockerOptionProblem(option: string): DockerOptionProblem | undefined {
    const example = ALLOWED_DOCKER_OPTIONS["--ulimit"].example;
    if (/[\0-\x1f\x7f]/.test(option)) return { message: "must not contain line breaks or other control characters", example };
    if (option.length > 4096) return { message: "must be at most 4096 characters", example };
    const short = /^-([A-Za-z])(?:=|$| )/.exec(option);
    if (short) {
        const long = SHORT_OPTIONS[short[1]];
        const value = option.slice(2).replace(/^[= ]/, "");
        if (long === "--volume") return { message: `is -v (${REFUSED_DOCKER_OPTIONS["--volume"]})`, example: mountFor(value) };
        if (long !== undefined && REFUSED_DOCKER_OPTIONS[long]) {
            return { message: `is -${short[1]} (${long}), which ${REFUSED_DOCKER_OPTIONS[long]}`, example: REFUSED_EXAMPLES[long] ?? example };
        }
        return {
            message: `is a one-letter option${long ? ` (${long})` : ""}; options are long, one token --flag=value, from the allow-list: ${ALLOWED_LIST}`,
            example,
        };
    }
    const match = /^(--[a-z][a-z0-9-]*)(?:=([\s\S]*))?$/.exec(option);
    if (!match) return { message: `must be one token --flag=value (no space between flag and value) of an option on the allow-list: ${ALLOWED_LIST}`, example };
    const [, flag, value] = match;
    const refused = REFUSED_DOCKER_OPTIONS[flag];
    if (refused)
        return { message: `sets ${flag}, which ${refused}`, example: flag === "--volume" ? mountFor(value ?? "") : (REFUSED_EXAMPLES[flag] ?? example) };
    const allowed = ALLOWED_DOCKER_OPTIONS[flag];
    if (!allowed) return { message: `sets ${flag}, which is not on the allow-list of docker options (${ALLOWED_LIST})`, example };
    if (value === undefined || value === "") return { message: `needs its value in the same token: ${allowed.form}`, example: allowed.example };
    const problem = allowed.problem(value);
    return problem ? { message: `${problem} (${allowed.form})`, example: allowed.example } : undefined;
}

/** The container paths of the bind mounts among `options` (valid options only). */
export function mountTargets(options: readonly string[]): string[] {
    return options.flatMap((option) => {
        if (!option.startsWith("--mount=")) return [];
        const mount = parseBindMount(option.slice("--mount=".length));
        return typeof mount === "string" ? [] : [mount.target];
    });
}

/** Why the options together are refused (the same container path mounted twice: docker's "Duplicate mount point"), by index. */
export function dockerOptionsProblems(options: readonly string[]): { index: number; problem: DockerOptionProblem }[] {
    const seen = new Set<string>();
    const out: { index: number; problem: DockerOptionProblem }[] = [];
    options.forEach((option, index) => {
        if (!option.startsWith("--mount=") || dockerOptionProblem(option)) return;
        const [target] = mountTargets([option]);
        if (seen.has(target)) {
            out.push({
                index,
                problem: {
                    message: `mounts ${target} again; docker refuses a container path mounted twice`,
                    example: ALLOWED_DOCKER_OPTIONS["--mount"].example,
                },
            });
        }
        seen.add(target);
    });
    return out;
}
