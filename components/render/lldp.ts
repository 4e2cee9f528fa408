// The cabling check against LLDP: where lldpd runs on a node, its neighbours (as
// `lldpcli show neighbors -f json0` reports them) must be the cables of interconnect.cables,
// port for port; a mismatch is refused naming both ends. Pure: the probe (`lldpProbe`) prints the
// JSON and reads it, `cablingCheckScript` judges what it read. The cluster's plan
// (components/plan/clusterPlan.ts) runs the probe (`<node>-lldp-probe`) and the check
// (`<node>-cabling-check`) on every mesh or ring node, before anything changes on any node.
//
// Format: lldpcli's `json0` output, in which every value is a list, so one neighbour and several
// read alike (`-f json` turns a single value into an object and keys a chassis by its name).
// The test fixture test/unit/fixtures/lldpcli-show-neighbors.lldpd-1.0.16.json0 is real output of
// Debian 12's lldpd 1.0.16-1+deb12u1 over a veth link between two network namespaces.
import type { FabricLink } from "../../config/fabric";
import type { Probe } from "./facts";
import { bashScript, shellQuote } from "./host/shell";

/** What the LLDP probe prints where lldpd does not run (no lldpcli, or it cannot reach lldpd). */
export const LLDP_ABSENT = "lldp=absent";

/** The LLDP probe: lldpcli's neighbours as json0, or {@link LLDP_ABSENT}. Read only. */
function lldpProbeScript(): string {
    return bashScript([
        `if command -v lldpcli >/dev/null && out=$(lldpcli show neighbors -f json0 2>/dev/null); then printf '%s\n' "$out"; else echo ${LLDP_ABSENT}; fi`,
    ]);
}

/** One LLDP neighbour seen on a local interface. */
export interface LldpNeighbour {
    /** The local interface it was seen on. */
    iface: string;
    /** Its system name (the peer's hostname), when it sends one. */
    system?: string;
    /** Its port: the port id when lldpd sends the interface name as id, else the port description (lldpd's default on Linux: the interface name). */
    port?: string;
}

type Json0Value = { value?: string; type?: string }[] | undefined;

function first(values: Json0Value): { value?: string; type?: string } | undefined {
    return Array.isArray(values) ? values[0] : undefined;
}

/** Reads `lldpcli show neighbors -f json0`; throws on text that is not that format. */
function parseLldpNeighbours(json: string): LldpNeighbour[] {
    const doc = JSON.parse(json) as { lldp?: { interface?: unknown[] }[] };
    if (!Array.isArray(doc.lldp)) throw new Error("not lldpcli json0 output: no `lldp` list");
    return doc.lldp.flatMap((section) =>
        (section.interface ?? []).map((raw) => {
            const entry = raw as { name?: string; chassis?: { name?: Json0Value }[]; port?: { id?: Json0Value; descr?: Json0Value }[] };
            if (typeof entry.name !== "string") throw new Error("not lldpcli json0 output: an interface without a name");
            const chassis = entry.chassis?.[0];
            const port = entry.port?.[0];
            const id = first(port?.id);
            const portName = id?.type === "ifname" ? id.value : first(port?.descr)?.value;
            const system = first(chassis?.name)?.value;
            return { iface: entry.name, ...(system !== undefined ? { system } : {}), ...(portName !== undefined ? { port: portName } : {}) };
        }),
    );
}

/**
 * What the LLDP probe found: lldpd does not run (the probe printed {@link LLDP_ABSENT}, or nothing),
 * the neighbours it heard, or output that is not lldpcli's json0 (why not).
 */
export type LldpFact = { state: "absent" } | { state: "heard"; neighbours: LldpNeighbour[] } | { state: "unreadable"; error: string };

/** The LLDP probe (`<node>-lldp-probe`, mesh and ring nodes): its script and the reader of what it printed. */
export const lldpProbe: Probe<void, LldpFact> = {
    script: lldpProbeScript,
    parse(stdout) {
        const out = stdout.trim();
        if (out === LLDP_ABSENT || out === "") return { state: "absent" };
        try {
            return { state: "heard", neighbours: parseLldpNeighbours(out) };
        } catch (err) {
            return { state: "unreadable", error: (err as Error).message };
        }
    },
};

/** The outcome of the LLDP check on one node. */
export interface LldpVerdict {
    /** Mismatches that refuse the cabling, each naming both ends as configured and as seen. */
    mismatches: string[];
    /** What could not be checked (no neighbour heard on a port, a neighbour that is no node of the cluster). */
    unchecked: string[];
}

/**
 * Compares a node's cables with its LLDP neighbours. A neighbour counts as a node of the cluster
 * when its system name is one of `nodeNames` (lldpd sends the hostname: a node's `name` must be its
 * hostname for the check to identify it); one that is not is reported as unchecked, not refused.
 */
export function checkCablingAgainstLldp(
    node: string,
    links: readonly Pick<FabricLink, "cable" | "iface" | "peer" | "peerIface">[],
    neighbours: readonly LldpNeighbour[],
    nodeNames: readonly string[],
): LldpVerdict {
    const verdict: LldpVerdict = { mismatches: [], unchecked: [] };
    for (const link of links) {
        const heard = neighbours.filter((n) => n.iface === link.iface);
        const expected = `${link.peer} ${link.peerIface}`;
        if (heard.length === 0) {
            verdict.unchecked.push(`${node} ${link.iface}: no LLDP neighbour heard (is lldpd running on ${link.peer}?)`);
            continue;
        }
        const known = heard.filter((n) => n.system !== undefined && nodeNames.includes(n.system));
        if (known.length === 0) {
            verdict.unchecked.push(
                `${node} ${link.iface}: LLDP neighbour ${heard.map((n) => n.system ?? "without a system name").join(", ")} is no node of the cluster by name`,
            );
            continue;
        }
        const right = known.some((n) => n.system === link.peer && n.port === link.peerIface);
        if (!right) {
            const seen = known.map((n) => `${n.system} ${n.port ?? "(port unknown)"}`).join(", ");
            verdict.mismatches.push(
                `${node} ${link.iface} is cabled to ${seen} (LLDP), but interconnect.cables[${link.cable}] says ${expected}: swap the cables, or correct interconnect.cables`,
            );
        }
    }
    return verdict;
}

/**
 * The cabling check of one node, from the LLDP probe's fact: fails, naming both ends of each
 * mismatch, when LLDP sees a port cabled otherwise than interconnect.cables says; prints what it
 * checked, or why it could not (lldpd absent, a port that heard nobody).
 */
export function cablingCheckScript(
    node: string,
    links: readonly Pick<FabricLink, "cable" | "iface" | "peer" | "peerIface">[],
    lldp: LldpFact,
    nodeNames: readonly string[],
): string {
    switch (lldp.state) {
        case "absent":
            return bashScript([`echo ${shellQuote(`cabling of ${node}: not checked against LLDP (lldpd does not run on ${node})`)}`]);
        case "unreadable": {
            const why = `${node}: cannot read \`lldpcli show neighbors -f json0\`: ${lldp.error}`;
            return bashScript([`echo ${shellQuote(why)} >&2`, "exit 1"]);
        }
        case "heard": {
            const verdict = checkCablingAgainstLldp(node, links, lldp.neighbours, nodeNames);
            if (verdict.mismatches.length > 0) {
                return bashScript([...verdict.mismatches.map((m) => `echo ${shellQuote(m)} >&2`), "exit 1"]);
            }
            const checked = links.length - verdict.unchecked.length;
            return bashScript([
                `echo ${shellQuote(`cabling of ${node}: ${checked} of ${links.length} ports as interconnect.cables says (LLDP)`)}`,
                ...verdict.unchecked.map((u) => `echo ${shellQuote(u)}`),
            ]);
        }
        default: {
            const never: never = lldp;
            throw new Error(`internal: unknown LLDP fact ${JSON.stringify(never)}`);
        }
    }
}
