// The Ray layer's shared wiring: one unit per node running `ray start --block`,
// pinned to the node's interconnect address. RayHead and RayWorker use it.
import * as pulumi from "@pulumi/pulumi";
import type * as sparkRemote from "./sparkRemote";
import type { Runtime, WatchdogConfig } from "../config";
import type { NodeHost } from "./nodeConnection";
import { RayPlan, RayStartSpec } from "./render/ray";

export interface RayNodeArgs {
    /** The node's connection and SSH user. */
    host: NodeHost;
    runtime: Runtime;
    /** `ray start` settings for this node. */
    ray: Omit<RayStartSpec, "role">;
    /** Hash of the runtime environment file: a change restarts Ray. */
    envHash: pulumi.Input<string>;
    /** The cluster's Ray token (secret): written to the root-only ray.env, never into argv or the unit. */
    authToken: pulumi.Input<string>;
    /** The image's ID the node's engine probe found (docker): the unit starts it by that ID. Defaults to the tag. */
    imageId?: pulumi.Input<string | undefined>;
    /** The head's GCS watchdog (config.watchdog; workers have none). Defaults to none. */
    watchdog?: WatchdogConfig;
}

/** The unit of one node, re-rendered when the runtime environment or the image's ID changes. */
export function rayUnit(plan: RayPlan, args: RayNodeArgs): pulumi.Output<string> {
    return pulumi.all([args.envHash, args.imageId]).apply(([envHash, imageId]) => plan.unit(envHash, imageId));
}

/**
 * The steps shared by head and workers: the root-only token file (from stdin, so the token stays
 * out of the script, its output and the process list; a new token restarts Ray), then the unit.
 */
export function rayUnitCommand(name: string, plan: RayPlan, unit: pulumi.Output<string>, args: RayNodeArgs, parent: pulumi.Resource): sparkRemote.Step {
    const auth = args.host.command(
        `${name}-auth`,
        {
            ...plan.auth,
            stdin: pulumi.secret(pulumi.output(args.authToken).apply(plan.authFile)),
            logging: "none",
        },
        { parent },
    );
    return args.host.command(
        `${name}-unit`,
        {
            create: unit.apply(plan.unitStep.create),
            delete: plan.unitStep.delete,
            read: unit.apply(plan.unitStep.read),
        },
        { parent, dependsOn: [auth], customTimeouts: { create: "10m", update: "10m" } },
    );
}
