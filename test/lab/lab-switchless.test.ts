/**
 * Lab, ring-4 (issue 23): four Sparks cabled in a ring by veth pairs (port 0 of each to port 1 of
 * the next). The product's switchless renderers (config/fabric.ts, components/render/fabric.ts)
 * are applied as rendered, over SSH, to the real netplan/networkd, kernel and nftables of the
 * nodes: addresses and host routes, forwarding where it is needed, the transit firewall, and the
 * DOCKER-USER rules under Docker's FORWARD DROP policy (set here as Docker sets it: the lab's
 * dockerd runs with iptables off). `pulumi up` is not run: mesh and ring are still refused by the
 * config gate (checkSwitchlessSupported) until their host steps are wired.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, test } from "node:test";

import { planFabric, type FabricNode } from "../../config/fabric";
import type { ParsedCable } from "../../config";
import { dockerTransitLines, fabricNetplanSpec, forwardingPlan } from "../../components/render/fabric";
import { renderFirewallRules } from "../../components/render/firewall";
import { netplanApplyScript, netplanDeleteScript } from "../../components/render/netplan";
import { keyPath, lab, labLeftovers, nodeAddr, shQuote, ssh, sshOpts, sshRun, withExclusiveLab } from "./lab-harness";

const P0 = "enp1s0f0np0";
const P1 = "enp1s0f1np1";
const NAMES = ["spark-a", "spark-b", "spark-c", "spark-d"];
const MTU = 9000;

/** The ring of lab/lib/net.sh (ring-4), as stack config would give it: one /31 per cable. */
function ring(): { nodes: { name: string; interconnect: { name: string; address: string }[] }[]; cables: ParsedCable[] } {
    const nodes = NAMES.map((name, i) => ({
        name,
        interconnect: [
            { name: P0, address: `192.168.200.${2 * i}/31` },
            { name: P1, address: `192.168.200.${2 * ((i + 3) % 4) + 1}/31` },
        ],
    }));
    const cables = NAMES.map((name, i) => ({ a: { node: name, port: P0 }, b: { node: NAMES[(i + 1) % 4], port: P1 } }));
    return { nodes, cables };
}

/** ssh NODE bash -c SCRIPT, asynchronously: the netplan applies wait for each other's peers. */
function sshAsync(node: string, script: string, timeoutMs: number): Promise<{ status: number | null; out: string }> {
    return new Promise((resolve) => {
        const child = spawn("ssh", ["-i", keyPath, ...sshOpts, `root@${nodeAddr[node]}`, "bash", "-c", shQuote(script)], { stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        child.stdout.on("data", (d: Buffer) => (out += d.toString()));
        child.stderr.on("data", (d: Buffer) => (out += d.toString()));
        const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
        child.on("close", (status) => {
            clearTimeout(timer);
            resolve({ status, out });
        });
    });
}

const { nodes, cables } = ring();
const plan: FabricNode[] = planFabric(cables, nodes);
const members = plan.flatMap((n) => n.links.map((l) => l.address.split("/")[0]));
const allAddresses = (name: string) => plan.find((n) => n.node === name)?.links.map((l) => l.address.split("/")[0]) ?? [];

describe("lab ring-4: the switchless renderers on real netplan, kernel and nftables", { timeout: 30 * 60_000 }, () => {
    withExclusiveLab();

    test("lab up --topology ring-4: each Spark's two ports cabled to its two neighbours", () => {
        const t0 = Date.now();
        lab(["up", "--topology", "ring-4"]);
        console.log(`# lab up --topology ring-4 took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        for (const name of NAMES) ssh(name, `ip link show dev ${P0} && ip link show dev ${P1}`);
    });

    test("Docker's FORWARD DROP, as dockerd sets it, is in place on every node", () => {
        // What dockerd does at start with iptables on (Docker docs, "Packet filtering and firewalls"):
        // its own DOCKER-USER chain jumped to first from FORWARD, and FORWARD's policy DROP.
        for (const name of NAMES) {
            ssh(
                name,
                "iptables -N DOCKER-USER 2>/dev/null || true; iptables -C FORWARD -j DOCKER-USER 2>/dev/null || iptables -I FORWARD -j DOCKER-USER; iptables -P FORWARD DROP",
            );
            assert.match(ssh(name, "iptables -S FORWARD"), /^-P FORWARD DROP$/m);
        }
    });

    test("forwarding flags as found, before anything is applied", () => {
        for (const name of NAMES)
            assert.equal(ssh(name, `cat /proc/sys/net/ipv4/conf/${P0}/forwarding /proc/sys/net/ipv4/conf/${P1}/forwarding`), "0\n0\n", name);
    });

    test("apply: netplan (addresses, MTU, host routes) on all four at once, forwarding, firewall with transit, DOCKER-USER", async () => {
        const t0 = Date.now();
        const results = await Promise.all(
            plan.map((fabric) => sshAsync(fabric.node, netplanApplyScript(fabricNetplanSpec(fabric, MTU, { lowSpeed: "warn" }), 60), 180_000)),
        );
        results.forEach((r, i) => assert.equal(r.status, 0, `${NAMES[i]}:\n${r.out}`));
        for (const fabric of plan) {
            ssh(fabric.node, forwardingPlan(fabric).create);
            const rules = renderFirewallRules({ node: fabric.node, members, openTcp: [22], openUdp: [], transitInterfaces: fabric.forwardingOn });
            ssh(fabric.node, `cat > /run/sc-fw.nft <<'EOF'\n${rules}EOF\nnft -f /run/sc-fw.nft`);
            ssh(fabric.node, ["set -euo pipefail", ...dockerTransitLines(fabric.forwardingOn, members, "add")].join("\n"));
        }
        console.log(`# apply on four nodes took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        assert.deepEqual(
            NAMES.map((name) => ssh(name, `cat /proc/sys/net/ipv4/conf/${P0}/forwarding /proc/sys/net/ipv4/conf/${P1}/forwarding`)),
            ["1\n1\n", "1\n1\n", "0\n0\n", "0\n0\n"],
        );
    });

    test("every node reaches every address of every other node, at full MTU without fragmenting", () => {
        for (const from of NAMES) {
            for (const to of NAMES.filter((n) => n !== from)) {
                for (const ip of allAddresses(to)) {
                    const r = sshRun(from, `ping -c 1 -W 2 -M do -s ${MTU - 28} ${ip}`);
                    assert.equal(r.status, 0, `${from} -> ${to} ${ip}: ${r.stdout}${r.stderr}`);
                }
            }
        }
    });

    test("the path to a non-neighbour is the expected hop: spark-a to spark-c through spark-b, spark-b to spark-d through spark-a", () => {
        assert.match(ssh("spark-a", "ip route get 192.168.200.4"), /^192\.168\.200\.4 via 192\.168\.200\.1 dev enp1s0f0np0 /m);
        assert.match(ssh("spark-c", "ip route get 192.168.200.0"), /^192\.168\.200\.0 via 192\.168\.200\.2 dev enp1s0f1np1 /m);
        // TTL 1 dies at the first hop, which answers from its own address on the cable.
        assert.match(sshRun("spark-a", "ping -c 1 -W 2 -t 1 192.168.200.4").stdout, /From 192\.168\.200\.1 .*Time to live exceeded/);
        assert.match(sshRun("spark-b", "ping -c 1 -W 2 -t 1 192.168.200.5").stdout, /From 192\.168\.200\.0 .*Time to live exceeded/);
    });

    test("Docker's FORWARD DROP blocks the transit without our DOCKER-USER rules, and they let it through", () => {
        ssh("spark-b", ["set -euo pipefail", ...dockerTransitLines(plan[1].forwardingOn, members, "remove")].join("\n"));
        assert.notEqual(sshRun("spark-a", "ping -c 1 -W 2 192.168.200.4").status, 0, "spark-a reached spark-c through spark-b with DOCKER-USER empty");
        ssh("spark-b", ["set -euo pipefail", ...dockerTransitLines(plan[1].forwardingOn, members, "add")].join("\n"));
        ssh("spark-a", "ping -c 1 -W 2 192.168.200.4");
    });

    test("a second apply changes nothing", async () => {
        const results = await Promise.all(
            plan.map((fabric) => sshAsync(fabric.node, netplanApplyScript(fabricNetplanSpec(fabric, MTU, { lowSpeed: "warn" }), 60), 180_000)),
        );
        results.forEach((r, i) => {
            assert.equal(r.status, 0, `${NAMES[i]}:\n${r.out}`);
            assert.match(r.out, /^unchanged \/etc\/netplan\//m, NAMES[i]);
            assert.doesNotMatch(r.out, /netplan apply/, NAMES[i]);
        });
        for (const fabric of plan) {
            const out = ssh(fabric.node, forwardingPlan(fabric).create);
            if (fabric.forwardingOn.length > 0) {
                assert.match(out, /^unchanged \/etc\/sysctl\.d\/60-spark-cluster-forwarding\.conf$/m, fabric.node);
            } else {
                // A node that forwards nothing: nothing installed, nothing printed.
                assert.equal(out, "", fabric.node);
            }
            // iptables expands the member lists (-s a,b,... -d a,b,...) into one rule per pair: the
            // second add must leave their number as it was.
            const count = () => ssh(fabric.node, "iptables -S DOCKER-USER | grep -c -- '-j ACCEPT' || true").trim();
            const before = count();
            ssh(fabric.node, ["set -euo pipefail", ...dockerTransitLines(fabric.forwardingOn, members, "add")].join("\n"));
            assert.equal(count(), before, fabric.node);
            assert.equal(before === "0", fabric.forwardingOn.length === 0, fabric.node);
        }
    });

    test("destroy: routes gone, forwarding restored as found, DOCKER-USER rules gone", () => {
        for (const fabric of plan) {
            ssh(fabric.node, forwardingPlan(fabric).delete);
            ssh(fabric.node, ["set -euo pipefail", ...dockerTransitLines(fabric.forwardingOn, members, "remove")].join("\n"));
            ssh(fabric.node, netplanDeleteScript(fabricNetplanSpec(fabric, MTU)));
        }
        for (const name of NAMES) {
            assert.equal(ssh(name, `cat /proc/sys/net/ipv4/conf/${P0}/forwarding /proc/sys/net/ipv4/conf/${P1}/forwarding`), "0\n0\n", name);
            assert.equal(ssh(name, "ip -4 route show | grep 192.168.200 || true"), "", name);
            assert.equal(
                ssh(name, "test ! -e /etc/sysctl.d/60-spark-cluster-forwarding.conf && iptables -S DOCKER-USER | grep -c ACCEPT || true").trim(),
                "0",
                name,
            );
        }
    });

    test("lab down leaves nothing behind", () => {
        lab(["down"], 5 * 60_000);
        assert.deepEqual(labLeftovers(), []);
    });
});
