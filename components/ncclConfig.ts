import * as pulumi from "@pulumi/pulumi";
import type * as command from "@pulumi/command";
import type { Runtime } from "../config";
import type { NodeHost } from "./nodeConnection";
import { envFileReader } from "./render/host/envFile";
import { typeToken } from "./package";
import { installFilesScript, removeFilesScript } from "./render/host/files";
import { filesReadScript } from "./render/host/read";
import { contentHash } from "./render/host/shell";
import { NcclSpec, renderNcclConf, renderRuntimeEnv } from "./render/nccl";
import { CONFIG_DIR, NCCL_CONF_PATH, RUNTIME_ENV_PATH } from "./render/paths";

const TYPE = typeToken("NcclConfig");

export interface NcclConfigArgs {
    /** The node's connection and SSH user. */
    host: NodeHost;
    /** Transport (a cluster decision), interface and HCA names, overrides. */
    spec: pulumi.Input<NcclSpec>;
    /** How Ray and vLLM run here: it decides who reads the env file (systemd or docker). */
    runtime: Runtime;
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
        this.runtimeEnv = spec.apply((nccl) => renderRuntimeEnv({ nccl, nodeIp: args.nodeIp, reader: envFileReader(args.runtime) }));
        this.envHash = pulumi.all([this.ncclConf, this.runtimeEnv]).apply(([a, b]) => contentHash(a + b));
        const files = pulumi.all([this.ncclConf, this.runtimeEnv]).apply(([conf, env]) => [
            { path: NCCL_CONF_PATH, mode: "644" as const, content: conf },
            { path: RUNTIME_ENV_PATH, mode: "644" as const, content: env },
        ]);
        this.installed = args.host.command(
            `${name}-files`,
            {
                create: files.apply(installFilesScript),
                read: files.apply(filesReadScript),
                delete: removeFilesScript([NCCL_CONF_PATH, RUNTIME_ENV_PATH], [CONFIG_DIR]),
            },
            { parent: this },
        );
        this.registerOutputs({ ncclConf: this.ncclConf, runtimeEnv: this.runtimeEnv });
    }
}
