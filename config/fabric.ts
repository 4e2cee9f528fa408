/**
 * The addressing and routing of a switchless cluster (mesh, ring), decided once from the cabling
 * that config/cablingRules.ts accepted: each node's links (one subnet per cable), a host route to
 * every address of another node that is not on one of its own cables, and the nodes that must
 * forward (the middle of some path). Pure; read by resolve and by the renderers' tests.
 *
 * Paths are symmetric on purpose: the path between two nodes is computed once for the pair (the
 * shortest, ties to the lowest node index) and its reverse is the way back, so a reply arrives on
 * the interface its request left by and strict reverse-path filtering (`rp_filter=1`) holds. In a
 * ring of four (a-b-c-d), a and c talk through b, b and d through a; c and d forward nothing.
 */
import { formatIpv4, parseCidr } from "./ipv4";
import type { ParsedCable } from "./cablingRules";
import type { ParsedNode } from "./schema";

/** One of a node's cables, from its side. */
export interface FabricLink {
    /** Index into `interconnect.cables`. */
    cable: number;
    /** This node's interface on the cable. */
    iface: string;
    /** This node's address on the cable, with prefix. */
    address: string;
    /** The node at the other end, its interface and its address (without prefix). */
    peer: string;
    peerIface: string;
    peerIp: string;
}

/** A host route of one node: another node's address that is not on this node's cables. */
export interface FabricRoute {
    /** The destination, `a.b.c.d/32`. */
    to: string;
    /** The neighbour's address on the shared cable, the next hop. */
    via: string;
    /** This node's interface towards the neighbour. */
    dev: string;
    /** The node that owns the destination. */
    node: string;
    /** The neighbour the route goes through (the destination node itself when it is a neighbour). */
    hop: string;
}

/** What a mesh or ring puts on one node. */
export interface FabricNode {
    node: string;
    links: FabricLink[];
    routes: FabricRoute[];
    /**
     * The interfaces on which IPv4 forwarding must be on (`net.ipv4.conf.IF.forwarding`: the kernel
     * forwards what arrives on an interface whose flag is on), empty where the node is in the middle
     * of no path; the global `ip_forward` is left alone.
     */
    forwardingOn: string[];
}

type FabricInput = Pick<ParsedNode, "name" | "interconnect">;

/** The node indices of the path from `from` to `to`: shortest, ties to the lowest index at each step. */
function shortestPath(neighbours: readonly number[][], from: number, to: number): number[] {
    const dist = neighbours.map(() => Infinity);
    dist[to] = 0;
    const queue = [to];
    for (let head = 0; head < queue.length; head++) {
        const at = queue[head];
        for (const next of neighbours[at]) {
            if (dist[next] === Infinity) {
                dist[next] = dist[at] + 1;
                queue.push(next);
            }
        }
    }
    if (dist[from] === Infinity) throw new Error(`internal: no path between nodes ${from} and ${to}; checkCabling let a split cabling through`);
    const path = [from];
    let at = from;
    while (at !== to) {
        at = Math.min(...neighbours[at].filter((n) => dist[n] === dist[at] - 1));
        path.push(at);
    }
    return path;
}

/**
 * The links, routes and forwarding of every node of a mesh or ring, in the order of `nodes`.
 * Assumes a cabling that passed {@link checkCabling} (every end known and named, one cable per port).
 */
export function planFabric(cables: readonly ParsedCable[], nodes: readonly FabricInput[]): FabricNode[] {
    const index = new Map(nodes.map((n, i) => [n.name, i]));
    const ifaceOf = (node: number, port: string) => {
        const iface = nodes[node].interconnect.find((i) => i.name === port);
        if (iface === undefined) throw new Error(`internal: ${nodes[node].name} has no interface ${port}; checkCabling let it through`);
        return iface;
    };
    const links: FabricLink[][] = nodes.map(() => []);
    cables.forEach((cable, c) => {
        const a = index.get(cable.a.node);
        const b = index.get(cable.b.node);
        if (a === undefined || b === undefined) throw new Error(`internal: cable ${c} names an unknown node; checkCabling let it through`);
        const aIface = ifaceOf(a, cable.a.port);
        const bIface = ifaceOf(b, cable.b.port);
        const ip = (address: string) => formatIpv4(parseCidr(address).ip);
        links[a].push({ cable: c, iface: cable.a.port, address: aIface.address, peer: cable.b.node, peerIface: cable.b.port, peerIp: ip(bIface.address) });
        links[b].push({ cable: c, iface: cable.b.port, address: bIface.address, peer: cable.a.node, peerIface: cable.a.port, peerIp: ip(aIface.address) });
    });
    const neighbours = links.map((ls) => ls.map((l) => index.get(l.peer) as number).sort((x, y) => x - y));
    // One path per pair, its reverse for the other direction.
    const paths = new Map<string, number[]>();
    const pathOf = (from: number, to: number): number[] => {
        const [lo, hi] = from < to ? [from, to] : [to, from];
        const key = `${lo}-${hi}`;
        let path = paths.get(key);
        if (path === undefined) {
            path = shortestPath(neighbours, lo, hi);
            paths.set(key, path);
        }
        return from === lo ? path : [...path].reverse();
    };
    const forwarding = new Set<number>();
    const routes = nodes.map((_, s) => {
        const attached = new Set(links[s].map((l) => l.peerIp));
        return nodes.flatMap((dest, d) => {
            if (d === s) return [];
            const path = pathOf(s, d);
            path.slice(1, -1).forEach((middle) => forwarding.add(middle));
            const hop = path[1];
            const link = links[s].find((l) => index.get(l.peer) === hop) as FabricLink;
            return links[d]
                .map((l) => formatIpv4(parseCidr(l.address).ip))
                .filter((ip) => !attached.has(ip))
                .sort((x, y) => (parseCidr(`${x}/32`).ip < parseCidr(`${y}/32`).ip ? -1 : 1))
                .map((ip): FabricRoute => ({ to: `${ip}/32`, via: link.peerIp, dev: link.iface, node: dest.name, hop: nodes[hop].name }));
        });
    });
    return nodes.map((node, i) => ({
        node: node.name,
        links: links[i],
        routes: routes[i],
        forwardingOn: forwarding.has(i) ? links[i].map((l) => l.iface) : [],
    }));
}
