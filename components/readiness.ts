// The "done only when it really works" step that follows a unit: a bounded
// probe on the node, re-run whenever the unit it checks changes.
import * as pulumi from "@pulumi/pulumi";
import type * as sparkRemote from "./sparkRemote";
import type { NodeHost } from "./nodeConnection";
import { contentHash } from "./render/host/shell";

export interface ReadinessArgs {
    host: NodeHost;
    /** The unit whose process is probed: its hash in the command re-runs the probe after a change. */
    unit: pulumi.Output<string>;
    /** The probe (a bounded wait that exits non-zero with diagnostics on failure). */
    script: string;
    /** Upper bound for the probe step as a whole, e.g. "20m". */
    timeout: string;
    /** Values whose change re-runs the probe too (a restart the unit's text does not show). */
    triggers?: pulumi.Input<string>[];
}

export function readinessCommand(name: string, args: ReadinessArgs, opts: pulumi.CustomResourceOptions): sparkRemote.Step {
    return args.host.command(
        `${name}-ready`,
        {
            header: args.unit.apply((unit) => `# unit ${contentHash(unit)}\n`),
            create: args.script,
            ...(args.triggers ? { triggers: args.triggers } : {}),
        },
        { ...opts, customTimeouts: { create: args.timeout, update: args.timeout } },
    );
}
