import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import type { Config, NodeConfig } from "../config";
import { NcclConfig } from "./ncclConfig";
import { NetplanInterconnect } from "./netplanInterconnect";
import { nodeConnection, sshReadyCommand } from "./nodeConnection";
import { typeToken } from "./package";
import { RayHead } from "./rayHead";
import { RayWorker } from "./rayWorker";
import { RocePfc } from "./rocePfc";
import { hcasFor, parseIbdev2netdev, resolveInterfaceNames } from "./render/detect";
import { remoteCommand } from "./render/shell";
import { VllmServeSpec } from "./render/runtime";
import { VllmServer } from "./vllmServer";

const TYPE = typeToken("SparkCluster");

export interface SparkClusterArgs {
    /** The validated stack configuration (config.ts). */
    config: Config;
}

/** What each node contributes once its host layers are in place. */
interface NodeLayers {
    node: NodeConfig;
    connection: pulumi.Output<command.types.input.remote.ConnectionArgs>;
    interconnect: NetplanInterconnect;
    nccl: NcclConfig;
    pfc?: RocePfc;
}

/**
 * The whole cluster: per node (in parallel) SSH → interconnect → PFC → NCCL,
 * then Ray head and workers (Ray executor), then vLLM. Exports the endpoint.
 */
export class SparkCluster extends pulumi.ComponentResource {
    /** OpenAI-compatible base URL. */
    public readonly endpoint: string;
    public readonly servedModel: string;
    public readonly transport: string;
    /** How to reach the Ray dashboard (Ray executor only). */
    public readonly dashboard?: string;
    /** PFC result per node (`enabled: …` / `lossy: …` / `skipped: …`). */
    public readonly roce: pulumi.Output<Record<string, string>>;

    constructor(name: string, args: SparkClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const config = args.config;
        const head = config.nodes.find((n) => n.name === config.headNode) as NodeConfig;
        const layers = config.nodes.map((node) => this.hostLayers(node, config));
        const byName = new Map(layers.map((l) => [l.node.name, l]));
        const headLayers = byName.get(head.name) as NodeLayers;
        const nodeIp = (node: NodeConfig) => node.interconnect[0].ip;

        let rayHead: RayHead | undefined;
        let rayAddress: string | undefined;
        if (config.model.executor === "ray") {
            const rayArgs = (l: NodeLayers) => ({
                connection: l.connection,
                sshUser: l.node.ssh.user,
                runtime: l.node.runtime,
                envHash: l.nccl.envHash,
                ray: {
                    nodeIp: nodeIp(l.node),
                    headIp: nodeIp(head),
                    port: config.ray.port,
                    gpus: l.node.gpus,
                    numCpus: config.ray.numCpus,
                    objectStoreMemoryMb: config.ray.objectStoreMemoryMb,
                    dashboardHost: config.ray.dashboardHost,
                    dashboardPort: config.ray.dashboardPort,
                },
            });
            rayHead = new RayHead(
                `${head.name}-ray-head`,
                {
                    ...rayArgs(headLayers),
                    sshTarget: `${head.ssh.user}@${head.ssh.host}${head.ssh.port === 22 ? "" : ` -p ${head.ssh.port}`}`,
                    expectedNodes: config.nodes.length,
                    expectedGpus: config.totalGpus,
                },
                { parent: this, dependsOn: [headLayers.interconnect, headLayers.nccl] },
            );
            for (const l of layers.filter((l) => l.node.name !== head.name)) {
                new RayWorker(`${l.node.name}-ray-worker`, rayArgs(l), {
                    parent: this,
                    dependsOn: [l.interconnect, l.nccl, rayHead.started],
                });
            }
            rayAddress = rayHead.address;
            this.dashboard = rayHead.dashboard;
        }

        const serve = (rank: number): VllmServeSpec => ({
            source: config.model.source,
            servedName: config.model.servedName,
            tensorParallel: config.model.tensorParallel,
            pipelineParallel: config.model.pipelineParallel,
            executor: config.model.executor,
            host: config.model.apiHost,
            port: config.model.apiPort,
            gpuMemoryUtilization: config.model.gpuMemoryUtilization,
            maxModelLen: config.model.maxModelLen,
            maxNumSeqs: config.model.maxNumSeqs,
            quantization: config.model.quantization,
            kvCacheDtype: config.model.kvCacheDtype,
            enforceEager: config.model.enforceEager,
            attentionBackend: config.model.attentionBackend,
            trustRemoteCode: config.model.trustRemoteCode,
            extraArgs: config.model.extraArgs,
            multiNode:
                config.model.executor === "mp"
                    ? { nnodes: config.nodes.length, rank, masterAddr: nodeIp(head), masterPort: config.model.masterPort }
                    : undefined,
        });
        const vllmNodes = config.model.executor === "ray" ? [headLayers] : [headLayers, ...layers.filter((l) => l !== headLayers)];
        const servers = vllmNodes.map(
            (l, rank) =>
                new VllmServer(
                    `${l.node.name}-vllm`,
                    {
                        connection: l.connection,
                        sshUser: l.node.ssh.user,
                        runtime: l.node.runtime,
                        serve: serve(rank),
                        apiKey: pulumi.secret(config.apiKey.reveal()),
                        hfToken: config.hfToken ? pulumi.secret(config.hfToken.reveal()) : undefined,
                        rayAddress,
                        envHash: l.nccl.envHash,
                        publicHost: head.ssh.host,
                    },
                    { parent: this, dependsOn: rayHead ? [rayHead] : [l.interconnect, l.nccl] },
                ),
        );
        this.endpoint = servers[0].baseUrl;
        this.servedModel = servers[0].servedModel;
        this.transport = config.transport;
        this.roce = pulumi
            .all(layers.map((l) => (l.pfc ? l.pfc.status : pulumi.output(this.pfcSkipReason(l.node, config)))))
            .apply((statuses) => Object.fromEntries(layers.map((l, i) => [l.node.name, statuses[i]])));
        this.registerOutputs({ endpoint: this.endpoint, servedModel: this.servedModel, transport: this.transport, roce: this.roce });
    }

    private pfcSkipReason(node: NodeConfig, config: Config): string {
        if (config.transport !== "roce") return "skipped: the cluster uses socket transport";
        if (!config.roce.enabled) return "skipped: roce.enabled is false";
        return `skipped: a ${node.kind} has no RoCE`;
    }

    /** SSH, interconnect, PFC and NCCL on one node; nodes proceed in parallel. */
    private hostLayers(node: NodeConfig, config: Config): NodeLayers {
        const connection = nodeConnection(node);
        const ssh = sshReadyCommand(node.name, node, connection, this);
        const probe = new command.remote.Command(
            `${node.name}-probe`,
            { connection, create: remoteCommand("ibdev2netdev 2>/dev/null || true", node.ssh.user) },
            { parent: this, dependsOn: [ssh] },
        );
        const devices = probe.stdout.apply(parseIbdev2netdev);
        const names = devices.apply((d) => resolveInterfaceNames(node.name, node.interconnect.map((i) => i.name), d));
        const peers = config.nodes
            .filter((other) => other.name !== node.name)
            .flatMap((other) =>
                other.interconnect.flatMap((theirs) => {
                    const index = node.interconnect.findIndex((mine) => mine.subnet === theirs.subnet);
                    return index < 0 ? [] : [{ node: other.name, ip: theirs.ip, index }];
                }),
            );
        const interconnect = new NetplanInterconnect(
            `${node.name}-interconnect`,
            {
                connection,
                sshUser: node.ssh.user,
                spec: names.apply((n) => ({
                    node: node.name,
                    mtu: config.interconnect.mtu,
                    interfaces: node.interconnect.map((iface, i) => ({ name: n[i], address: iface.address })),
                    peers: peers.map((p) => ({ node: p.node, ip: p.ip, via: n[p.index] })),
                })),
            },
            { parent: this, dependsOn: [probe] },
        );
        const useRoce = config.transport === "roce" && config.roce.enabled && node.kind !== "thor";
        const pfc = useRoce
            ? new RocePfc(
                  `${node.name}-roce`,
                  {
                      connection,
                      sshUser: node.ssh.user,
                      interfaces: pulumi.all([names, devices]).apply(([n, d]) => n.filter((name) => d.some((dev) => dev.netdev === name))),
                      priority: config.roce.priority,
                      trustDscp: config.roce.trustDscp,
                      peermem: config.roce.peermem,
                  },
                  { parent: this, dependsOn: [interconnect] },
              )
            : undefined;
        const nccl = new NcclConfig(
            `${node.name}-nccl`,
            {
                connection,
                sshUser: node.ssh.user,
                nodeIp: node.interconnect[0].ip,
                spec: pulumi.all([names, devices]).apply(([n, d]) => ({
                    transport: config.transport,
                    socketIfname: config.nccl.socketIfname ?? n[0],
                    interfaceName: n[0],
                    ibHca: config.transport === "roce" ? (config.nccl.ibHca ?? hcasFor(n, d)) : [],
                    heterogeneous: config.nodes.some((other) => other.kind === "thor"),
                    debug: config.nccl.debug,
                    overrides: config.nccl.overrides,
                })),
            },
            { parent: this, dependsOn: pfc ? [interconnect, pfc] : [interconnect] },
        );
        return { node, connection, interconnect, nccl, pfc };
    }
}
