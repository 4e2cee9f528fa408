import * as pulumi from "@pulumi/pulumi";
import type * as sparkRemote from "./sparkRemote";
import type { NodeHost } from "./nodeConnection";
import { typeToken } from "./package";
import { NetplanSpec, linkCheck, netplanPlan } from "./render/netplan";

const TYPE = typeToken("NetplanInterconnect");

export interface NetplanInterconnectArgs {
    /** The node's connection and SSH user. */
    host: NodeHost;
    /** What to configure: interfaces with addresses, MTU, and the peers that must answer. */
    spec: pulumi.Input<NetplanSpec>;
}

/**
 * The node's interconnect interfaces: a netplan file (mode 600) with static
 * addresses and MTU, applied, then verified by pinging every peer over the
 * link; the previous file is put back if verification fails. Destroy removes
 * our file, restores one we replaced and clears our addresses and MTU.
 */
export class NetplanInterconnect extends pulumi.ComponentResource {
    /** The rendered netplan file. */
    public readonly netplan: pulumi.Output<string>;
    /** The apply step: later layers depend on it. */
    public readonly applied: sparkRemote.Step;
    /** What the link checks found at the last apply: each interface's state and speed, each rail's MTU end to end. */
    public readonly links: pulumi.Output<string[]>;

    constructor(name: string, args: NetplanInterconnectArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const plan = pulumi.output(args.spec).apply((s) => netplanPlan(s as NetplanSpec));
        this.netplan = plan.apply((p) => p.netplan);
        this.applied = args.host.command(
            `${name}-apply`,
            {
                create: plan.apply((p) => p.step.create),
                delete: plan.apply((p) => p.step.delete),
                read: plan.apply((p) => p.step.read),
            },
            { parent: this, customTimeouts: { create: "10m", update: "10m", delete: "5m" } },
        );
        this.links = this.applied.stdout.apply((out) => {
            const { links, warnings } = linkCheck.parse(out ?? "");
            for (const warning of warnings) {
                pulumi.log.warn(`${name}: ${warning}`, this);
            }
            return links;
        });
        this.registerOutputs({ netplan: this.netplan, links: this.links });
    }
}
