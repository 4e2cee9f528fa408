// The ports rule: every port the cluster uses (Ray's pinned ones and its worker range, the API,
// the mp master port, the metrics ports) differs from the others and from every node's SSH port.
import type { z } from "zod";
import { ConfigIssue, describeValue } from "./issues";
import type { MetricsSchema, ParsedModel, ParsedNode, RaySchema } from "./schema";
import { exampleFor } from "./zodIssues";

/** The service ports differ from each other and from every node's SSH port. */
export function checkPorts(
    ray: Partial<z.output<typeof RaySchema>> & Pick<z.output<typeof RaySchema>, "port" | "dashboardPort">,
    model: Pick<ParsedModel, "apiPort" | "masterPort">,
    nodes: readonly (Pick<ParsedNode, "name"> & { ssh: { port: number } })[],
    metrics?: Pick<z.output<typeof MetricsSchema>, "enabled" | "exporterPort" | "port">,
): ConfigIssue[] {
    const single = RAY_SINGLE_PORTS.filter((key) => ray[key] !== undefined).map((key): [string, number, number] => [
        `ray.${key}`,
        ray[key] as number,
        ray[key] as number,
    ]);
    const services: [string, number, number][] = [
        ["ray.port", ray.port, ray.port],
        ["ray.dashboardPort", ray.dashboardPort, ray.dashboardPort],
        ...single,
        ["model.apiPort", model.apiPort, model.apiPort],
        ["model.masterPort", model.masterPort, model.masterPort],
        ...(metrics?.enabled
            ? ([
                  ["metrics.exporterPort", metrics.exporterPort, metrics.exporterPort],
                  ["metrics.port", metrics.port, metrics.port],
              ] as [string, number, number][])
            : []),
    ];
    const issues: ConfigIssue[] = [];
    if (ray.minWorkerPort !== undefined && ray.maxWorkerPort !== undefined) {
        if (ray.maxWorkerPort < ray.minWorkerPort) {
            issues.push({
                path: "ray.maxWorkerPort",
                message: `is below ray.minWorkerPort (${ray.minWorkerPort}); Ray's worker ports are the range between them`,
                got: describeValue(ray.maxWorkerPort),
                example: `${ray.minWorkerPort + 99}`,
            });
        } else {
            services.push(["ray.minWorkerPort", ray.minWorkerPort, ray.maxWorkerPort]);
        }
    }
    const overlaps = (a: [string, number, number], b: [string, number, number]) => a[1] <= b[2] && b[1] <= a[2];
    services.forEach((service, s) => {
        const [key, value] = service;
        const earlier = services.slice(0, s).find((other) => overlaps(other, service));
        const sshNode = nodes.findIndex((node) => node.ssh.port >= service[1] && node.ssh.port <= service[2]);
        const clash = earlier
            ? earlier[1] === earlier[2]
                ? earlier[0]
                : `the range ${earlier[0]}..ray.maxWorkerPort`
            : sshNode >= 0
              ? `nodes[${sshNode}].ssh.port (${nodes[sshNode].name})`
              : undefined;
        if (clash) {
            issues.push({
                path: key,
                message: `collides with ${clash}; the Ray ports (and the worker port range), model.apiPort, model.masterPort, the metrics ports and the SSH ports must all differ`,
                got: describeValue(value),
                example: exampleFor(key.split(".")),
            });
        }
    });
    return issues;
}

/** Ray's pinned single ports (besides the GCS and dashboard ports), each a ray.* key. */
export const RAY_SINGLE_PORTS = [
    "clientServerPort",
    "nodeManagerPort",
    "objectManagerPort",
    "runtimeEnvAgentPort",
    "dashboardAgentGrpcPort",
    "dashboardAgentListenPort",
    "metricsExportPort",
] as const;
