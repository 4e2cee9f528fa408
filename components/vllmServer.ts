import * as pulumi from "@pulumi/pulumi";
import type { Runtime } from "../config";
import type { NodeHost } from "./nodeConnection";
import { typeToken } from "./package";
import { readinessCommand } from "./readiness";
import { envFileReader } from "./render/host/envFile";
import { installFileFromStdinScript, installUnitScript, removeFilesScript, removeUnitScript } from "./render/host/files";
import { secretFileReadScript, unitReadScript } from "./render/host/read";
import { contentHash } from "./render/host/shell";
import { CONFIG_DIR, UNITS, VLLM_SECRETS_PATH } from "./render/paths";
import { VllmServeSpec, chatReadyScript, renderVllmFollowUnit, renderVllmSecrets, renderVllmUnit } from "./render/vllm";

const TYPE = typeToken("VllmServer");

export interface VllmServerArgs {
    /** The node's connection and SSH user. */
    host: NodeHost;
    runtime: Runtime;
    /** The `vllm serve` settings; `multiNode` set for the mp executor. */
    serve: VllmServeSpec;
    /** API key clients must send. */
    apiKey: pulumi.Input<string>;
    /** Hugging Face token for gated models. Defaults to none. */
    hfToken?: pulumi.Input<string>;
    /** Ray's address for the ray executor. Defaults to none (mp executor). */
    rayAddress?: string;
    /** Hash of the runtime environment file: a change restarts vLLM. */
    envHash: pulumi.Input<string>;
    /** Host clients use to reach the API (the head's SSH address). */
    publicHost: string;
    /**
     * The other ranks' servers (mp executor, on the head; give them in `dependsOn` too): when one
     * of them restarts, the engine ends on every rank, so the head's unit (which names their
     * units' hash) restarts after them and its readiness probe runs again.
     */
    peers?: VllmServer[];
}

/**
 * The `vllm serve` unit (on the head; on every node, `--headless` on the
 * others, for the mp executor). Complete only when a real chat request is
 * answered with text, within a bounded wait; otherwise it fails with the
 * unit's journal tail.
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
        const rank = args.serve.multiNode?.rank ?? 0;
        this.baseUrl = `http://${args.publicHost}:${args.serve.apiPort}/v1`;
        this.servedModel = args.serve.servedName;

        const secretsFile = pulumi.all([args.apiKey, args.hfToken ?? ""]).apply(([key, token]) => renderVllmSecrets(envFileReader(args.runtime), key, token));
        const secrets = args.host.command(
            `${name}-secrets`,
            {
                create: installFileFromStdinScript(VLLM_SECRETS_PATH, "600", UNITS.vllm),
                delete: removeFilesScript([VLLM_SECRETS_PATH], [CONFIG_DIR]),
                read: secretFileReadScript(VLLM_SECRETS_PATH, "600"),
                // A changed secret changes stdin: an update, which rewrites the file.
                stdin: pulumi.secret(secretsFile),
                logging: "none",
            },
            { parent: this },
        );

        const peerUnits = (args.peers ?? []).map((p) => p.unit);
        this.unit = pulumi
            .all([args.envHash, ...peerUnits])
            .apply(([envHash, ...units]) =>
                renderVllmUnit(args.serve, args.runtime, envHash, args.rayAddress, units.length > 0 ? contentHash(units.join("\n")) : undefined),
            );
        const unitCommand = args.host.command(
            `${name}-unit`,
            {
                create: this.unit.apply((unit) => installUnitScript(UNITS.vllm, unit)),
                delete: removeUnitScript(UNITS.vllm),
                read: this.unit.apply((unit) => unitReadScript(UNITS.vllm, unit)),
            },
            { parent: this, dependsOn: [secrets], customTimeouts: { create: "10m", update: "10m" } },
        );
        // A headless rank follows its head: its follower unit restarts it when the head's engine ends.
        const followUnit = renderVllmFollowUnit(args.serve);
        if (followUnit !== undefined) {
            args.host.command(
                `${name}-follow`,
                {
                    create: installUnitScript(UNITS.vllmFollow, followUnit),
                    delete: removeUnitScript(UNITS.vllmFollow),
                    read: unitReadScript(UNITS.vllmFollow, followUnit),
                },
                { parent: this, dependsOn: [unitCommand] },
            );
        }
        this.generation = pulumi.secret(pulumi.all([this.unit, secretsFile]).apply(([unit, file]) => contentHash(`${unit}\n${file}`)));
        if (rank === 0) {
            readinessCommand(
                name,
                {
                    host: args.host,
                    unit: this.unit,
                    // A new API key (vLLM restarted by the secrets step) or a restarted peer re-runs the probe too.
                    triggers: [
                        pulumi.secret(
                            pulumi.all([this.generation, ...(args.peers ?? []).map((p) => p.generation)]).apply((all) => contentHash(all.join("\n"))),
                        ),
                    ],
                    script: chatReadyScript({
                        port: args.serve.apiPort,
                        model: args.serve.servedName,
                        envFile: VLLM_SECRETS_PATH,
                        reader: envFileReader(args.runtime),
                        unit: UNITS.vllm,
                    }),
                    timeout: "20m",
                },
                { parent: this, dependsOn: [unitCommand] },
            );
        }
        this.registerOutputs({ baseUrl: this.baseUrl, servedModel: this.servedModel });
    }
}
