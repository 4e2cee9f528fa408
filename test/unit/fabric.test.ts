/**
 * Switchless clusters (interconnect.topology mesh | ring, issue 23): the cabling rules (table),
 * the addressing, routes and forwarding decided from the cabling (config/fabric.ts), and what the
 * renderers make of them (components/render/fabric.ts), pinned by snapshots `fabric.*.snap`.
 */
import { describe, it, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as yaml from "js-yaml";
import { ConfigError, checkCabling, checkTopology, parseConfig, type ConfigIssue, type ParsedCable } from "../../config";
import { planFabric } from "../../config/fabric";
import { dockerTransitLines, fabricNcclSelection, fabricNetplanSpec, forwardingPlan, renderForwardingSysctl } from "../../components/render/fabric";
import { renderFirewallRules } from "../../components/render/firewall";
import { LLDP_ABSENT, type LldpNeighbour, cablingCheckScript, checkCablingAgainstLldp, lldpProbe } from "../../components/render/lldp";
import { renderNcclConf } from "../../components/render/nccl";
import { netplanApplyScript, renderNetplan } from "../../components/render/netplan";
import { matchSnapshot, unusedSnapshots } from "../support/snapshot";

const P0 = "enp1s0f0np0";
const P1 = "enp1s0f1np1";
const SSH_KEY = ["-----BEGIN OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAA", "-----END OPENSSH PRIVATE KEY-----"].join("\n");

interface FabricNodeInput {
    name: string;
    interconnect: { name?: string; address: string }[];
}

/** `count` nodes spark-a.. with ports P0 and P1; cable k joins node k's P0 to node k+1's P1 in 192.168.200.(2k)/31. */
function ringNodes(count: number): { nodes: FabricNodeInput[]; cables: ParsedCable[] } {
    const names = Array.from({ length: count }, (_, i) => `spark-${String.fromCharCode(97 + i)}`);
    const nodes = names.map((name, i) => ({
        name,
        interconnect: [
            { name: P0, address: `192.168.200.${2 * i}/31` },
            { name: P1, address: `192.168.200.${2 * ((i + count - 1) % count) + 1}/31` },
        ],
    }));
    const cables = names.map((name, i) => ({ a: { node: name, port: P0 }, b: { node: names[(i + 1) % count], port: P1 } }));
    return { nodes, cables };
}

/** Stack config values for a mesh or ring of the given nodes and cables. */
function stackValues(topology: "mesh" | "ring", nodes: FabricNodeInput[], cables: unknown): Record<string, unknown> {
    return {
        nodes: nodes.map((node, i) => ({ ...node, kind: "spark", head: i === 0, ssh: { host: `10.0.0.${11 + i}` } })),
        interconnect: { topology, cables },
        model: { source: "Qwen/Qwen2.5-7B-Instruct" },
        apiKey: "fabric-test-api-key-0123456789",
        sshPrivateKey: SSH_KEY,
    };
}

function configIssues(values: Record<string, unknown>): ConfigIssue[] {
    try {
        parseConfig({ values, secretKeys: new Set(["apiKey", "sshPrivateKey"]) });
    } catch (err) {
        assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
        return err.issues;
    }
    return assert.fail("expected parseConfig to refuse the config");
}

describe("parseConfig: mesh and ring", () => {
    it("a right mesh-3 and ring-4 parse, each node with its links, routes and forwarding decided once", () => {
        const ring = ringNodes(4);
        const config = parseConfig({ values: stackValues("ring", ring.nodes, ring.cables), secretKeys: new Set(["apiKey", "sshPrivateKey"]) });
        assert.deepEqual(
            config.nodes.map((n) => `${n.name} ${n.fabric?.forwardingOn.join(",")} ${n.firewall.transitInterfaces?.join(",") ?? "-"}`),
            [`spark-a ${P0},${P1} ${P0},${P1}`, `spark-b ${P1},${P0} ${P1},${P0}`, "spark-c  -", "spark-d  -"],
        );
        assert.deepEqual(config.nodes[0].fabric, planFabric(ring.cables, ring.nodes)[0]);
        const mesh = ringNodes(3);
        const meshConfig = parseConfig({ values: stackValues("mesh", mesh.nodes, mesh.cables), secretKeys: new Set(["apiKey", "sshPrivateKey"]) });
        assert.deepEqual(
            meshConfig.nodes.map((n) => n.fabric?.forwardingOn.length),
            [0, 0, 0],
        );
        assert.ok(meshConfig.nodes.every((n) => n.firewall.transitInterfaces === undefined));
    });

    it("a pair or a switch has no fabric and no transit", () => {
        const values = stackValues("ring", ringNodes(2).nodes, undefined);
        const config = parseConfig({
            values: {
                ...values,
                interconnect: { topology: "pair" },
                nodes: (values.nodes as { interconnect: unknown[] }[]).map((n, i) => ({ ...n, interconnect: [{ address: `192.168.100.${11 + i}/24` }] })),
            },
            secretKeys: new Set(["apiKey", "sshPrivateKey"]),
        });
        assert.ok(config.nodes.every((n) => !("fabric" in n) && !("transitInterfaces" in n.firewall)));
    });

    it("a swapped cable is refused before the gate's verdict matters, naming both ends", () => {
        const { nodes, cables } = ringNodes(4);
        const swapped = structuredClone(cables);
        swapped[0].b = { node: "spark-c", port: P1 };
        swapped[1].b = { node: "spark-b", port: P1 };
        const issues = configIssues(stackValues("ring", nodes, swapped));
        assert.ok(
            issues.some(
                (i) =>
                    i.path === "nodes[2].interconnect[1].address" && /interconnect\.cables\[0\] \(spark-a enp1s0f0np0 192\.168\.200\.0\/31\)/.test(i.message),
            ),
            JSON.stringify(issues),
        );
    });

    it("cables on a pair are refused", () => {
        const issues = checkCabling({ topology: "pair", cables: [] }, []);
        assert.deepEqual(
            issues.map((i) => i.path),
            ["interconnect.cables"],
        );
    });
});

interface CablingCase {
    name: string;
    topology: "mesh" | "ring";
    count: number;
    edit: (f: { nodes: FabricNodeInput[]; cables: ParsedCable[] }) => void;
    paths: string[];
    message: RegExp;
}

const CABLING_CASES: readonly CablingCase[] = [
    {
        name: "no cables",
        topology: "ring",
        count: 4,
        edit: (f) => f.cables.splice(0),
        paths: ["interconnect.cables"],
        message: /is required for topology ring/,
    },
    {
        name: "unknown node",
        topology: "ring",
        count: 4,
        edit: (f) => (f.cables[1].b.node = "spark-z"),
        paths: ["interconnect.cables[1].b.node", "nodes[2].interconnect[1]"],
        message: /names no node of nodes \(known: spark-a, spark-b, spark-c, spark-d\)/,
    },
    {
        name: "unknown port",
        topology: "ring",
        count: 4,
        edit: (f) => (f.cables[1].b.port = "enP2p1s0f1np1"),
        paths: ["interconnect.cables[1].b.port", "nodes[2].interconnect[1]"],
        message: /is not an interconnect interface of spark-c \(its ports: enp1s0f0np0, enp1s0f1np1\)/,
    },
    {
        name: "a port used twice",
        topology: "ring",
        count: 4,
        edit: (f) => (f.cables[1].a.port = P1),
        paths: ["interconnect.cables[1].a.port", "nodes[1].interconnect[0]"],
        message: /spark-b's port enp1s0f1np1 already carries interconnect\.cables\[0\]\.b; a port takes one cable/,
    },
    {
        name: "an unnamed port",
        topology: "ring",
        count: 4,
        edit: (f) => delete f.nodes[3].interconnect[0].name,
        paths: ["nodes[3].interconnect[0].name", "interconnect.cables[3].a.port"],
        message: /is required when interconnect\.topology is ring/,
    },
    {
        name: "a cable to itself",
        topology: "ring",
        count: 4,
        edit: (f) => (f.cables[0].b = { node: "spark-a", port: P1 }),
        paths: ["interconnect.cables[3].b.port", "interconnect.cables[0]", "nodes[1].interconnect[1]"],
        message: /connects spark-a to itself/,
    },
    {
        name: "ends in different subnets",
        topology: "ring",
        count: 4,
        edit: (f) => (f.nodes[1].interconnect[1].address = "192.168.201.1/31"),
        paths: ["nodes[1].interconnect[1].address"],
        message: /is not in 192\.168\.200\.0\/31, the subnet of the other end of interconnect\.cables\[0\] \(spark-a enp1s0f0np0 192\.168\.200\.0\/31\)/,
    },
    {
        name: "two cables in one subnet",
        topology: "ring",
        count: 4,
        edit: (f) => {
            f.nodes[1].interconnect[0].address = "192.168.200.0/30";
            f.nodes[2].interconnect[1].address = "192.168.200.3/30";
        },
        paths: ["nodes[1].interconnect[0].address"],
        message: /overlaps 192\.168\.200\.0\/31 of interconnect\.cables\[0\]; each cable needs a subnet of its own/,
    },
    {
        name: "ring not closed (an open chain)",
        topology: "ring",
        count: 4,
        edit: (f) => {
            f.cables.pop();
            f.nodes[3].interconnect.splice(0, 1);
            f.nodes[0].interconnect.splice(1, 1);
        },
        paths: ["interconnect.cables"],
        message: /do not close a ring: every node needs exactly two cables, one to each neighbour, but spark-a has 1, spark-d has 1/,
    },
    {
        name: "two loops instead of one ring",
        topology: "ring",
        count: 6,
        edit: (f) => {
            // a-b-c-a and d-e-f-d: every node has two cables, but the ring is split.
            f.cables[2] = { a: { node: "spark-c", port: P0 }, b: { node: "spark-a", port: P1 } };
            f.cables[5] = { a: { node: "spark-f", port: P0 }, b: { node: "spark-d", port: P1 } };
            f.nodes[0].interconnect[1].address = "192.168.200.5/31";
            f.nodes[3].interconnect[1].address = "192.168.200.11/31";
        },
        paths: ["interconnect.cables"],
        message: /make more than one loop: spark-a - spark-b - spark-c - spark-a closes without spark-d, spark-e, spark-f/,
    },
    {
        name: "mesh missing a cable",
        topology: "mesh",
        count: 3,
        edit: (f) => {
            f.cables.pop();
            f.nodes[2].interconnect.splice(0, 1);
            f.nodes[0].interconnect.splice(1, 1);
        },
        paths: ["interconnect.cables"],
        message: /has no cable between spark-a and spark-c; a mesh cables every pair of its nodes/,
    },
    {
        name: "two cables between the same nodes (two pairs instead of a ring)",
        topology: "ring",
        count: 4,
        edit: (f) => {
            f.cables[1] = { a: { node: "spark-b", port: P0 }, b: { node: "spark-a", port: P1 } };
            f.cables[3] = { a: { node: "spark-d", port: P0 }, b: { node: "spark-c", port: P1 } };
            f.nodes[0].interconnect[1].address = "192.168.200.3/31";
            f.nodes[2].interconnect[1].address = "192.168.200.7/31";
        },
        paths: ["interconnect.cables[1]", "interconnect.cables[3]"],
        message: /is a second cable between spark-b and spark-a \(interconnect\.cables\[0\] is the first\)/,
    },
];

describe("checkCabling: one issue per wrong cabling, naming the key", () => {
    for (const c of CABLING_CASES) {
        it(c.name, () => {
            const fixture = ringNodes(c.count);
            c.edit(fixture);
            const issues = checkCabling({ topology: c.topology, cables: fixture.cables }, fixture.nodes);
            assert.deepEqual(issues.map((i) => i.path).sort(), [...c.paths].sort(), issues.map((i) => `${i.path}: ${i.message}`).join("\n"));
            assert.ok(
                issues.some((i) => c.message.test(i.message)),
                issues.map((i) => i.message).join("\n"),
            );
        });
    }
    it("right cablings have no issue (mesh-3, ring-4, ring-5)", () => {
        for (const [topology, count] of [
            ["mesh", 3],
            ["ring", 4],
            ["ring", 5],
        ] as const) {
            const { nodes, cables } = ringNodes(count);
            assert.deepEqual(checkCabling({ topology, cables }, nodes), []);
        }
    });
    it("node counts: mesh is three, ring four or more", () => {
        assert.match(checkTopology("mesh", 4)[0].message, /is mesh \(three nodes/);
        assert.equal(checkTopology("mesh", 4)[0].example, "ring");
        assert.match(checkTopology("ring", 3)[0].message, /needs at least 4 nodes/);
        assert.equal(checkTopology("ring", 3)[0].example, "mesh");
        assert.deepEqual(checkTopology("mesh", 3), []);
        assert.deepEqual(checkTopology("ring", 8), []);
    });
});

describe("planFabric", () => {
    it("ring-4: the far node through the lower neighbour, symmetric paths, forwarding on a and b only", () => {
        const { nodes, cables } = ringNodes(4);
        const plan = planFabric(cables, nodes);
        const routes = Object.fromEntries(plan.map((n) => [n.node, n.routes.map((r) => `${r.to} via ${r.via} dev ${r.dev} (${r.node} through ${r.hop})`)]));
        assert.deepEqual(routes, {
            "spark-a": [
                "192.168.200.2/32 via 192.168.200.1 dev enp1s0f0np0 (spark-b through spark-b)",
                "192.168.200.3/32 via 192.168.200.1 dev enp1s0f0np0 (spark-c through spark-b)",
                "192.168.200.4/32 via 192.168.200.1 dev enp1s0f0np0 (spark-c through spark-b)",
                "192.168.200.5/32 via 192.168.200.6 dev enp1s0f1np1 (spark-d through spark-d)",
            ],
            "spark-b": [
                "192.168.200.7/32 via 192.168.200.0 dev enp1s0f1np1 (spark-a through spark-a)",
                "192.168.200.4/32 via 192.168.200.3 dev enp1s0f0np0 (spark-c through spark-c)",
                "192.168.200.5/32 via 192.168.200.0 dev enp1s0f1np1 (spark-d through spark-a)",
                "192.168.200.6/32 via 192.168.200.0 dev enp1s0f1np1 (spark-d through spark-a)",
            ],
            "spark-c": [
                "192.168.200.0/32 via 192.168.200.2 dev enp1s0f1np1 (spark-a through spark-b)",
                "192.168.200.7/32 via 192.168.200.2 dev enp1s0f1np1 (spark-a through spark-b)",
                "192.168.200.1/32 via 192.168.200.2 dev enp1s0f1np1 (spark-b through spark-b)",
                "192.168.200.6/32 via 192.168.200.5 dev enp1s0f0np0 (spark-d through spark-d)",
            ],
            "spark-d": [
                "192.168.200.0/32 via 192.168.200.7 dev enp1s0f0np0 (spark-a through spark-a)",
                "192.168.200.1/32 via 192.168.200.7 dev enp1s0f0np0 (spark-b through spark-a)",
                "192.168.200.2/32 via 192.168.200.7 dev enp1s0f0np0 (spark-b through spark-a)",
                "192.168.200.3/32 via 192.168.200.4 dev enp1s0f1np1 (spark-c through spark-c)",
            ],
        });
        assert.deepEqual(
            plan.map((n) => n.forwardingOn),
            [[P0, P1], [P1, P0], [], []],
        );
    });
    it("mesh-3: every node a neighbour, routes only to their far addresses, no forwarding", () => {
        const { nodes, cables } = ringNodes(3);
        const plan = planFabric(cables, nodes);
        for (const node of plan) {
            assert.deepEqual(node.forwardingOn, []);
            assert.equal(node.routes.length, 2);
            assert.ok(node.routes.every((r) => r.hop === r.node));
        }
    });
    it("ring-6: the opposite node through the lower-indexed side, three hops", () => {
        const { nodes, cables } = ringNodes(6);
        const plan = planFabric(cables, nodes);
        const toD = plan[0].routes.filter((r) => r.node === "spark-d");
        assert.deepEqual([...new Set(toD.map((r) => r.hop))], ["spark-b"]);
        // a-b-c-d: b and c forward, and so does every node on some other pair's path.
        assert.ok(plan[1].forwardingOn.length === 2 && plan[2].forwardingOn.length === 2);
    });
});

describe("fabric renderers", () => {
    const { nodes, cables } = ringNodes(4);
    const plan = planFabric(cables, nodes);
    const members = plan.flatMap((n) => n.links.map((l) => l.address.split("/")[0]));

    it("netplan of a ring node: MTU on both ports, host routes per port, read back by YAML", () => {
        const spec = fabricNetplanSpec(plan[0], 9000, { lowSpeed: "refuse" });
        const text = renderNetplan(spec);
        matchSnapshot("fabric.netplan.ring4-spark-a.yaml", text);
        const doc = yaml.load(text) as { network: { ethernets: Record<string, { mtu: number; routes?: { to: string; via: string }[] }> } };
        assert.deepEqual(
            Object.values(doc.network.ethernets).map((e) => e.mtu),
            [9000, 9000],
        );
        assert.deepEqual(
            doc.network.ethernets[P0].routes?.map((r) => r.to),
            ["192.168.200.2/32", "192.168.200.3/32", "192.168.200.4/32"],
        );
        // The neighbours are the peers the apply pings at full size, don't fragment; the addresses
        // behind them answer only after the forwarding and firewall steps.
        assert.deepEqual(
            spec.peers.map((p) => `${p.node} ${p.ip} ${p.via}`),
            ["spark-b 192.168.200.1 enp1s0f0np0", "spark-d 192.168.200.6 enp1s0f1np1"],
        );
        assert.match(netplanApplyScript(spec), /ping -M do -s 8972 -c 1 -W 1 -I enp1s0f0np0 192\.168\.200\.1/);
    });

    it("forwarding: a sysctl.d file and a step only on the nodes that forward", () => {
        assert.equal(renderForwardingSysctl(plan[2]), undefined);
        matchSnapshot("fabric.forwarding.ring4-spark-a.conf", renderForwardingSysctl(plan[0]) ?? "");
        const step = forwardingPlan(plan[0], members);
        matchSnapshot("fabric.forwarding-apply.ring4-spark-a.sh", step.create);
        matchSnapshot("fabric.forwarding-delete.ring4-spark-a.sh", step.delete);
        matchSnapshot("fabric.forwarding-read.ring4-spark-a.sh", step.read);
        // The DOCKER-USER rules go with the forwarding, added and removed by its step.
        assert.match(step.create, /iptables -C DOCKER-USER -i enp1s0f0np0 -o enp1s0f1np1 .* \|\| iptables -I DOCKER-USER /);
        assert.match(step.delete, /then iptables -D DOCKER-USER -i enp1s0f0np0 -o enp1s0f1np1 /);
        // A node that forwards nothing only removes what an earlier layout left: no rule of its own.
        matchSnapshot("fabric.forwarding-delete.sh", forwardingPlan(plan[2], members).delete);
        assert.doesNotMatch(forwardingPlan(plan[2], members).delete, /DOCKER-USER/);
    });

    it("firewall: members transit between the interconnect ports, nobody else does", () => {
        const rules = renderFirewallRules({ node: "spark-a", members, openTcp: [22], openUdp: [], transitInterfaces: plan[0].forwardingOn });
        matchSnapshot("fabric.firewall.ring4-spark-a.nft", rules);
        assert.doesNotMatch(renderFirewallRules({ node: "spark-c", members, openTcp: [22], openUdp: [] }), /chain forward/);
    });

    it("nft itself loads the rules with the forward chain, in a network namespace of its own", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nft-fabric-"));
        try {
            const file = path.join(dir, "rules.nft");
            fs.writeFileSync(file, renderFirewallRules({ node: "spark-a", members, openTcp: [22], openUdp: [], transitInterfaces: plan[0].forwardingOn }));
            const r = spawnSync("unshare", ["--net", "bash", "-c", `set -euo pipefail; nft -f ${file}; nft list chain inet spark_cluster forward`], {
                encoding: "utf8",
                timeout: 20_000,
            });
            assert.equal(r.status, 0, r.stderr);
            assert.match(
                r.stdout,
                /iifname \{ "enp1s0f0np0", "enp1s0f1np1" \} oifname \{ "enp1s0f0np0", "enp1s0f1np1" \} ip saddr @members ip daddr @members accept/,
            );
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("Docker's FORWARD DROP: DOCKER-USER accepts members' transit, added once and removed", () => {
        const add = dockerTransitLines(plan[0].forwardingOn, members, "add");
        matchSnapshot("fabric.docker-user.ring4-spark-a.sh", [...add, ...dockerTransitLines(plan[0].forwardingOn, members, "remove")].join("\n") + "\n");
        assert.equal(add.filter((l) => l.includes("iptables -I DOCKER-USER")).length, 2);
        // A node that forwards nothing gets no lines (found by the lab test: an empty `then` is a syntax error).
        assert.deepEqual(dockerTransitLines(plan[2].forwardingOn, members, "add"), []);
    });

    it("NCCL: both ports by exact name, RoCE v2 with an IPv4 GID, no GID index", () => {
        const selection = fabricNcclSelection(nodes[0].interconnect.map((i) => i.name ?? ""));
        const conf = renderNcclConf({
            transport: "roce",
            ibHca: ["rocep1s0f0", "rocep1s0f1"],
            heterogeneous: false,
            ibTrafficClass: 106,
            debug: "WARN",
            overrides: {},
            ...selection,
        });
        matchSnapshot("fabric.nccl.ring4-spark-a.conf", conf);
        assert.match(conf, /^NCCL_SOCKET_IFNAME==enp1s0f0np0,enp1s0f1np1$/m);
        assert.match(conf, /^NCCL_IB_ADDR_FAMILY=AF_INET$/m);
        assert.doesNotMatch(conf, /NCCL_IB_GID_INDEX/);
    });
});

test("no fabric snapshot is left unused", () => {
    assert.deepEqual(unusedSnapshots("fabric."), []);
});

describe("the cabling against LLDP (lldpcli show neighbors -f json0)", () => {
    const real = fs.readFileSync(path.join(__dirname, "..", "..", "..", "test", "unit", "fixtures", "lldpcli-show-neighbors.lldpd-1.0.16.json0"), "utf8");
    const names = ["spark-a", "spark-b", "spark-c", "spark-d"];
    /** The neighbours the LLDP probe read from `output` (its fixtures: test/unit/fixtures/probes/lldp/). */
    const heard = (output: string): LldpNeighbour[] => {
        const fact = lldpProbe.parse(output);
        assert.equal(fact.state, "heard");
        return fact.state === "heard" ? fact.neighbours : [];
    };

    it("the configured cable matches: nothing refused", () => {
        const { nodes, cables } = ringNodes(4);
        const a = planFabric(cables, nodes)[0];
        const verdict = checkCablingAgainstLldp("spark-a", a.links, heard(real), names);
        assert.deepEqual(verdict.mismatches, []);
        // spark-a's other port heard nobody in this capture: reported, not refused.
        assert.deepEqual(verdict.unchecked, ["spark-a enp1s0f1np1: no LLDP neighbour heard (is lldpd running on spark-d?)"]);
    });

    it("a swapped cable is refused, naming both ends as configured and as seen", () => {
        const { nodes, cables } = ringNodes(4);
        const a = planFabric(cables, nodes)[0];
        const seen = [
            { iface: P0, system: "spark-d", port: P1 },
            { iface: P1, system: "spark-b", port: P0 },
        ];
        assert.deepEqual(checkCablingAgainstLldp("spark-a", a.links, seen, names).mismatches, [
            "spark-a enp1s0f0np0 is cabled to spark-d enp1s0f1np1 (LLDP), but interconnect.cables[0] says spark-b enp1s0f1np1: swap the cables, or correct interconnect.cables",
            "spark-a enp1s0f1np1 is cabled to spark-b enp1s0f0np0 (LLDP), but interconnect.cables[3] says spark-d enp1s0f0np0: swap the cables, or correct interconnect.cables",
        ]);
    });

    it("the cabling check step: refuses a mismatch naming both ends, passes a match, says when lldpd does not run", () => {
        const { nodes, cables } = ringNodes(4);
        const a = planFabric(cables, nodes)[0];
        const runScript = (script: string) => spawnSync("bash", ["-c", script], { encoding: "utf8", timeout: 10_000 });
        // What lldpcli prints on a miscabled spark-a (lab ring-4-miscabled: its port 0 goes to spark-d's port 1).
        const miscabled = JSON.stringify({
            lldp: [
                {
                    interface: [
                        { name: P0, chassis: [{ name: [{ value: "spark-d" }] }], port: [{ id: [{ type: "ifname", value: P1 }] }] },
                        { name: P1, chassis: [{ name: [{ value: "spark-d" }] }], port: [{ id: [{ type: "ifname", value: P0 }] }] },
                    ],
                },
            ],
        });
        const refused = runScript(cablingCheckScript("spark-a", a.links, lldpProbe.parse(miscabled), names));
        assert.equal(refused.status, 1);
        assert.match(
            refused.stderr,
            /^spark-a enp1s0f0np0 is cabled to spark-d enp1s0f1np1 \(LLDP\), but interconnect\.cables\[0\] says spark-b enp1s0f1np1: /m,
        );
        const matched = runScript(cablingCheckScript("spark-a", a.links, lldpProbe.parse(real), names));
        assert.equal(matched.status, 0, matched.stderr);
        assert.equal(
            matched.stdout,
            "cabling of spark-a: 1 of 2 ports as interconnect.cables says (LLDP)\nspark-a enp1s0f1np1: no LLDP neighbour heard (is lldpd running on spark-d?)\n",
        );
        const absent = runScript(cablingCheckScript("spark-a", a.links, lldpProbe.parse(`${LLDP_ABSENT}\n`), names));
        assert.deepEqual([absent.status, absent.stdout], [0, "cabling of spark-a: not checked against LLDP (lldpd does not run on spark-a)\n"]);
        const garbled = runScript(cablingCheckScript("spark-a", a.links, lldpProbe.parse("lldpcli: unknown format"), names));
        assert.equal(garbled.status, 1);
        assert.match(garbled.stderr, /^spark-a: cannot read `lldpcli show neighbors -f json0`: /);
        // A system name the neighbour sends reaches the script quoted, never run.
        const hostile = JSON.stringify({
            lldp: [{ interface: [{ name: P0, chassis: [{ name: [{ value: "spark-d" }] }], port: [{ descr: [{ value: "$(touch /tmp/x)'" }] }] }] }],
        });
        assert.match(
            runScript(cablingCheckScript("spark-a", a.links, lldpProbe.parse(hostile), names)).stderr,
            /cabled to spark-d \$\(touch \/tmp\/x\)' \(LLDP\)/,
        );
        // The probe prints lldpcli's json0, or the absent line where lldpcli is missing or lldpd does not answer.
        assert.match(lldpProbe.script(), /lldpcli show neighbors -f json0/);
        assert.equal(runScript(`PATH=/nonexistent; ${lldpProbe.script()}`).stdout, `${LLDP_ABSENT}\n`);
    });

    it("a neighbour that is no node of the cluster is reported, not refused", () => {
        const { nodes, cables } = ringNodes(4);
        const a = planFabric(cables, nodes)[0];
        const verdict = checkCablingAgainstLldp("spark-a", a.links.slice(0, 1), [{ iface: P0, system: "switch-7", port: "swp1" }], names);
        assert.deepEqual(verdict, { mismatches: [], unchecked: ["spark-a enp1s0f0np0: LLDP neighbour switch-7 is no node of the cluster by name"] });
    });
});
