// The Ray layer: one unit per node running `ray start --block`, pinned to the
// node's interconnect address. RayHead and RayWorker share this wiring.
import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import type { Runtime } from "../config";
import type { Connection } from "./nodeConnection";
import { installUnitScript, removeUnitScript } from "./render/hostScripts";
import { RUNTIME_ENV_PATH } from "./render/nccl";
import { CONTAINER_NAMES, RayStartSpec, rayStartArgv } from "./render/runtime";
import { remoteCommand } from "./render/shell";
import { renderUnit } from "./render/systemd";

export const RAY_UNIT = "spark-cluster-ray";

export interface RayNodeArgs {
    connection: pulumi.Input<Connection>;
    sshUser: string;
    runtime: Runtime;
    /** `ray start` settings for this node. */
    ray: Omit<RayStartSpec, "role">;
    /** Hash of the runtime environment file: a change restarts Ray. */
    envHash: pulumi.Input<string>;
}

/** Renders the unit for one node. */
export function rayUnit(role: RayStartSpec["role"], args: RayNodeArgs, envHash: string): string {
    const spec: RayStartSpec = { ...args.ray, role };
    return renderUnit({
        name: RAY_UNIT,
        description: `spark-cluster: Ray ${role}`,
        runtime: args.runtime,
        container: CONTAINER_NAMES.ray,
        argv: rayStartArgv(spec),
        envFiles: [RUNTIME_ENV_PATH],
        inputs: { "runtime.env": envHash },
        // A worker waits (bounded) for the head's GCS port instead of sleeping.
        preStart:
            role === "worker"
                ? [["/usr/bin/timeout", "300", "/bin/bash", "-c", `until echo > /dev/tcp/${spec.headIp}/${spec.port}; do sleep 2; done 2>/dev/null`]]
                : undefined,
    });
}

/** The unit install/remove step shared by head and workers. */
export function rayUnitCommand(name: string, unit: pulumi.Output<string>, args: RayNodeArgs, parent: pulumi.Resource): command.remote.Command {
    return new command.remote.Command(
        `${name}-unit`,
        {
            connection: args.connection,
            create: unit.apply((content) => remoteCommand(installUnitScript(RAY_UNIT, content), args.sshUser)),
            delete: remoteCommand(removeUnitScript(RAY_UNIT), args.sshUser),
        },
        { parent, customTimeouts: { create: "10m", update: "10m" } },
    );
}
