import * as pulumi from "@pulumi/pulumi";
import type { Config } from "../config";
import { ClusterNode } from "./clusterNode";
import { hostKeyFingerprint } from "./hostKey";
import { ModelSync } from "./modelSync";
import { rayAuthStatus } from "./nodeFacts";
import { typeToken } from "./package";
import { RayHead } from "./rayHead";
import { RayNodeArgs } from "./rayNode";
import { RayWorker } from "./rayWorker";
import { VllmServer } from "./vllmServer";

const TYPE = typeToken("SparkCluster");

export interface SparkClusterArgs {
    /** The validated, resolved stack configuration (config/). */
    config: Config;
}

/**
 * The whole cluster: one {@link ClusterNode} per node (its host layers: SSH → interconnect →
 * PFC → NCCL, nodes in parallel), then Ray head and workers (Ray executor) beside the model sync
 * ({@link ModelSync}: the model on every node), then vLLM, each a child of its node. Exports the endpoint.
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
    /** The NCCL check per node: bus bandwidth, transport, pass mark (or why it did not run). */
    public readonly ncclCheck: pulumi.Output<Record<string, string>>;
    /** The SSH host key fingerprint each node is pinned to (compare with `ssh-keygen -lf` on the node). */
    public readonly hostKeys: pulumi.Output<Record<string, string>>;
    /** Firewall per node: what is open to whom. */
    public readonly firewall: pulumi.Output<Record<string, string>>;
    /** Ray per node: its version and whether token authentication is on (or why Ray is not used). */
    public readonly ray: pulumi.Output<Record<string, string>>;

    constructor(name: string, args: SparkClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const config = args.config;
        const nodes = config.nodes.map((node) => new ClusterNode(node.name, { node, cluster: config }, { parent: this }));
        const head = nodes[config.nodes.indexOf(config.head)];
        const workers = nodes.filter((n) => n !== head);

        let rayHead: RayHead | undefined;
        if (config.model.executor === "ray") {
            const rayArgs = (n: ClusterNode): RayNodeArgs => ({
                host: n.host,
                runtime: n.node.runtime,
                envHash: n.nccl.envHash,
                authToken: pulumi.secret(config.rayAuthToken.reveal()),
                ray: {
                    nodeIp: n.node.ip,
                    headIp: config.head.ip,
                    port: config.ray.port,
                    gpus: n.node.gpus,
                    numCpus: config.ray.numCpus,
                    objectStoreMemoryMb: config.ray.objectStoreMemoryMb,
                    dashboardHost: config.ray.dashboardHost,
                    dashboardPort: config.ray.dashboardPort,
                    ports: config.ray,
                },
            });
            const ssh = config.head.ssh;
            rayHead = new RayHead(
                `${head.node.name}-ray-head`,
                {
                    ...rayArgs(head),
                    sshTarget: `${ssh.user}@${ssh.host}${ssh.port === 22 ? "" : ` -p ${ssh.port}`}`,
                    expectedNodes: config.nodes.length,
                    expectedGpus: config.totalGpus,
                },
                head.childOptions({ dependsOn: head.hostReady }),
            );
            for (const worker of workers) {
                new RayWorker(`${worker.node.name}-ray-worker`, rayArgs(worker), worker.childOptions({ dependsOn: [...worker.hostReady, rayHead.started] }));
            }
            this.dashboard = rayHead.dashboard;
        }

        // model sync: the model on every node before any vLLM starts (download once on the head,
        // pulled over the interconnect; a local path is checked). Runs beside Ray.
        const modelSync = new ModelSync(
            `${name}-model`,
            {
                model: config.model,
                head,
                workers,
                apiKey: pulumi.secret(config.apiKey.reveal()),
                hfToken: config.hfToken ? pulumi.secret(config.hfToken.reveal()) : undefined,
            },
            { parent: this },
        );
        // end model sync

        // Ray executor: vLLM on the head only. mp executor: on every node, rank 0 the head.
        const vllmNodes = rayHead ? [head] : [head, ...workers];
        const servers = vllmNodes.map(
            (n, rank) =>
                new VllmServer(
                    `${n.node.name}-vllm`,
                    {
                        host: n.host,
                        runtime: n.node.runtime,
                        serve: {
                            ...config.model,
                            multiNode: rayHead
                                ? undefined
                                : { nnodes: config.nodes.length, rank, masterAddr: config.head.ip, masterPort: config.model.masterPort },
                        },
                        apiKey: pulumi.secret(config.apiKey.reveal()),
                        hfToken: config.hfToken ? pulumi.secret(config.hfToken.reveal()) : undefined,
                        rayAddress: rayHead?.address,
                        envHash: n.nccl.envHash,
                        publicHost: config.head.ssh.host,
                    },
                    n.childOptions({ dependsOn: [...(rayHead ? [rayHead] : n.hostReady), modelSync] }),
                ),
        );
        this.endpoint = servers[0].baseUrl;
        this.servedModel = servers[0].servedModel;
        this.transport = config.transport;
        this.roce = pulumi.all(nodes.map((n) => n.roceStatus)).apply((statuses) => Object.fromEntries(nodes.map((n, i) => [n.node.name, statuses[i]])));
        this.ncclCheck = pulumi
            .all(nodes.map((n) => n.check?.result ?? pulumi.output("not run: check.enabled is false")))
            .apply((results) => Object.fromEntries(nodes.map((n, i) => [n.node.name, results[i]])));
        this.hostKeys = pulumi
            .all(nodes.map((n) => n.hostKey))
            .apply((keys) =>
                Object.fromEntries(
                    nodes.map((n, i) => [n.node.name, keys[i] ? `${hostKeyFingerprint(keys[i])} (${keys[i].split(" ")[0]})` : "not recorded yet"]),
                ),
            );
        this.firewall = pulumi.all(nodes.map((n) => n.firewallStatus)).apply((statuses) => Object.fromEntries(nodes.map((n, i) => [n.node.name, statuses[i]])));
        this.ray = rayHead
            ? pulumi.all(nodes.map((n) => n.rayVersion)).apply((versions) => Object.fromEntries(nodes.map((n, i) => [n.node.name, rayAuthStatus(versions[i])])))
            : pulumi.output(Object.fromEntries(nodes.map((n) => [n.node.name, "not used: model.executor is mp"])));
        this.registerOutputs({ endpoint: this.endpoint, servedModel: this.servedModel, transport: this.transport, roce: this.roce, ray: this.ray });
    }
}
