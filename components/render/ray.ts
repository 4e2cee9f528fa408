// The Ray layer: `ray start --block` argv pinned to the interconnect address,
// the unit that runs it, and the readiness probe on the head (the GCS node table, polled).
import type { Runtime, WatchdogConfig } from "../../config";
import { addressOnNode } from "../../config/ipv4";
import { renderEnvFile } from "./host/envFile";
import type { EnvFileReader } from "./host/runtime";
import { installFileFromStdinScript, installUnitScript, removeFilesScript, removeUnitScript } from "./host/files";
import { HOST_LIB } from "./host/lib";
import { secretFileReadScript, unitReadScript } from "./host/read";
import { runtimeStrategy } from "./host/runtime";
import { bashScript, shellQuote } from "./host/shell";
import { renderUnit } from "./host/systemd";
import { CONFIG_DIR, CONTAINER_NAMES, MANAGED_MARKER, RAY_ENV_PATH, RUNTIME_ENV_PATH, RayEnvName, UNITS } from "../../config/hostPaths";
import type { StepScripts } from "./step";
import type { CompanionUnit } from "./host/files";
import { renderWatchdogUnit } from "./watchdog";

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

/**
 * How long a worker's `ray start` keeps trying the head's GCS before it gives up (and systemd
 * starts it again): Ray's own retry, one try about every second
 * (ray/_private/node.py `_init_gcs_client`, Ray 2.60: `RAY_gcs_server_port_wait_time_s`, by
 * default 20 tries). With it a worker starts beside the head instead of after the head's port
 * answers, so the two `ray start`s overlap.
 */
export const RAY_WORKER_GCS_WAIT_SECONDS = 300;

/**
 * No drain when systemd stops Ray. In Ray 2.60 a SIGTERM first asks the GCS to drain the node
 * and waits until its raylet exits, up to `RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S` (30 s by
 * default; `_drain_node_before_shutdown` in ray/_private/node.py): meant for Ray Serve's proxies,
 * which this cluster does not run. With vLLM's actors on the node it does not end, so each stop
 * waited until `docker stop` (10 s) or systemd's `TimeoutStopSec` (30 s) killed Ray; destroy
 * stops vLLM first, then the workers' Ray, then the head's. 0 turns it off ("a value <= 0
 * disables draining"); older Rays ignore the variable.
 */
const RAY_STOP_ENVIRONMENT = { RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S: "0" } as const;

/** The Ray unit of one node: a worker starts at once and joins the head by Ray's own bounded retry. */
export function renderRayUnit(spec: RayStartSpec, runtime: Runtime, envHash: string, watchdog?: WatchdogConfig): string {
    return renderUnit({
        name: UNITS.ray,
        description: `spark-cluster: Ray ${spec.role}`,
        runtime,
        container: CONTAINER_NAMES.ray,
        argv: rayStartArgv(spec),
        envFiles: [RUNTIME_ENV_PATH, RAY_ENV_PATH],
        // vLLM's workers under the Ray executor are this raylet's children: offline like vLLM itself
        // (the model sync put the model on every node).
        environment: {
            HF_HUB_OFFLINE: "1",
            ...RAY_STOP_ENVIRONMENT,
            ...(spec.role === "worker" ? { RAY_gcs_server_port_wait_time_s: String(RAY_WORKER_GCS_WAIT_SECONDS) } : {}),
        },
        inputs: { "runtime.env": envHash },
        // The head's watchdog starts with it (it is PartOf the Ray unit, so it stops and restarts with it too).
        ...(spec.role === "head" && watchdog !== undefined ? { wants: [`${UNITS.rayWatchdog}.service`] } : {}),
    });
}

/**
 * The readiness probe, run beside Ray with its Python: ONE process that reads the GCS's node
 * table (ALIVE nodes and their GPUs) every 0.2 s, instead of a `ray status` (1-1.5 s of imports
 * and an autoscaler report) every 2 s. Says what it waits for, and what it sees, every 10 s.
 * Arguments: GCS address, nodes, GPUs, seconds, and (the head's readiness only) the members'
 * addresses, comma-separated: an ALIVE node at any other address is removed from the cluster
 * (the GCS's DrainNode: it marks the node dead at once and shuts its raylet down), so that no
 * engine placed next can land on a node that left `nodes` and whose Ray worker still runs until
 * its steps are deleted at the end of the `up`; ready then means exactly the members.
 * Exit 0 when ready, 1 when it gave up.
 */
export const RAY_PROBE_PY = String.raw`import sys, time
address, nodes, gpus, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
members = set(sys.argv[5].split(",")) if len(sys.argv) > 5 else None
start = time.monotonic()
from ray._raylet import GcsClient
from ray.core.generated.gcs_pb2 import GcsNodeInfo
what = "Ray at %s to show %d nodes and %g GPUs" % (address, nodes, gpus)
seen, client, said, removing = "the GCS has not answered yet", None, start, {}
while True:
    try:
        if client is None:
            client = GcsClient(address=address)
        alive = list(client.get_all_node_info(timeout=5, state_filter=GcsNodeInfo.GcsNodeState.ALIVE).values())
        strangers = [n for n in alive if members is not None and n.node_manager_address not in members]
        for n in strangers:
            if time.monotonic() - removing.get(n.node_id, -60) >= 5:
                removing[n.node_id] = time.monotonic()
                done = n.node_id in client.drain_nodes([n.node_id], timeout=5)
                print("[spark-cluster] ray: %s is not a member of the cluster (no longer in nodes): %s" % (n.node_manager_address, "removed it" if done else "its removal was refused; trying again"), flush=True)
        alive = [n for n in alive if n not in strangers]
        have = sum(float(n.resources_total.get("GPU", 0)) for n in alive)
        seen = "%d node(s), %g GPU(s)" % (len(alive), have) + ("; removing %s" % ", ".join(sorted(n.node_manager_address for n in strangers)) if strangers else "")
        if len(alive) >= nodes and have >= gpus and not strangers:
            print("ray: %s after %.1f s" % (seen, time.monotonic() - start), flush=True)
            sys.exit(0)
    except Exception as err:
        client, seen = None, "the GCS does not answer (%s)" % type(err).__name__
    now = time.monotonic()
    if now - start >= limit:
        print("[spark-cluster] gave up after %d s waiting for %s; last seen: %s" % (limit, what, seen), flush=True)
        sys.exit(1)
    if now - said >= 10:
        print("[spark-cluster] waiting for %s: %s (%d s of %d s)" % (what, seen, now - start, limit), flush=True)
        said = now
    time.sleep(0.2)
`;

/** The probe's argv (see {@link RAY_PROBE_PY}), for `execBeside` the Ray unit; `members`: remove every other node (the head's readiness only). */
export function rayProbeArgv(address: string, nodes: number, gpus: number, seconds = 300, members?: readonly string[]): string[] {
    return ["python3", "-c", RAY_PROBE_PY, address, String(nodes), String(gpus), String(seconds), ...(members === undefined ? [] : [members.join(",")])];
}

/**
 * A bounded wait for the Ray cluster to show the expected nodes and GPUs; `ray status` on failure,
 * for diagnosis. `awaitUnit`: lines that first wait for the unit the probe runs beside
 * (the runtime strategy's `awaitContainer`).
 */
export function rayReadyScript(probeCommand: string, rayStatusCommand: string, envFile = RAY_ENV_PATH, awaitUnit: readonly string[] = []): string {
    return bashScript([
        HOST_LIB,
        // The probe authenticates like every member: the token comes from the root-only env file.
        `set -a; . ${shellQuote(envFile)}; set +a`,
        ...awaitUnit,
        `if ! ${probeCommand}; then`,
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
            ["RAY_AUTH_MODE" satisfies RayEnvName, "token"],
            ["RAY_AUTH_TOKEN" satisfies RayEnvName, token],
        ],
        reader,
    );
}

/** The first Ray release with token authentication. */
export const RAY_TOKEN_AUTH_SINCE = "2.52.0";

/**
 * Everything the Ray layer puts on one node, asked for once by its component, which wires it:
 * the root-only token file and its step, the unit and its step, and (head) the readiness probe.
 * The unit and the token file wait for deploy-time values, so they are functions of them.
 */
export interface RayPlan {
    /** Rendered token file, read by the runtime's env-file reader. */
    authFile(token: string): string;
    /** The token step: the file from stdin, root-only. */
    auth: StepScripts;
    /** The unit; `imageId`: the image's ID the node's engine probe found (docker), which it starts instead of the tag. Defaults to the tag. */
    unit(envHash: string, imageId?: string): string;
    /** The unit step: its create and read-back scripts for the rendered unit, and its delete. */
    unitStep: { create(unit: string): string; read(unit: string): string; delete: string };
    /** The head's readiness probe: the cluster shows `nodes` nodes and `gpus` GPUs at `address`, and no node but `members` (any other is removed). */
    ready(address: string, nodes: number, gpus: number, members: readonly string[]): string;
}

/**
 * The URL of the head's GCS health check: the dashboard's `/api/gcs_healthz` answers 200 while the
 * GCS answers it (Ray's dashboard asks the GCS each time), on the node (loopback where the dashboard
 * listens on every address).
 */
export function rayGcsHealthUrl(spec: Pick<RayStartSpec, "dashboardHost" | "dashboardPort">): string {
    return `http://${addressOnNode(spec.dashboardHost)}:${spec.dashboardPort}/api/gcs_healthz`;
}

/** The head's watchdog unit (watchdog on), or its removal (off); a worker has none. */
export function rayWatchdogCompanions(spec: RayStartSpec, watchdog?: WatchdogConfig): CompanionUnit[] {
    if (spec.role !== "head") return [];
    return [
        {
            name: UNITS.rayWatchdog,
            content:
                watchdog === undefined
                    ? undefined
                    : renderWatchdogUnit(
                          {
                              unit: UNITS.ray,
                              url: rayGcsHealthUrl(spec),
                              what: "spark-cluster: restarts Ray's head when its GCS stops answering",
                              gated: false,
                              unanswered: "wait",
                          },
                          watchdog,
                      ),
        },
    ];
}

/** The Ray layer's plan for one node; `watchdog`: the head's GCS watchdog (config.watchdog). */
export function rayPlan(spec: RayStartSpec, runtime: Runtime, watchdog?: WatchdogConfig): RayPlan {
    const strategy = runtimeStrategy(runtime);
    const companions = rayWatchdogCompanions(spec, watchdog);
    return {
        authFile: (token) => renderRayEnv(strategy.envFileReader, token),
        auth: {
            create: installFileFromStdinScript(RAY_ENV_PATH, "600", UNITS.ray),
            delete: removeFilesScript([RAY_ENV_PATH], [CONFIG_DIR]),
            read: secretFileReadScript(RAY_ENV_PATH, "600"),
        },
        unit: (envHash, imageId) => renderRayUnit(spec, strategy.pinned(imageId), envHash, watchdog),
        unitStep: {
            create: (unit) => installUnitScript(UNITS.ray, unit, companions),
            read: (unit) => unitReadScript(UNITS.ray, unit, companions),
            delete: removeUnitScript(
                UNITS.ray,
                companions.map((c) => c.name),
            ),
        },
        ready: (address, nodes, gpus, members) =>
            rayReadyScript(
                strategy.execBeside(CONTAINER_NAMES.ray, rayProbeArgv(address, nodes, gpus, 300, members)),
                strategy.execBeside(CONTAINER_NAMES.ray, ["ray", "status", `--address=${address}`]),
                RAY_ENV_PATH,
                strategy.awaitContainer(CONTAINER_NAMES.ray, UNITS.ray, 60),
            ),
    };
}
