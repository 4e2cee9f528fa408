// The chain that makes NCCL's RoCE traffic lossless: the traffic class NCCL puts on its packets,
// the DSCP it carries, the priority the NIC's DSCP → priority map gives that DSCP (trust dscp),
// and the priority PFC is enabled on. Each link is a fact from a source:
// - NCCL_IB_TC is the traffic class NCCL sets on its RoCE queue pairs (the GRH traffic class; the
//   default leaves it at 0). NCCL docs, "Environment Variables", NCCL_IB_TC:
//   https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-tc
// - For RoCE v2 the traffic class is the IP header's TOS byte: DSCP in the upper six bits, ECN in
//   the lower two (RFC 2474 section 3, RFC 3168 section 5). 106 = 26 << 2 | 2: DSCP 26 (AF31),
//   ECN-capable transport ECT(0).
// - With `mlnx_qos --trust dscp` the ConnectX default map puts DSCP d on priority d >> 3 (the
//   mlnx-tools source, python/dcbnetlink.py `setDefaultAppEntry`: `set_ieee_app(selector, i >> 3, i)
//   #firmware default`), so DSCP 26 lands on priority 3; `mlnx_qos --dscp2prio set,DSCP,PRIO`
//   changes one entry, and `mlnx_qos -i IF` prints the map as `prio:P dscp:D,D,…` lines under
//   `dscp2prio mapping:` (python/mlnx_qos `pretty_print`).

/** ECN field of the traffic class: ECT(0), "ECN-capable transport" (RFC 3168 section 5). */
export const ECN_ECT0 = 2;

/** NCCL_IB_TC for a DSCP: the TOS byte, DSCP << 2 | ECT(0). 26 → 106. */
export function ncclTrafficClass(dscp: number): number {
    return (dscp << 2) | ECN_ECT0;
}

/** The DSCP a traffic class carries: its upper six bits. 106 → 26. */
export function dscpOfTrafficClass(trafficClass: number): number {
    return trafficClass >> 2;
}

/** The priority a ConnectX puts a DSCP on by default (trust dscp): DSCP >> 3. 26 → 3. */
export function defaultDscpPriority(dscp: number): number {
    return dscp >> 3;
}

/** What a node's `roce` output shows: the chain from NCCL's traffic class to the PFC priority. */
export interface RoceChain {
    /** `enabled: …`, `lossy: …` or `skipped: …` (the PFC step's status). */
    status: string;
    /** The priority PFC is enabled on (roce.priority). */
    priority?: number;
    /** Whether the NIC classifies by DSCP (roce.trustDscp). */
    trust?: "dscp" | "pcp";
    /** The DSCP NCCL marks with, mapped to `priority` on the NIC (roce.dscp). */
    dscp?: number;
    /** NCCL_IB_TC as rendered into NCCL's environment. */
    trafficClass?: number;
    /** Whether nvidia-peermem (GPUDirect RDMA) is loaded on this node, and why (roce.peermem). */
    peermem?: string;
}

/** The RoCE settings a cluster's nodes render, from the resolved config: one decision, read by the cluster's plan and the tests. */
export interface RoceChainPlan {
    /** NCCL_IB_TC: set on the roce transport only. */
    trafficClass?: number;
    /** PFC's priority, the trust mode, and the DSCP the NIC's map must put on that priority. */
    pfc: { priority: number; trustDscp: boolean; dscp: number };
}

export function roceChainPlan(cluster: { transport: "roce" | "socket"; roce: { priority: number; trustDscp: boolean; dscp: number } }): RoceChainPlan {
    return {
        ...(cluster.transport === "roce" ? { trafficClass: ncclTrafficClass(cluster.roce.dscp) } : {}),
        pfc: { priority: cluster.roce.priority, trustDscp: cluster.roce.trustDscp, dscp: cluster.roce.dscp },
    };
}
