/**
 * Lab test of the link checks (components/render/netplan.ts) on the Spark pair: the rendered apply
 * and read-back scripts run on the nodes as `up` and `refresh` run them, over real veth links with
 * real ping, and the lab's ethtool stand-in reporting a Spark port's speed. A rail whose MTU was
 * lowered on one hop fails the full-size don't-fragment ping, naming both ends; a port that reports
 * 13000 Mb/s is refused, or warned about with `lowSpeed: warn`, with its value; the read-back
 * reports both. Needs root and the lab; about 1 min warm.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { NetplanSpec, linkResults, netplanApplyScript, netplanReadScript } from "../../components/render/netplan";
import { lab, ssh, sshRun, withExclusiveLab } from "./lab-harness";

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
        assert.deepEqual(linkResults(r.stdout).links, [
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
        assert.deepEqual(linkResults(warned.stdout).warnings, [
            "spark-a enP2p1s0f1np1: speed 13000 Mb/s, want at least 200000 Mb/s (interconnect.linkCheck.lowSpeed is warn)",
        ]);
        assert.ok(linkResults(warned.stdout).links.includes("enP2p1s0f1np1 up, 13000 Mb/s"));
        assert.deepEqual(readLinks(specOf("spark-a", true)), ["enP2p1s0f1np1: speed 13000 Mb/s, want at least 200000 Mb/s"]);
    });
});
