// Read-back scripts (components/render/host/read.ts and the layers' *ReadScript):
// run in bash against files in a temporary directory and stand-ins for
// systemctl, ip, mlnx_qos and lsmod on PATH. A script prints one line per
// difference and nothing for a host as `up` left it. The lab's drift tests
// (test/integration/hostState.test.ts) run them on real systemd and networkd.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { installFilesScript } from "../../components/render/host/files";
import { READ_LIB, filesReadScript, readScript, secretFileReadScript, unitDriftLine } from "../../components/render/host/read";
import { HOST_LIB } from "../../components/render/host/lib";
import { bashScript } from "../../components/render/host/shell";
import { linkCheck, netplanReadScript } from "../../components/render/netplan";
import { pfcReadScript, pfcVector, renderPeermemConf, renderPfcUnit } from "../../components/render/pfc";
import { firewallReadScript } from "../../components/render/firewall";
import { matchSnapshot } from "../support/snapshot";

/** A temporary directory with a bin/ of stand-in commands (bash scripts) first on PATH. */
function sandbox(commands: Record<string, string>): { dir: string; run: (script: string, stdin?: string) => { status: number | null; stdout: string } } {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "read-back-"));
    fs.mkdirSync(path.join(dir, "bin"));
    for (const [name, body] of Object.entries(commands)) {
        fs.writeFileSync(path.join(dir, "bin", name), `#!/bin/bash\n${body}\n`, { mode: 0o755 });
    }
    return {
        dir,
        run: (script, stdin = "") => {
            const r = spawnSync("bash", ["-c", script], {
                input: stdin,
                encoding: "utf8",
                env: { PATH: `${path.join(dir, "bin")}:/usr/bin:/bin:/usr/sbin:/sbin`, HOME: dir },
                timeout: 20_000,
            });
            assert.equal(r.stderr, "", `the read script wrote to stderr: ${r.stderr}`);
            return { status: r.status, stdout: r.stdout };
        },
    };
}

const lines = (stdout: string) => stdout.split("\n").filter((l) => l !== "");

describe("read-back scripts", () => {
    it("files: nothing for what installFilesScript wrote; missing, edited and mode lines otherwise", () => {
        const box = sandbox({});
        const files = [
            { path: path.join(box.dir, "nccl.conf"), mode: "644" as const, content: "NCCL_IB_HCA=rocep1s0f1\n" },
            // No trailing newline: the heredoc adds one, and the read-back hashes what was written.
            { path: path.join(box.dir, "runtime.env"), mode: "600" as const, content: "A=1" },
        ];
        const install = box.run(installFilesScript(files));
        assert.equal(install.status, 0);
        const read = filesReadScript(files);
        assert.deepEqual(box.run(read), { status: 0, stdout: "" }, "a host as up left it reads back clean");

        fs.appendFileSync(files[0].path, "NCCL_DEBUG=INFO\n");
        fs.chmodSync(files[1].path, 0o644);
        assert.deepEqual(lines(box.run(read).stdout), [
            `${files[0].path}: edited (its content is not what pulumi up wrote)`,
            `${files[1].path}: mode 644, want 600`,
        ]);
        fs.rmSync(files[0].path);
        assert.deepEqual(lines(box.run(read).stdout), [`${files[0].path}: missing`, `${files[1].path}: mode 644, want 600`]);

        assert.equal(box.run(installFilesScript(files)).status, 0, "running create again repairs");
        assert.deepEqual(box.run(read), { status: 0, stdout: "" });
        assert.deepEqual(lines(box.run(secretFileReadScript(path.join(box.dir, "absent.env"), "600")).stdout), [
            `${path.join(box.dir, "absent.env")}: missing`,
        ]);
        assert.deepEqual(box.run(secretFileReadScript(files[1].path, "600")), { status: 0, stdout: "" });
    });

    it("units: disabled, stopped or gone", () => {
        // systemctl is-enabled/is-active print the state and exit non-zero for anything but enabled/active.
        const box = sandbox({
            systemctl: `state=$(cat "$HOME/$1.$2" 2>/dev/null) || exit 1; echo "$state"; case "$state" in enabled|active) exit 0;; esac; exit 1`,
        });
        const script = readScript([unitDriftLine("spark-cluster-ray"), unitDriftLine("spark-cluster-pfc", true)]);
        const set = (what: string, unit: string, state: string) => fs.writeFileSync(path.join(box.dir, `${what}.${unit}.service`), state);
        set("is-enabled", "spark-cluster-ray", "enabled");
        set("is-active", "spark-cluster-ray", "active");
        set("is-enabled", "spark-cluster-pfc", "enabled");
        set("is-active", "spark-cluster-pfc", "inactive");
        assert.deepEqual(box.run(script), { status: 0, stdout: "" }, "a oneshot boot unit only has to be enabled");
        set("is-enabled", "spark-cluster-ray", "disabled");
        set("is-active", "spark-cluster-ray", "failed");
        fs.rmSync(path.join(box.dir, "is-enabled.spark-cluster-pfc.service"));
        assert.deepEqual(lines(box.run(script).stdout), [
            "spark-cluster-ray.service: disabled, want enabled",
            "spark-cluster-ray.service: failed, want active",
            "spark-cluster-pfc.service: not installed, want enabled",
        ]);
    });

    it("netplan: address and MTU per interface, and a missing interface", () => {
        // The file check reads /etc/netplan, which this machine does not have: that line is expected.
        const spec = { node: "spark-a", mtu: 9000, interfaces: [{ name: "lo", address: "127.0.0.1/8" }], peers: [] };
        const script = netplanReadScript(spec);
        matchSnapshot("read.netplan.sh", script);
        const box = sandbox({});
        const mtu = fs.readFileSync("/sys/class/net/lo/mtu", "utf8").trim();
        const got = lines(box.run(script).stdout);
        assert.ok(got[0].startsWith("/etc/netplan/60-spark-cluster-interconnect.yaml: "), got[0]);
        assert.deepEqual(got.slice(1), mtu === "9000" ? [] : [`lo: MTU ${mtu}, want 9000`], "lo has 127.0.0.1/8");
        const other = lines(
            box.run(
                netplanReadScript({
                    ...spec,
                    interfaces: [
                        { name: "lo", address: "10.9.9.9/24" },
                        { name: "nope0", address: "10.9.9.8/24" },
                    ],
                }),
            ).stdout,
        );
        assert.ok(other.includes("lo: address 10.9.9.9/24 missing (has: 127.0.0.1/8)"), other.join("\n"));
        assert.ok(other.includes("nope0: no such interface"), other.join("\n"));
    });

    it("links: speed from ethtool (else sysfs), a slow link refused or warned with its value, a short MTU on the way named by both ends", () => {
        // lo stands for the interconnect interface: its operstate is "unknown", so it is reported as not up.
        const box = sandbox({
            ethtool: `echo "Settings for $1:"; echo "	Speed: $(cat "$HOME/speed")Mb/s"; echo "	Link detected: yes"`,
            // The ping answers while $HOME/mtu-ok exists; it must be full size and don't-fragment.
            ping: `[ "$*" = "-M do -s 8972 -c 1 -W 1 -I lo 192.168.100.12" ] && [ -e "$HOME/mtu-ok" ]`,
        });
        const spec = {
            node: "spark-a",
            mtu: 9000,
            interfaces: [{ name: "lo", address: "127.0.0.1/8" }],
            peers: [{ node: "spark-b", ip: "192.168.100.12", via: "lo" }],
            linkCheck: { minSpeedMbps: 200000, lowSpeed: "refuse" as const },
        };
        const loMtu = fs.readFileSync("/sys/class/net/lo/mtu", "utf8").trim();
        const read = (speed: string) => {
            fs.writeFileSync(path.join(box.dir, "speed"), speed);
            return lines(box.run(netplanReadScript(spec)).stdout).filter((l) => !l.startsWith("/etc/netplan/") && !l.startsWith("lo: MTU"));
        };
        fs.writeFileSync(path.join(box.dir, "mtu-ok"), "");
        assert.deepEqual(read("200000"), ["lo: link unknown, want up"]);
        assert.deepEqual(read("13000"), ["lo: link unknown, want up", "lo: speed 13000 Mb/s, want at least 200000 Mb/s"]);
        fs.rmSync(path.join(box.dir, "mtu-ok"));
        assert.deepEqual(read("200000"), [
            "lo: link unknown, want up",
            "lo -> spark-b 192.168.100.12: no answer to a 8972-byte don't-fragment ping (MTU 9000 end to end)",
        ]);

        // The apply: refuse fails naming node, interface and value; warn goes on with a warning line.
        const apply = (lowSpeed: "refuse" | "warn") =>
            box.run(
                bashScript([
                    HOST_LIB,
                    ...linkCheck.lines({ ...spec, interfaces: [{ name: "lo", address: "127.0.0.1/8" }], linkCheck: { minSpeedMbps: 200000, lowSpeed } }, 1),
                ]),
            );
        fs.writeFileSync(path.join(box.dir, "speed"), "13000");
        fs.writeFileSync(path.join(box.dir, "mtu-ok"), "");
        const refused = apply("refuse");
        assert.equal(refused.status, 1);
        assert.ok(refused.stdout.includes("spark-a lo: speed 13000 Mb/s, want at least 200000 Mb/s"), refused.stdout);
        assert.deepEqual(linkCheck.parse(refused.stdout).links, ["lo unknown, 13000 Mb/s", "spark-a lo -> spark-b 192.168.100.12: MTU 9000 end to end"]);
        const warned = apply("warn");
        assert.deepEqual(linkCheck.parse(warned.stdout).warnings, [
            "spark-a lo: speed 13000 Mb/s, want at least 200000 Mb/s (interconnect.linkCheck.lowSpeed is warn)",
        ]);
        assert.equal(warned.status, 1, "lo is not up: that still fails");
        assert.ok(warned.stdout.includes("spark-a lo: link unknown, want up"), warned.stdout);
        fs.rmSync(path.join(box.dir, "mtu-ok"));
        const short = apply("warn");
        assert.ok(
            short.stdout.includes(
                `spark-a lo -> spark-b 192.168.100.12: a 8972-byte don't-fragment ping gets no answer: the MTU is below 9000 on the way (spark-a lo has ${loMtu}; check spark-b's interface on 192.168.100.12)`,
            ),
            short.stdout,
        );
    });

    it("PFC: vector and trust per interface; nvidia-peermem only where the last apply loaded it", () => {
        const box = sandbox({
            mlnx_qos: [
                `pfc=$(cat "$HOME/pfc.$2")`,
                `echo "Priority trust state: $(cat "$HOME/trust.$2")"`,
                // The map as mlnx_qos prints it (python/mlnx_qos pretty_print), one line a priority here.
                `if [ "$(cat "$HOME/trust.$2")" = dscp ]; then echo "dscp2prio mapping:"; cat "$HOME/map.$2"; fi`,
                `echo "default priority:"`,
                `echo "PFC configuration:"`,
                `echo "	priority    0   1   2   3   4   5   6   7"`,
                `echo "	enabled     \${pfc//,/   }   "`,
            ].join("\n"),
            lsmod: `echo "Module Size Used by"; cat "$HOME/modules" 2>/dev/null || true`,
            systemctl: `echo enabled`,
        });
        const spec = {
            interfaces: ["enp1s0f1np1"],
            pfcVector: pfcVector(3),
            trustDscp: true,
            priority: 3,
            dscp: 26,
            peermem: true,
            unitContent: renderPfcUnit(["enp1s0f1np1"], 3, true, 26),
            peermemConf: renderPeermemConf(),
        };
        const script = pfcReadScript(spec);
        fs.writeFileSync(path.join(box.dir, "pfc.enp1s0f1np1"), "0,0,0,1,0,0,0,0");
        fs.writeFileSync(path.join(box.dir, "trust.enp1s0f1np1"), "dscp");
        fs.writeFileSync(path.join(box.dir, "map.enp1s0f1np1"), "\tprio:2 dscp:16,17,18,19,20,21,22,23,\n\tprio:3 dscp:24,25,26,27,28,29,30,31,\n");
        fs.writeFileSync(path.join(box.dir, "modules"), "nvidia_peermem 16384 0\n");
        // The unit and modules-load files live under /etc, absent here: those two lines are expected.
        const fileLines = ["/etc/systemd/system/spark-cluster-pfc.service: missing", "/etc/modules-load.d/nvidia-peermem.conf: missing"];
        const loaded = "status=enabled: PFC 0,0,0,1,0,0,0,0 on enp1s0f1np1, trust dscp; nvidia-peermem loaded";
        assert.deepEqual(lines(box.run(script, loaded).stdout), fileLines);
        // DSCP 26 moved to priority 5 (by hand, or another tool): drift, with the value found.
        fs.writeFileSync(
            path.join(box.dir, "map.enp1s0f1np1"),
            "\tprio:3 dscp:24,25,27,28,29,30,31,\n\tprio:5 dscp:26,40,41,42,43,44,45,46,\n\tprio:5 dscp:47,\n",
        );
        assert.deepEqual(lines(box.run(script, loaded).stdout), ["enp1s0f1np1: DSCP 26 -> priority 5, want 3", ...fileLines]);
        fs.writeFileSync(path.join(box.dir, "pfc.enp1s0f1np1"), "0,0,0,0,0,0,0,0");
        fs.writeFileSync(path.join(box.dir, "trust.enp1s0f1np1"), "pcp");
        fs.writeFileSync(path.join(box.dir, "modules"), "");
        assert.deepEqual(lines(box.run(script, loaded).stdout), [
            "enp1s0f1np1: PFC 0,0,0,0,0,0,0,0, want 0,0,0,1,0,0,0,0",
            "enp1s0f1np1: trust pcp, want dscp",
            "enp1s0f1np1: DSCP 26 -> priority none, want 3",
            ...fileLines,
            "nvidia-peermem: not loaded",
        ]);
        const unavailable = lines(box.run(script, loaded.replace("nvidia-peermem loaded", "nvidia-peermem not available")).stdout);
        assert.ok(!unavailable.includes("nvidia-peermem: not loaded"), "a node without the module (Thor) has no peermem drift");
        assert.deepEqual(box.run(pfcReadScript({ ...spec, interfaces: [] }), loaded), { status: 0, stdout: "" }, "no RoCE device: nothing to read");
    });

    it("the read functions and every layer's read script are side-effect free bash (snapshot)", () => {
        matchSnapshot("read.lib.sh", READ_LIB);
        matchSnapshot(
            "read.firewall.sh",
            firewallReadScript({
                node: "spark-a",
                members: ["192.168.100.11", "192.168.100.12"],
                openTcp: [22],
                openUdp: [],
                api: { port: 8000, allowFrom: [] },
            }),
        );
        for (const script of [READ_LIB]) {
            assert.doesNotMatch(script, /\b(rm|mv|cp|install|tee|modprobe|restart|start|stop|enable|disable|apply)\b(?![-_])/, "a read never changes the host");
        }
    });
});
