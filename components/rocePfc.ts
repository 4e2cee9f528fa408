import * as pulumi from "@pulumi/pulumi";
import type { NodeHost } from "./nodeConnection";
import { typeToken } from "./package";
import { statusOf } from "./statusLine";
import { pfcPlan } from "./render/pfc";

const TYPE = typeToken("RocePfc");

export interface RocePfcArgs {
    /** The node's connection and SSH user. */
    host: NodeHost;
    /** RoCE interfaces to enable PFC on. */
    interfaces: pulumi.Input<string[]>;
    /** Priority that carries RoCE traffic. Defaults to 3 (config `roce.priority`). */
    priority: number;
    /** Also set `--trust dscp`. Defaults to true (config `roce.trustDscp`). */
    trustDscp: boolean;
    /** The DSCP NCCL marks with (config `roce.dscp`): the NIC's map must put it on `priority`. */
    dscp: number;
    /** Load and persist nvidia-peermem (GPUDirect RDMA). Defaults to true (config `roce.peermem`). */
    peermem: boolean;
}

/**
 * Lossless RoCE: PFC on one priority with mlnx_qos, persisted by a oneshot
 * unit, plus nvidia-peermem. Records the PFC state it found so destroy puts it
 * back. Where mlnx_qos is absent it changes nothing and `status` (and a
 * warning) say RoCE runs lossy.
 */
export class RocePfc extends pulumi.ComponentResource {
    /** `enabled: …` or `lossy: …`. */
    public readonly status: pulumi.Output<string>;

    constructor(name: string, args: RocePfcArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const plan = pulumi
            .output(args.interfaces)
            .apply((interfaces) => pfcPlan(interfaces, { priority: args.priority, trustDscp: args.trustDscp, dscp: args.dscp, peermem: args.peermem }));
        const apply = args.host.command(
            `${name}-apply`,
            {
                create: plan.apply((p) => p.step.create),
                delete: plan.apply((p) => p.step.delete),
                read: plan.apply((p) => p.step.read),
            },
            { parent: this },
        );
        this.status = statusOf(apply.stdout, name, this);
        if (!args.trustDscp && args.priority !== 0) {
            // Untagged RoCE v2 packets carry no PCP: with trust pcp the NIC puts them on priority 0.
            pulumi.log.warn(
                `${name}: roce.trustDscp is false, so the NIC ignores the DSCP NCCL marks and its untagged RoCE traffic lands on priority 0, not on PFC priority ${args.priority}; set roce.trustDscp: true`,
                this,
            );
        }
        this.registerOutputs({ status: this.status });
    }
}
