import * as pulumi from "@pulumi/pulumi";
import type { NodeHost } from "./nodeConnection";
import { typeToken } from "./package";
import { statusOf } from "./statusLine";
import { FirewallSpec, firewallPlan } from "./render/firewall";

const TYPE = typeToken("Firewall");

export interface FirewallArgs {
    /** The node's connection and SSH user. */
    host: NodeHost;
    /** Who reaches what: the members, and the ports open to everyone. */
    spec: FirewallSpec;
}

/**
 * The node's firewall: an nftables table of our own, loaded at boot by a oneshot unit. Only the
 * cluster's nodes reach its internal ports; SSH, the API (head) and the user's ports stay open.
 * Destroy removes our table, unit and file and nothing else. `status` says what is open, or that
 * ufw is active too (with the command that lets members through).
 */
export class Firewall extends pulumi.ComponentResource {
    /** `enabled: …` or `ufw active: …`. */
    public readonly status: pulumi.Output<string>;
    /** The step later layers wait for. */
    public readonly applied: pulumi.Resource;

    constructor(name: string, args: FirewallArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const plan = firewallPlan(args.spec);
        const apply = args.host.command(`${name}-apply`, plan.step, { parent: this });
        this.applied = apply;
        this.status = statusOf(apply.stdout, name, this);
        this.registerOutputs({ status: this.status });
    }
}
