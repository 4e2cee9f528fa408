// The Ray layer's shared wiring: one unit per node running `ray start --block`,
// pinned to the node's interconnect address. RayHead and RayWorker use it.
import * as pulumi from "@pulumi/pulumi";
import type * as command from "@pulumi/command";
import type { Runtime } from "../config";
import type { NodeHost } from "./nodeConnection";
import { installUnitScript, removeUnitScript } from "./render/host/files";
import { UNITS } from "./render/paths";
import { RayStartSpec, renderRayUnit } from "./render/ray";

export interface RayNodeArgs {
    /** The node's connection and SSH user. */
    host: NodeHost;
    runtime: Runtime;
    /** `ray start` settings for this node. */
    ray: Omit<RayStartSpec, "role">;
    /** Hash of the runtime environment file: a change restarts Ray. */
    envHash: pulumi.Input<string>;
}

/** The unit of one node, re-rendered when the runtime environment changes. */
export function rayUnit(role: RayStartSpec["role"], args: RayNodeArgs): pulumi.Output<string> {
    return pulumi.output(args.envHash).apply((hash) => renderRayUnit({ ...args.ray, role }, args.runtime, hash));
}

/** The unit install/remove step shared by head and workers. */
export function rayUnitCommand(name: string, unit: pulumi.Output<string>, args: RayNodeArgs, parent: pulumi.Resource): command.remote.Command {
    return args.host.command(
        `${name}-unit`,
        { create: unit.apply((content) => installUnitScript(UNITS.ray, content)), delete: removeUnitScript(UNITS.ray) },
        { parent, customTimeouts: { create: "10m", update: "10m" } },
    );
}
