/**
 * The cabling of a switchless cluster (`interconnect.topology: mesh | ring`), checked before any
 * host is touched: every cable names known nodes and ports, each port carries at most one cable,
 * each cable is one subnet of its own, a mesh cables every pair of its three nodes, and a ring is
 * one closed loop through every node. Pure functions with table tests (test/unit/fabric.test.ts).
 */
import type { z } from "zod";
import { formatSubnet, parseCidr, subnetsOverlap } from "./ipv4";
import { describeValue, type ConfigIssue } from "./issues";
import type { CableSchema, InterconnectSchema, ParsedNode } from "./schema";

/** One cable as the schema outputs it. */
export type ParsedCable = z.output<typeof CableSchema>;
type Interconnect = Pick<z.output<typeof InterconnectSchema>, "topology" | "cables">;
type CablingNode = Pick<ParsedNode, "name" | "interconnect">;

/** True for the switchless topologies, whose links are the configured cables. */
export function isSwitchless(topology: Interconnect["topology"]): topology is "mesh" | "ring" {
    return topology === "mesh" || topology === "ring";
}

/** A two-cable example of the cabling key, for messages. */
const CABLES_EXAMPLE = "cables: [{ a: { node: spark-a, port: enp1s0f0np0 }, b: { node: spark-b, port: enp1s0f1np1 } }, ...]";

/** A cable end that names a known node and one of its interconnect interfaces. */
interface ResolvedEnd {
    node: number;
    iface: number;
}

/**
 * Every problem of a mesh or ring's cabling; for `pair` and `switch`, only that `cables` is absent.
 * Structural problems (unknown ends, a port used twice, a missing cable) are reported before the
 * shape of the whole (complete mesh, closed ring), which is judged only on a cabling whose every
 * end is known.
 */
export function checkCabling(interconnect: Interconnect, nodes: readonly CablingNode[]): ConfigIssue[] {
    const { topology, cables } = interconnect;
    if (!isSwitchless(topology)) {
        return cables === undefined
            ? []
            : [
                  {
                      path: "interconnect.cables",
                      message: `is only for topology mesh or ring; a ${topology} is cabled by subnets (each node's interconnect[i] in one subnet)`,
                      got: describeValue(cables),
                      example: "remove interconnect.cables, or set interconnect.topology: ring",
                  },
              ];
    }
    if (cables === undefined || cables.length === 0) {
        return [
            {
                path: "interconnect.cables",
                message: `is required for topology ${topology}: which port of which node goes to which port of which node`,
                got: describeValue(cables),
                example: CABLES_EXAMPLE,
            },
        ];
    }
    const issues: ConfigIssue[] = [];
    nodes.forEach((node, i) =>
        node.interconnect.forEach((iface, k) => {
            if (iface.name === undefined) {
                issues.push({
                    path: `nodes[${i}].interconnect[${k}].name`,
                    message: `is required when interconnect.topology is ${topology}: the cables name a node's ports by their interface names (detection cannot tell which port goes where)`,
                    got: "nothing",
                    example: "enp1s0f0np0",
                });
            }
        }),
    );
    const nodeIndex = new Map(nodes.map((node, i) => [node.name, i]));
    const known = nodes.map((n) => n.name).join(", ");
    const usedBy = new Map<string, string>();
    const resolved: ([ResolvedEnd, ResolvedEnd] | undefined)[] = cables.map((cable, c) => {
        const ends = (["a", "b"] as const).map((side): ResolvedEnd | undefined => {
            const end = cable[side];
            const path = `interconnect.cables[${c}].${side}`;
            const i = nodeIndex.get(end.node);
            if (i === undefined) {
                issues.push({
                    path: `${path}.node`,
                    message: `names no node of nodes (known: ${known})`,
                    got: describeValue(end.node),
                    example: nodes[0]?.name ?? "spark-a",
                });
                return undefined;
            }
            const k = nodes[i].interconnect.findIndex((iface) => iface.name === end.port);
            if (k < 0) {
                const ports = nodes[i].interconnect.flatMap((iface) => (iface.name !== undefined ? [iface.name] : [])).join(", ") || "none named";
                issues.push({
                    path: `${path}.port`,
                    message: `is not an interconnect interface of ${end.node} (its ports: ${ports}); add it to nodes[${i}].interconnect, or name one of those`,
                    got: describeValue(end.port),
                    example: nodes[i].interconnect[0]?.name ?? "enp1s0f0np0",
                });
                return undefined;
            }
            const key = `${i}/${k}`;
            const earlier = usedBy.get(key);
            if (earlier !== undefined) {
                issues.push({
                    path: `${path}.port`,
                    message: `${end.node}'s port ${end.port} already carries ${earlier}; a port takes one cable`,
                    got: describeValue(end.port),
                    example: `the other port of ${end.node}`,
                });
                return undefined;
            }
            usedBy.set(key, `interconnect.cables[${c}].${side}`);
            return { node: i, iface: k };
        });
        const [a, b] = ends;
        if (a === undefined || b === undefined) return undefined;
        if (a.node === b.node) {
            issues.push({
                path: `interconnect.cables[${c}]`,
                message: `connects ${nodes[a.node].name} to itself; a cable joins two nodes`,
                got: describeValue(cable),
                example: `{ a: { node: ${nodes[a.node].name}, ... }, b: { node: <another node>, ... } }`,
            });
            return undefined;
        }
        return [a, b];
    });
    // A second cable between the same two nodes: a mesh and a ring have one per neighbour pair.
    const pairs = new Map<string, number>();
    resolved.forEach((ends, c) => {
        if (!ends) return;
        const key = [ends[0].node, ends[1].node].sort((x, y) => x - y).join("-");
        const earlier = pairs.get(key);
        if (earlier !== undefined) {
            issues.push({
                path: `interconnect.cables[${c}]`,
                message: `is a second cable between ${nodes[ends[0].node].name} and ${nodes[ends[1].node].name} (interconnect.cables[${earlier}] is the first); a ${topology} has one cable per pair of neighbours`,
                got: describeValue(cables[c]),
                example: "remove it",
            });
        } else {
            pairs.set(key, c);
        }
    });
    // Every listed port carries a cable: an uncabled port would get an address and no peer.
    nodes.forEach((node, i) =>
        node.interconnect.forEach((iface, k) => {
            if (iface.name !== undefined && !usedBy.has(`${i}/${k}`)) {
                issues.push({
                    path: `nodes[${i}].interconnect[${k}]`,
                    message: `(${node.name} ${iface.name}) is on no cable of interconnect.cables; in a ${topology} every listed port carries one`,
                    got: describeValue(iface.name),
                    example: `a cable { a: { node: ${node.name}, port: ${iface.name} }, b: { ... } }, or remove the interface`,
                });
            }
        }),
    );
    issues.push(...checkCableSubnets(cables, resolved, nodes));
    if (issues.length === 0) {
        const links = resolved.filter((ends): ends is [ResolvedEnd, ResolvedEnd] => ends !== undefined).map(([a, b]) => [a.node, b.node] as const);
        issues.push(...(topology === "mesh" ? checkMeshComplete(links, nodes) : checkRingClosed(links, nodes)));
    }
    return issues;
}

/** Both ends of a cable lie in one subnet (same prefix), and no other cable's subnet overlaps it. */
function checkCableSubnets(
    cables: readonly ParsedCable[],
    resolved: readonly ([ResolvedEnd, ResolvedEnd] | undefined)[],
    nodes: readonly CablingNode[],
): ConfigIssue[] {
    const issues: ConfigIssue[] = [];
    const subnets: { cable: number; cidr: ReturnType<typeof parseCidr> }[] = [];
    resolved.forEach((ends, c) => {
        if (!ends) return;
        const [a, b] = ends.map((end) => parseCidr(nodes[end.node].interconnect[end.iface].address));
        const aAddress = nodes[ends[0].node].interconnect[ends[0].iface].address;
        const bAddress = nodes[ends[1].node].interconnect[ends[1].iface].address;
        if (a.prefixLength !== b.prefixLength || a.network !== b.network) {
            issues.push({
                path: `nodes[${ends[1].node}].interconnect[${ends[1].iface}].address`,
                message: `is not in ${formatSubnet(a)}, the subnet of the other end of interconnect.cables[${c}] (${cables[c].a.node} ${cables[c].a.port} ${aAddress}); both ends of a cable share one subnet`,
                got: describeValue(bAddress),
                example: "192.168.200.1/31 at one end and 192.168.200.0/31 at the other",
            });
            return;
        }
        const other = subnets.find((s) => subnetsOverlap(s.cidr, a));
        if (other !== undefined) {
            issues.push({
                path: `nodes[${ends[0].node}].interconnect[${ends[0].iface}].address`,
                message: `puts interconnect.cables[${c}] in ${formatSubnet(a)}, which overlaps ${formatSubnet(other.cidr)} of interconnect.cables[${other.cable}]; each cable needs a subnet of its own`,
                got: describeValue(aAddress),
                example: "one /31 (or /30) per cable: 192.168.200.0/31, 192.168.200.2/31, ...",
            });
            return;
        }
        subnets.push({ cable: c, cidr: a });
    });
    return issues;
}

/** A mesh cables every pair of its (three) nodes. */
function checkMeshComplete(links: readonly (readonly [number, number])[], nodes: readonly CablingNode[]): ConfigIssue[] {
    const has = new Set(links.map(([a, b]) => [a, b].sort((x, y) => x - y).join("-")));
    const issues: ConfigIssue[] = [];
    for (let i = 0; i < nodes.length; i++) {
        for (let j = i + 1; j < nodes.length; j++) {
            if (!has.has(`${i}-${j}`)) {
                issues.push({
                    path: "interconnect.cables",
                    message: `has no cable between ${nodes[i].name} and ${nodes[j].name}; a mesh cables every pair of its nodes`,
                    got: `${links.length} cables`,
                    example: `{ a: { node: ${nodes[i].name}, port: <a free port> }, b: { node: ${nodes[j].name}, port: <a free port> } }`,
                });
            }
        }
    }
    return issues;
}

/** A ring: every node has two cables, and following them from one node visits every node before it comes back. */
function checkRingClosed(links: readonly (readonly [number, number])[], nodes: readonly CablingNode[]): ConfigIssue[] {
    const neighbours = nodes.map((_, i) => links.flatMap(([a, b]) => (a === i ? [b] : b === i ? [a] : [])));
    const open = neighbours.flatMap((ns, i) => (ns.length === 2 ? [] : [`${nodes[i].name} has ${ns.length}`]));
    if (open.length > 0) {
        return [
            {
                path: "interconnect.cables",
                message: `do not close a ring: every node needs exactly two cables, one to each neighbour, but ${open.join(", ")}`,
                got: `${links.length} cables`,
                example: "spark-a - spark-b - spark-c - spark-d - spark-a: four cables, each node on two",
            },
        ];
    }
    const order = [0];
    let previous = -1;
    let current = 0;
    for (let step = 0; step < nodes.length; step++) {
        const next = neighbours[current][0] !== previous ? neighbours[current][0] : neighbours[current][1];
        if (next === 0) break;
        order.push(next);
        previous = current;
        current = next;
    }
    if (order.length === nodes.length) return [];
    const loop = [...order, 0].map((i) => nodes[i].name).join(" - ");
    const missing = nodes.flatMap((node, i) => (order.includes(i) ? [] : [node.name])).join(", ");
    return [
        {
            path: "interconnect.cables",
            message: `make more than one loop: ${loop} closes without ${missing}; a ring is one loop through every node`,
            got: `${links.length} cables`,
            example: "spark-a - spark-b - spark-c - spark-d - spark-a",
        },
    ];
}
