import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import type { Runtime } from "../config";
import type { Connection } from "./nodeConnection";
import { typeToken } from "./package";
import { readinessCommand } from "./readiness";
import { MANAGED_MARKER } from "./render/hostLib";
import { chatReadyScript, installFileFromStdinScript, installUnitScript, removeFilesScript, removeUnitScript } from "./render/hostScripts";
import { RUNTIME_ENV_PATH } from "./render/nccl";
import { CONTAINER_NAMES, VllmServeSpec, vllmServeArgv } from "./render/runtime";
import { remoteCommand } from "./render/shell";
import { renderUnit } from "./render/systemd";

const TYPE = typeToken("VllmServer");
export const VLLM_UNIT = "spark-cluster-vllm";
/** Root-only env file with the API key and HF token: never in argv, state or logs. */
export const VLLM_SECRETS_PATH = "/etc/spark-cluster/vllm.env";

export interface VllmServerArgs {
    connection: pulumi.Input<Connection>;
    sshUser: string;
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
}

/**
 * The `vllm serve` unit (on the head; on every node, `--headless` on the
 * others, for the mp executor). Complete only when a real chat request is
 * answered with text, within a bounded wait; otherwise it fails with the
 * unit's journal tail.
 */
export class VllmServer extends pulumi.ComponentResource {
    public readonly unit: pulumi.Output<string>;
    /** OpenAI-compatible base URL (rank 0 only). */
    public readonly baseUrl: string;
    public readonly servedModel: string;

    constructor(name: string, args: VllmServerArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const rank = args.serve.multiNode?.rank ?? 0;
        this.baseUrl = `http://${args.publicHost}:${args.serve.port}/v1`;
        this.servedModel = args.serve.servedName;

        const secretsFile = pulumi
            .all([args.apiKey, args.hfToken ?? ""])
            .apply(([key, token]) => `# ${MANAGED_MARKER}\nVLLM_API_KEY=${key}\n${token ? `HF_TOKEN=${token}\n` : ""}`);
        const secrets = new command.remote.Command(
            `${name}-secrets`,
            {
                connection: args.connection,
                create: remoteCommand(installFileFromStdinScript(VLLM_SECRETS_PATH, "600", VLLM_UNIT), args.sshUser),
                delete: remoteCommand(removeFilesScript([VLLM_SECRETS_PATH], ["/etc/spark-cluster"]), args.sshUser),
                // A changed secret changes stdin: an update, which rewrites the file.
                stdin: pulumi.secret(secretsFile),
                logging: "none",
            },
            { parent: this },
        );

        this.unit = pulumi.output(args.envHash).apply((envHash) =>
            renderUnit({
                name: VLLM_UNIT,
                description: `spark-cluster: vLLM serving ${args.serve.servedName}${rank > 0 ? ` (headless rank ${rank})` : ""}`,
                runtime: args.runtime,
                container: CONTAINER_NAMES.vllm,
                argv: vllmServeArgv(args.serve),
                envFiles: [RUNTIME_ENV_PATH, VLLM_SECRETS_PATH],
                environment: args.rayAddress ? { RAY_ADDRESS: args.rayAddress } : {},
                inputs: { "runtime.env": envHash },
                after: args.rayAddress ? ["spark-cluster-ray.service"] : [],
            }),
        );
        const unitCommand = new command.remote.Command(
            `${name}-unit`,
            {
                connection: args.connection,
                create: this.unit.apply((unit) => remoteCommand(installUnitScript(VLLM_UNIT, unit), args.sshUser)),
                delete: remoteCommand(removeUnitScript(VLLM_UNIT), args.sshUser),
            },
            { parent: this, dependsOn: [secrets], customTimeouts: { create: "10m", update: "10m" } },
        );
        if (rank === 0) {
            readinessCommand(
                name,
                {
                    connection: args.connection,
                    sshUser: args.sshUser,
                    unit: this.unit,
                    script: chatReadyScript({ port: args.serve.port, model: args.serve.servedName, envFile: VLLM_SECRETS_PATH, unit: VLLM_UNIT }),
                    timeout: "20m",
                },
                { parent: this, dependsOn: [unitCommand] },
            );
        }
        this.registerOutputs({ baseUrl: this.baseUrl, servedModel: this.servedModel });
    }
}
