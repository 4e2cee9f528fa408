/**
 * What a user may write in a stack's config: the zod schema of every key under the
 * `spark-cluster:` namespace. Each field's doc comment says what it is and its default; its
 * `.meta({ example })` is the right value an error message shows (config/zodIssues.ts reads it
 * from here, so the example cannot drift from the field).
 */
import { z } from "zod";
import { ipv4RangeProblem } from "./ipv4";
import { CONFIG_NAMESPACE } from "./namespace";
import { ModelSizeSchema } from "./modelSize";
import { DockerRuntimeSchema, InterfaceSchema, NodeSchema, VenvRuntimeSchema } from "./nodeSchema";
import { FrontendSchema, OPEN_WEBUI_PASSWORD_EXAMPLE } from "./frontendSchema";
import { IFNAME, PRIVATE_KEY_TEXT, SECRET_TEXT, hostOrIpv4, keyFilePath, port } from "./schemaFields";

export * from "./nodeSchema";
export * from "./frontendSchema";
export { PRIVATE_KEY_TEXT } from "./schemaFields";
import { extraArgProblem, modelEnvNameProblem, modelEnvValueProblem, modelSourceProblem, overrideKeyProblem } from "./valueRules";

/** One end of a cable: a node's port, named by its interconnect interface. */
export const CableEndSchema = z
    .strictObject({
        /** The node's `name`. Required. */
        node: z.string().min(1).meta({ example: "spark-a" }),
        /** The interface name of the port, one of that node's `interconnect[].name`. Required. */
        port: z.string().regex(IFNAME, { error: "must be a Linux interface name: up to 15 letters, digits, _ . -" }).meta({ example: "enp1s0f0np0" }),
    })
    .meta({ example: "{ node: spark-a, port: enp1s0f0np0 }" });

/** One cable of a mesh or ring: its two ends. */
export const CableSchema = z
    .strictObject({
        /** One end. Required. */
        a: CableEndSchema,
        /** The other end. Required. */
        b: CableEndSchema,
    })
    .meta({ example: "{ a: { node: spark-a, port: enp1s0f0np0 }, b: { node: spark-b, port: enp1s0f1np1 } }" });

/** How the nodes are cabled. */
export const InterconnectSchema = z.strictObject({
    /**
     * `pair`: two nodes cabled back to back; `switch`: any number of nodes on a switch; `mesh`: three
     * nodes, each cabled to both others; `ring`: four or more nodes, each cabled to two neighbours
     * (`mesh` and `ring` need `cables`; a ring routes to non-neighbours through a neighbour, which
     * forwards). Defaults to "pair".
     */
    topology: z.enum(["pair", "switch", "mesh", "ring"]).default("pair").meta({ example: "pair (or switch, mesh, ring)" }),
    /**
     * The cables of a `mesh` or `ring`, one entry per cable: which port (interface name, as in that
     * node's `interconnect`) of which node goes to which port of which node. Both ends' addresses lie
     * in one subnet of the cable's own (a /30 or /31 is enough). Only for `mesh` and `ring`; required there.
     */
    cables: z.array(CableSchema).optional().meta({ example: "[{ a: { node: spark-a, port: enp1s0f0np0 }, b: { node: spark-b, port: enp1s0f1np1 } }]" }),
    /**
     * Take the interconnect's ports over from the tools that claim them today: other netplan files
     * that define a port (NVIDIA's `40-cx7.yaml`, NVIDIA Sync's `99-nvidia-sync-cluster.yaml`,
     * DGX OS's NetworkManager profiles as `90-NM-*.yaml`) are moved aside, or rewritten without our
     * ports, with a backup; NetworkManager is told to leave the ports alone (a conf.d drop-in); and
     * addresses our config does not give the ports are removed. `destroy` puts the files and
     * NetworkManager's hold back as they were. Without it, `up` stops at the node check naming each
     * file, connection and address. Defaults to false.
     */
    takeOver: z.boolean().default(false).meta({ example: "true" }),
    /** MTU of the interconnect interfaces (a switch must carry it too). Defaults to 9000. */
    mtu: z.int().min(1280).max(9216).default(9000).meta({ example: "9000" }),
    /** What `up` and the read-back check on every interconnect link (its state, speed and MTU end to end). */
    linkCheck: z
        .strictObject({
            /**
             * The lowest speed, in Mb/s, an interconnect interface may report (ethtool, else
             * /sys/class/net/IF/speed). Defaults to 200000 on a Spark (a healthy ConnectX-7 port; NVIDIA's
             * playbooks detect ports stuck at about 13 Gb/s) and to no minimum on other nodes.
             */
            minSpeedMbps: z.int().min(1).max(1_600_000).optional().meta({ example: "200000" }),
            /** `refuse`: `up` fails on a slower link; `warn`: `up` warns and goes on. Either way the read-back reports it. Defaults to "refuse". */
            lowSpeed: z.enum(["refuse", "warn"]).default("refuse").meta({ example: "warn (or refuse)" }),
            /**
             * An RDMA write bandwidth test per rail at `up` (perftest's ib_write_bw: one end serves, the other
             * connects, over the rail's RDMA devices), on nodes where ib_write_bw is installed. Its figure goes
             * in the `links` output; a rail below `minGbps`, or one that could not be measured while the node
             * has ib_write_bw, is handled as `lowSpeed` says. Off by default.
             */
            rdmaBandwidth: z
                .strictObject({
                    /** Run the test. Defaults to false. */
                    enabled: z.boolean().default(false).meta({ example: "true" }),
                    /** The lowest average, in Gb/s, a rail may show (one owner's GB10 wrote 92.57 over one twin; NVIDIA measured 189.85 over both twins together). Defaults to none: the figure is shown, not checked. */
                    minGbps: z.number().positive().max(1600).optional().meta({ example: "80" }),
                    /** Seconds of writes per rail (`ib_write_bw -D`). Defaults to 5. */
                    durationSeconds: z.int().min(1).max(60).default(5).meta({ example: "5" }),
                    /** How long each end waits for the other (the two ends start their steps independently). Defaults to 120. */
                    waitSeconds: z.int().min(10).max(1800).default(120).meta({ example: "120" }),
                    /** perftest's TCP port for the first rail (`-p`); rail k uses port + k. Defaults to 18515, perftest's own. */
                    port: z.int().min(1024).max(65000).default(18515).meta({ example: "18515" }),
                })
                .prefault({})
                .meta({ example: "{ enabled: true, minGbps: 80 }" }),
        })
        .prefault({})
        .meta({ example: "{ minSpeedMbps: 200000, lowSpeed: warn }" }),
});

/** RoCE host settings on nodes that have RoCE (Spark, workstation with ConnectX). */
export const RoceSchema = z.strictObject({
    /** Configure PFC (lossless RoCE) on the interconnect; off or unavailable means lossy RoCE. Defaults to true. */
    enabled: z.boolean().default(true).meta({ example: "true" }),
    /** The priority PFC is enabled on (`mlnx_qos --pfc`). Defaults to 3. */
    priority: z.int().min(0).max(7).default(3).meta({ example: "3" }),
    /** Trust DSCP marks (`mlnx_qos --trust dscp`). Defaults to true. */
    trustDscp: z.boolean().default(true).meta({ example: "true" }),
    /**
     * The DSCP NCCL marks its RoCE packets with: NCCL_IB_TC is rendered as DSCP << 2 | 2 (ECN-capable,
     * 26 → 106), and the NIC's DSCP → priority map is set to put this DSCP on `priority`. Defaults to
     * 26 (AF31, which the ConnectX default map already puts on priority 3).
     */
    dscp: z.int().min(0).max(63).default(26).meta({ example: "26" }),
    /**
     * Load nvidia-peermem for GPUDirect RDMA, persisted across reboot. `auto`: on a workstation (a
     * discrete GPU) only; a DGX Spark's GB10 does not support GPUDirect RDMA (nvidia-peermem fails
     * to load there: "Invalid argument") and NCCL moves data through host memory. `true` loads it on
     * every RoCE node, `false` on none. Defaults to "auto".
     */
    peermem: z
        .union([z.boolean(), z.literal("auto")])
        .default("auto")
        .meta({ example: "auto (or true, false)" }),
});

/** NCCL settings, rendered to /etc/nccl.conf and the runtime's env file. */
export const NcclSchema = z.strictObject({
    /**
     * `roce` (NET/IB), `socket` (NET/Socket, `NCCL_IB_DISABLE=1`) or `auto`: socket when any node
     * is a Thor (it has no RoCE), else roce. The choice is cluster-wide. Defaults to "auto".
     */
    transport: z.enum(["auto", "roce", "socket"]).default("auto").meta({ example: "auto (or roce, socket)" }),
    /** RDMA devices for NCCL_IB_HCA, e.g. both twins `[rocep1s0f1, roceP2p1s0f1]`. Defaults to detection from the interconnect interfaces. */
    ibHca: z
        .array(
            z
                .string()
                .regex(/^[^\s,\0-\x1f\x7f]+$/, { error: "must be one RDMA device name, without spaces, commas or control characters" })
                .meta({ example: "rocep1s0f1" }),
        )
        .min(1)
        .optional()
        .meta({ example: "[rocep1s0f1, roceP2p1s0f1]" }),
    /** NCCL_SOCKET_IFNAME (NCCL's syntax: a name, a prefix, ^exclusions). Defaults to the interconnect interface. */
    socketIfname: z
        .string()
        .regex(/^[^\s\0-\x1f\x7f]{1,255}$/, { error: "must be 1-255 characters without spaces or control characters" })
        .optional()
        .meta({ example: "enp1s0f1np1" }),
    /** NCCL_DEBUG level (INFO shows NET/IB vs NET/Socket at start). Defaults to "WARN". */
    debug: z.enum(["WARN", "INFO", "TRACE"]).default("WARN").meta({ example: "INFO" }),
    /**
     * Further NCCL variables, name to string value, e.g. `NCCL_IB_MERGE_NICS: "1"`. Variables with
     * their own key are rejected, and so is NCCL_IB_GID_INDEX (it moves at run time). Defaults to {}.
     */
    overrides: z
        .record(
            z.string().superRefine((key, ctx) => {
                const problem = overrideKeyProblem(key);
                if (problem) {
                    ctx.addIssue({ code: "custom", message: problem.message });
                }
            }),
            z
                .string()
                .regex(/^[^\0-\x1f\x7f]*$/, { error: "must be a single line without control characters" })
                // NCCL reads /etc/nccl.conf a line at a time into 1024-byte buffers: a longer value is cut.
                .refine((value) => Buffer.byteLength(value, "utf8") <= 1023, {
                    error: "must be at most 1023 bytes (NCCL's reader of nccl.conf cuts longer lines)",
                })
                .meta({ example: 'NCCL_IB_MERGE_NICS: "1"' }),
        )
        .default({})
        .meta({ example: '{ NCCL_IB_MERGE_NICS: "1" }' }),
});

/** Ray cluster settings (used when model.executor is ray). */
export const RaySchema = z.strictObject({
    /** GCS port on the head. Defaults to 6379. */
    port: port().default(6379).meta({ example: "6379" }),
    /**
     * Address the dashboard binds to. The dashboard accepts jobs without auth (ShadowRay,
     * CVE-2023-48022): keep it on loopback and reach it through an SSH tunnel. Defaults to "127.0.0.1".
     */
    dashboardHost: hostOrIpv4().default("127.0.0.1").meta({ example: "127.0.0.1" }),
    /** Dashboard port on the head. Defaults to 8265. */
    dashboardPort: port().default(8265).meta({ example: "8265" }),
    /** Object store size per node in MiB. Defaults to Ray's own choice. */
    objectStoreMemoryMb: z.int().min(64).optional().meta({ example: "8192" }),
    /** Logical CPUs each node offers to Ray (`ray start --num-cpus`). Defaults to Ray's own count. */
    numCpus: z.int().min(1).optional().meta({ example: "8" }),
    // Ray picks these at random unless `ray start` pins them; pinned, every port the cluster uses
    // can be named (docs/operations.md, "Ports"). Members reach them; the firewall keeps everyone else out.
    /** Ray client server on the head (`--ray-client-server-port`). Defaults to 10001. */
    clientServerPort: port().default(10001).meta({ example: "10001" }),
    /** Raylet's node manager on every node (`--node-manager-port`). Defaults to 6800. */
    nodeManagerPort: port().default(6800).meta({ example: "6800" }),
    /** Object manager on every node (`--object-manager-port`). Defaults to 6801. */
    objectManagerPort: port().default(6801).meta({ example: "6801" }),
    /** Runtime-env agent on every node (`--runtime-env-agent-port`). Defaults to 6802. */
    runtimeEnvAgentPort: port().default(6802).meta({ example: "6802" }),
    /** Dashboard agent's gRPC port on every node (`--dashboard-agent-grpc-port`). Defaults to 6803. */
    dashboardAgentGrpcPort: port().default(6803).meta({ example: "6803" }),
    /** Dashboard agent's HTTP port on every node (`--dashboard-agent-listen-port`). Defaults to 52365. */
    dashboardAgentListenPort: port().default(52365).meta({ example: "52365" }),
    /** Metrics export on every node (`--metrics-export-port`). Defaults to 6804. */
    metricsExportPort: port().default(6804).meta({ example: "6804" }),
    /** First port of Ray's worker processes (`--min-worker-port`). Defaults to 10002. */
    minWorkerPort: port().default(10002).meta({ example: "10002" }),
    /** Last port of Ray's worker processes (`--max-worker-port`); one per worker process. Defaults to 10101. */
    maxWorkerPort: port().default(10101).meta({ example: "10101" }),
});

/** A port a user opens in the firewall: `8080` (TCP) or `5353/udp`. */
const OPEN_PORT = /^([1-9][0-9]{0,4})(\/(tcp|udp))?$/;

/**
 * The nodes' firewall: nftables rules in a table of our own (`inet spark_cluster`), so that only the
 * cluster's own nodes reach its internal ports (Ray, torch/vLLM, NCCL: several are random).
 */
export const FirewallSchema = z.strictObject({
    /**
     * Accept new connections from outside the cluster only on SSH, the API port (head) and
     * `allowPorts`; members (their interconnect addresses) reach everything. Off leaves the
     * nodes' firewall as it is (the internal ports then listen to the world). Defaults to true.
     */
    enabled: z.boolean().default(true).meta({ example: "true" }),
    /** Source ranges allowed to reach the API port, e.g. your LAN. Defaults to [] (anyone: the API key guards only /v1 and a few other prefixes; docs/operations.md, "Ports", lists what answers without it). */
    apiAllowFrom: z
        .array(
            z
                .string()
                .refine((text) => ipv4RangeProblem(text) === undefined, { error: "must be an IPv4 range a.b.c.d/prefix, e.g. 192.168.1.0/24" })
                .meta({ example: "192.168.1.0/24" }),
        )
        .default([])
        .meta({ example: "[192.168.1.0/24]" }),
    /** More ports to accept from anyone: `8080` (TCP) or `5353/udp`. Defaults to []. */
    allowPorts: z
        .array(
            z
                .union([
                    port(),
                    z
                        .string()
                        .regex(OPEN_PORT, { error: "must be a port like 8080 or 5353/udp" })
                        .refine((text) => Number(text.split("/")[0]) <= 65535, { error: "must be a port 1-65535" }),
                ])
                .meta({ example: "8080 (or 5353/udp)" }),
        )
        .default([])
        .meta({ example: "[8080, 5353/udp]" }),
});

/** What vLLM serves and how. */
export const ModelSchema = z.strictObject({
    /** Hugging Face id `org/name`, or an absolute path to a model directory on the nodes. Required. */
    source: z
        .string()
        .superRefine((text, ctx) => {
            const problem = modelSourceProblem(text);
            if (problem) {
                ctx.addIssue({ code: "custom", message: problem });
            }
        })
        .meta({ example: "Qwen/Qwen2.5-7B-Instruct (or /models/qwen2.5-7b-instruct)" }),
    /** Name clients put in requests. Defaults to the last path segment of `source`. */
    servedName: z
        .string()
        .regex(/^[^\s\0-\x1f\x7f-][^\s\0-\x1f\x7f]{0,255}$/, {
            error: "must be 1-256 characters without spaces or control characters, not starting with - (vLLM would read it as a flag)",
        })
        .optional()
        .meta({ example: "qwen2.5-7b" }),
    /**
     * Tensor-parallel size. When neither parallelism is given, the default is tensor parallelism
     * over every GPU: on two Sparks TP=2 measured 2.09x one Spark while PP=2 gave 1.08x
     * (community PR), although a community guide recommends PP across single-GPU nodes — the choice is
     * yours. Defaults to the cluster's total GPUs, or 1 when only pipelineParallel is given.
     */
    tensorParallel: z.int().min(1).optional().meta({ example: "2" }),
    /**
     * Pipeline-parallel size (the Sparks + Thors guide uses PP=4 over 2 Sparks + 2 Thors on sockets). Defaults to 1.
     */
    pipelineParallel: z.int().min(1).optional().meta({ example: "1" }),
    /**
     * How vLLM spans the nodes. `mp`: vLLM's own multi-node mode (`--nnodes`, `--node-rank`,
     * `--master-addr`, `--headless` peers), no Ray at all — what vLLM >= 0.18 does without Ray,
     * what NGC vLLM images from 26.05 on support (they ship without Ray), and the default of the
     * most used community launcher since July 2026. `ray`: a Ray cluster (head and workers) as in
     * the older community guides; needs Ray in every node's runtime. Defaults to "mp".
     */
    executor: z.enum(["ray", "mp"]).default("mp").meta({ example: "mp (or ray)" }),
    /**
     * The serving engine. `vllm`: `vllm serve`. `sglang`: SGLang 0.5.23's `python3 -m
     * sglang.launch_server` on every node (`--nnodes`, `--node-rank`, `--dist-init-addr
     * <head>:<model.masterPort>`), only rank 0 serving the API; it needs model.executor `mp`, a
     * runtime with SGLang on every node (an SGLang image such as lmsysorg/sglang, or a venv with
     * the `sglang` package), and no vLLM-only option (docs/engines.md). A change restarts only
     * the serving layer. Defaults to "vllm".
     */
    engine: z.enum(["vllm", "sglang"]).default("vllm").meta({ example: "vllm (or sglang)" }),
    /**
     * Fraction of GPU memory vLLM may use, in (0, 1]; vLLM sizes its KV cache from it and refuses to
     * start when less than this share of the GPU's memory is free (on a Spark or Thor: the memory
     * the OS reports available). Not with `kvCacheMemoryBytes`. Defaults to 0.9.
     */
    gpuMemoryUtilization: z.number().gt(0).lte(1).optional().meta({ example: "0.85" }),
    /**
     * A fixed KV-cache budget per GPU in bytes (`--kv-cache-memory-bytes`, vLLM 0.10.2 and later),
     * instead of `gpuMemoryUtilization`: vLLM then skips its memory profiling, so its KV cache does
     * not shrink with whatever the OS holds at start (unified memory: page cache, other services).
     * The start-up check's `--gpu-memory-utilization` is then derived from the fit planner's
     * estimate of weights + this budget + overhead (README, "Unified memory"). At least 64 MiB.
     * Defaults to none.
     */
    kvCacheMemoryBytes: z
        .int()
        .min(64 * 2 ** 20)
        .max(2 ** 50)
        .optional()
        .meta({ example: "34359738368 (32 GiB)" }),
    /** Context length (--max-model-len). Defaults to the model's own. */
    maxModelLen: z.int().min(1).optional().meta({ example: "32768" }),
    /** Concurrent sequences (--max-num-seqs). Defaults to vLLM's own. */
    maxNumSeqs: z.int().min(1).optional().meta({ example: "64" }),
    /** Quantization method (--quantization), e.g. fp8. Defaults to none (from the model's config). */
    quantization: z
        .string()
        .regex(/^[a-z0-9_]+$/, { error: "must be a vLLM quantization name like fp8 or awq" })
        .optional()
        .meta({ example: "fp8" }),
    /** KV cache dtype (--kv-cache-dtype), e.g. fp8. Defaults to vLLM's "auto". */
    kvCacheDtype: z
        .string()
        .regex(/^[a-z0-9_]+$/, { error: "must be a vLLM kv-cache dtype like auto or fp8" })
        .optional()
        .meta({ example: "fp8" }),
    /** Disable CUDA graphs (--enforce-eager). Defaults to true when any node is a thor, else false. */
    enforceEager: z.boolean().optional().meta({ example: "true" }),
    /** Attention backend (--attention-backend), e.g. TRITON_ATTN (on a Thor). Defaults to vLLM's choice. */
    attentionBackend: z
        .string()
        .regex(/^[A-Za-z0-9_]+$/, { error: "must be a backend name like TRITON_ATTN or FLASH_ATTN" })
        .optional()
        .meta({ example: "TRITON_ATTN" }),
    /** Allow the model repository's own Python code (--trust-remote-code). Defaults to false. */
    trustRemoteCode: z.boolean().default(false).meta({ example: "false" }),
    /** Further `vllm serve` flags, one `--flag` or `--flag=value` per element. Defaults to []. */
    extraArgs: z
        .array(
            z
                .string()
                .superRefine((arg, ctx) => {
                    const problem = extraArgProblem(arg);
                    if (problem) {
                        ctx.addIssue({ code: "custom", message: problem.message });
                    }
                })
                .meta({ example: "--max-num-batched-tokens=8192" }),
        )
        .default([])
        .meta({ example: "[--max-num-batched-tokens=8192, --disable-custom-all-reduce]" }),
    /**
     * Extra environment for the vLLM server, name to string value, e.g. `VLLM_USE_FLASHINFER_MOE_FP4:
     * "1"` or an NCCL tuning variable only vLLM should see. Names the project sets itself (the
     * runtime env file's NCCL, Gloo and VLLM_HOST_IP variables, VLLM_API_KEY, Ray's token and
     * address, HF_HUB_OFFLINE) are rejected with the key to set instead, and so are HF_TOKEN (the
     * model download's, from hfToken), HF_HOME and HF_HUB_CACHE (vLLM reads the model offline from
     * the cache the model sync fills). Values are
     * single lines of at most 4096 bytes; they reach vLLM byte for byte. A change restarts only
     * vLLM. Defaults to {}.
     */
    env: z
        .record(
            z.string().superRefine((name, ctx) => {
                const problem = modelEnvNameProblem(name);
                if (problem) {
                    ctx.addIssue({ code: "custom", message: problem.message });
                }
            }),
            z
                .string()
                .superRefine((value, ctx) => {
                    const problem = modelEnvValueProblem(value);
                    if (problem) {
                        ctx.addIssue({ code: "custom", message: problem });
                    }
                })
                .meta({ example: 'VLLM_USE_FLASHINFER_MOE_FP4: "1"' }),
        )
        .default({})
        .meta({ example: '{ VLLM_USE_FLASHINFER_MOE_FP4: "1" }' }),
    /**
     * Seconds `up` waits for the first chat answer after vLLM (re)starts. The default covers a warm
     * start and a cold start of a mid-size model from the page cache; a cold start of a large model
     * (a 235B MoE read from disk, compiled and captured) can need longer. 60-7200. Defaults to 600.
     */
    readyTimeoutSeconds: z.int().min(60).max(7200).default(600).meta({ example: "1800" }),
    /** Port of the OpenAI-compatible API on the head. Defaults to 8000. */
    apiPort: port().default(8000).meta({ example: "8000" }),
    /** Address the API binds to on the head. Defaults to "0.0.0.0". */
    apiHost: hostOrIpv4().default("0.0.0.0").meta({ example: "0.0.0.0" }),
    /**
     * The model's size, for the fit check at preview: parameter count and dtype, and the shapes
     * that size its KV cache. Defaults to the model directory's config.json when model.source is
     * a directory readable where pulumi runs; a hub id without it skips the check (the `fit`
     * output says so).
     */
    size: ModelSizeSchema.optional().meta({ example: "{ paramsB: 72.7, dtype: bf16, layers: 80, kvHeads: 8, headDim: 128 }" }),
    /** torch.distributed master port for the mp executor (`--master-port`; vLLM's own default). Defaults to 29501. */
    masterPort: port().default(29501).meta({ example: "29501" }),
    /**
     * Remove a Hugging Face model from every node's cache (/root/.cache/huggingface/hub) when
     * `pulumi destroy` (or a change of model.source) drops it. Model caches are your data: by
     * default they stay, so a later `up` copies nothing. Defaults to false.
     */
    removeCacheOnDestroy: z.boolean().optional().meta({ example: "false" }),
    /**
     * Parallel rsync streams each other node pulls a Hugging Face model from the head with (the
     * model's files split between them by size, then one pass over the whole tree): one stream is
     * bound by a core's checksumming and copying, well below a Spark's interconnect. 1-16; 1 is a
     * single pass. Defaults to 4.
     */
    syncStreams: z.int().min(1).max(16).default(4).meta({ example: "8" }),
    /**
     * Stop serving and keep everything else. `true`: the next `up` stops and removes the vLLM
     * layer on every node (its units, the follower units of the mp executor, the root-only secrets
     * file, the readiness probe), which frees the GPU memory; the network, PFC, NCCL, firewall,
     * Ray (ray executor) and the model in every node's cache stay as they are. Set it back to
     * `false` (or remove it) and the next `up` serves again: it creates only the vLLM layer, with
     * no download and no step on the network layers. Defaults to false.
     */
    paused: z.boolean().optional().meta({ example: "true" }),
});

/** NVIDIA's pass mark for NCCL between two Sparks over RoCE: 175 Gb/s of the 200 Gb/s link, in GB/s (1e9 bytes/s). */
export const ROCE_PASS_MARK_GBPS = 21.875;

/** The NCCL check: an all-reduce across the nodes with the runtime's own torch, after the host layers. */
export const CheckSchema = z.strictObject({
    /**
     * Run it on `up` (again whenever the NCCL environment changes). It needs torch in every node's
     * runtime (the NGC images and a vLLM venv have it). Defaults to true; the lab stack turns it off.
     */
    enabled: z.boolean().default(true).meta({ example: "false" }),
    /**
     * Bus bandwidth below which `up` fails, in GB/s. Defaults to 21.875 with RoCE (NVIDIA's pass mark
     * for two Sparks) and to 0 (report only) over sockets.
     */
    passMarkGBps: z.number().min(0).max(10000).optional().meta({ example: "21.875" }),
    /**
     * Fail unless the transport the check used starts with this. Defaults to `NET/IB` (RDMA) with
     * RoCE and to none over sockets; `any` accepts whatever it measured (e.g. `gloo/TCP`, which
     * is what a runtime whose torch sees no GPU uses, as in the lab).
     */
    requireTransport: z
        .string()
        .regex(/^(any|[A-Za-z0-9_-]+(\/[A-Za-z0-9_-]+)*)$/, "must be a transport like NET/IB, NET/Socket or gloo/TCP, or any")
        .optional()
        .meta({ example: "NET/IB" }),
});

/**
 * The health watchdog of every server we start (the engine's API on the head, the engine's ranks on
 * the other nodes, Ray's head, Open WebUI): a server that is running but does not answer its health check is
 * restarted, with the reason in the journal.
 */
export const WatchdogSchema = z.strictObject({
    /**
     * Run the watchdog and the restart gate (`restarts`). `false`: the serving units restart as
     * systemd's Restart=always alone does (every 5 s, no backoff, no stop). Defaults to true.
     */
    enabled: z.boolean().default(true).meta({ example: "false" }),
    /**
     * Seconds after each start of a server before a missing answer counts: model load, compile
     * and graph capture on a Spark take minutes. Once the server has answered, the watchdog judges
     * it from its last answer instead. 60-14400. Defaults to 1800.
     */
    startSeconds: z.int().min(60).max(14400).default(1800).meta({ example: "1800" }),
    /** Seconds without an answer (each probe bounded by 5 s) after which a server is restarted. 5-3600. Defaults to 30. */
    unresponsiveSeconds: z.int().min(5).max(3600).default(30).meta({ example: "30" }),
});

/**
 * How the engine's unit restarts (systemd 252, Debian 12's, has no RestartSteps=; a gate run before
 * each start does it): backoff after starts that never answered, a memory check, and a stop.
 */
export const RestartsSchema = z.strictObject({
    /** Seconds of backoff before the restart that follows the first start that never answered; doubled each time. 1-600. Defaults to 5. */
    backoffSeconds: z.int().min(1).max(600).default(5).meta({ example: "5" }),
    /** The longest backoff, in seconds. 1-3600. Defaults to 300. */
    maxBackoffSeconds: z.int().min(1).max(3600).default(300).meta({ example: "300" }),
    /**
     * Starts in a row that never answered after which the unit is stopped (no more restarts) and
     * `npm run status` names the cause; `pulumi up --refresh` starts it again. 2-100. Defaults to 6.
     */
    maxFailedStarts: z.int().min(2).max(100).default(6).meta({ example: "6" }),
    /**
     * Seconds a restart after a start that never answered waits, on a unified-memory node (Spark,
     * Thor), for MemAvailable to reach what the engine asks for (model.gpuMemoryUtilization of
     * MemTotal); then it starts anyway and the engine's own check decides. 0-3600. Defaults to 120.
     */
    memoryWaitSeconds: z.int().min(0).max(3600).default(120).meta({ example: "120" }),
});

/**
 * Metrics: Prometheus's node_exporter on every node and Prometheus on the head, scraping the
 * exporters and the engine's `/metrics`, both from the nodes' own packages (Debian's and Ubuntu's
 * `prometheus-node-exporter` and `prometheus`), run by units of ours on ports of their own (the
 * packages' own services, where they run, are left as they are). Prometheus listens on the head's
 * loopback (the `metrics` output gives the SSH tunnel); an exporter on its node's cluster address,
 * which the firewall keeps to the members.
 */
export const MetricsSchema = z.strictObject({
    /**
     * Run the exporters and Prometheus. Off by default: the nodes need the two packages, which the
     * node check asks for (apt-get install prometheus-node-exporter, and prometheus on the head).
     */
    enabled: z.boolean().default(false).meta({ example: "true" }),
    /** node_exporter's port on every node's cluster address. Defaults to 9101 (the package's own service keeps 9100). */
    exporterPort: port().default(9101).meta({ example: "9101" }),
    /** Prometheus's port on the head's loopback. Defaults to 9190 (the package's own service keeps 9090). */
    port: port().default(9190).meta({ example: "9190" }),
    /** Seconds between scrapes. 5-300. Defaults to 15. */
    scrapeSeconds: z.int().min(5).max(300).default(15).meta({ example: "15" }),
    /** Days of samples Prometheus keeps. 1-365. Defaults to 15. */
    retentionDays: z.int().min(1).max(365).default(15).meta({ example: "15" }),
    /** The most disk Prometheus's samples take, in GiB (the oldest go first). 1-1000. Defaults to 2. */
    retentionGiB: z.int().min(1).max(1000).default(2).meta({ example: "2" }),
});

/** Every key under the `spark-cluster:` namespace. */
export const ClusterConfigSchema = z.strictObject({
    /** The machines, at least two. Required. */
    nodes: z.array(NodeSchema).min(2).meta({
        example:
            "[{ name: spark-a, kind: spark, head: true, ssh: { host: 10.0.0.11 }, interconnect: [{ address: 192.168.100.11/24 }] }, { name: spark-b, ... }]",
    }),
    /** Cabling. Defaults to `{ topology: pair, mtu: 9000 }`. */
    interconnect: InterconnectSchema.prefault({}).meta({ example: "{ topology: pair, mtu: 9000 }" }),
    /** RoCE host settings. Defaults to PFC on priority 3, trust DSCP, nvidia-peermem. */
    roce: RoceSchema.prefault({}).meta({ example: "{ enabled: true, priority: 3 }" }),
    /** NCCL settings. Defaults to transport auto, debug WARN. */
    nccl: NcclSchema.prefault({}).meta({ example: "{ transport: auto, debug: WARN }" }),
    /** The NCCL check after the host layers. Defaults to on, pass mark by transport. */
    check: CheckSchema.prefault({}).meta({ example: "{ enabled: true, passMarkGBps: 21.875, requireTransport: NET/IB }" }),
    /** Firewall on every node. Defaults to on: only SSH, the API and `allowPorts` from outside the cluster. */
    firewall: FirewallSchema.prefault({}).meta({ example: "{ enabled: true, apiAllowFrom: [192.168.1.0/24] }" }),
    /** Ray settings. Defaults to ports 6379/8265, dashboard on 127.0.0.1. */
    ray: RaySchema.prefault({}).meta({ example: "{ port: 6379, dashboardHost: 127.0.0.1, dashboardPort: 8265 }" }),
    /** The health watchdog of the servers. Defaults to on: 1800 s after a start, then 30 s without an answer. */
    watchdog: WatchdogSchema.prefault({}).meta({ example: "{ enabled: true, startSeconds: 1800, unresponsiveSeconds: 30 }" }),
    /** Restarts of the engine's unit: backoff, memory check, stop. Defaults to 5 s doubling to 300 s, stop after 6 starts that never answered. */
    restarts: RestartsSchema.prefault({}).meta({ example: "{ backoffSeconds: 5, maxBackoffSeconds: 300, maxFailedStarts: 6, memoryWaitSeconds: 120 }" }),
    /** Prometheus and node_exporter (the nodes' packages). Defaults to off. */
    metrics: MetricsSchema.prefault({}).meta({ example: "{ enabled: true, exporterPort: 9101, port: 9190, retentionDays: 15 }" }),
    /** The model and vLLM settings. Required (at least `source`). */
    model: ModelSchema.meta({ example: "{ source: Qwen/Qwen2.5-7B-Instruct }" }),
    /** Front ends on the head (Open WebUI). Defaults to none. */
    frontend: FrontendSchema.prefault({}).meta({ example: "{ openWebui: { enabled: true, adminEmail: admin@example.com } }" }),
    /**
     * SECRET. Private key text (OpenSSH or PEM) for every node. Exactly one of this and
     * `sshPrivateKeyPath` unless every node sets ssh.privateKeyPath.
     */
    sshPrivateKey: z
        .string()
        .regex(PRIVATE_KEY_TEXT, {
            error: "must be the text of a private key (-----BEGIN ... PRIVATE KEY-----), not a path or a public key",
        })
        .optional()
        .meta({ example: `pulumi config set --secret ${CONFIG_NAMESPACE}:sshPrivateKey "$(cat ~/.ssh/id_ed25519)"` }),
    /** Path of the private key file on the machine that runs pulumi; `~` is not expanded. Alternative to sshPrivateKey. */
    sshPrivateKeyPath: keyFilePath()
        .optional()
        .meta({ example: `pulumi config set ${CONFIG_NAMESPACE}:sshPrivateKeyPath /home/you/.ssh/id_ed25519` }),
    /**
     * SECRET. The sudo password of the login user (nodes[].ssh.user) on every node that does not log
     * in as root: DGX OS's admin user gets sudo that asks for its password. Every step sends it on
     * stdin to `sudo -S`, never in argv, a file or a log. Not needed with passwordless sudo. Defaults to none.
     */
    sudoPassword: z
        .string()
        .min(1)
        .max(256)
        .regex(/^[^\0-\x1f\x7f]+$/, { error: "must be one line of text (no line breaks or control characters)" })
        .optional()
        .meta({ example: `pulumi config set --secret ${CONFIG_NAMESPACE}:sudoPassword` }),
    /** SECRET. Key clients must send to the OpenAI-compatible endpoint, at least 16 characters. Required. */
    apiKey: z
        .string()
        .min(16)
        .max(4096)
        .regex(SECRET_TEXT, { error: "must be printable ASCII (spaces inside are fine), without control characters or a space at either end" })
        .meta({ example: `pulumi config set --secret ${CONFIG_NAMESPACE}:apiKey "$(openssl rand -hex 24)"` }),
    /** SECRET. Hugging Face token for gated models. Defaults to none. */
    hfToken: z
        .string()
        .max(512)
        .regex(SECRET_TEXT, { error: "must be printable ASCII (spaces inside are fine), not empty, without control characters or a space at either end" })
        .optional()
        .meta({ example: `pulumi config set --secret ${CONFIG_NAMESPACE}:hfToken hf_...` }),
    /**
     * SECRET. The token every Ray node authenticates with (Ray's token authentication,
     * `RAY_AUTH_MODE=token`); only with the ray executor. Defaults to a token derived from the
     * stack's root secret (a random secret `up` draws once and keeps encrypted in the state; see
     * secretsGeneration), which no client of the API can compute. Set it to choose the token yourself.
     */
    rayAuthToken: z
        .string()
        // Letters, digits, _ and - only: the head's Ray readiness step reads ray.env with bash (`. ray.env`).
        .regex(/^[A-Za-z0-9_-]{32,256}$/, { error: "must be 32-256 letters, digits, _ or - (e.g. 64 hex digits)" })
        .optional()
        .meta({ example: `pulumi config set --secret ${CONFIG_NAMESPACE}:rayAuthToken "$(openssl rand -hex 32)"` }),
    /**
     * The generation of the stack's root secret: a random secret the first `up` draws and keeps
     * encrypted in the state, from which the cluster's internal secrets are derived (the Ray token
     * unless rayAuthToken is set, the model sync's rsync secret, Open WebUI's session key). Change it
     * to rotate them (any new value: a number, a date): the next `up` draws a new root and updates
     * the steps that carry them (Ray and the engine restart; Open WebUI's sessions end). Defaults to "1".
     */
    secretsGeneration: z
        .string()
        .regex(/^[A-Za-z0-9._-]{1,64}$/, { error: "must be 1-64 letters, digits, '.', '_' or '-' (e.g. 2, or today's date)" })
        .default("1")
        .meta({ example: `pulumi config set ${CONFIG_NAMESPACE}:secretsGeneration 2` }),
    /** SECRET. The Open WebUI admin's password (frontend.openWebui), at least 12 characters. Required when Open WebUI is enabled. */
    openWebuiAdminPassword: z
        .string()
        .min(12)
        .max(256)
        .regex(SECRET_TEXT, { error: "must be printable ASCII (spaces inside are fine), without control characters or a space at either end" })
        .optional()
        .meta({ example: OPEN_WEBUI_PASSWORD_EXAMPLE }),
});

/** The stack config as the schema outputs it, before cross-field defaults. */
export type ParsedConfig = z.output<typeof ClusterConfigSchema>;
/** One node as the schema outputs it. */
export type ParsedNode = z.output<typeof NodeSchema>;
/** One interconnect interface as the schema outputs it. */
export type ParsedInterface = z.output<typeof InterfaceSchema>;
/** The model section as the schema outputs it. */
export type ParsedModel = z.output<typeof ModelSchema>;

export type NodeKind = ParsedNode["kind"];
export type DockerRuntime = z.output<typeof DockerRuntimeSchema>;
export type VenvRuntime = z.output<typeof VenvRuntimeSchema>;
export type Runtime = DockerRuntime | VenvRuntime;
