// The optional per-rail RDMA bandwidth test (interconnect.linkCheck.rdmaBandwidth): perftest's
// ib_write_bw between the two ends of every rail, at `up`, where it is installed. One end serves
// (the node first in config order), the other connects; every node walks its rails in the same
// global order, so each pair meets without a deadlock, and each rail has its own TCP port.
import { HOST_LIB } from "./host/lib";
import type { Probe } from "./facts";
import { bashScript, shellJoin, shellQuote } from "./host/shell";
import { type LinkResults, linkCheck } from "./netplan";

/** One rail as one of its ends runs it. */
export interface RdmaRail {
    /** `server` waits for the other end; `client` connects to it. */
    role: "server" | "client";
    /** This end's interface, and its RDMA device (ibdev2netdev); undefined: the interface has none. */
    iface: string;
    device?: string;
    /** The other end: its node and its address on this rail (the client dials the server's). */
    peer: string;
    peerIp: string;
    /** perftest's TCP port for this rail (`-p`). */
    port: number;
}

export interface RdmaBandwidthSpec {
    node: string;
    rails: RdmaRail[];
    /** `-D`: seconds of RDMA writes per rail. */
    durationSeconds: number;
    /** How long a server waits for its client, and a client for its server to listen. */
    waitSeconds: number;
    /** The lowest average (Gb/s) a rail may show; undefined: the figure is shown, not checked. */
    minGbps?: number;
    /** `refuse`: a rail below the minimum, or not measured, fails `up`; `warn`: a warning. */
    lowBandwidth: "refuse" | "warn";
}

/**
 * The average bandwidth of an `ib_write_bw --report_gbits` run, read from its report: the row
 * under the ` #bytes  #iterations  BW peak[Gb/sec]  BW average[Gb/sec]  MsgRate[Mpps]` header
 * (perftest src/perftest_parameters.h RESULT_FMT_G and REPORT_FMT; the client prints its own
 * figure, a write test's server the client's). The 4th field; nothing when there is no such row.
 */
export const IB_WRITE_BW_AVERAGE_AWK = String.raw`/BW average\[Gb\/sec\]/ { header = 1; next } header && NF >= 4 && $1 ~ /^[0-9]+$/ { print $4; exit }`;

/** perftest's arguments for one rail: the same on both ends (as perftest requires), plus the server's address on the client. */
export function ibWriteBwArgv(rail: RdmaRail & { device: string }, durationSeconds: number): string[] {
    const argv = ["ib_write_bw", "-d", rail.device, "-i", "1", "-F", "--report_gbits", "-D", String(durationSeconds), "-p", String(rail.port)];
    return rail.role === "client" ? [...argv, rail.peerIp] : argv;
}

/**
 * The step's script: per rail a `link: …` line with the figure (or why there is none), a
 * `link warning: …` line where lowBandwidth is warn, and with refuse a failure that names the
 * node, the interface, the other end and the value found. Without ib_write_bw on the node it
 * says so and measures nothing.
 */
function rdmaBandwidthScript(spec: RdmaBandwidthSpec): string {
    const { node, durationSeconds: d, waitSeconds: wait, minGbps: min } = spec;
    const fail = (what: string) =>
        spec.lowBandwidth === "warn" ? `echo "link warning: ${what} (interconnect.linkCheck.lowSpeed is warn)"` : `sc_log "${what}"; rdma_failed=1`;
    return bashScript([
        HOST_LIB,
        `if ! command -v ib_write_bw >/dev/null; then`,
        ...spec.rails.map(
            (r) =>
                `  echo ${shellQuote(`link: ${node} ${r.iface} <-> ${r.peer} ${r.peerIp}: RDMA bandwidth not measured: ib_write_bw (perftest) is not installed on ${node}`)}`,
        ),
        `  exit 0`,
        `fi`,
        `rdma_failed=0`,
        `log=$(mktemp)`,
        `trap 'rm -f "$log"' EXIT`,
        `average() { awk ${shellQuote(IB_WRITE_BW_AVERAGE_AWK)} "$log"; }`,
        // A client's try: done (0) once ib_write_bw ran to an end other than "nobody listens there yet".
        `client_try() { try_rc=0; "$@" > "$log" 2>&1 || try_rc=$?; [ "$try_rc" = 0 ] && return 0; ! grep -q "^Couldn't connect to " "$log"; }`,
        ...spec.rails.flatMap((rail) => {
            const where = `${node} ${rail.iface} <-> ${rail.peer} ${rail.peerIp}`;
            if (rail.device === undefined) {
                const why = `RDMA bandwidth not measured: ${rail.iface} has no RDMA device (ibdev2netdev)`;
                return [`echo ${shellQuote(`link: ${where}: ${why}`)}`, fail(`${where}: ${why}`)];
            }
            const argv = shellJoin(ibWriteBwArgv({ ...rail, device: rail.device }, d));
            const run =
                rail.role === "server"
                    ? [
                          `sc_log ${shellQuote(`RDMA bandwidth on ${where}: serving on port ${rail.port} (${rail.device}), waiting up to ${wait} s for ${rail.peer}`)}`,
                          `rc=0; timeout --kill-after=5 ${wait + d + 30} ${argv} > "$log" 2>&1 || rc=$?`,
                      ]
                    : [
                          `sc_log ${shellQuote(`RDMA bandwidth on ${where}: connecting from ${rail.device} to port ${rail.port}`)}`,
                          `try_rc=1; sc_wait ${wait} ${shellQuote(`${rail.peer} to serve ib_write_bw on ${rail.peerIp}:${rail.port}`)} client_try timeout --kill-after=5 ${d + 30} ${argv} || true; rc=$try_rc`,
                      ];
            const figure = `$gbps Gb/s`;
            return [
                ...run,
                `gbps=$(average)`,
                `if [ -n "$gbps" ]; then`,
                `  echo "link: ${where}: RDMA write ${figure} average (ib_write_bw, ${d} s)"`,
                ...(min !== undefined
                    ? [
                          `  if awk -v g="$gbps" 'BEGIN { exit !(g < ${min}) }'; then`,
                          `    ${fail(`${where}: RDMA write ${figure}, want at least ${min} Gb/s (interconnect.linkCheck.rdmaBandwidth.minGbps)`)}`,
                          `  fi`,
                      ]
                    : []),
                `else`,
                `  echo "link: ${where}: RDMA bandwidth not measured (ib_write_bw exit $rc)"`,
                `  tail -n 5 "$log"`,
                `  ${fail(`${where}: RDMA bandwidth not measured: ib_write_bw ${rail.role === "server" ? `served, and ${rail.peer} did not finish a run within ${wait} s` : `could not run against ${rail.peer}`} (exit $rc)`)}`,
                `fi`,
            ];
        }),
        `[ "$rdma_failed" = 0 ] || { sc_log "RDMA bandwidth check failed on ${node}"; exit 1; }`,
    ]);
}

/** The RDMA bandwidth step (`<node>-rdma-bandwidth`): its script, and its `link: …` and `link warning: …` lines read as the link checks' are. */
export const rdmaBandwidthProbe: Probe<RdmaBandwidthSpec, LinkResults> = {
    script: rdmaBandwidthScript,
    parse: linkCheck.parse,
};
