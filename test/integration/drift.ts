// The drifts the lab's refresh test makes by hand on the Spark pair, and how a
// refresh must report each: the resource whose read-back finds it, and the
// line it prints (components/render/host/read.ts and the layers' read scripts).
import type { NodeName } from "./stackSession";

export interface Drift {
    /** What a user did by hand. */
    what: string;
    node: NodeName;
    /** Run as root on the node (bounded by the caller). */
    script: string;
    /** The command resource whose read-back must report it. */
    resource: string;
    /** The line that read-back prints. */
    line: string;
}

/**
 * One of each kind docs/operations.md's "Drift" section lists, spread over both nodes; but for
 * nvidia-peermem unloaded, which only a node that loads it can show (a workstation: a Spark's GB10
 * has no GPUDirect RDMA, so roce.peermem auto leaves it off; test/unit/read.test.ts covers it).
 */
export const DRIFTS: readonly Drift[] = [
    {
        what: "our file edited",
        node: "spark-a",
        script: "echo NCCL_DEBUG=TRACE >> /etc/nccl.conf",
        resource: "spark-a-nccl-files",
        line: "/etc/nccl.conf: edited (its content is not what pulumi up wrote)",
    },
    {
        what: "our file deleted",
        node: "spark-b",
        script: "rm /etc/spark-cluster/runtime.env",
        resource: "spark-b-nccl-files",
        line: "/etc/spark-cluster/runtime.env: missing",
    },
    {
        what: "a unit stopped",
        node: "spark-a",
        script: "systemctl stop spark-cluster-vllm.service",
        resource: "spark-a-vllm-unit",
        line: "spark-cluster-vllm.service: inactive, want active",
    },
    {
        what: "a unit disabled",
        node: "spark-b",
        script: "systemctl disable --quiet spark-cluster-ray.service",
        resource: "spark-b-ray-worker-unit",
        line: "spark-cluster-ray.service: disabled, want enabled",
    },
    {
        what: "a unit edited",
        node: "spark-b",
        script: "sed -i 's/^RestartSec=5$/RestartSec=1/' /etc/systemd/system/spark-cluster-ray.service",
        resource: "spark-b-ray-worker-unit",
        line: "/etc/systemd/system/spark-cluster-ray.service: edited (its content is not what pulumi up wrote)",
    },
    {
        what: "the interconnect address changed",
        node: "spark-a",
        script: "ip addr del 192.168.101.11/24 dev enP2p1s0f1np1 && ip addr add 192.168.101.111/24 dev enP2p1s0f1np1",
        resource: "spark-a-interconnect-apply",
        line: "enP2p1s0f1np1: address 192.168.101.11/24 missing (has: 192.168.101.111/24)",
    },
    {
        what: "the interconnect MTU changed",
        node: "spark-b",
        script: "ip link set dev enp1s0f1np1 mtu 1500",
        resource: "spark-b-interconnect-apply",
        line: "enp1s0f1np1: MTU 1500, want 9000",
    },
    {
        what: "PFC turned off",
        node: "spark-a",
        script: "mlnx_qos -i enp1s0f1np1 --pfc 0,0,0,0,0,0,0,0 >/dev/null",
        resource: "spark-a-roce-apply",
        line: "enp1s0f1np1: PFC 0,0,0,0,0,0,0,0, want 0,0,0,1,0,0,0,0",
    },
    {
        what: "the NIC's DSCP -> priority map moved NCCL's DSCP off the PFC priority",
        node: "spark-b",
        script: "mlnx_qos -i enP2p1s0f1np1 --dscp2prio set,26,0 >/dev/null",
        resource: "spark-b-roce-apply",
        line: "enP2p1s0f1np1: DSCP 26 -> priority 0, want 3",
    },
    {
        what: "our firewall table deleted",
        node: "spark-a",
        script: "nft delete table inet spark_cluster",
        resource: "spark-a-firewall-apply",
        line: "nftables table inet spark_cluster: not loaded",
    },
];

/**
 * What the drifts above also break, and the read-back reports too: for the link checks (the
 * full-size don't-fragment ping of each rail, netplan read-back), by the node at either end of
 * that rail; and the watchdog of a stopped server, which stops with it (PartOf=, components/render/watchdog.ts).
 */
export const CONSEQUENCES: readonly Omit<Drift, "script" | "node">[] = [
    {
        what: "spark-a's vLLM stopped: its watchdog stops with it",
        resource: "spark-a-vllm-unit",
        line: "spark-cluster-vllm-watchdog.service: inactive, want active",
    },
    {
        what: "spark-b's MTU 1500 seen from spark-a: the 9000-byte frame is dropped on spark-b's side",
        resource: "spark-a-interconnect-apply",
        line: "enp1s0f1np1 -> spark-b 192.168.100.12: no answer to a 8972-byte don't-fragment ping (MTU 9000 end to end)",
    },
    {
        what: "spark-b's MTU 1500 seen from spark-b: the ping does not leave",
        resource: "spark-b-interconnect-apply",
        line: "enp1s0f1np1 -> spark-a 192.168.100.11: no answer to a 8972-byte don't-fragment ping (MTU 9000 end to end)",
    },
    {
        what: "spark-a's moved address seen from spark-b",
        resource: "spark-b-interconnect-apply",
        line: "enP2p1s0f1np1 -> spark-a 192.168.101.11: no answer to a 8972-byte don't-fragment ping (MTU 9000 end to end)",
    },
];

/** What the drifts above must make a refresh report: resource → its lines, sorted. */
export function expectedDrift(drifts: readonly Pick<Drift, "resource" | "line">[] = [...DRIFTS, ...CONSEQUENCES]): Map<string, string[]> {
    const want = new Map<string, string[]>();
    for (const d of drifts) {
        want.set(d.resource, [...(want.get(d.resource) ?? []), d.line].sort());
    }
    return want;
}

/**
 * The drift a refresh reported, from the CLI's output: our provider warns once per resource whose
 * read-back differs, `warning: <name> on <user@host:port> differs from what pulumi up made:`, then
 * the read's lines at the warning's indentation (none in a preview's list of warnings; four spaces
 * under the resource's header in an update's Diagnostics). Progress lines, which repeat a warning
 * after the resource's name, do not count.
 */
export function reportedDrift(output: string): Map<string, string[]> {
    const found = new Map<string, string[]>();
    const lines = output.split("\n");
    for (let i = 0; i < lines.length; i++) {
        const warning = /^( *)warning: (\S+) on \S+ differs from what pulumi up made:$/.exec(lines[i]);
        if (!warning) {
            continue;
        }
        const indent = warning[1];
        const read: string[] = [];
        for (let j = i + 1; j < lines.length; j++) {
            const line = lines[j];
            if (!line.startsWith(indent) || /^\s/.test(line.slice(indent.length)) || line.trim() === "") break;
            if (/^(warning|error|info): |^spark-remote:index:Step \(|^pulumi:pulumi:Stack/.test(line.slice(indent.length))) break;
            read.push(line.trim());
        }
        found.set(warning[2], [...new Set([...(found.get(warning[2]) ?? []), ...read])].sort());
    }
    return found;
}

/** A map as sorted `resource: line` strings, for deepEqual with a readable diff. */
export function asLines(m: Map<string, string[]>): string[] {
    return [...m.entries()].flatMap(([resource, lines]) => lines.map((l) => `${resource}: ${l}`)).sort();
}
