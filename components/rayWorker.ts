import * as pulumi from "@pulumi/pulumi";
import type * as sparkRemote from "./sparkRemote";
import { typeToken } from "./package";
import { RayNodeArgs, rayUnit, rayUnitCommand } from "./rayNode";
import { rayPlan } from "./render/ray";

const TYPE = typeToken("RayWorker");

/**
 * A Ray worker: joins the head at its interconnect address, with this node's GPUs declared.
 * It starts at once, beside the head, and Ray's own bounded retry joins it as soon as the head's
 * GCS answers (no wait for the port before `ray start`).
 */
export class RayWorker extends pulumi.ComponentResource {
    public readonly unit: pulumi.Output<string>;
    public readonly started: sparkRemote.Step;

    constructor(name: string, args: RayNodeArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const plan = rayPlan({ ...args.ray, role: "worker" }, args.runtime);
        this.unit = rayUnit(plan, args);
        this.started = rayUnitCommand(name, plan, this.unit, args, this);
        this.registerOutputs({ unit: this.unit });
    }
}
