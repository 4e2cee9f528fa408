// The "done only when it really works" step that follows a unit: a bounded
// probe on the node, re-run whenever the unit it checks changes.
import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import type { Connection } from "./nodeConnection";
import { contentHash, remoteCommand } from "./render/shell";

export interface ReadinessArgs {
    connection: pulumi.Input<Connection>;
    sshUser: string;
    /** The unit whose process is probed: its hash in the command re-runs the probe after a change. */
    unit: pulumi.Output<string>;
    /** The probe (a bounded wait that exits non-zero with diagnostics on failure). */
    script: string;
    /** Upper bound for the probe step as a whole, e.g. "20m". */
    timeout: string;
}

export function readinessCommand(
    name: string,
    args: ReadinessArgs,
    opts: { parent: pulumi.Resource; dependsOn: pulumi.Resource[] },
): command.remote.Command {
    return new command.remote.Command(
        `${name}-ready`,
        {
            connection: args.connection,
            create: args.unit.apply((unit) => `# unit ${contentHash(unit)}\n` + remoteCommand(args.script, args.sshUser)),
        },
        { ...opts, customTimeouts: { create: args.timeout, update: args.timeout } },
    );
}
