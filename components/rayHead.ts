import * as pulumi from "@pulumi/pulumi";
import type * as sparkRemote from "./sparkRemote";
import { typeToken } from "./package";
import { RayNodeArgs, rayUnit, rayUnitCommand } from "./rayNode";
import { readinessCommand } from "./readiness";
import { rayPlan } from "./render/ray";

const TYPE = typeToken("RayHead");

export interface RayHeadArgs extends RayNodeArgs {
    /** `ip:port` of the head's GCS, which workers and vLLM join. */
    address: string;
    /** How to reach the dashboard from your machine (an SSH tunnel, or its exposed URL). */
    dashboard: string;
    /** Nodes the cluster must show before the head counts as ready. */
    expectedNodes: number;
    /** GPUs the cluster must show before the head counts as ready. */
    expectedGpus: number;
    /** The Ray nodes' addresses: the readiness removes any other node from the cluster (a node that left `nodes`). */
    members: readonly string[];
}

/**
 * The Ray head: GCS on the interconnect address, dashboard on loopback by
 * default (it runs jobs without auth: CVE-2023-48022). Complete only when
 * the GCS's node table shows every node and GPU alive and no other node (bounded wait, polled
 * every 0.2 s by one process; workers join meanwhile, started beside the head; a node that left
 * `nodes` is removed from Ray before the engine restarts on the new set).
 */
export class RayHead extends pulumi.ComponentResource {
    public readonly unit: pulumi.Output<string>;
    /** The unit step: workers start after it. */
    public readonly started: sparkRemote.Step;
    /** `host:port` workers and vLLM join. */
    public readonly address: string;
    /** How to reach the dashboard from your machine. */
    public readonly dashboard: string;

    constructor(name: string, args: RayHeadArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const plan = rayPlan({ ...args.ray, role: "head" }, args.runtime, args.watchdog);
        this.unit = rayUnit(plan, args);
        this.started = rayUnitCommand(name, plan, this.unit, args, this);
        this.address = args.address;
        this.dashboard = args.dashboard;
        readinessCommand(
            name,
            {
                host: args.host,
                unit: this.unit,
                script: plan.ready(this.address, args.expectedNodes, args.expectedGpus, args.members),
                timeout: "10m",
            },
            { parent: this, dependsOn: [this.started] },
        );
        this.registerOutputs({ unit: this.unit, address: this.address, dashboard: this.dashboard });
    }
}
