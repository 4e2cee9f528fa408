// The stack's `cluster` output: what the configuration describes, as typed data
// a user reads with `pulumi stack output cluster` and tools (scripts/bench-serve.sh)
// read as JSON without parsing text back. Never any secret.
import type { Config, Runtime } from "../config";

export interface ClusterSummary {
    head: string;
    totalGpus: number;
    transport: Config["transport"];
    topology: Config["interconnect"]["topology"];
    mtu: number;
    nodes: {
        name: string;
        kind: string;
        head: boolean;
        /** Where to SSH to the node. */
        ssh: { user: string; host: string; port: number };
        gpus: number;
        /** The node's runtime with every default resolved (an image and its docker flags, or a venv). */
        runtime: Runtime;
        interconnect: string[];
    }[];
    model: {
        source: string;
        servedName: string;
        executor: string;
        tensorParallel: number;
        pipelineParallel: number;
        apiPort: number;
    };
}

/** Summarises a validated config for the stack outputs. */
export function clusterSummary(config: Config): ClusterSummary {
    return {
        head: config.head.name,
        totalGpus: config.totalGpus,
        transport: config.transport,
        topology: config.interconnect.topology,
        mtu: config.interconnect.mtu,
        nodes: config.nodes.map((node) => ({
            name: node.name,
            kind: node.kind,
            head: node.head,
            ssh: { user: node.ssh.user, host: node.ssh.host, port: node.ssh.port },
            gpus: node.gpus,
            runtime: node.runtime,
            interconnect: node.interconnect.map((iface) => `${iface.name ?? "(detected)"} ${iface.address}`),
        })),
        model: {
            source: config.model.source,
            servedName: config.model.servedName,
            executor: config.model.executor,
            tensorParallel: config.model.tensorParallel,
            pipelineParallel: config.model.pipelineParallel,
            apiPort: config.model.apiPort,
        },
    };
}
