/**
 * The interconnect's netplan step on a lab Spark (real netplan.io and systemd-networkd), without
 * Pulumi: the rendered apply script, then the rendered delete script, run as root over SSH. The
 * interfaces must be back as found: no file or address of ours, the MTU, and the IPv6 link-local
 * state (addr_gen_mode and the fe80::/64 addresses), which our `link-local: []` takes away while
 * the file is in place. About 30 s on an up lab.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { NetplanSpec, netplanApplyScript, netplanDeleteScript } from "../../components/render/netplan";
import { NETPLAN_PATH, STATE_DIR } from "../../config/hostPaths";
import { keyPath, run, ssh, withLabUp } from "./lab-harness";
import { linkLocalState } from "../integration/stackSession";

withLabUp();

const SPEC: NetplanSpec = {
    node: "spark-a",
    mtu: 9000,
    interfaces: [
        { name: "enp1s0f1np1", address: "192.168.100.11/24" },
        { name: "enP2p1s0f1np1", address: "192.168.101.11/24" },
    ],
    // spark-b's side is not configured here: the peers' wait is not what this test is about.
    peers: [],
};

/** Runs `script` on spark-a as root, its text on stdin (bounded). */
function runScript(script: string): string {
    const r = run(
        "ssh",
        ["-i", keyPath, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "root@10.77.0.11", "bash", "-s"],
        120_000,
        script,
    );
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    return r.stdout;
}

describe("netplan apply, then delete: the interconnect interfaces as found", { timeout: 1_200_000 }, () => {
    test("the IPv6 link-local state, the MTU and the addresses come back; nothing of ours is left", () => {
        const before = linkLocalState(
            "spark-a",
            SPEC.interfaces.map((i) => i.name),
        );
        const mtuBefore = ssh("spark-a", SPEC.interfaces.map((i) => `cat /sys/class/net/${i.name}/mtu`).join("; "));
        assert.ok(
            Object.values(before).some((s) => /fe80::/.test(s)),
            `the lab's interfaces start with a link-local address: ${JSON.stringify(before)}`,
        );

        runScript(netplanApplyScript(SPEC));
        const applied = linkLocalState(
            "spark-a",
            SPEC.interfaces.map((i) => i.name),
        );
        for (const iface of SPEC.interfaces) {
            assert.match(ssh("spark-a", `ip -o -4 addr show dev ${iface.name}`), new RegExp(`inet ${iface.address.replace(/\./g, "\\.")} `));
        }
        // What `link-local: []` does while our file is in place (why destroy must restore it).
        assert.ok(
            Object.values(applied).every((s) => !/fe80::/.test(s)),
            `link-local addresses while applied: ${JSON.stringify(applied)}`,
        );

        runScript(netplanDeleteScript(SPEC));
        assert.deepEqual(
            linkLocalState(
                "spark-a",
                SPEC.interfaces.map((i) => i.name),
            ),
            before,
            "IPv6 link-local state as found",
        );
        assert.equal(ssh("spark-a", SPEC.interfaces.map((i) => `cat /sys/class/net/${i.name}/mtu`).join("; ")), mtuBefore, "MTU as found");
        for (const iface of SPEC.interfaces) {
            assert.doesNotMatch(ssh("spark-a", `ip -o -4 addr show dev ${iface.name}`), /192\.168\.10[01]\.11/, `${iface.name} has no address of ours`);
        }
        assert.equal(ssh("spark-a", `ls -d ${NETPLAN_PATH} ${STATE_DIR} 2>/dev/null || true`).trim(), "", "no file of ours");
    });
});
