// The Ray layer: `ray start --block` argv pinned to the interconnect address,
// the unit that runs it, and the readiness probe on the head.
import type { Runtime } from "../../config";
import { EnvFileReader, renderEnvFile } from "./host/envFile";
import { HOST_LIB } from "./host/lib";
import { bashScript, shellQuote } from "./host/shell";
import { renderUnit } from "./host/systemd";
import { CONTAINER_NAMES, MANAGED_MARKER, RAY_ENV_PATH, RUNTIME_ENV_PATH, UNITS } from "./paths";

/** Ray's ports that `ray start` would otherwise pick at random: pinned, so each can be named (and firewalled). */
export interface RayPorts {
    clientServerPort: number;
    nodeManagerPort: number;
    objectManagerPort: number;
    runtimeEnvAgentPort: number;
    dashboardAgentGrpcPort: number;
    dashboardAgentListenPort: number;
    metricsExportPort: number;
    minWorkerPort: number;
    maxWorkerPort: number;
}

export interface RayStartSpec {
    role: "head" | "worker";
    nodeIp: string;
    headIp: string;
    port: number;
    gpus: number;
    numCpus?: number;
    objectStoreMemoryMb?: number;
    dashboardHost: string;
    dashboardPort: number;
    ports: RayPorts;
}

/** `ray start --block …` pinned to the node's interconnect address, every port named. */
export function rayStartArgv(spec: RayStartSpec): string[] {
    const argv = ["ray", "start", "--block", `--node-ip-address=${spec.nodeIp}`, `--num-gpus=${spec.gpus}`];
    if (spec.role === "head") {
        argv.push(
            "--head",
            `--port=${spec.port}`,
            "--include-dashboard=true",
            `--dashboard-host=${spec.dashboardHost}`,
            `--dashboard-port=${spec.dashboardPort}`,
            `--ray-client-server-port=${spec.ports.clientServerPort}`,
        );
    } else {
        argv.push(`--address=${spec.headIp}:${spec.port}`);
    }
    argv.push(
        `--node-manager-port=${spec.ports.nodeManagerPort}`,
        `--object-manager-port=${spec.ports.objectManagerPort}`,
        `--runtime-env-agent-port=${spec.ports.runtimeEnvAgentPort}`,
        `--dashboard-agent-grpc-port=${spec.ports.dashboardAgentGrpcPort}`,
        `--dashboard-agent-listen-port=${spec.ports.dashboardAgentListenPort}`,
        `--metrics-export-port=${spec.ports.metricsExportPort}`,
        `--min-worker-port=${spec.ports.minWorkerPort}`,
        `--max-worker-port=${spec.ports.maxWorkerPort}`,
    );
    if (spec.numCpus !== undefined) {
        argv.push(`--num-cpus=${spec.numCpus}`);
    }
    if (spec.objectStoreMemoryMb !== undefined) {
        argv.push(`--object-store-memory=${spec.objectStoreMemoryMb * 1024 * 1024}`);
    }
    return argv;
}

/** The Ray unit of one node: a worker waits (bounded) for the head's GCS port instead of sleeping. */
export function renderRayUnit(spec: RayStartSpec, runtime: Runtime, envHash: string): string {
    return renderUnit({
        name: UNITS.ray,
        description: `spark-cluster: Ray ${spec.role}`,
        runtime,
        container: CONTAINER_NAMES.ray,
        argv: rayStartArgv(spec),
        envFiles: [RUNTIME_ENV_PATH, RAY_ENV_PATH],
        // vLLM's workers under the Ray executor are this raylet's children: offline like vLLM itself
        // (the model sync put the model on every node).
        environment: { HF_HUB_OFFLINE: "1" },
        inputs: { "runtime.env": envHash },
        preStart:
            spec.role === "worker"
                ? [["/usr/bin/timeout", "300", "/bin/bash", "-c", `until echo > /dev/tcp/${spec.headIp}/${spec.port}; do sleep 2; done 2>/dev/null`]]
                : undefined,
    });
}

/** A bounded wait for the Ray cluster to show the expected nodes and GPUs. */
export function rayReadyScript(rayStatusCommand: string, nodes: number, gpus: number, seconds = 300, envFile = RAY_ENV_PATH): string {
    return bashScript([
        HOST_LIB,
        // `ray status` authenticates like every member: the token comes from the root-only env file.
        `set -a; . ${shellQuote(envFile)}; set +a`,
        `ray_ready() {`,
        `  local out; out=$(${rayStatusCommand} 2>/dev/null) || return 1`,
        `  local n g`,
        `  n=$(printf '%s\\n' "$out" | awk '/^Active:/{a=1;next} /^Pending:/{a=0} a && /node_/{c++} END{print c+0}')`,
        `  g=$(printf '%s\\n' "$out" | grep -oE '[0-9.]+/[0-9.]+ GPU' | head -n 1 | sed 's#.*/##; s# GPU##')`,
        `  echo "ray: $n node(s), \${g:-0} GPU(s)"`,
        `  [ "$n" -ge ${nodes} ] && awk -v g="\${g:-0}" 'BEGIN{exit !(g+0 >= ${gpus})}'`,
        `}`,
        `if ! sc_wait ${seconds} "Ray to show ${nodes} nodes and ${gpus} GPUs" ray_ready; then`,
        `  ${rayStatusCommand} || true`,
        `  exit 1`,
        `fi`,
    ]);
}

/**
 * The root-only env file with Ray's token authentication (Ray >= 2.52): every member runs with
 * the same token, so a machine without it cannot join the cluster or use its GCS.
 */
export function renderRayEnv(reader: EnvFileReader, token: string): string {
    return renderEnvFile(
        MANAGED_MARKER,
        [
            ["RAY_AUTH_MODE", "token"],
            ["RAY_AUTH_TOKEN", token],
        ],
        reader,
    );
}

/** The first Ray release with token authentication. */
export const RAY_TOKEN_AUTH_SINCE = "2.52.0";
