/**
 * Lab self-test, hetero-4 topology: two Sparks and two Thors on a switch-like interconnect
 * segment. Each node reports its kind through the simulated tools (nvidia-smi names,
 * ibdev2netdev empty on Thor, no mlnx_qos / nvidia-peermem on Thor), Thors have only
 * enp1s0f1np1, and the shared segment carries MTU 9000 between a Spark and a Thor. The outsider
 * (in no stack) boots too, with the same Ray, and is plugged into the same switch (ic0) with no
 * address.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { lab, labLeftovers, labRayVersion, outsiderNode, ssh, sshRun, withExclusiveLab } from "./lab-harness";

const sparks = ["spark-a", "spark-b"];
const thors = ["thor-a", "thor-b"];

describe("lab hetero-4", { timeout: 60 * 60_000 }, () => {
    withExclusiveLab();

    test("lab up --topology hetero-4 brings four nodes up", () => {
        const t0 = Date.now();
        lab(["up", "--topology", "hetero-4"]);
        console.log(`# lab up --topology hetero-4 took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        const status = lab(["status"], 60_000);
        assert.match(status, /^lab: topology hetero-4$/m);
        for (const n of [...sparks, ...thors, outsiderNode]) assert.match(status, new RegExp(`^${n}\\s.*ssh ok$`, "m"));
        assert.doesNotMatch(status, /^ws-a/m);
    });

    test(`every node, the outsider included, runs Ray ${labRayVersion}`, () => {
        for (const n of [...sparks, ...thors, outsiderNode]) {
            assert.equal(ssh(n, "/opt/lab-venv/bin/ray --version").trim(), `ray, version ${labRayVersion}`, n);
        }
    });

    test("Sparks report a GB10 and their RoCE devices", () => {
        for (const n of sparks) {
            assert.equal(ssh(n, "hostname").trim(), n);
            assert.equal(ssh(n, "nvidia-smi --query-gpu=name --format=csv,noheader").trim(), "NVIDIA GB10");
            const ib = ssh(n, "ibdev2netdev");
            assert.match(ib, /^rocep1s0f1 port 1 ==> enp1s0f1np1 \(Up\)$/m);
            assert.match(ib, /^roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 \(Up\)$/m);
            ssh(n, "command -v mlnx_qos");
            assert.match(sshRun(n, "modprobe nvidia-peermem").stderr, /Invalid argument/, "nvidia-peermem fails on GB10");
            ssh(n, "ip link show dev enp1s0f1np1 && ip link show dev enP2p1s0f1np1");
        }
    });

    test("Thors report an NVIDIA Thor, no RoCE device and no RoCE tooling", () => {
        for (const n of thors) {
            assert.equal(ssh(n, "hostname").trim(), n);
            assert.equal(ssh(n, "nvidia-smi --query-gpu=name --format=csv,noheader").trim(), "NVIDIA Thor");
            // Thor has no RoCE device: ibdev2netdev runs and prints nothing.
            assert.equal(ssh(n, "ibdev2netdev"), "");
            assert.notEqual(sshRun(n, "command -v mlnx_qos").status, 0, "mlnx_qos must be absent on Thor");
            assert.notEqual(sshRun(n, "modprobe nvidia-peermem").status, 0, "nvidia-peermem must not load on Thor");
            ssh(n, "ip link show dev enp1s0f1np1");
            assert.notEqual(sshRun(n, "ip link show dev enP2p1s0f1np1").status, 0, "Thor has no twin interface");
        }
    });

    test("the switch-like segment joins all four nodes at MTU 9000", () => {
        const all = [...sparks, ...thors];
        for (const [i, n] of all.entries()) {
            ssh(n, `ip addr add 192.168.100.${11 + i}/24 dev enp1s0f1np1 && ip link set dev enp1s0f1np1 mtu 9000`);
        }
        ssh("spark-a", "ping -c 2 -W 3 -M do -s 8972 192.168.100.14 && ping -c 2 -W 3 -M do -s 8972 192.168.100.12");
        ssh("thor-a", "ping -c 2 -W 3 -M do -s 8972 192.168.100.12");
    });

    test("the outsider is on the same switch (ic0), with no address until someone gives it one", () => {
        assert.equal(ssh(outsiderNode, "ip -o -4 addr show dev enp1s0f1np1 | wc -l").trim(), "0");
        assert.notEqual(sshRun(outsiderNode, "ip link show dev enP2p1s0f1np1").status, 0, "only ic0, not ic1");
        ssh(outsiderNode, "ip addr add 192.168.100.99/24 dev enp1s0f1np1 && ping -c 2 -W 3 192.168.100.11 && ip addr flush dev enp1s0f1np1");
    });

    test("lab down leaves nothing behind", () => {
        lab(["down"], 5 * 60_000);
        assert.deepEqual(labLeftovers(), []);
    });
});
