import * as pulumi from "@pulumi/pulumi";
import type { NodeHost } from "./nodeConnection";
import { typeToken } from "./package";
import { readinessCommand } from "./readiness";
import type { EnginePlan } from "./render/enginePlan";
import { contentHash } from "./render/host/shell";

const TYPE = typeToken("VllmServer");

export interface VllmServerArgs {
    /** The node's connection and SSH user. */
    host: NodeHost;
    /** What the engine puts on this node (components/render/engine.ts): secrets, unit, readiness, follower. */
    plan: EnginePlan;
    /** API key clients must send. */
    apiKey: pulumi.Input<string>;
    /** Hash of the runtime environment file: a change restarts vLLM. */
    envHash: pulumi.Input<string>;
    /** The image's ID the node's engine probe found (docker): the unit starts it by that ID. Defaults to the tag. */
    imageId?: pulumi.Input<string | undefined>;
    /** Host clients use to reach the API (the head's SSH address). */
    publicHost: string;
    /**
     * The other ranks' servers (mp executor, on the head; give them in `dependsOn` too): the head's
     * unit names their units' hash, so a change to any rank's unit restarts the head, after their
     * steps installed the new files, and its readiness probe runs again. A running rank whose unit
     * changed is not restarted by its own step: its follower restarts it, from the new file, when
     * the head's engine ends (render/host/files.ts, UnitRestart).
     */
    peers?: VllmServer[];
    /**
     * The engine's Ray cluster (ray executor, the head's server): its nodes and its token. A change
     * of either runs the readiness probe again, so that `up` ends with the engine answering: a node
     * that left takes the shard it held with it, and a new token restarts Ray under the engine; the
     * engine restarts in both cases without a change of its own unit.
     */
    ray?: { members: readonly string[]; token: pulumi.Input<string> };
}

/** The OpenAI-compatible base URL rank 0 serves on `publicHost`. */
export function apiBaseUrl(publicHost: string, apiPort: number): string {
    return `http://${publicHost}:${apiPort}/v1`;
}

/**
 * One server of the serving engine (on the head; on every node, headless on the others, for the
 * mp executor), wired from its {@link EnginePlan} whatever the engine: the secrets step, the unit
 * step, a headless rank's follower, and on rank 0 the readiness check. Complete only when a real
 * chat request is answered with text, within a bounded wait; otherwise it fails with the unit's
 * journal tail. (Its type token stays `VllmServer`: stacks deployed before keep their URNs.)
 */
export class VllmServer extends pulumi.ComponentResource {
    public readonly unit: pulumi.Output<string>;
    /**
     * Changes whenever this node's vLLM restarts because of us (its unit or its secrets file
     * changed). A hash that covers the secrets, so it is itself a secret (encrypted in state,
     * `[secret]` in a diff).
     */
    public readonly generation: pulumi.Output<string>;
    /** OpenAI-compatible base URL (rank 0 only). */
    public readonly baseUrl: string;
    public readonly servedModel: string;

    constructor(name: string, args: VllmServerArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const plan = args.plan;
        this.baseUrl = apiBaseUrl(args.publicHost, plan.api.port);
        this.servedModel = plan.api.servedModel;

        const secretsFile = pulumi.output(args.apiKey).apply((key) => plan.secretsFile(key));
        // Another engine than vLLM: first the other engine's leftovers go (see EnginePlan.switchCleanup).
        const cleanup = plan.switchCleanup !== undefined ? args.host.command(`${name}-engine-switch`, plan.switchCleanup, { parent: this }) : undefined;
        const secrets = args.host.command(
            `${name}-secrets`,
            {
                ...plan.secrets,
                // A changed secret changes stdin: an update, which rewrites the file.
                stdin: pulumi.secret(secretsFile),
                logging: "none",
            },
            { parent: this, ...(cleanup ? { dependsOn: [cleanup] } : {}) },
        );

        this.unit = pulumi
            .all([args.envHash, pulumi.output(args.imageId), pulumi.all((args.peers ?? []).map((p) => p.unit))])
            .apply(([envHash, imageId, units]) => plan.unit(envHash, units, imageId));
        const unitCommand = args.host.command(
            `${name}-unit`,
            {
                create: this.unit.apply(plan.unitStep.create),
                delete: plan.unitStep.delete,
                read: this.unit.apply(plan.unitStep.read),
            },
            { parent: this, dependsOn: [secrets], customTimeouts: { create: "10m", update: "10m" } },
        );
        // A headless rank follows its head: its follower unit restarts it when the head's engine ends.
        if (plan.follow !== undefined) {
            args.host.command(`${name}-follow`, plan.follow, { parent: this, dependsOn: [unitCommand] });
        }
        this.generation = pulumi.secret(pulumi.all([this.unit, secretsFile]).apply(([unit, file]) => contentHash(`${unit}\n${file}`)));
        if (plan.ready !== undefined) {
            readinessCommand(
                name,
                {
                    host: args.host,
                    unit: this.unit,
                    // A new API key (vLLM restarted by the secrets step), a restarted peer or a change of the Ray
                    // cluster's nodes or token re-runs the probe too.
                    triggers: [
                        pulumi.secret(
                            pulumi
                                .all([this.generation, ...(args.peers ?? []).map((p) => p.generation), ...(args.ray ? [args.ray.token] : [])])
                                .apply((all) => contentHash([...all, ...(args.ray?.members ?? [])].join("\n"))),
                        ),
                    ],
                    script: plan.ready,
                    timeout: plan.readyTimeout,
                },
                { parent: this, dependsOn: [unitCommand] },
            );
        }
        this.registerOutputs({ baseUrl: this.baseUrl, servedModel: this.servedModel });
    }
}
