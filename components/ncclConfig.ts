import * as pulumi from "@pulumi/pulumi";
import * as command from "@pulumi/command";
import type { Connection } from "./nodeConnection";
import { typeToken } from "./package";
import { installFilesScript, removeFilesScript } from "./render/hostScripts";
import { NCCL_CONF_PATH, NcclSpec, RUNTIME_ENV_PATH, renderNcclConf, renderRuntimeEnv } from "./render/nccl";
import { contentHash, remoteCommand } from "./render/shell";

const TYPE = typeToken("NcclConfig");

export interface NcclConfigArgs {
    connection: pulumi.Input<Connection>;
    sshUser: string;
    /** Transport (a cluster decision), interface and HCA names, overrides. */
    spec: pulumi.Input<NcclSpec>;
    /** The node's interconnect address, exported to Ray and vLLM as VLLM_HOST_IP. */
    nodeIp: string;
}

/**
 * /etc/nccl.conf and the environment file the Ray and vLLM units load (the
 * container runtime does not read profile.d). Destroy removes both and
 * restores an /etc/nccl.conf we replaced.
 */
export class NcclConfig extends pulumi.ComponentResource {
    public readonly ncclConf: pulumi.Output<string>;
    public readonly runtimeEnv: pulumi.Output<string>;
    /** Hash of what the runtime reads: a change restarts Ray and vLLM. */
    public readonly envHash: pulumi.Output<string>;
    public readonly installed: command.remote.Command;

    constructor(name: string, args: NcclConfigArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const spec = pulumi.output(args.spec) as pulumi.Output<NcclSpec>;
        this.ncclConf = spec.apply(renderNcclConf);
        this.runtimeEnv = spec.apply((nccl) => renderRuntimeEnv({ nccl, nodeIp: args.nodeIp }));
        this.envHash = pulumi.all([this.ncclConf, this.runtimeEnv]).apply(([a, b]) => contentHash(a + b));
        this.installed = new command.remote.Command(
            `${name}-files`,
            {
                connection: args.connection,
                create: pulumi.all([this.ncclConf, this.runtimeEnv]).apply(([conf, env]) =>
                    remoteCommand(
                        installFilesScript([
                            { path: NCCL_CONF_PATH, mode: "644", content: conf },
                            { path: RUNTIME_ENV_PATH, mode: "644", content: env },
                        ]),
                        args.sshUser,
                    ),
                ),
                delete: remoteCommand(removeFilesScript([NCCL_CONF_PATH, RUNTIME_ENV_PATH], ["/etc/spark-cluster"]), args.sshUser),
            },
            { parent: this },
        );
        this.registerOutputs({ ncclConf: this.ncclConf, runtimeEnv: this.runtimeEnv });
    }
}
