/**
 * The resolution step: a config that passed the schema and the cross-field rules becomes the
 * plan every component reads. Every derived decision is made here, once: the head node, whether
 * the cluster has a Thor, the NCCL transport, the parallelism, each node's RoCE decision (with
 * the reason when it is skipped), each node's peers on each link, and the SSH key of each node.
 * Components read these fields; none derives them again.
 */
import { createHmac } from "node:crypto";
import type { z } from "zod";
import type { FitReport } from "./fitRule";
import { formatIpv4, formatSubnet, parseCidr } from "./ipv4";
import {
    CheckSchema,
    DEFAULT_SSH_CONNECT_TIMEOUT_SECONDS,
    DockerRuntimeSchema,
    InterconnectSchema,
    NcclSchema,
    NodeKind,
    ParsedConfig,
    ParsedInterface,
    ParsedModel,
    ParsedNode,
    RaySchema,
    RoceSchema,
    Runtime,
} from "./schema";
import { SecretString } from "./secret";

/** NVIDIA's pass mark for NCCL between two Sparks over RoCE (175 Gb/s), in GB/s. */
export const ROCE_PASS_MARK_GBPS = 21.875;

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
export type RoceDecision = { enabled: true } | { enabled: false; /** Shown in the `roce` output: `skipped: …`. */ reason: string };

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
    ssh: { host: string; port: number; user: string; privateKey: SshKey; hostKey?: string; connectTimeoutSeconds: number };
    gpus: number;
    runtime: Runtime;
    interconnect: InterconnectInterface[];
    /** The address Ray, vLLM and NCCL pin to: the first interconnect interface's. */
    ip: string;
    peers: Peer[];
    roce: RoceDecision;
    /** The node is gone: nothing runs on it, its resources leave the stack without their delete. */
    retired: boolean;
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

/** The model section with parallelism, served name and eager mode resolved. */
export interface ModelConfig extends Omit<ParsedModel, "tensorParallel" | "pipelineParallel" | "servedName" | "enforceEager"> {
    tensorParallel: number;
    pipelineParallel: number;
    servedName: string;
    enforceEager: boolean;
}

/** The validated cluster config: plain data, every default resolved, secrets wrapped. */
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
    firewall: FirewallConfig;
    /**
     * The NCCL check, with the pass mark and the required transport resolved from the cluster's
     * transport when none is given (`requireTransport` undefined: any).
     */
    check: { enabled: boolean; passMarkGBps: number; requireTransport: string | undefined };
    model: ModelConfig;
    apiKey: SecretString;
    hfToken?: SecretString;
    /** Whether the model fits (the planner's estimate), or why it was not checked. */
    fit: FitReport;
    /** The token of Ray's token authentication (ray executor): rayAuthToken, or derived from apiKey. */
    rayAuthToken: SecretString;
}

/**
 * The parallelism vLLM runs with. Neither given: tensor parallelism over every GPU (TP=2
 * measured 2.09x one Spark vs PP=2 1.08x on two Sparks; seed 002 recommends PP instead, so set
 * it explicitly if you follow the seed). One given: the other is 1.
 */
export function resolveParallelism(
    model: Pick<ParsedModel, "tensorParallel" | "pipelineParallel">,
    totalGpus: number,
): { tensorParallel: number; pipelineParallel: number } {
    if (model.tensorParallel === undefined && model.pipelineParallel === undefined) {
        return { tensorParallel: totalGpus, pipelineParallel: 1 };
    }
    return { tensorParallel: model.tensorParallel ?? 1, pipelineParallel: model.pipelineParallel ?? 1 };
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
export function resolveRoce(kind: NodeKind, transport: Transport, enabled: boolean): RoceDecision {
    if (transport !== "roce") return { enabled: false, reason: "skipped: the cluster uses socket transport" };
    if (!enabled) return { enabled: false, reason: "skipped: roce.enabled is false" };
    if (kind === "thor") return { enabled: false, reason: `skipped: a ${kind} has no RoCE` };
    return { enabled: true };
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
 * The Ray token when none is configured: HMAC-SHA256 of the stack name keyed by the API key, so it
 * is stable across runs, differs per stack, never stored anywhere but in Pulumi's encrypted state,
 * and changes when the API key is rotated.
 */
export function deriveRayAuthToken(apiKey: string, stack: string): string {
    return createHmac("sha256", apiKey).update(`spark-cluster ray auth token for stack ${stack}`).digest("hex");
}

/** Resolves a config that passed the schema and every cross-field rule (exactly one head, among others). */
export function resolveConfig(parsed: ParsedConfig, stack: string, fit: FitReport): Config {
    const totalGpus = parsed.nodes.reduce((sum, node) => sum + node.gpus, 0);
    const hasThor = parsed.nodes.some((node) => node.kind === "thor");
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
    const nodes: NodeConfig[] = parsed.nodes.map((node, i) => ({
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
        },
        gpus: node.gpus,
        runtime: node.runtime ?? DockerRuntimeSchema.parse({ kind: "docker" }),
        interconnect: interfaces[i].interconnect,
        ip: interfaces[i].interconnect[0].ip,
        peers: resolvePeers(interfaces[i], interfaces),
        roce: resolveRoce(node.kind, transport, parsed.roce.enabled),
        retired: node.retired === true,
    }));
    const head = nodes.find((node) => node.head);
    if (head === undefined) {
        throw new Error("internal: checkExactlyOneHead let a config without a head through");
    }
    const { tensorParallel, pipelineParallel, servedName, enforceEager, ...model } = parsed.model;
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
        firewall: { ...parsed.firewall, allowPorts: parsed.firewall.allowPorts.map(parseOpenPort) },
        check: resolveCheck(parsed.check, transport),
        model: {
            ...model,
            ...resolveParallelism({ tensorParallel, pipelineParallel }, totalGpus),
            servedName: servedName ?? defaultServedName(model.source),
            enforceEager: enforceEager ?? hasThor,
        },
        apiKey: new SecretString(parsed.apiKey),
        ...(parsed.hfToken !== undefined ? { hfToken: new SecretString(parsed.hfToken) } : {}),
        fit,
        rayAuthToken: new SecretString(parsed.rayAuthToken ?? deriveRayAuthToken(parsed.apiKey, stack)),
    };
}
