/**
 * The resolution step: a config that passed the schema and the cross-field rules becomes the
 * plan every component reads. Every derived decision is made here, once: the head node, whether
 * the cluster has a Thor, the NCCL transport, the parallelism, each node's RoCE decision (with
 * the reason when it is skipped), each node's peers on each link, and the SSH key of each node.
 * Components read these fields; none derives them again.
 */
import type { z } from "zod";
import { isSwitchless } from "./cablingRules";
import { type FabricNode, planFabric } from "./fabric";
import { DEFAULT_GPU_MEMORY_UTILIZATION, type Facts, NODE_KIND_TRAITS, RUNTIME_TRAITS, gatherFacts, runtimeOf } from "./facts";
import { DEFAULT_OPEN_WEBUI_IMAGE, DEFAULT_OPEN_WEBUI_VENV, OpenWebuiDockerSchema, OpenWebuiVenvSchema } from "./frontendSchema";
import { type FitInputs, type FitReport, fitInputs } from "./fitRule";
import { formatIpv4, formatSubnet, isLoopback, parseCidr } from "./ipv4";
import {
    CheckSchema,
    DEFAULT_SSH_CONNECT_TIMEOUT_SECONDS,
    InterconnectSchema,
    NcclSchema,
    NodeKind,
    ParsedConfig,
    ParsedInterface,
    ParsedModel,
    ParsedNode,
    RaySchema,
    ROCE_PASS_MARK_GBPS,
    RestartsSchema,
    MetricsSchema,
    WatchdogSchema,
    RoceSchema,
    Runtime,
} from "./schema";
import { SecretString } from "./secret";
import { SGLANG_VERSION } from "./sglangFlags";

/** The NCCL transport every node uses. */
export type Transport = "roce" | "socket";

/** Where a node's SSH private key comes from. */
export type SshKey =
    { kind: "secret"; /** The key text. */ text: SecretString } | { kind: "path"; /** The key file on the machine that runs pulumi. */ path: string };

/** An interconnect interface with its address taken apart. */
export interface InterconnectInterface {
    /** Linux interface name; undefined means detect it on the node (ibdev2netdev) at deploy time. */
    name?: string;
    /** The address with prefix, as configured: `192.168.100.11/24`. */
    address: string;
    /** The address alone: `192.168.100.11`. */
    ip: string;
    /** The prefix length: 24. */
    prefixLength: number;
    /** The subnet: `192.168.100.0/24`. */
    subnet: string;
}

/** Whether a node configures lossless RoCE (PFC, nvidia-peermem), and why not when it does not. */
export type RoceDecision =
    | { enabled: true; /** Load nvidia-peermem (roce.peermem), and why (shown in the `roce` output). */ peermem: { load: boolean; reason: string } }
    | { enabled: false; /** Shown in the `roce` output: `skipped: …`. */ reason: string };

/** Another node's address that must answer over one of this node's links. */
export interface Peer {
    node: string;
    ip: string;
    /** Index into this node's `interconnect` of the interface on that link. */
    via: number;
}

/** A node with every default resolved and every per-node decision made. */
export interface NodeConfig {
    name: string;
    kind: NodeKind;
    head: boolean;
    ssh: {
        host: string;
        port: number;
        user: string;
        privateKey: SshKey;
        hostKey?: string;
        connectTimeoutSeconds: number;
        /** The user's sudo password (sudoPassword), on a node that does not log in as root. */
        sudoPassword?: SecretString;
    };
    gpus: number;
    /** GPU and OS share one memory pool (spark, thor): the model's pages are evicted from the page cache before vLLM starts. */
    unifiedMemory: boolean;
    runtime: Runtime;
    interconnect: InterconnectInterface[];
    /** The address Ray, vLLM and NCCL pin to: the first interconnect interface's. */
    ip: string;
    peers: Peer[];
    roce: RoceDecision;
    /** The link checks of this node's interconnect: the lowest speed its interfaces may report, and what a slower one does. */
    linkCheck: LinkCheck;
    /** The node is gone: nothing runs on it, its resources leave the stack without their delete. */
    retired: boolean;
    /** What this node's firewall lets in (used when firewall.enabled). */
    firewall: FirewallPolicy;
    /**
     * A mesh or ring (interconnect.topology): this node's cables, its host routes to the other
     * nodes' addresses that are not on its own cables, and the interfaces that must forward
     * (config/fabric.ts). Undefined for a pair or a switch, whose links are subnets.
     */
    fabric?: FabricNode;
}

/** What `up` and the read-back check on a node's interconnect links. */
export interface LinkCheck {
    /** Lowest speed (Mb/s) an interface may report; undefined: the speed is shown, not checked. */
    minSpeedMbps?: number;
    lowSpeed: "refuse" | "warn";
    /** The RDMA bandwidth test at `up` (interconnect.linkCheck.rdmaBandwidth.enabled): its settings and this node's rails. */
    rdmaBandwidth?: { minGbps?: number; durationSeconds: number; waitSeconds: number; rails: RdmaRailPlan[] };
}

/** One end of one rail of the RDMA bandwidth test. */
export interface RdmaRailPlan {
    role: "server" | "client";
    /** Index into this node's `interconnect` of the rail's interface. */
    via: number;
    peer: string;
    /** The other end's address on the rail. */
    peerIp: string;
    /** perftest's port for this rail: the configured port + the rail's place in the cluster's order. */
    port: number;
}

/**
 * Every rail of the RDMA bandwidth test, per node, in one cluster-wide order: for each pair of
 * nodes (config order) and each shared subnet, the earlier node serves and the later connects.
 * Every node runs its rails in this order, so the two ends of each meet; nodes without RDMA
 * (a Thor) and retired nodes have none.
 */
export function resolveRdmaRails(
    nodes: readonly (Pick<NodeConfig, "name" | "interconnect" | "retired"> & { rdma: boolean })[],
    basePort: number,
): Map<string, RdmaRailPlan[]> {
    const rails = new Map<string, RdmaRailPlan[]>(nodes.map((n) => [n.name, []]));
    const live = nodes.filter((n) => n.rdma && !n.retired);
    let k = 0;
    live.forEach((server, i) =>
        live.slice(i + 1).forEach((client) =>
            server.interconnect.forEach((mine, via) => {
                const theirs = client.interconnect.findIndex((iface) => iface.subnet === mine.subnet);
                if (theirs < 0) return;
                const port = basePort + k++;
                rails.get(server.name)?.push({ role: "server", via, peer: client.name, peerIp: client.interconnect[theirs].ip, port });
                rails.get(client.name)?.push({ role: "client", via: theirs, peer: server.name, peerIp: mine.ip, port });
            }),
        ),
    );
    return rails;
}

/** What a healthy DGX Spark's ConnectX-7 port reports as its speed (/sys/class/net/IF/speed), Mb/s. */
export const SPARK_LINK_SPEED_MBPS = 200_000;

/** A node's link check: the configured minimum, else a Spark's port speed on a Spark, else none. */
export function resolveLinkCheck(kind: NodeKind, configured: { minSpeedMbps?: number; lowSpeed: "refuse" | "warn" }): LinkCheck {
    const min = configured.minSpeedMbps ?? (kind === "spark" ? SPARK_LINK_SPEED_MBPS : undefined);
    return { ...(min !== undefined ? { minSpeedMbps: min } : {}), lowSpeed: configured.lowSpeed };
}

/** One node's firewall: who is a member, what is open to everyone, and who reaches the API. */
export interface FirewallPolicy {
    node: string;
    /** Interconnect addresses of every node of the cluster: they reach everything. */
    members: string[];
    /** TCP ports anyone may connect to (SSH, the user's, an exposed Ray dashboard on the head), sorted. */
    openTcp: number[];
    /** UDP ports anyone may send to (the user's), sorted. */
    openUdp: number[];
    /** The API port and the source ranges it is restricted to (head only; none: open to anyone). */
    api?: { port: number; allowFrom: string[] };
    /** The interconnect interfaces members' traffic may transit between (a ring's forwarding node); none: no forward chain. */
    transitInterfaces?: string[];
}

/** A port opened to everyone in the firewall. */
export interface OpenPort {
    port: number;
    protocol: "tcp" | "udp";
}

/** The firewall section with `allowPorts` taken apart. */
export interface FirewallConfig {
    enabled: boolean;
    /** Source ranges allowed to reach the API port; empty: anyone. */
    apiAllowFrom: string[];
    allowPorts: OpenPort[];
}

/** `8080` or `"5353/udp"` (validated by the schema) as a port and protocol. */
export function parseOpenPort(value: number | string): OpenPort {
    const [port, protocol] = String(value).split("/");
    return { port: Number(port), protocol: protocol === "udp" ? "udp" : "tcp" };
}

/** The model section with parallelism, served name, eager mode and the start-up check's utilization resolved. */
export interface ModelConfig extends Omit<ParsedModel, "tensorParallel" | "pipelineParallel" | "servedName" | "enforceEager" | "gpuMemoryUtilization"> {
    /**
     * `--gpu-memory-utilization`: model.gpuMemoryUtilization; with model.kvCacheMemoryBytes, what the
     * fit estimate needs (vLLM still checks it against the free memory at start), or the default
     * when the fit was not estimated.
     */
    gpuMemoryUtilization: number;
    tensorParallel: number;
    pipelineParallel: number;
    servedName: string;
    enforceEager: boolean;
    /** metrics.enabled: the engine serves `/metrics` for Prometheus (SGLang's --enable-metrics; vLLM's are always on). */
    enableMetrics?: true;
}

/** One serving process (`vllm serve`): where it runs and its rank (rank 0 serves the API; the others run headless). */
export interface ServerPlacement {
    node: string;
    rank: number;
    /** The engine's own multi-node mode (mp executor): the ranks, this one's, and where rank 0 listens. Undefined: one process drives every GPU (ray executor). */
    multiNode?: { nnodes: number; rank: number; masterAddr: string; masterPort: number };
}

/** The Ray cluster the ray executor runs on. */
export interface RayLayout {
    /** The node of the Ray head (the cluster's head). */
    head: string;
    /** The nodes that join the head as Ray workers, in config order. */
    workers: string[];
    /** `ip:port` of the head's GCS, which the workers and vLLM join. */
    address: string;
    /** Nodes and GPUs the head waits to see before it counts as ready. */
    expectedNodes: number;
    expectedGpus: number;
    /**
     * Every Ray node's address (its --node-ip-address). The head's readiness removes
     * any other node from the cluster: one taken out of `nodes` whose Ray worker still runs until
     * its steps are deleted, at the end of the `up` (issue 36).
     */
    members: string[];
    /** The dashboard: whether it listens beyond loopback (the head's firewall then opens its port), and how to reach it. */
    dashboard: { exposed: boolean; port: number; access: string };
}

/**
 * What runs where for the executor (model.executor): the `vllm serve` processes with their ranks,
 * and the Ray cluster when there is one. Components read these fields; none tests the executor's
 * name.
 */
export type Executor =
    | {
          kind: "ray";
          /** vLLM on the head only: its workers run inside the Ray cluster. */
          servers: [ServerPlacement];
          ray: RayLayout;
          /** What the `ray` output says per node. */
          rayUnused?: undefined;
      }
    | {
          kind: "mp";
          /** vLLM on every node, rank 0 the head, the others in config order. */
          servers: ServerPlacement[];
          ray?: undefined;
          rayUnused: string;
      };

/**
 * The serving engine: which program serves the model. One arm for now; another engine is one more
 * arm here (from its schema value) and one strategy in components/render/engine.ts, which is the
 * only place that tests `kind`.
 */
export type Engine = { kind: "vllm" } | { kind: "sglang"; version: string };

/** The serving engine of the config (model.engine). */
export function resolveEngine(model: Pick<ParsedModel, "engine">): Engine {
    switch (model.engine) {
        case "vllm":
            return { kind: "vllm" };
        case "sglang":
            return { kind: "sglang", version: SGLANG_VERSION };
        default: {
            const never: never = model.engine;
            throw new Error(`internal: unknown engine ${String(never)}`);
        }
    }
}

/** The validated cluster config: plain data, every default resolved, secrets wrapped. */
/**
 * The servers' health watchdog and the engine unit's restart gate, as the renderers read them
 * (watchdog and restarts, with the backoff's ceiling never below its first step).
 */
export interface WatchdogConfig {
    /** Seconds after each start before a missing answer counts. */
    startSeconds: number;
    /** Seconds without an answer after which a server that answered (or whose start seconds are over) is restarted. */
    unresponsiveSeconds: number;
    /** Backoff before the restart after the first start that never answered, doubled each time up to maxBackoffSeconds. */
    backoffSeconds: number;
    maxBackoffSeconds: number;
    /** Starts in a row that never answered after which the gate stops the unit. */
    maxFailedStarts: number;
    /** Bounded wait for MemAvailable before a restart after a start that never answered (unified-memory nodes). */
    memoryWaitSeconds: number;
}

/** watchdog and restarts as one {@link WatchdogConfig}. */
export function resolveWatchdog(watchdog: z.output<typeof WatchdogSchema>, restarts: z.output<typeof RestartsSchema>): WatchdogConfig {
    return {
        startSeconds: watchdog.startSeconds,
        unresponsiveSeconds: watchdog.unresponsiveSeconds,
        backoffSeconds: restarts.backoffSeconds,
        maxBackoffSeconds: Math.max(restarts.maxBackoffSeconds, restarts.backoffSeconds),
        maxFailedStarts: restarts.maxFailedStarts,
        memoryWaitSeconds: restarts.memoryWaitSeconds,
    };
}

/** Prometheus and node_exporter (metrics.enabled), as the renderers read them. */
export interface MetricsConfig {
    exporterPort: number;
    port: number;
    scrapeSeconds: number;
    retentionDays: number;
    retentionGiB: number;
    /** How to reach Prometheus on the head's loopback: the SSH tunnel, then the local URL (the `metrics` output). */
    access: string;
}

/** metrics (enabled) as {@link MetricsConfig}. */
function resolveMetrics(metrics: z.output<typeof MetricsSchema>, head: NodeConfig): MetricsConfig {
    const { enabled: _, ...settings } = metrics;
    return { ...settings, access: `ssh -N -L ${metrics.port}:127.0.0.1:${metrics.port} ${sshTarget(head.ssh)}, then open http://localhost:${metrics.port}` };
}

export interface Config {
    nodes: NodeConfig[];
    /** The head node (runs the Ray head and serves the API). */
    head: NodeConfig;
    /** Every node but the head, in config order. */
    workers: NodeConfig[];
    /** Any node is a Jetson Thor (no RoCE: sockets everywhere, eager mode by default). */
    hasThor: boolean;
    /** Sum of the nodes' GPUs. */
    totalGpus: number;
    /** The NCCL transport of the whole cluster (nccl.transport with `auto` resolved). */
    transport: Transport;
    interconnect: z.output<typeof InterconnectSchema>;
    roce: z.output<typeof RoceSchema>;
    nccl: Omit<z.output<typeof NcclSchema>, "transport">;
    ray: z.output<typeof RaySchema>;
    /** The servers' health watchdog and the engine unit's restart gate (watchdog, restarts); undefined when watchdog.enabled is false. */
    watchdog?: WatchdogConfig;
    /** Prometheus on the head and node_exporter on every node; undefined when metrics.enabled is false. */
    metrics?: MetricsConfig;
    firewall: FirewallConfig;
    /**
     * The NCCL check, with the pass mark and the required transport resolved from the cluster's
     * transport when none is given (`requireTransport` undefined: any).
     */
    check: { enabled: boolean; passMarkGBps: number; requireTransport: string | undefined };
    model: ModelConfig;
    /** model.source is a directory on the nodes, served as it is, rather than a Hugging Face id. */
    localModel: boolean;
    apiKey: SecretString;
    hfToken?: SecretString;
    /** Whether the model fits (the planner's estimate), or why it was not checked. */
    fit: FitReport;
    /** What the planner was asked, for the node check to ask again with each node's probed memory (config.probedFit). */
    fitInputs: FitInputs;
    /** The configured token of Ray's token authentication (ray executor); absent: derived from the root secret (components/clusterSecrets.ts). */
    rayAuthToken?: SecretString;
    /** The generation of the stack's root secret (secretsGeneration): a new one draws a new root. */
    secretsGeneration: string;
    /** The nodes in rank order: the head (rank 0, whose address every rank dials), then the others in config order. */
    rankOrder: string[];
    /** What runs where for the executor. */
    executor: Executor;
    /** The serving engine the servers run. */
    engine: Engine;
    /** Open WebUI on the head (frontend.openWebui.enabled); absent when off. */
    openWebui?: OpenWebuiConfig;
}

/** How the head runs Open WebUI: its own image, or a venv `up` installs. */
export type OpenWebuiRuntime = z.output<typeof OpenWebuiDockerSchema> | z.output<typeof OpenWebuiVenvSchema>;

/** Open WebUI on the head, every default and derived value decided. */
export interface OpenWebuiConfig {
    /** The head node's name (Open WebUI runs there). */
    node: string;
    runtime: OpenWebuiRuntime;
    /** PyPI release for the venv runtime. */
    version: string;
    listenAddress: string;
    port: number;
    /** Listening off loopback: the firewall opens `port` on the head. */
    exposed: boolean;
    adminEmail: string;
    adminName: string;
    adminPassword: SecretString;
    dataDir: string;
    removeDataOnDestroy: boolean;
    /** The cluster's OpenAI-compatible base URL as Open WebUI on the head reaches it. */
    endpoint: string;
    /** How a person reaches the page: the SSH tunnel command, or the URL when exposed. */
    access: string;
}

/** The NCCL check's pass mark and required transport: RDMA at NVIDIA's pass mark on RoCE, report only over sockets. */
export function resolveCheck(check: z.output<typeof CheckSchema>, transport: Transport): Config["check"] {
    const requireTransport = check.requireTransport ?? (transport === "roce" ? "NET/IB" : undefined);
    return {
        enabled: check.enabled,
        passMarkGBps: check.passMarkGBps ?? (transport === "roce" ? ROCE_PASS_MARK_GBPS : 0),
        requireTransport: requireTransport === "any" ? undefined : requireTransport,
    };
}

/** The cluster's NCCL transport: `auto` is socket when any node is a Thor, else roce. */
export function resolveTransport(requested: z.output<typeof NcclSchema>["transport"], hasThor: boolean): Transport {
    if (requested !== "auto") {
        return requested;
    }
    return hasThor ? "socket" : "roce";
}

/** A node's RoCE decision: lossless RoCE needs the roce transport, roce.enabled, and a node with RoCE. */
export function resolveRoce(kind: NodeKind, transport: Transport, enabled: boolean, peermem: boolean | "auto" = "auto"): RoceDecision {
    if (transport !== "roce") return { enabled: false, reason: "skipped: the cluster uses socket transport" };
    if (!enabled) return { enabled: false, reason: "skipped: roce.enabled is false" };
    if (kind === "thor") return { enabled: false, reason: `skipped: a ${kind} has no RoCE` };
    return { enabled: true, peermem: resolvePeermem(kind, peermem) };
}

/**
 * Whether a RoCE node loads nvidia-peermem (GPUDirect RDMA), and why. GB10 (a DGX Spark) does not
 * support GPUDirect RDMA: NVIDIA's developer forum ("dgx-spark-gpudirect-rdma") says nvidia-peermem,
 * dma-buf and GDRCopy do not work there and `modprobe nvidia-peermem` fails with "Invalid
 * argument"; NCCL then moves data through host memory. A workstation's discrete GPU has it.
 */
export function resolvePeermem(kind: NodeKind, setting: boolean | "auto"): { load: boolean; reason: string } {
    if (setting === true) return { load: true, reason: "roce.peermem is true" };
    if (setting === false) return { load: false, reason: "roce.peermem is false" };
    return kind === "workstation"
        ? { load: true, reason: "a workstation's discrete GPU supports GPUDirect RDMA" }
        : { load: false, reason: `a ${kind}'s GB10 does not support GPUDirect RDMA (nvidia-peermem fails to load there); NCCL goes through host memory` };
}

/** The other nodes' addresses that share a subnet with one of `node`'s interfaces. */
export function resolvePeers(node: Pick<NodeConfig, "name" | "interconnect">, nodes: readonly Pick<NodeConfig, "name" | "interconnect">[]): Peer[] {
    return nodes
        .filter((other) => other.name !== node.name)
        .flatMap((other) =>
            other.interconnect.flatMap((theirs) => {
                const via = node.interconnect.findIndex((mine) => mine.subnet === theirs.subnet);
                return via < 0 ? [] : [{ node: other.name, ip: theirs.ip, via }];
            }),
        );
}

/** The served model name when none is given: the last path segment of the source. */
export function defaultServedName(source: string): string {
    const segments = source.split("/").filter((segment) => segment !== "");
    return segments[segments.length - 1] ?? source;
}

function resolveInterface(iface: ParsedInterface): InterconnectInterface {
    const cidr = parseCidr(iface.address);
    return {
        ...(iface.name !== undefined ? { name: iface.name } : {}),
        address: iface.address,
        ip: formatIpv4(cidr.ip),
        prefixLength: cidr.prefixLength,
        subnet: formatSubnet(cidr),
    };
}

/**
 * frontend.openWebui resolved (undefined when off): the runtime (docker where the head's runtime
 * is a container, else a venv), the endpoint it talks to (the head's vLLM over loopback unless
 * model.apiHost binds one address) and how a person reaches it.
 */
export function resolveOpenWebui(
    parsed: Pick<ParsedConfig, "frontend" | "openWebuiAdminPassword" | "apiKey">,
    head: Pick<NodeConfig, "name" | "ssh" | "runtime">,
    api: { host: string; port: number },
): OpenWebuiConfig | undefined {
    const ui = parsed.frontend.openWebui;
    if (!ui.enabled) return undefined;
    if (ui.adminEmail === undefined || parsed.openWebuiAdminPassword === undefined) {
        throw new Error("internal: checkOpenWebui let an Open WebUI without its admin through");
    }
    const runtime: OpenWebuiRuntime =
        ui.runtime ??
        (RUNTIME_TRAITS[head.runtime.kind].containerized
            ? { kind: "docker", image: DEFAULT_OPEN_WEBUI_IMAGE }
            : { kind: "venv", path: DEFAULT_OPEN_WEBUI_VENV });
    const exposed = !isLoopback(ui.listenAddress);
    // The address vLLM binds (a server on 127.0.0.2 accepts nothing on 127.0.0.1); loopback for 0.0.0.0 and localhost.
    const apiHost = api.host === "0.0.0.0" || api.host === "localhost" ? "127.0.0.1" : api.host;
    const access = exposed
        ? `http://${ui.listenAddress === "0.0.0.0" ? head.ssh.host : ui.listenAddress}:${ui.port}`
        : `ssh -N -L ${ui.port}:${ui.listenAddress}:${ui.port} ${sshTarget(head.ssh)}, then open http://localhost:${ui.port}`;
    return {
        node: head.name,
        runtime,
        version: ui.version,
        listenAddress: ui.listenAddress,
        port: ui.port,
        exposed,
        adminEmail: ui.adminEmail,
        adminName: ui.adminName,
        adminPassword: new SecretString(parsed.openWebuiAdminPassword),
        dataDir: ui.dataDir.replace(/\/+$/, ""),
        removeDataOnDestroy: ui.removeDataOnDestroy,
        endpoint: `http://${apiHost}:${api.port}/v1`,
        access,
    };
}

/** How a user reaches a node's SSH on a command line: `user@host`, and `-p port` when not 22. */
export function sshTarget(ssh: { user: string; host: string; port: number }): string {
    return `${ssh.user}@${ssh.host}${ssh.port === 22 ? "" : ` -p ${ssh.port}`}`;
}

/** What runs where for `model.executor`: the one place that tells the executors apart. */
export function resolveExecutor(
    model: Pick<ModelConfig, "executor" | "masterPort">,
    ray: z.output<typeof RaySchema>,
    nodes: readonly Pick<NodeConfig, "name" | "ip" | "ssh">[],
    rankOrder: readonly string[],
    totalGpus: number,
): Executor {
    const head = nodes.find((node) => node.name === rankOrder[0]);
    if (head === undefined) {
        throw new Error("internal: resolveExecutor without a head");
    }
    switch (model.executor) {
        case "ray": {
            const exposed = !isLoopback(ray.dashboardHost);
            return {
                kind: "ray",
                servers: [{ node: head.name, rank: 0 }],
                ray: {
                    head: head.name,
                    workers: rankOrder.slice(1),
                    address: `${head.ip}:${ray.port}`,
                    expectedNodes: nodes.length,
                    expectedGpus: totalGpus,
                    members: nodes.map((node) => node.ip),
                    dashboard: {
                        exposed,
                        port: ray.dashboardPort,
                        access: exposed
                            ? `http://${ray.dashboardHost}:${ray.dashboardPort} (exposed: anyone who reaches it can run code)`
                            : `ssh -L ${ray.dashboardPort}:127.0.0.1:${ray.dashboardPort} ${sshTarget(head.ssh)}, then open http://127.0.0.1:${ray.dashboardPort}`,
                    },
                },
            };
        }
        case "mp":
            return {
                kind: "mp",
                servers: rankOrder.map((node, rank) => ({
                    node,
                    rank,
                    multiNode: { nnodes: nodes.length, rank, masterAddr: head.ip, masterPort: model.masterPort },
                })),
                rayUnused: "not used: model.executor is mp",
            };
        default: {
            const never: never = model.executor;
            throw new Error(`internal: unknown executor ${String(never)}`);
        }
    }
}

/**
 * The firewall of one node: members are every node's interconnect addresses; SSH (22 and the
 * configured port) and the user's ports are open to all; the head also serves the API (to
 * firewall.apiAllowFrom, or all) and, when the user moved it off loopback, the Ray dashboard.
 */
export function resolveFirewallPolicy(
    node: Pick<NodeConfig, "name" | "ssh">,
    nodes: readonly Pick<NodeConfig, "interconnect">[],
    isHead: boolean,
    firewall: FirewallConfig,
    executor: Executor,
    apiPort: number,
    headTcp: readonly number[] = [],
    transitInterfaces: readonly string[] = [],
): FirewallPolicy {
    const dashboard = executor.ray?.dashboard;
    const tcp = [
        22,
        node.ssh.port,
        ...firewall.allowPorts.filter((p) => p.protocol === "tcp").map((p) => p.port),
        ...(isHead && dashboard?.exposed ? [dashboard.port] : []),
        ...(isHead ? headTcp : []),
    ];
    return {
        node: node.name,
        members: nodes.flatMap((n) => n.interconnect.map((iface) => iface.ip)),
        openTcp: [...new Set(tcp)].sort((a, b) => a - b),
        openUdp: [...new Set(firewall.allowPorts.filter((p) => p.protocol === "udp").map((p) => p.port))].sort((a, b) => a - b),
        api: isHead ? { port: apiPort, allowFrom: firewall.apiAllowFrom } : undefined,
        ...(transitInterfaces.length > 0 ? { transitInterfaces: [...transitInterfaces] } : {}),
    };
}

/** Resolves a config that passed the schema and every cross-field rule (exactly one head, among others). */
export function resolveConfig(
    parsed: ParsedConfig,
    fit: FitReport,
    facts: Facts = gatherFacts(parsed),
    fitPlanInputs: FitInputs = fitInputs(parsed, facts),
): Config {
    const { totalGpus, hasThor } = facts;
    const { transport: requestedTransport, ...nccl } = parsed.nccl;
    const transport = resolveTransport(requestedTransport, hasThor);
    const clusterKey: SshKey | undefined =
        parsed.sshPrivateKey !== undefined
            ? { kind: "secret", text: new SecretString(parsed.sshPrivateKey) }
            : parsed.sshPrivateKeyPath !== undefined
              ? { kind: "path", path: parsed.sshPrivateKeyPath }
              : undefined;
    const sshKeyOf = (node: ParsedNode): SshKey => {
        if (node.ssh.privateKeyPath !== undefined) {
            return { kind: "path", path: node.ssh.privateKeyPath };
        }
        if (clusterKey === undefined) {
            throw new Error(`internal: checkSshKeySource let ${node.name} through without a key`);
        }
        return clusterKey;
    };
    const interfaces = parsed.nodes.map((node) => ({ name: node.name, interconnect: node.interconnect.map(resolveInterface) }));
    const { topology, cables } = parsed.interconnect;
    const fabric = isSwitchless(topology) && cables !== undefined ? planFabric(cables, parsed.nodes) : undefined;
    const planned: Omit<NodeConfig, "firewall">[] = parsed.nodes.map((node, i) => ({
        name: node.name,
        kind: node.kind,
        head: node.head,
        ssh: {
            host: node.ssh.host,
            port: node.ssh.port,
            user: node.ssh.user,
            privateKey: sshKeyOf(node),
            ...(node.ssh.hostKey !== undefined ? { hostKey: node.ssh.hostKey } : {}),
            connectTimeoutSeconds: node.ssh.connectTimeoutSeconds ?? DEFAULT_SSH_CONNECT_TIMEOUT_SECONDS,
            ...(node.ssh.user !== "root" && parsed.sudoPassword !== undefined ? { sudoPassword: new SecretString(parsed.sudoPassword) } : {}),
        },
        gpus: node.gpus,
        unifiedMemory: NODE_KIND_TRAITS[node.kind].unifiedMemory,
        runtime: runtimeOf(node),
        interconnect: interfaces[i].interconnect,
        ip: interfaces[i].interconnect[0].ip,
        peers: resolvePeers(interfaces[i], interfaces),
        roce: resolveRoce(node.kind, transport, parsed.roce.enabled, parsed.roce.peermem),
        linkCheck: resolveLinkCheck(node.kind, parsed.interconnect.linkCheck),
        retired: node.retired === true,
        ...(fabric !== undefined ? { fabric: fabric[i] } : {}),
    }));
    const rdma = parsed.interconnect.linkCheck.rdmaBandwidth;
    if (rdma.enabled) {
        const rails = resolveRdmaRails(
            planned.map((n) => ({ ...n, rdma: NODE_KIND_TRAITS[n.kind].rdma })),
            rdma.port,
        );
        for (const n of planned) {
            n.linkCheck = {
                ...n.linkCheck,
                rdmaBandwidth: {
                    ...(rdma.minGbps !== undefined ? { minGbps: rdma.minGbps } : {}),
                    durationSeconds: rdma.durationSeconds,
                    waitSeconds: rdma.waitSeconds,
                    rails: rails.get(n.name) ?? [],
                },
            };
        }
    }
    const firewall: FirewallConfig = { ...parsed.firewall, allowPorts: parsed.firewall.allowPorts.map(parseOpenPort) };
    const executor = resolveExecutor(parsed.model, parsed.ray, planned, facts.rankOrder, totalGpus);
    const plannedHead = planned.find((node) => node.head);
    const openWebui = plannedHead === undefined ? undefined : resolveOpenWebui(parsed, plannedHead, { host: parsed.model.apiHost, port: parsed.model.apiPort });
    const nodes: NodeConfig[] = planned.map((node) => ({
        ...node,
        firewall: resolveFirewallPolicy(
            node,
            planned,
            node.head,
            firewall,
            executor,
            parsed.model.apiPort,
            openWebui?.exposed ? [openWebui.port] : [],
            node.fabric?.forwardingOn,
        ),
    }));
    const head = nodes.find((node) => node.head);
    if (head === undefined) {
        throw new Error("internal: checkExactlyOneHead let a config without a head through");
    }
    const { tensorParallel, pipelineParallel, servedName, enforceEager, gpuMemoryUtilization, ...model } = parsed.model;
    return {
        nodes,
        head,
        workers: nodes.filter((node) => node !== head),
        hasThor,
        totalGpus,
        transport,
        interconnect: parsed.interconnect,
        roce: parsed.roce,
        nccl,
        ray: parsed.ray,
        ...(parsed.watchdog.enabled ? { watchdog: resolveWatchdog(parsed.watchdog, parsed.restarts) } : {}),
        ...(parsed.metrics.enabled ? { metrics: resolveMetrics(parsed.metrics, head) } : {}),
        firewall,
        check: resolveCheck(parsed.check, transport),
        model: {
            ...model,
            ...facts.parallelism,
            servedName: servedName ?? defaultServedName(model.source),
            gpuMemoryUtilization: gpuMemoryUtilization ?? (fit.status === "fits" ? fit.startupUtilization : undefined) ?? DEFAULT_GPU_MEMORY_UTILIZATION,
            enforceEager: facts.enforceEager,
            ...(parsed.metrics.enabled ? { enableMetrics: true as const } : {}),
        },
        localModel: facts.localModel,
        apiKey: new SecretString(parsed.apiKey),
        ...(parsed.hfToken !== undefined ? { hfToken: new SecretString(parsed.hfToken) } : {}),
        fit,
        fitInputs: fitPlanInputs,
        ...(parsed.rayAuthToken !== undefined ? { rayAuthToken: new SecretString(parsed.rayAuthToken) } : {}),
        secretsGeneration: parsed.secretsGeneration,
        rankOrder: facts.rankOrder,
        executor,
        engine: resolveEngine(parsed.model),
        ...(openWebui !== undefined ? { openWebui } : {}),
    };
}
