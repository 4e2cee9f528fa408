// What a switchless cluster (interconnect.topology mesh or ring) puts on a node beyond a pair's:
// the netplan spec with its host routes, IPv4 forwarding where the node is in the middle of a path
// (saved and restored by destroy), the transit rules of the firewall (our nftables forward chain
// and Docker's DOCKER-USER chain, whose FORWARD policy is DROP wherever Docker runs), and NCCL's
// interface selection across several subnets. Pure: config/fabric.ts decides, this renders.
//
// Wired by components/plan/clusterPlan.ts: the netplan spec and NCCL selection on every mesh or ring
// node, the forwarding step (with the DOCKER-USER rules) on the nodes that forward, the forward
// chain through the firewall policy's transitInterfaces (config/resolve.ts).
import type { FabricNode } from "../../config/fabric";
import { HOST_LIB } from "./host/lib";
import { readScript } from "./host/read";
import { bashScript, heredoc, shellQuote } from "./host/shell";
import type { NcclSpec } from "./nccl";
import type { NetplanSpec } from "./netplan";
import { FORWARDING_STATE_DIR, FORWARDING_SYSCTL_PATH, MANAGED_MARKER } from "../../config/hostPaths";
import type { StepScripts } from "./step";

/**
 * The netplan spec of a mesh or ring node: one address per cable, the MTU on every interface (so
 * on every hop: a transit node's both interfaces carry it), host routes grouped by the interface
 * they leave by, and as peers the neighbours over their cables (the apply's full-size
 * don't-fragment ping). The addresses behind a neighbour answer only once the neighbour forwards
 * and its firewall lets the transit through, steps that come after this one: the netplan apply
 * cannot wait for them (found by the lab's first switchless test, whose successor is
 * test/integration/switchless.test.ts, where it rolled back).
 */
export function fabricNetplanSpec(fabric: FabricNode, mtu: number, linkCheck?: NetplanSpec["linkCheck"]): NetplanSpec {
    return {
        node: fabric.node,
        mtu,
        interfaces: fabric.links.map((link) => ({
            name: link.iface,
            address: link.address,
            routes: fabric.routes.filter((r) => r.dev === link.iface).map((r) => ({ to: r.to, via: r.via })),
        })),
        peers: fabric.links.map((link) => ({ node: link.peer, ip: link.peerIp, via: link.iface })),
        ...(linkCheck !== undefined ? { linkCheck } : {}),
    };
}

/** The kernel's per-interface IPv4 forwarding flag: forwarding is decided by the interface a packet arrives on. */
function forwardingPath(iface: string): string {
    return `/proc/sys/net/ipv4/conf/${iface}/forwarding`;
}

/**
 * /etc/sysctl.d file turning forwarding on for the node's interconnect interfaces only, or
 * undefined where the node forwards nothing. The interface name goes in with `/` separators
 * (sysctl.d(5): a name holding `.`, as a VLAN's, cannot be written with dots).
 */
export function renderForwardingSysctl(fabric: Pick<FabricNode, "node" | "forwardingOn">): string | undefined {
    if (fabric.forwardingOn.length === 0) return undefined;
    return (
        [
            `# ${MANAGED_MARKER}`,
            `# IPv4 forwarding on the interconnect of ${fabric.node} (it carries ring traffic between its neighbours); removed by \`pulumi destroy\`.`,
            ...fabric.forwardingOn.map((iface) => `net/ipv4/conf/${iface}/forwarding = 1`),
        ].join("\n") + "\n"
    );
}

/**
 * The forwarding step: saves each interface's flag as found (once), installs the sysctl.d file (for
 * boot) and sets the flags now, then checks them; where Docker runs, lets members' transit through
 * its FORWARD chain ({@link dockerTransitLines}, the rules between `members`). The delete removes
 * those rules and the file and writes back what was found. A node that forwards nothing gets
 * scripts that only remove what an earlier layout left.
 */
export function forwardingPlan(fabric: Pick<FabricNode, "node" | "forwardingOn">, members: readonly string[]): StepScripts {
    const file = renderForwardingSysctl(fabric);
    const restore = [
        `if [ -d ${FORWARDING_STATE_DIR} ]; then`,
        `  for saved in ${FORWARDING_STATE_DIR}/*; do`,
        `    [ -e "$saved" ] || continue`,
        `    iface=$(basename "$saved")`,
        `    if [ -w "/proc/sys/net/ipv4/conf/$iface/forwarding" ]; then cat "$saved" > "/proc/sys/net/ipv4/conf/$iface/forwarding"; sc_log "forwarding on $iface restored to $(cat "$saved")"; fi`,
        `    rm -f "$saved"`,
        `  done`,
        `fi`,
    ];
    const remove = bashScript([
        HOST_LIB,
        ...dockerTransitLines(fabric.forwardingOn, members, "remove"),
        `sc_remove_file ${FORWARDING_SYSCTL_PATH}`,
        ...restore,
        `sc_cleanup_state`,
    ]);
    if (file === undefined) {
        return {
            create: remove,
            delete: remove,
            read: readScript([
                `[ ! -e ${FORWARDING_SYSCTL_PATH} ] || echo ${shellQuote(`${FORWARDING_SYSCTL_PATH}: present, but ${fabric.node} forwards nothing`)}`,
            ]),
        };
    }
    const create = bashScript([
        HOST_LIB,
        ...fabric.forwardingOn.flatMap((iface) => [
            `[ -e ${shellQuote(forwardingPath(iface))} ] || { sc_log ${shellQuote(`no interface ${iface} on ${fabric.node}`)}; exit 1; }`,
            `[ -e ${FORWARDING_STATE_DIR}/${shellQuote(iface)} ] || { mkdir -p ${FORWARDING_STATE_DIR}; cat ${shellQuote(forwardingPath(iface))} > ${FORWARDING_STATE_DIR}/${shellQuote(iface)}; }`,
        ]),
        heredoc(`result=$(sc_install_file ${FORWARDING_SYSCTL_PATH} 644`, file) + "\n)",
        `echo "$result"`,
        ...fabric.forwardingOn.map((iface) => `[ "$(cat ${shellQuote(forwardingPath(iface))})" = 1 ] || echo 1 > ${shellQuote(forwardingPath(iface))}`),
        ...fabric.forwardingOn.map(
            (iface) => `[ "$(cat ${shellQuote(forwardingPath(iface))})" = 1 ] || { sc_log ${shellQuote(`forwarding on ${iface} did not turn on`)}; exit 1; }`,
        ),
        ...dockerTransitLines(fabric.forwardingOn, members, "add"),
        `sc_log ${shellQuote(`forwarding on: ${fabric.forwardingOn.join(" ")}`)}`,
    ]);
    const read = readScript([
        `grep -qxF ${shellQuote(`# ${MANAGED_MARKER}`)} ${FORWARDING_SYSCTL_PATH} 2>/dev/null || echo ${shellQuote(`${FORWARDING_SYSCTL_PATH}: missing or not ours`)}`,
        ...fabric.forwardingOn.map(
            (iface) => `[ "$(cat ${shellQuote(forwardingPath(iface))} 2>/dev/null)" = 1 ] || echo ${shellQuote(`${iface}: IPv4 forwarding off, want on`)}`,
        ),
        ...dockerTransitReadLines(fabric.forwardingOn, members),
    ]);
    return { create, delete: remove, read };
}

/**
 * Our nftables forward chain (inside the table inet spark_cluster): between the interconnect
 * interfaces, members' traffic transits and nobody else's does. An accept in our table cannot
 * override a drop in another table (every base chain on the hook sees the packet), hence
 * {@link dockerTransitLines} for Docker's.
 */
export function renderTransitChain(interfaces: readonly string[]): string[] {
    const ifs = `{ ${interfaces.map((i) => JSON.stringify(i)).join(", ")} }`;
    return [
        `    chain forward {`,
        `        type filter hook forward priority filter; policy accept;`,
        `        iifname ${ifs} oifname ${ifs} ip saddr @members ip daddr @members accept`,
        `        iifname ${ifs} oifname ${ifs} drop`,
        `    }`,
    ];
}

/** The iptables rule specs that let members' traffic transit through Docker's FORWARD chain. */
export function dockerTransitRules(interfaces: readonly string[], members: readonly string[]): string[][] {
    return interfaces.flatMap((into) =>
        interfaces.filter((out) => out !== into).map((out) => ["-i", into, "-o", out, "-s", members.join(","), "-d", members.join(","), "-j", "ACCEPT"]),
    );
}

/**
 * Docker sets the iptables FORWARD policy to DROP and evaluates DOCKER-USER first (Docker's "Packet
 * filtering and firewalls" page): an ACCEPT there lets forwarded traffic through. Added only where
 * the chain exists (Docker present), each rule once (`-C` before `-I`); `remove` deletes them.
 */
export function dockerTransitLines(interfaces: readonly string[], members: readonly string[], action: "add" | "remove"): string[] {
    const rules = dockerTransitRules(interfaces, members).map((spec) => spec.map(shellQuote).join(" "));
    // A node that forwards nothing has no rule (an empty `then` would not even parse).
    if (rules.length === 0) return [];
    return [
        `if command -v iptables >/dev/null && iptables -S DOCKER-USER >/dev/null 2>&1; then`,
        ...rules.map((rule) =>
            action === "add"
                ? `  iptables -C DOCKER-USER ${rule} 2>/dev/null || iptables -I DOCKER-USER ${rule}`
                : `  if iptables -C DOCKER-USER ${rule} 2>/dev/null; then iptables -D DOCKER-USER ${rule}; fi`,
        ),
        `fi`,
    ];
}

/** The read-back of {@link dockerTransitLines}: each rule missing from DOCKER-USER, where the chain exists. */
function dockerTransitReadLines(interfaces: readonly string[], members: readonly string[]): string[] {
    const rules = dockerTransitRules(interfaces, members).map((spec) => spec.map(shellQuote).join(" "));
    if (rules.length === 0) return [];
    return [
        `if command -v iptables >/dev/null && iptables -S DOCKER-USER >/dev/null 2>&1; then`,
        ...rules.map((rule) => `  iptables -C DOCKER-USER ${rule} 2>/dev/null || echo ${shellQuote(`DOCKER-USER: missing ${rule}`)}`),
        `fi`,
    ];
}

/**
 * NCCL's interfaces on a mesh or ring node: NCCL_SOCKET_IFNAME names both ports exactly (`=a,b`,
 * NCCL's exact-match syntax; a prefix such as `enp1s0f` would also take a port's twin), Gloo and
 * torch take the first port's name (the port of the node's own address, VLLM_HOST_IP), and the
 * RoCE GID must be routable (see {@link NcclSpec.routed}). `ports`: the node's interconnect
 * interfaces in config order; `configured`: nccl.socketIfname, which wins when set.
 */
export function fabricNcclSelection(ports: readonly string[], configured?: string): Pick<NcclSpec, "socketIfname" | "interfaceName" | "routed"> {
    return { socketIfname: configured ?? `=${ports.join(",")}`, interfaceName: ports[0], routed: true };
}
