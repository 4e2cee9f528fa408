/**
 * Lab test of the link checks (components/render/netplan.ts) on the Spark pair: the rendered apply
 * and read-back scripts run on the nodes as `up` and `refresh` run them, over real veth links with
 * real ping, and the lab's ethtool stand-in reporting a Spark port's speed. A rail whose MTU was
 * lowered on one hop fails the full-size don't-fragment ping, naming both ends; a port that reports
 * 13000 Mb/s is refused, or warned about with `lowSpeed: warn`, with its value; the read-back
 * reports both. The optional RDMA bandwidth test (components/render/rdmaBandwidth.ts) runs on both
 * ends of both rails with the lab's perftest stand-in (lab/perftest_standin/ib_write_bw, installed
 * here on the two nodes only): each rail's figure is in the `link:` lines of both ends, and a rail
 * whose figure is low is refused with its value. Needs root and the lab; about 1.5 min warm.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import * as fs from "node:fs";
import * as path from "node:path";

import { NetplanSpec, linkCheck, netplanApplyScript, netplanReadScript } from "../../components/render/netplan";
import { hardwareProbe } from "../../components/render/probe";
import { RdmaBandwidthSpec, rdmaBandwidthProbe } from "../../components/render/rdmaBandwidth";
import { resolveRdmaRails } from "../../config/resolve";
import { lab, shQuote, ssh, sshRun, startScript, unitLog, unitState, waitFor, withExclusiveLab } from "./lab-harness";

const LINK_CHECK = { minSpeedMbps: 200000, lowSpeed: "refuse" as const };

function specOf(node: "spark-a" | "spark-b", withPeers: boolean, linkCheck: NetplanSpec["linkCheck"] = LINK_CHECK): NetplanSpec {
    const [own, peer, peerName] = node === "spark-a" ? [11, 12, "spark-b"] : [12, 11, "spark-a"];
    return {
        node,
        mtu: 9000,
        interfaces: [
            { name: "enp1s0f1np1", address: `192.168.100.${own}/24` },
            { name: "enP2p1s0f1np1", address: `192.168.101.${own}/24` },
        ],
        peers: withPeers
            ? [
                  { node: peerName, ip: `192.168.100.${peer}`, via: "enp1s0f1np1" },
                  { node: peerName, ip: `192.168.101.${peer}`, via: "enP2p1s0f1np1" },
              ]
            : [],
        linkCheck,
    };
}

/** Runs the apply script on the node with a short wait for peers (they are up already). */
function apply(spec: NetplanSpec): { status: number; stdout: string } {
    const r = sshRun(spec.node, netplanApplyScript(spec, 5), 180_000);
    return { status: r.status, stdout: r.stdout + r.stderr };
}

/** The read-back's lines about links (the netplan file itself is not under test here). */
function readLinks(spec: NetplanSpec): string[] {
    const out = ssh(spec.node, netplanReadScript(spec), 60_000);
    return out.split("\n").filter((l) => l !== "" && !l.startsWith("/etc/netplan/"));
}

describe("lab links: state, speed and MTU end to end per rail", { timeout: 30 * 60_000 }, () => {
    withExclusiveLab({
        tearDown: () => {
            // Only what this test changed, by exact name: the stand-in's speed file and spark-b's MTU.
            sshRun("spark-a", "rm -f /var/lib/lab-sim/ethtool/enP2p1s0f1np1.speed");
            for (const node of ["spark-a", "spark-b"]) sshRun(node, "rm -rf /usr/bin/ib_write_bw /var/lib/lab-sim/perftest");
        },
    });

    test("lab up; both nodes get their interconnect (no peers yet)", () => {
        lab(["up"]);
        for (const node of ["spark-b", "spark-a"] as const) {
            const r = apply(specOf(node, false));
            assert.equal(r.status, 0, r.stdout);
        }
    });

    test("healthy: every interface up at 200000 Mb/s, every rail carries 9000 bytes; the read-back is clean", () => {
        const r = apply(specOf("spark-a", true));
        assert.equal(r.status, 0, r.stdout);
        assert.deepEqual(linkCheck.parse(r.stdout).links, [
            "enp1s0f1np1 up, 200000 Mb/s",
            "enP2p1s0f1np1 up, 200000 Mb/s",
            "spark-a enp1s0f1np1 -> spark-b 192.168.100.12: MTU 9000 end to end",
            "spark-a enP2p1s0f1np1 -> spark-b 192.168.101.12: MTU 9000 end to end",
        ]);
        assert.deepEqual(readLinks(specOf("spark-a", true)), []);
    });

    test("spark-b's end of one rail lowered to MTU 1500: spark-a's check fails naming both ends; the read-back reports it", () => {
        ssh("spark-b", "ip link set dev enp1s0f1np1 mtu 1500");
        try {
            const r = apply(specOf("spark-a", true));
            assert.equal(r.status, 1, r.stdout);
            assert.ok(
                r.stdout.includes(
                    "spark-a enp1s0f1np1 -> spark-b 192.168.100.12: a 8972-byte don't-fragment ping gets no answer: the MTU is below 9000 on the way (spark-a enp1s0f1np1 has 9000; check spark-b's interface on 192.168.100.12)",
                ),
                r.stdout,
            );
            assert.ok(r.stdout.includes("spark-a enP2p1s0f1np1 -> spark-b 192.168.101.12: MTU 9000 end to end"), "the other rail is fine");
            assert.deepEqual(readLinks(specOf("spark-a", true)), [
                "enp1s0f1np1 -> spark-b 192.168.100.12: no answer to a 8972-byte don't-fragment ping (MTU 9000 end to end)",
            ]);
        } finally {
            ssh("spark-b", "ip link set dev enp1s0f1np1 mtu 9000");
        }
        assert.equal(apply(specOf("spark-a", true)).status, 0, "repaired on spark-b: the check passes again");
    });

    test("a port reporting 13000 Mb/s: refused with its value, or warned with lowSpeed: warn; the read-back reports it", () => {
        ssh("spark-a", "mkdir -p /var/lib/lab-sim/ethtool && echo 13000 > /var/lib/lab-sim/ethtool/enP2p1s0f1np1.speed");
        const refused = apply(specOf("spark-a", true));
        assert.equal(refused.status, 1, refused.stdout);
        assert.ok(refused.stdout.includes("spark-a enP2p1s0f1np1: speed 13000 Mb/s, want at least 200000 Mb/s"), refused.stdout);
        const warned = apply(specOf("spark-a", true, { minSpeedMbps: 200000, lowSpeed: "warn" }));
        assert.equal(warned.status, 0, warned.stdout);
        assert.deepEqual(linkCheck.parse(warned.stdout).warnings, [
            "spark-a enP2p1s0f1np1: speed 13000 Mb/s, want at least 200000 Mb/s (interconnect.linkCheck.lowSpeed is warn)",
        ]);
        assert.ok(linkCheck.parse(warned.stdout).links.includes("enP2p1s0f1np1 up, 13000 Mb/s"));
        assert.deepEqual(readLinks(specOf("spark-a", true)), ["enP2p1s0f1np1: speed 13000 Mb/s, want at least 200000 Mb/s"]);
    });

    /** The RDMA bandwidth step of NODE as ClusterNode renders it: rails from resolve, devices from the node's ibdev2netdev. */
    function rdmaSpecOf(node: "spark-a" | "spark-b", minGbps: number): RdmaBandwidthSpec {
        const nodes = (["spark-a", "spark-b"] as const).map((name) => ({
            name,
            retired: false,
            rdma: true,
            interconnect: specOf(name, false).interfaces.map((i) => {
                const ip = i.address.split("/")[0];
                return { address: i.address, ip, prefixLength: 24, subnet: ip.replace(/\.\d+$/, ".0/24") };
            }),
        }));
        const names = specOf(node, false).interfaces.map((i) => i.name);
        const devices = hardwareProbe.parse(ssh(node, "ibdev2netdev"));
        return {
            node,
            rails: (resolveRdmaRails(nodes, 18515).get(node) ?? []).map((r) => {
                const device = devices.find((d) => d.netdev === names[r.via])?.device;
                return { role: r.role, iface: names[r.via], ...(device !== undefined ? { device } : {}), peer: r.peer, peerIp: r.peerIp, port: r.port };
            }),
            durationSeconds: 2,
            waitSeconds: 30,
            minGbps,
            lowBandwidth: "refuse",
        };
    }

    /** Both ends side by side, as up runs them: spark-a's (the servers) as a transient unit, spark-b's over SSH. */
    async function rdmaBoth(minGbps: number): Promise<{ a: { status: number; out: string }; b: { status: number; out: string } }> {
        startScript("spark-a", "lab-links-rdma", rdmaBandwidthProbe.script(rdmaSpecOf("spark-a", minGbps)));
        const b = sshRun("spark-b", rdmaBandwidthProbe.script(rdmaSpecOf("spark-b", minGbps)), 180_000);
        await waitFor("spark-a's RDMA bandwidth step", 60_000, () => (unitState("spark-a", "lab-links-rdma").running ? undefined : true));
        return {
            a: { status: unitState("spark-a", "lab-links-rdma").status, out: unitLog("spark-a", "lab-links-rdma") },
            b: { status: b.status, out: b.stdout + b.stderr },
        };
    }

    test("RDMA bandwidth (perftest stand-in on both nodes): each rail's figure on both ends; a missing device fails as perftest does", async () => {
        const standin = fs.readFileSync(path.join(__dirname, "..", "..", "..", "lab", "perftest_standin", "ib_write_bw"), "utf8");
        for (const node of ["spark-a", "spark-b"]) {
            ssh(node, `printf '%s' ${shQuote(standin)} > /usr/bin/ib_write_bw && chmod 755 /usr/bin/ib_write_bw`);
        }
        const missing = sshRun("spark-a", "ib_write_bw -d rocep9s9f9 -D 2 --report_gbits");
        assert.equal(missing.status, 1);
        assert.equal(missing.stderr, "IB device rocep9s9f9 not found\n Unable to find the Infiniband/RoCE device\n");
        const { a, b } = await rdmaBoth(80);
        assert.equal(b.status, 0, b.out);
        assert.equal(a.status, 0, a.out);
        const rails = [
            ["enp1s0f1np1", "192.168.100"],
            ["enP2p1s0f1np1", "192.168.101"],
        ];
        assert.deepEqual(
            rdmaBandwidthProbe.parse(a.out).links,
            rails.map(([iface, net]) => `spark-a ${iface} <-> spark-b ${net}.12: RDMA write 92.57 Gb/s average (ib_write_bw, 2 s)`),
        );
        assert.deepEqual(
            rdmaBandwidthProbe.parse(b.out).links,
            rails.map(([iface, net]) => `spark-b ${iface} <-> spark-a ${net}.11: RDMA write 92.57 Gb/s average (ib_write_bw, 2 s)`),
        );
    });

    test("RDMA bandwidth: a rail writing 12.80 Gb/s is refused on both ends with its value", async () => {
        ssh("spark-b", "mkdir -p /var/lib/lab-sim/perftest && echo 12.80 > /var/lib/lab-sim/perftest/roceP2p1s0f1.gbps");
        const { a, b } = await rdmaBoth(80);
        for (const [node, r, other] of [
            ["spark-a", a, "spark-b 192.168.101.12"],
            ["spark-b", b, "spark-a 192.168.101.11"],
        ] as const) {
            assert.equal(r.status, 1, r.out);
            assert.ok(
                r.out.includes(
                    `${node} enP2p1s0f1np1 <-> ${other}: RDMA write 12.80 Gb/s, want at least 80 Gb/s (interconnect.linkCheck.rdmaBandwidth.minGbps)`,
                ),
                r.out,
            );
            assert.ok(r.out.includes(`RDMA bandwidth check failed on ${node}`), r.out);
            assert.ok(
                rdmaBandwidthProbe.parse(r.out).links.some((l) => l.includes("enp1s0f1np1") && l.endsWith("RDMA write 92.57 Gb/s average (ib_write_bw, 2 s)")),
                "the healthy rail keeps its figure",
            );
        }
    });
});
