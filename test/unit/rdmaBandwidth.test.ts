/**
 * The optional RDMA bandwidth test (interconnect.linkCheck.rdmaBandwidth): the parser of
 * ib_write_bw's report (the awk program the step runs) against real perftest output, the rails
 * each node runs (resolve), the config's errors, and the rendered step run in bash against a fake
 * ib_write_bw on PATH: the figure in a `link:` line, a low figure refused or warned about, a run
 * that measured nothing, a node without perftest.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { ConfigError, parseConfig } from "../../config";
import { resolveRdmaRails } from "../../config/resolve";
import { IB_WRITE_BW_AVERAGE_AWK, RdmaBandwidthSpec, ibWriteBwArgv, rdmaBandwidthProbe } from "../../components/render/rdmaBandwidth";
import { matchSnapshot } from "../support/snapshot";
import { sparkPair } from "../support/fixtures";

/**
 * A real client run between two GB10s (DGX Spark class) over one ConnectX-7 twin, as its owner
 * published it (`ib_write_bw -d roceP2p1s0f0 -D 10 --cpu_util --report_gbits 192.168.100.10`;
 * addresses masked by the owner): the CPU_Util column is there because of --cpu_util, and the
 * peak is 0.00 in duration mode, as perftest prints it.
 */
const GB10_CLIENT_SAMPLE = `---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : roceP2p1s0f0
 Number of qps   : 1            Transport type : IB
 Connection type : RC           Using SRQ      : OFF
 PCIe relax order: ON
 ibv_wr* API     : ON
 TX depth        : 128
 CQ Moderation   : 1
 Mtu             : 1024[B]
 Link type       : Ethernet
 GID index       : 3
 Max inline data : 0[B]
 rdma_cm QPs     : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
 local address: LID 0000 QPN 0xxxxx PSN 0xxxxxx RKey 0xxxxxx VAddr 0xxxxxxxxxxx
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:100:15
 remote address: LID 0000 QPN 0xxxxx PSN 0xxxxxx RKey 0xxxxxx VAddr 0xxxxxxxxxxx
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:100:10
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]    CPU_Util[%]
 65536      1059332          0.00               92.57              0.176557         5.07
---------------------------------------------------------------------------------------
`;

/**
 * The report row exactly as perftest 6.29 prints it (src/perftest_parameters.h RESULT_FMT_G and
 * REPORT_FMT " %-7lu    %-10" PRIu64 "       %-7.2lf            %-7.2lf\t\t     %-7.6lf", then
 * REPORT_EXT "\n"), for an iterations run with a peak, tabs included.
 */
const PERFTEST_FORMAT_SAMPLE =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n" +
    " 65536      5000             97.52              97.44\t\t     0.185852\n";

/** What the step's parser reads from an ib_write_bw report. */
function average(report: string): string {
    const r = spawnSync("awk", [IB_WRITE_BW_AVERAGE_AWK], { input: report, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim();
}

describe("ib_write_bw's report", () => {
    it("gives the average of a real GB10 run and of perftest's own row format", () => {
        assert.equal(average(GB10_CLIENT_SAMPLE), "92.57");
        assert.equal(average(PERFTEST_FORMAT_SAMPLE), "97.44");
    });

    it("gives nothing for a run that reported no row (the server still waiting, a device not found, MiB/s without --report_gbits)", () => {
        assert.equal(average("\n************************************\n* Waiting for client to connect... *\n************************************\n"), "");
        assert.equal(average("IB device rocep9s0f9 not found\n Unable to find the Infiniband/RoCE device\n"), "");
        assert.equal(
            average(
                " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n 65536      5000             11620.00            11610.00\t\t     0.185852\n",
            ),
            "",
        );
    });

    it("is asked for with the same options on both ends, the server's address last on the client", () => {
        const rail = { iface: "enp1s0f1np1", device: "rocep1s0f1", peer: "spark-b", peerIp: "192.168.100.12", port: 18515 };
        assert.deepEqual(ibWriteBwArgv({ ...rail, role: "server" }, 5), [
            "ib_write_bw",
            "-d",
            "rocep1s0f1",
            "-i",
            "1",
            "-F",
            "--report_gbits",
            "-D",
            "5",
            "-p",
            "18515",
        ]);
        assert.deepEqual(ibWriteBwArgv({ ...rail, role: "client" }, 5), [
            "ib_write_bw",
            "-d",
            "rocep1s0f1",
            "-i",
            "1",
            "-F",
            "--report_gbits",
            "-D",
            "5",
            "-p",
            "18515",
            "192.168.100.12",
        ]);
    });
});

describe("rails of the RDMA bandwidth test", () => {
    const iface = (ip: string) => ({ address: `${ip}/24`, ip, prefixLength: 24, subnet: ip.replace(/\.\d+$/, ".0/24") });
    const node = (name: string, ips: string[], extra: { rdma?: boolean; retired?: boolean } = {}) => ({
        name,
        interconnect: ips.map(iface),
        retired: extra.retired ?? false,
        rdma: extra.rdma ?? true,
    });

    it("a pair's twins: the first node serves both rails, each on its own port", () => {
        const rails = resolveRdmaRails([node("spark-a", ["192.168.100.11", "192.168.101.11"]), node("spark-b", ["192.168.100.12", "192.168.101.12"])], 18515);
        assert.deepEqual(rails.get("spark-a"), [
            { role: "server", via: 0, peer: "spark-b", peerIp: "192.168.100.12", port: 18515 },
            { role: "server", via: 1, peer: "spark-b", peerIp: "192.168.101.12", port: 18516 },
        ]);
        assert.deepEqual(rails.get("spark-b"), [
            { role: "client", via: 0, peer: "spark-a", peerIp: "192.168.100.11", port: 18515 },
            { role: "client", via: 1, peer: "spark-a", peerIp: "192.168.101.11", port: 18516 },
        ]);
    });

    it("on a switch every pair, in one order on every node; a Thor and a retired node have none", () => {
        const rails = resolveRdmaRails(
            [
                node("a", ["10.0.0.1"]),
                node("b", ["10.0.0.2"]),
                node("c", ["10.0.0.3"]),
                node("thor", ["10.0.0.4"], { rdma: false }),
                node("gone", ["10.0.0.5"], { retired: true }),
            ],
            20000,
        );
        const summary = (n: string) => (rails.get(n) ?? []).map((r) => `${r.role} ${r.peer} ${r.port}`);
        assert.deepEqual(summary("a"), ["server b 20000", "server c 20001"]);
        assert.deepEqual(summary("b"), ["client a 20000", "server c 20002"]);
        assert.deepEqual(summary("c"), ["client a 20001", "client b 20002"]);
        assert.deepEqual(summary("thor"), []);
        assert.deepEqual(summary("gone"), []);
    });

    it("config: off by default; on, each node gets its rails and the settings; a bad value names its key", () => {
        const pair = (linkCheck: Record<string, unknown>) =>
            parseConfig({
                values: {
                    nodes: sparkPair(),
                    interconnect: { topology: "pair", mtu: 9000, linkCheck },
                    model: { source: "Qwen/Qwen2.5-7B-Instruct" },
                    sshPrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nrdma-test-key\n-----END OPENSSH PRIVATE KEY-----",
                    apiKey: "rdma-test-api-key-0123456789abcdef",
                },
                secretKeys: new Set(["sshPrivateKey", "apiKey"]),
            });
        const off = pair({});
        assert.ok(off.nodes.every((n) => n.linkCheck.rdmaBandwidth === undefined));
        const on = pair({ rdmaBandwidth: { enabled: true, minGbps: 80 } });
        const a = on.nodes[0].linkCheck.rdmaBandwidth;
        assert.ok(a);
        assert.equal(a.minGbps, 80);
        assert.equal(a.durationSeconds, 5);
        assert.equal(a.waitSeconds, 120);
        assert.ok(a.rails.length > 0 && a.rails.every((r) => r.role === "server"));
        assert.throws(
            () => pair({ rdmaBandwidth: { enabled: true, durationSeconds: 0 } }),
            (err: unknown) => err instanceof ConfigError && /interconnect\.linkCheck\.rdmaBandwidth\.durationSeconds/.test(err.message),
        );
    });
});

const SERVER: RdmaBandwidthSpec = {
    node: "spark-a",
    rails: [
        { role: "server", iface: "enp1s0f1np1", device: "rocep1s0f1", peer: "spark-b", peerIp: "192.168.100.12", port: 18515 },
        { role: "server", iface: "enP2p1s0f1np1", device: "roceP2p1s0f1", peer: "spark-b", peerIp: "192.168.101.12", port: 18516 },
    ],
    durationSeconds: 5,
    waitSeconds: 120,
    minGbps: 80,
    lowBandwidth: "refuse",
};
const CLIENT: RdmaBandwidthSpec = {
    ...SERVER,
    node: "spark-b",
    rails: [
        { role: "client", iface: "enp1s0f1np1", device: "rocep1s0f1", peer: "spark-a", peerIp: "192.168.100.11", port: 18515 },
        { role: "client", iface: "enP2p1s0f1np1", peer: "spark-a", peerIp: "192.168.101.11", port: 18516 },
    ],
    lowBandwidth: "warn",
};

describe("the RDMA bandwidth step", () => {
    it("renders (snapshots: a refusing server end, a warning client end with a rail lacking its device)", () => {
        matchSnapshot("rdma-bandwidth.spark-a.sh", rdmaBandwidthProbe.script(SERVER));
        matchSnapshot("rdma-bandwidth.spark-b-warn.sh", rdmaBandwidthProbe.script(CLIENT));
    });

    /** Runs the step in bash with a fake ib_write_bw printing REPORT (per device) and exiting with RC. */
    function runStep(spec: RdmaBandwidthSpec, fake: string | undefined): { status: number | null; out: string } {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rdma-bw-"));
        try {
            const bin = path.join(dir, "bin");
            fs.mkdirSync(bin);
            // The tools the script uses, and no ib_write_bw unless the test gives one.
            for (const tool of ["awk", "grep", "tail", "mktemp", "rm", "date", "sleep", "timeout", "cat"]) {
                const found = spawnSync("bash", ["-c", `command -v ${tool}`], { encoding: "utf8" }).stdout.trim();
                fs.symlinkSync(found, path.join(bin, tool));
            }
            if (fake !== undefined) fs.writeFileSync(path.join(bin, "ib_write_bw"), `#!/bin/bash\n${fake}\n`, { mode: 0o755 });
            const r = spawnSync("/bin/bash", ["-c", rdmaBandwidthProbe.script(spec)], { encoding: "utf8", env: { PATH: bin }, timeout: 60_000 });
            return { status: r.status, out: r.stdout + r.stderr };
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }
    const report = (gbps: string) =>
        `printf '%s\\n' ' #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]' ' 65536      1059332          0.00               ${gbps}              0.176557'`;

    it("healthy: each rail's figure in a link line, exit 0", () => {
        const r = runStep(SERVER, report("92.57"));
        assert.equal(r.status, 0, r.out);
        assert.deepEqual(rdmaBandwidthProbe.parse(r.out).links, [
            "spark-a enp1s0f1np1 <-> spark-b 192.168.100.12: RDMA write 92.57 Gb/s average (ib_write_bw, 5 s)",
            "spark-a enP2p1s0f1np1 <-> spark-b 192.168.101.12: RDMA write 92.57 Gb/s average (ib_write_bw, 5 s)",
        ]);
    });

    it("a low figure is refused with its value and the rail's ends, or warned about with lowSpeed: warn", () => {
        const refused = runStep(SERVER, `case "$*" in *rocep1s0f1*) ${report("12.80")} ;; *) ${report("92.57")} ;; esac`);
        assert.equal(refused.status, 1, refused.out);
        assert.match(
            refused.out,
            /^\[spark-cluster\] spark-a enp1s0f1np1 <-> spark-b 192\.168\.100\.12: RDMA write 12\.80 Gb\/s, want at least 80 Gb\/s \(interconnect\.linkCheck\.rdmaBandwidth\.minGbps\)$/m,
        );
        assert.match(refused.out, /RDMA bandwidth check failed on spark-a/);
        const warned = runStep({ ...SERVER, lowBandwidth: "warn" }, report("12.80"));
        assert.equal(warned.status, 0, warned.out);
        assert.equal(rdmaBandwidthProbe.parse(warned.out).warnings.length, 2);
        assert.match(rdmaBandwidthProbe.parse(warned.out).warnings[0], /RDMA write 12\.80 Gb\/s, want at least 80 Gb\/s .*lowSpeed is warn/);
    });

    it("a run that measured nothing, or a rail without an RDMA device, counts as a failure to measure", () => {
        const r = runStep(CLIENT, `echo 'IB device rocep1s0f1 not found' >&2; echo ' Unable to find the Infiniband/RoCE device' >&2; exit 1`);
        assert.equal(r.status, 0, r.out);
        assert.deepEqual(rdmaBandwidthProbe.parse(r.out).links, [
            "spark-b enp1s0f1np1 <-> spark-a 192.168.100.11: RDMA bandwidth not measured (ib_write_bw exit 1)",
            "spark-b enP2p1s0f1np1 <-> spark-a 192.168.101.11: RDMA bandwidth not measured: enP2p1s0f1np1 has no RDMA device (ibdev2netdev)",
        ]);
        assert.match(r.out, /IB device rocep1s0f1 not found/);
        assert.deepEqual(
            rdmaBandwidthProbe.parse(r.out).warnings.map((w) => w.replace(/ \(interconnect.*$/, "")),
            [
                "spark-b enp1s0f1np1 <-> spark-a 192.168.100.11: RDMA bandwidth not measured: ib_write_bw could not run against spark-a (exit 1)",
                "spark-b enP2p1s0f1np1 <-> spark-a 192.168.101.11: RDMA bandwidth not measured: enP2p1s0f1np1 has no RDMA device (ibdev2netdev)",
            ],
        );
    });

    it("a client whose server never listens gives up after waitSeconds, naming the other end", () => {
        const r = runStep(
            { ...SERVER, node: "spark-b", waitSeconds: 2, rails: [{ ...CLIENT.rails[0], role: "client" }] },
            `echo "Couldn't connect to 192.168.100.11:18515" >&2; exit 1`,
        );
        assert.equal(r.status, 1, r.out);
        assert.match(r.out, /gave up after 2 s waiting for spark-a to serve ib_write_bw on 192\.168\.100\.11:18515/);
        assert.match(
            r.out,
            /spark-b enp1s0f1np1 <-> spark-a 192\.168\.100\.11: RDMA bandwidth not measured: ib_write_bw could not run against spark-a \(exit 1\)/,
        );
    });

    it("without ib_write_bw on the node: each rail says so, nothing fails", () => {
        const r = runStep(SERVER, undefined);
        assert.equal(r.status, 0, r.out);
        assert.deepEqual(rdmaBandwidthProbe.parse(r.out).links, [
            "spark-a enp1s0f1np1 <-> spark-b 192.168.100.12: RDMA bandwidth not measured: ib_write_bw (perftest) is not installed on spark-a",
            "spark-a enP2p1s0f1np1 <-> spark-b 192.168.101.12: RDMA bandwidth not measured: ib_write_bw (perftest) is not installed on spark-a",
        ]);
    });
});
