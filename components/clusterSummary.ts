// The stack's `cluster` output: what the configuration describes, in plain
// data a user can read with `pulumi stack output cluster`. Never any secret.
import type { Config } from "../config";

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
        ssh: string;
        gpus: number;
        runtime: string;
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
            ssh: `${node.ssh.user}@${node.ssh.host}:${node.ssh.port}`,
            gpus: node.gpus,
            runtime: node.runtime.kind === "docker" ? `docker ${node.runtime.image}` : `venv ${node.runtime.path}`,
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
