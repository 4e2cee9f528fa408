import * as pulumi from "@pulumi/pulumi";
import type * as sparkRemote from "./sparkRemote";
import type { Runtime } from "../config";
import type { NodeHost } from "./nodeConnection";
import { typeToken } from "./package";
import { NcclSpec, ncclPlan } from "./render/nccl";

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
    public readonly installed: sparkRemote.Step;

    constructor(name: string, args: NcclConfigArgs, opts?: pulumi.ComponentResourceOptions) {
        super(TYPE, name, {}, opts);
        const plan = ncclPlan(args.runtime, args.nodeIp);
        const files = (pulumi.output(args.spec) as pulumi.Output<NcclSpec>).apply(plan.files);
        this.ncclConf = files.apply((f) => f.ncclConf);
        this.runtimeEnv = files.apply((f) => f.runtimeEnv);
        this.envHash = files.apply((f) => f.envHash);
        this.installed = args.host.command(
            `${name}-files`,
            {
                create: files.apply((f) => f.create),
                read: files.apply((f) => f.read),
                delete: plan.delete,
            },
            { parent: this },
        );
        this.registerOutputs({ ncclConf: this.ncclConf, runtimeEnv: this.runtimeEnv });
    }
}
