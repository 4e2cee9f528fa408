// /etc/nccl.conf and the environment file the runtime units read. The
// transport is a cluster decision passed in; interface and HCA names come from
// config or from `ibdev2netdev` on the node. No GID index is ever written:
// it moved from 3 to 4 within 30 minutes on one Spark, and NCCL >= 2.21 picks it itself.
import type { Runtime } from "../../config";
import { envFileReader, renderEnvFile } from "./host/envFile";
import type { EnvFileReader } from "./host/runtime";
import { installFilesScript, removeFilesScript } from "./host/files";
import { filesReadScript } from "./host/read";
import { contentHash } from "./host/shell";
import { CONFIG_DIR, MANAGED_MARKER, NCCL_CONF_PATH, RUNTIME_ENV_PATH, RuntimeEnvName } from "../../config/hostPaths";

export interface NcclSpec {
    transport: "roce" | "socket";
    /** NCCL_SOCKET_IFNAME: an interface, or NCCL's prefix / `^exclusion` selector. */
    socketIfname: string;
    /** The node's own first interconnect interface: Gloo and torch TP need a plain name. */
    interfaceName: string;
    /** RDMA devices of the interconnect (RoCE only). */
    ibHca: string[];
    /** The cluster has a Thor: sockets with P2P, SHM off and the Simple protocol (NCCL otherwise fails with 'wrong type 3 != 4' between a Spark and a Thor). */
    heterogeneous: boolean;
    /** NCCL_IB_TC, the traffic class of NCCL's RoCE packets (RoCE only): DSCP << 2 | ECN, see ./roceChain.ts. */
    ibTrafficClass?: number;
    debug: string;
    overrides: Record<string, string>;
    /**
     * RoCE across more than one subnet (a mesh or ring: one subnet per cable, routes to
     * non-neighbours). NCCL then needs a routable GID on every HCA: RoCE v2 (UDP/IP; v1 is layer 2
     * only) with an IPv4 address. NCCL >= 2.21 picks the GID itself when NCCL_IB_GID_INDEX is unset
     * (its default, -1), filtered by NCCL_IB_ROCE_VERSION_NUM (default 2) and NCCL_IB_ADDR_FAMILY
     * (default AF_INET); both are written explicitly so a site-wide /etc/nccl.conf or an image's env
     * cannot turn the pick to a link-local IPv6 GID, which does not cross a hop. Sources: NCCL's
     * environment variables (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html:
     * NCCL_IB_GID_INDEX, NCCL_IB_ROCE_VERSION_NUM, NCCL_IB_ADDR_FAMILY, NCCL_SOCKET_IFNAME's `=`
     * exact names) and src/transport/net_ib/connect.cc (v2.31.2: IB_GID_INDEX -1, IB_ROCE_VERSION_NUM 2).
     * Defaults to false.
     */
    routed?: boolean;
}

/** NCCL variables, in a stable order, overrides last. */
export function ncclVariables(spec: NcclSpec): [string, string][] {
    // The names the project writes: the type admits only those of RUNTIME_ENV_NAMES (model.env refuses them).
    const own: [RuntimeEnvName, string][] = [["NCCL_SOCKET_IFNAME", spec.socketIfname]];
    if (spec.transport === "roce") {
        if (spec.ibHca.length === 0) {
            throw new Error("RoCE transport needs at least one RDMA device (nccl.ibHca or ibdev2netdev)");
        }
        own.push(["NCCL_IB_DISABLE", "0"], ["NCCL_IB_HCA", spec.ibHca.join(",")], ["NCCL_IB_ROCE_VERSION_NUM", "2"]);
        if (spec.routed === true) {
            own.push(["NCCL_IB_ADDR_FAMILY", "AF_INET"]);
        }
        if (spec.ibTrafficClass !== undefined) {
            // Without it NCCL's packets carry DSCP 0, priority 0 by the NIC's map: not the PFC priority.
            own.push(["NCCL_IB_TC", String(spec.ibTrafficClass)]);
        }
        if (spec.ibHca.length > 1) {
            own.push(["NCCL_CROSS_NIC", "1"]);
        }
    } else {
        own.push(["NCCL_IB_DISABLE", "1"]);
        if (spec.heterogeneous) {
            own.push(["NCCL_P2P_DISABLE", "1"], ["NCCL_SHM_DISABLE", "1"], ["NCCL_PROTO", "Simple"]);
        }
    }
    own.push(["NCCL_DEBUG", spec.debug]);
    const vars: [string, string][] = own;
    for (const [key, value] of Object.entries(spec.overrides).sort(([a], [b]) => a.localeCompare(b))) {
        const at = vars.findIndex(([k]) => k === key);
        if (at >= 0) {
            vars[at] = [key, value];
        } else {
            vars.push([key, value]);
        }
    }
    return vars;
}

/** /etc/nccl.conf: read by NCCL itself at run time. */
export function renderNcclConf(spec: NcclSpec): string {
    return [`# ${MANAGED_MARKER}`, `# transport: ${spec.transport}`, ...ncclVariables(spec).map(([k, v]) => `${k}=${v}`)].join("\n") + "\n";
}

export interface RuntimeEnvSpec {
    nccl: NcclSpec;
    /** Who reads the file: systemd (venv runtime) or docker (container runtime). */
    reader: EnvFileReader;
    /** This node's interconnect address: Ray and vLLM pin themselves to it. */
    nodeIp: string;
}

/**
 * The EnvironmentFile of the Ray and vLLM units: NCCL, Gloo and torch socket
 * names, and the node's own address (containers do not read profile.d).
 */
export function renderRuntimeEnv(spec: RuntimeEnvSpec): string {
    const own: [RuntimeEnvName, string][] = [
        ["GLOO_SOCKET_IFNAME", spec.nccl.interfaceName],
        ["TP_SOCKET_IFNAME", spec.nccl.interfaceName],
        ["VLLM_HOST_IP", spec.nodeIp],
    ];
    return renderEnvFile(MANAGED_MARKER, [...ncclVariables(spec.nccl), ...own], spec.reader);
}

/** The NCCL layer's files on one node, rendered from the spec (known once the node's interfaces are probed). */
export interface NcclFiles {
    ncclConf: string;
    runtimeEnv: string;
    /** Hash of what the runtime reads: a change restarts Ray and vLLM. */
    envHash: string;
    /** The files step's create script: install both. */
    create: string;
    /** The files step's read-back. */
    read: string;
}

/**
 * Everything the NCCL layer puts on one node: /etc/nccl.conf and the runtime env file (a function
 * of the spec, which waits for the node's probe), and the files step's delete (known up front).
 */
export interface NcclPlan {
    files(spec: NcclSpec): NcclFiles;
    /** The files step's delete: remove both, restoring an /etc/nccl.conf we replaced. */
    delete: string;
}

/** The NCCL layer's plan for one node, asked for once by its component. `nodeIp`: the node's interconnect address. */
export function ncclPlan(runtime: Runtime, nodeIp: string): NcclPlan {
    return {
        files: (spec) => {
            const ncclConf = renderNcclConf(spec);
            const runtimeEnv = renderRuntimeEnv({ nccl: spec, nodeIp, reader: envFileReader(runtime) });
            const files = [
                { path: NCCL_CONF_PATH, mode: "644" as const, content: ncclConf },
                { path: RUNTIME_ENV_PATH, mode: "644" as const, content: runtimeEnv },
            ];
            return { ncclConf, runtimeEnv, envHash: contentHash(ncclConf + runtimeEnv), create: installFilesScript(files), read: filesReadScript(files) };
        },
        delete: removeFilesScript([NCCL_CONF_PATH, RUNTIME_ENV_PATH], [CONFIG_DIR]),
    };
}
