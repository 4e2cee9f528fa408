import * as pulumi from "@pulumi/pulumi";
import type { Config } from "../config";
import { materialize } from "./materialize";
import { typeToken } from "./package";
import { clusterPlan } from "./plan/clusterPlan";
import type { RoceChain } from "./render/roceChain";

const TYPE = typeToken("SparkCluster");

export interface SparkClusterArgs {
    /** The validated, resolved stack configuration (config/). */
    config: Config;
}

/**
 * The whole cluster, as its plan has it (components/plan/clusterPlan.ts), made into resources by
 * the materializer (components/materialize.ts): per node its host layers (SSH → probes → firewall,
 * interconnect → PFC → NCCL → the NCCL check, nodes in parallel), then Ray head and workers (Ray
 * executor) beside the model sync (the model on every node), then the engine's servers, each a
 * child of its node. Exports the endpoint and what the last up found on each node.
 *
 * A retired node (`nodes[].retired`) stays in the plan, so nothing about the other nodes changes,
 * but every command on it (its node's, and the model sync's steps on it) goes through
 * retiredCommand (nodeConnection.ts): nothing runs there, and its resources leave the stack
 * without their delete.
 */
export class SparkCluster extends pulumi.ComponentResource {
    /** OpenAI-compatible base URL. */
    public readonly endpoint: string;
    public readonly servedModel: string;
    public readonly transport: string;
    /** How to reach the Ray dashboard (Ray executor only). */
    public readonly dashboard?: string;
    /** Per node: the PFC status and the RoCE chain (priority, trust, DSCP, NCCL's traffic class). */
    public readonly roce: pulumi.Output<Record<string, RoceChain>>;
    /** Per node: each interconnect interface's state and speed, and each rail's MTU end to end, as the last apply found them. */
    public readonly links: pulumi.Output<Record<string, string[]>>;
    /** The NCCL check per node: bus bandwidth, transport, pass mark (or why it did not run). */
    public readonly ncclCheck: pulumi.Output<Record<string, string>>;
    /** The SSH host key fingerprint each node is pinned to (compare with `ssh-keygen -lf` on the node). */
    public readonly hostKeys: pulumi.Output<Record<string, string>>;
    /** Firewall per node: what is open to whom. */
    public readonly firewall: pulumi.Output<Record<string, string>>;
    /** Ray per node: its version and whether token authentication is on (or why Ray is not used). */
    public readonly ray: pulumi.Output<Record<string, string>>;
    /** vLLM per node: the version its runtime has, and the image's ID (docker). */
    public readonly vllm: pulumi.Output<Record<string, string>>;
    /** The model sync per node: what the last sync did there (a worker: the bytes it pulled, the time, the rate and the streams). */
    public readonly modelSync: pulumi.Output<Record<string, string>>;
    /** How to reach Open WebUI (frontend.openWebui), when it is on. */
    public readonly openWebui?: string;
    /** How to reach Prometheus on the head (metrics.enabled), when it is on. */
    public readonly metrics?: string;

    constructor(name: string, args: SparkClusterArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const { outputs } = materialize(clusterPlan(name, args.config), this, args.config);
        const output = <T>(key: string) => outputs[key] as T;
        this.endpoint = output("endpoint");
        this.servedModel = output("servedModel");
        this.transport = output("transport");
        this.dashboard = output("dashboard");
        this.roce = output("roce");
        this.links = output("links");
        this.ncclCheck = output("ncclCheck");
        this.hostKeys = output("hostKeys");
        this.firewall = output("firewall");
        this.ray = output("ray");
        this.vllm = output("vllm");
        this.modelSync = output("modelSync");
        this.openWebui = output("openWebui");
        this.metrics = output("metrics");
        this.registerOutputs({
            endpoint: this.endpoint,
            servedModel: this.servedModel,
            transport: this.transport,
            roce: this.roce,
            links: this.links,
            ray: this.ray,
            vllm: this.vllm,
        });
    }
}
