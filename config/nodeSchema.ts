/**
 * The schema of one node: how to reach it over SSH, how it runs vLLM and Ray (its runtime), and
 * its interconnect interfaces. config/schema.ts puts the nodes into the cluster's schema.
 */
import { z } from "zod";
import { GpuMemoryGiBSchema } from "./fitPlanner";
import { interfaceAddressProblem } from "./ipv4";
import { DEFAULT_VLLM_IMAGE } from "./namespace";
import { dockerOptionProblem, dockerOptionsProblems } from "./dockerOptions";
import { interconnectNameProblem } from "./valueRules";
import { DNS_LABEL, IFNAME, IMAGE_REFERENCE, hostOrIpv4, keyFilePath, port } from "./schemaFields";

/** How long a step tries to reach a node over SSH before it fails, when `ssh.connectTimeoutSeconds` is not given. */
export const DEFAULT_SSH_CONNECT_TIMEOUT_SECONDS = 60;

/** How to reach a node over SSH (the management network, not the interconnect). */
export const SshSchema = z.strictObject({
    /**
     * IPv4 address or hostname of the node's management interface. Required. An address inside the
     * node's own interconnect subnets is refused: netplan would route it over the interconnect.
     */
    host: hostOrIpv4().meta({ example: "10.0.0.11" }),
    /** SSH port. Defaults to 22. */
    port: port().default(22).meta({ example: "22" }),
    /** Login user; it needs root rights (netplan, systemd). Defaults to "root". */
    user: z
        .string()
        .regex(/^[a-z_][a-z0-9_-]{0,31}$/, { error: "must be a Linux user name (lowercase letters, digits, _ and -)" })
        .default("root")
        .meta({ example: "root" }),
    /**
     * Path to the private key for this node, on the machine that runs pulumi; overrides the
     * cluster-wide `sshPrivateKey`/`sshPrivateKeyPath`. `~` is not expanded. Defaults to the
     * cluster-wide key.
     */
    privateKeyPath: keyFilePath().optional().meta({ example: "/home/you/.ssh/id_ed25519" }),
    /**
     * The node's SSH host public key, the safe path: read it over a channel you trust (on the
     * node's console, `cat /etc/ssh/ssh_host_ed25519_key.pub`; or `ssh-keyscan -t ed25519 HOST`
     * over a network you trust, its fingerprint compared with `ssh-keygen -lf` of that file on the
     * console). Every command, the SSH step included, checks it from the first `up` on, and it wins
     * over a recorded key; a changed key stops `up` for the node before anything runs there.
     * Defaults to the key the node presented in the SSH step's handshake on first contact (trusted
     * as ssh trusts a new host), recorded by the provider and checked by every later command; a
     * changed `ssh.host`, `port` or `user` must then present that same key, or be pinned here
     * (docs/how-it-works.md, "SSH host keys").
     */
    hostKey: z
        .string()
        .regex(/^(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa) [A-Za-z0-9+/]+=*( [^\0-\x1f]*)?$/, {
            error: "must be an SSH public key line like ssh-ed25519 AAAA... (from /etc/ssh/ssh_host_ed25519_key.pub)",
        })
        .optional()
        .meta({ example: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI... root@spark-a" }),
    /**
     * How long a step keeps trying to open its SSH connection to the node before it fails, naming
     * the node's step and the address it tried: a node that is gone fails its own steps within this
     * bound, and the other nodes go on (`pulumi up --continue-on-error`). Tries are bounded by 5 s
     * each, with growing pauses between them; a node that refuses at once (sshd not up yet) is
     * given up on sooner. Defaults to 60.
     */
    connectTimeoutSeconds: z
        .int()
        .min(5)
        .max(3600)
        .optional()
        .meta({ example: String(DEFAULT_SSH_CONNECT_TIMEOUT_SECONDS) }),
});

/** Runs vLLM and Ray in a container driven by a systemd unit (Spark and workstation). */
export const DockerRuntimeSchema = z.strictObject({
    /** Selects this runtime. Required when `runtime` is given. */
    kind: z.literal("docker").meta({ example: "docker (or venv)" }),
    /**
     * Image with vLLM (and Ray, for the ray executor); the same multi-arch tag serves Spark and
     * workstation. Its vLLM must accept what we render: the vLLM check refuses it otherwise, before
     * anything changes. The serving units start the image by the ID the tag named at the last `up`,
     * so a later `docker pull` of the tag changes nothing until `up --refresh` (docs/operations.md,
     * "Image identity"); to pin one image in config, name it by digest: `repo@sha256:…` (or
     * `repo:tag@sha256:…`). Defaults to "nvcr.io/nvidia/vllm:26.10-py3" (vLLM 0.31.0, no Ray).
     */
    image: z
        .string()
        .max(255)
        .regex(IMAGE_REFERENCE, { error: "must be an image reference like registry/name:tag (lowercase name; it cannot start with -)" })
        .default(DEFAULT_VLLM_IMAGE)
        .meta({ example: DEFAULT_VLLM_IMAGE }),
    /** Run the container with `--privileged` (RDMA devices). Defaults to true. */
    privileged: z.boolean().default(true).meta({ example: "true" }),
    /** Run the container with `--ulimit memlock=-1` (RDMA memory registration). Defaults to true. */
    memlockUnlimited: z.boolean().default(true).meta({ example: "true" }),
    /**
     * Give the container the host's /dev/infiniband (RDMA devices): a bind mount with `privileged`;
     * without it, `--device=/dev/infiniband` (each device under it) and `--cap-add=IPC_LOCK`. Defaults to true.
     */
    infiniband: z.boolean().default(true).meta({ example: "true" }),
    /** Size of /dev/shm in the container, as docker reads it. Defaults to "16g". */
    shmSize: z
        .string()
        .regex(/^[1-9][0-9]*([bkmg]|[kmg]b)?$/i, { error: "must be a size like 16g or 10240m" })
        .default("16g")
        .meta({ example: "16g" }),
    /**
     * Extra `docker run` options for this node's serving containers (vLLM, and Ray for the ray
     * executor), each one token `--flag=value` from an allow-list (config/dockerOptions.ts):
     * `--mount=type=bind,source=/HOST/DIR,target=/DIR[,readonly]` (a host directory under /data,
     * /media, /mnt, /models, /opt, /raid, /scratch, /srv or /workspace, or in a user's home
     * (/home/USER/DIR), not in .ssh or .gnupg; a missing one fails the start, where `-v` would create it and leave it behind), `--device=/dev/NAME`,
     * `--ulimit=NAME=SOFT[:HARD]` (not memlock or stack), `--cap-add=IPC_LOCK|SYS_NICE|SYS_PTRACE|SYS_RESOURCE`,
     * `--group-add=GROUP`. Everything else is refused with the reason: options the project renders
     * (`--privileged`, `--shm-size`, `--network`, `--ipc`, `--pid`, `--gpus`, `--name`, `--rm`)
     * point at their key, and options that would change what runs, as whom or where its output
     * goes (`--entrypoint`, `--user`, `-e`/`--env`, `--env-file`, `-p`, `--restart`, `--log-driver`,
     * `--security-opt`, …) are refused outright. The NCCL check and the model download do not get
     * them. A change restarts only the serving units. Defaults to none.
     */
    extraOptions: z
        .array(
            z
                .string()
                .superRefine((option, ctx) => {
                    const problem = dockerOptionProblem(option);
                    if (problem) {
                        ctx.addIssue({ code: "custom", message: problem.message });
                    }
                })
                .meta({ example: "--ulimit=nofile=1048576:1048576" }),
        )
        .max(32)
        .superRefine((options, ctx) => {
            for (const { index, problem } of dockerOptionsProblems(options)) {
                ctx.addIssue({ code: "custom", message: problem.message, path: [index] });
            }
        })
        .optional()
        .meta({ example: "[--ulimit=nofile=1048576:1048576, --mount=type=bind,source=/data/templates,target=/templates,readonly]" }),
});

/** Runs vLLM and Ray from a Python venv on the host (Jetson Thor: a source build). */
export const VenvRuntimeSchema = z.strictObject({
    /** Selects this runtime. Required when `runtime` is given. */
    kind: z.literal("venv").meta({ example: "docker (or venv)" }),
    /** Absolute path of the venv (the directory holding bin/vllm and bin/ray). Required. */
    path: z
        .string()
        // systemd runs ExecStart's executable path as it is: no $ substitution, and no quotes,
        // backslashes or control characters there; Linux limits a path (PATH_MAX) and its parts (NAME_MAX).
        .regex(/^\/[^\s$"'\\\0-\x1f\x7f]*$/, { error: "must be an absolute path without spaces, quotes, $, \\ or control characters" })
        .max(4000)
        .refine((path) => path.split("/").every((part) => Buffer.byteLength(part, "utf8") <= 255), { error: "has a directory name longer than 255 bytes" })
        .meta({ example: "/opt/vllm-venv" }),
});

/** How a node runs vLLM and Ray. */
export const RuntimeSchema = z.discriminatedUnion("kind", [DockerRuntimeSchema, VenvRuntimeSchema]);

/** One interconnect interface of a node. */
export const InterfaceSchema = z
    .strictObject({
        /**
         * Linux interface name, e.g. enp1s0f1np1. Defaults to detection on the node at deploy time
         * (the next linked-up RoCE interface `ibdev2netdev` reports); required on a thor, which has none.
         * Loopback (`lo`), the kernel's `all`/`default`, and software devices (docker0, br-*, veth*,
         * virbr*, tun/tap, WireGuard, Tailscale, ZeroTier, CNI) are refused: none is a NIC's port.
         */
        name: z
            .string()
            .regex(IFNAME, { error: "must be a Linux interface name: up to 15 letters, digits, _ . -" })
            .superRefine((name, ctx) => {
                const problem = interconnectNameProblem(name);
                if (problem) {
                    ctx.addIssue({ code: "custom", message: problem });
                }
            })
            .optional()
            .meta({ example: "enp1s0f1np1" }),
        /** Static address with prefix length, a.b.c.d/prefix. Required. */
        address: z
            .string()
            .superRefine((text, ctx) => {
                const problem = interfaceAddressProblem(text);
                if (problem) {
                    ctx.addIssue({ code: "custom", message: problem });
                }
            })
            .meta({ example: "192.168.100.11/24" }),
    })
    .meta({ example: "{ name: enp1s0f1np1, address: 192.168.100.11/24 }" });

/** One machine of the cluster. */
export const NodeSchema = z
    .strictObject({
        /** Name used in resource names and /etc/hosts: a DNS label. Required. */
        name: z
            .string()
            .regex(DNS_LABEL, {
                error: "must be a DNS label: 1-63 lowercase letters, digits and -, not starting or ending with -",
            })
            .meta({ example: "spark-a" }),
        /** What the machine is: a DGX Spark, a Jetson Thor or an x86 workstation. Required. */
        kind: z.enum(["spark", "thor", "workstation"]).meta({ example: "spark (or thor, workstation)" }),
        /** Whether this node runs the Ray head and serves the API; exactly one node is the head. Defaults to false. */
        head: z.boolean().default(false).meta({ example: "true" }),
        /** How to reach the node over SSH. Required (at least `host`). */
        ssh: SshSchema.meta({ example: "{ host: 10.0.0.11, port: 22, user: root }" }),
        /**
         * Memory of each GPU in GiB as CUDA reports it, for the fit check. Defaults to 121.63 on a
         * spark or thor (128 GB unified, what vLLM sees); give it for a workstation (an RTX PRO 6000: 89.4).
         */
        gpuMemoryGiB: GpuMemoryGiBSchema,
        /** GPUs on this node (a Spark and a Thor have one). Defaults to 1. */
        gpus: z.int().min(1).default(1).meta({ example: "1" }),
        /**
         * How vLLM runs here. Defaults to `{ kind: docker }` with its defaults on a spark or a
         * workstation; required, and a venv, on a thor.
         */
        runtime: RuntimeSchema.optional().meta({ example: `{ kind: docker, image: ${DEFAULT_VLLM_IMAGE} } (or { kind: venv, path: /opt/vllm-venv })` }),
        /** The interconnect interfaces: one, or a Spark's two twins (each in its own subnet). Required. */
        interconnect: z
            .array(InterfaceSchema)
            .min(1)
            .max(2)
            .meta({ example: "[{ name: enp1s0f1np1, address: 192.168.100.11/24 }, { name: enP2p1s0f1np1, address: 192.168.101.11/24 }]" }),
        /**
         * The node is gone for good: nothing runs on it any more (`up` neither updates nor creates
         * anything there, nothing is ever deleted on it), and its resources leave the stack without
         * their delete — when the node is removed from `nodes`, or by `pulumi destroy --run-program`
         * (a plain `destroy` after an `up`). The rest of the cluster is planned as before until the
         * node is removed. docs/operations.md, "A node that is gone". Defaults to false.
         */
        retired: z.boolean().optional().meta({ example: "true" }),
    })
    .meta({ example: "{ name: spark-a, kind: spark, ssh: { host: 10.0.0.11 }, interconnect: [{ address: 192.168.100.11/24 }] }" });
