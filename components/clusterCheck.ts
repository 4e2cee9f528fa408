import * as pulumi from "@pulumi/pulumi";
import type { NodeHost } from "./nodeConnection";
import { typeToken } from "./package";
import { NcclCheckSpec, ncclCheckPlan } from "./render/check";

const TYPE = typeToken("ClusterCheck");

export interface ClusterCheckArgs {
    /** The node's connection and SSH user. */
    host: NodeHost;
    /** This node's rank in the all-reduce, and the rest of the check's settings. */
    spec: NcclCheckSpec;
    /** Hash of the node's NCCL environment: the check runs again when it changes. */
    envHash: pulumi.Input<string>;
}

/**
 * The NCCL check on one node: one rank of an all-reduce across every node, run with the
 * runtime's own torch (NCCL on the GPU; gloo on CPU tensors where there is none), after the host
 * layers and before Ray and vLLM take the GPU. Fails `up` below the pass mark (or, on a RoCE
 * cluster, when NCCL did not use NET/IB). `result` is the check's own summary line: bus
 * bandwidth, transport, pass mark.
 */
export class ClusterCheck extends pulumi.ComponentResource {
    public readonly result: pulumi.Output<string>;

    constructor(name: string, args: ClusterCheckArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const plan = ncclCheckPlan(args.spec);
        const check = args.host.command(
            `${name}-nccl`,
            { create: pulumi.output(args.envHash).apply(plan.create) },
            { parent: this, customTimeouts: { create: "15m", update: "15m" } },
        );
        this.result = check.stdout.apply(plan.summary);
        this.registerOutputs({ result: this.result });
    }
}
