// The interconnect's netplan file and the scripts that apply, verify and
// remove it. Only the interconnect interfaces appear: the management
// interface is never touched.
import * as yaml from "js-yaml";
import { HOST_LIB } from "./host/lib";
import { fileDriftLine, readScript } from "./host/read";
import { bashScript, heredoc, shellQuote } from "./host/shell";
import { MANAGED_MARKER, NETPLAN_PATH } from "../../config/hostPaths";
import type { StepScripts } from "./step";

export interface NetplanSpec {
    node: string;
    mtu: number;
    /** `routes`: host routes through this interface (a ring's or mesh's other nodes' addresses), rendered as netplan `routes`. */
    interfaces: { name: string; address: string; routes?: { to: string; via: string }[] }[];
    /** Interconnect addresses of the other nodes that must answer, with the interface to reach them by. */
    peers: { node: string; ip: string; via: string }[];
    /**
     * Check each link after the apply and in the read-back: the interface is up, its speed is at
     * least `minSpeedMbps` (when set), and a full-size don't-fragment ping reaches every peer.
     */
    linkCheck?: { minSpeedMbps?: number; lowSpeed: "refuse" | "warn" };
}

/**
 * `sc_link_speed IF`: the speed the interface reports in Mb/s (ethtool's `Speed:`, else
 * /sys/class/net/IF/speed), or nothing when unknown (a link that is down reads -1 or `Unknown!`).
 */
const LINK_LIB = String.raw`sc_link_speed() {
  local s=
  if command -v ethtool >/dev/null; then s=$(ethtool "$1" 2>/dev/null | awk -F': ' '$1 ~ /^[ \t]*Speed$/ {print $2; exit}'); s=${"$"}{s%Mb/s}; fi
  case "$s" in ''|*[!0-9]*) s=$(cat "/sys/class/net/$1/speed" 2>/dev/null || true) ;; esac
  case "$s" in ''|*[!0-9]*) s= ;; esac
  echo "$s"
}
sc_link_state() { cat "/sys/class/net/$1/operstate" 2>/dev/null || echo missing; }`;

/** The size of a ping whose IPv4 packet fills the MTU: MTU - 20 (IP header) - 8 (ICMP header). */
export function fullSizePing(mtu: number): number {
    return mtu - 28;
}

/** The ping that proves the MTU end to end: full size, don't fragment, one try, one second. */
function mtuPing(mtu: number, via: string, ip: string): string {
    return `ping -M do -s ${fullSizePing(mtu)} -c 1 -W 1 -I ${shellQuote(via)} ${shellQuote(ip)} >/dev/null 2>&1`;
}

/**
 * The link checks of the apply: per interface its state and speed, per peer the full-size
 * don't-fragment ping (bounded wait: the peer may still be applying its own MTU). Prints a
 * `link: …` line per result and a `link warning: …` line per slow link allowed by `lowSpeed: warn`;
 * a failure names the node, the interface (both ends for the ping) and the value found, and fails.
 */
function linkCheckLines(spec: NetplanSpec, peerWaitSeconds = 30): string[] {
    const check = spec.linkCheck;
    if (!check) return [];
    const min = check.minSpeedMbps;
    return [
        LINK_LIB,
        `link_failed=0`,
        ...spec.interfaces.flatMap((iface) => {
            const dev = shellQuote(iface.name);
            const where = `${spec.node} ${iface.name}`;
            return [
                `state=$(sc_link_state ${dev}); speed=$(sc_link_speed ${dev})`,
                `echo "link: ${iface.name} $state, \${speed:-unknown} Mb/s"`,
                `[ "$state" = up ] || { sc_log ${shellQuote(where)}": link $state, want up"; link_failed=1; }`,
                ...(min !== undefined
                    ? [
                          `if [ -z "$speed" ] || [ "$speed" -lt ${min} ]; then`,
                          check.lowSpeed === "warn"
                              ? `  echo "link warning: ${where}: speed \${speed:-unknown} Mb/s, want at least ${min} Mb/s (interconnect.linkCheck.lowSpeed is warn)"`
                              : `  sc_log "${where}: speed \${speed:-unknown} Mb/s, want at least ${min} Mb/s (a degraded port, or set interconnect.linkCheck.minSpeedMbps / lowSpeed: warn)"; link_failed=1`,
                          `fi`,
                      ]
                    : []),
            ];
        }),
        ...spec.peers.flatMap((peer) => {
            const ends = `${spec.node} ${peer.via} -> ${peer.node} ${peer.ip}`;
            return [
                `if sc_wait ${peerWaitSeconds} ${shellQuote(`a ${fullSizePing(spec.mtu)}-byte don't-fragment ping ${ends}`)} ${mtuPing(spec.mtu, peer.via, peer.ip)}; then`,
                `  echo ${shellQuote(`link: ${ends}: MTU ${spec.mtu} end to end`)}`,
                `else`,
                `  sc_log "${ends}: a ${fullSizePing(spec.mtu)}-byte don't-fragment ping gets no answer: the MTU is below ${spec.mtu} on the way (${spec.node} ${peer.via} has $(cat /sys/class/net/${shellQuote(peer.via)}/mtu); check ${peer.node}'s interface on ${peer.ip})"; link_failed=1`,
                `fi`,
            ];
        }),
        `[ "$link_failed" = 0 ] || { sc_log "link check failed on ${spec.node}"; exit 1; }`,
    ];
}

/** What the link checks printed: each `link: …` line (a result) and each `link warning: …` line, without their prefix. */
export interface LinkResults {
    links: string[];
    warnings: string[];
}

/**
 * The link checks: the lines the apply runs after netplan apply ({@link linkCheckLines}), and the
 * reader of the `link: …` and `link warning: …` lines they print (the RDMA bandwidth step prints
 * the same two kinds: render/rdmaBandwidth.ts). Every other line of the output is left out.
 */
export const linkCheck: { lines(spec: NetplanSpec, peerWaitSeconds?: number): string[]; parse(stdout: string): LinkResults } = {
    lines: linkCheckLines,
    parse(stdout) {
        const lines = stdout.split("\n");
        return {
            links: lines.filter((l) => l.startsWith("link: ")).map((l) => l.slice("link: ".length)),
            warnings: lines.filter((l) => l.startsWith("link warning: ")).map((l) => l.slice("link warning: ".length)),
        };
    },
};

/** The link checks of the read-back: a link down, slower than the minimum, or short of the MTU somewhere on the way. */
function linkReadLines(spec: Pick<NetplanSpec, "interfaces" | "mtu" | "node" | "peers" | "linkCheck">): string[] {
    const check = spec.linkCheck;
    if (!check) return [];
    const min = check.minSpeedMbps;
    return [
        LINK_LIB,
        ...spec.interfaces.flatMap((iface) => {
            const dev = shellQuote(iface.name);
            return [
                `if [ -e /sys/class/net/${dev} ]; then`,
                `  state=$(sc_link_state ${dev}); [ "$state" = up ] || echo "${iface.name}: link $state, want up"`,
                ...(min !== undefined
                    ? [
                          `  speed=$(sc_link_speed ${dev}); if [ -z "$speed" ] || [ "$speed" -lt ${min} ]; then echo "${iface.name}: speed \${speed:-unknown} Mb/s, want at least ${min} Mb/s"; fi`,
                      ]
                    : []),
                `fi`,
            ];
        }),
        ...(spec.peers ?? []).map(
            (peer) =>
                `if [ -e /sys/class/net/${shellQuote(peer.via)} ]; then ${mtuPing(spec.mtu, peer.via, peer.ip)} || ` +
                `echo ${shellQuote(`${peer.via} -> ${peer.node} ${peer.ip}: no answer to a ${fullSizePing(spec.mtu)}-byte don't-fragment ping (MTU ${spec.mtu} end to end)`)}; fi`,
        ),
    ];
}

/**
 * How the YAML is written: two-space indent, sequences indented under their key, block style
 * throughout, no folding, no anchors. A string that would read back as another type (`'123'`,
 * `'true'`) is quoted; addresses and kernel interface names come out plain.
 */
const NETPLAN_DUMP_OPTIONS: yaml.DumpOptions = {
    // Maps keep insertion order (a plain object would move an all-digit interface name first).
    schema: yaml.DUMP_SCHEMA.withTags(yaml.realMapTag),
    indent: 2,
    seqNoIndent: false,
    flowLevel: -1,
    lineWidth: -1,
    noRefs: true,
};

/** netplan YAML for the interconnect: static addresses, MTU, no DHCP, no link-local. */
export function renderNetplan(spec: NetplanSpec): string {
    const ethernets = new Map(
        spec.interfaces.map((iface) => [
            iface.name,
            {
                dhcp4: false,
                dhcp6: false,
                "link-local": [],
                addresses: [iface.address],
                mtu: spec.mtu,
                optional: true,
                ...(iface.routes !== undefined && iface.routes.length > 0 ? { routes: iface.routes.map((r) => ({ to: r.to, via: r.via })) } : {}),
            },
        ]),
    );
    const header = [`# ${MANAGED_MARKER}`, `# Interconnect of ${spec.node}; removed by \`pulumi destroy\`.`];
    return header.join("\n") + "\n" + yaml.dump({ network: { version: 2, renderer: "networkd", ethernets } }, NETPLAN_DUMP_OPTIONS);
}

/**
 * The interface's IPv6 link-local state as found, and its restore. Our netplan file turns
 * link-local addressing off (`link-local: []`): networkd sets the interface's IPv6 address
 * generation mode to none and drops its fe80::/64 address, and nothing gives it back when the file
 * goes. Saved before the first apply: the mode (/proc/sys/net/ipv6/conf/IF/addr_gen_mode) and the
 * link-local addresses; restored on destroy by writing the mode back (through the sysctl, which
 * also makes the link-local address again; where /proc/sys is read-only, as in a container, through
 * netlink like networkd, which does not), then adding any saved address still missing.
 */
const LINK_LOCAL_LIB = [
    `sc_save_link_local() {`,
    `  local conf=/proc/sys/net/ipv6/conf/$1/addr_gen_mode`,
    `  [ -r "$conf" ] || return 0`,
    `  mkdir -p "$SC_STATE/ipv6ll"`,
    `  { cat "$conf"; ip -6 -o addr show dev "$1" scope link | awk '{print $4}'; } > "$SC_STATE/ipv6ll/$1"`,
    `}`,
    `sc_restore_link_local() {`,
    `  local saved="$SC_STATE/ipv6ll/$1" conf=/proc/sys/net/ipv6/conf/$1/addr_gen_mode mode name address`,
    `  [ -e "$saved" ] || return 0`,
    `  mode=$(head -n 1 "$saved")`,
    `  if [ "$(cat "$conf" 2>/dev/null)" != "$mode" ]; then`,
    `    if [ -w "$conf" ]; then`,
    `      echo "$mode" > "$conf" || sc_log "$1: cannot set addr_gen_mode $mode"`,
    `    else`,
    `      case "$mode" in 0) name=eui64 ;; 1) name=none ;; 2) name=stable_secret ;; *) name=random ;; esac`,
    `      ip link set dev "$1" addrgenmode "$name" || sc_log "$1: cannot set addrgenmode $name"`,
    `    fi`,
    `  fi`,
    `  tail -n +2 "$saved" | while read -r address; do`,
    `    ip -6 -o addr show dev "$1" scope link | grep -F " $address " >/dev/null || ip -6 addr add "$address" dev "$1" scope link || sc_log "$1: cannot add $address back"`,
    `  done`,
    `  rm -f "$saved"`,
    `}`,
];

/**
 * `netplan apply`, again (for at most 10 s, through sc_wait) when it lost a race with a
 * daemon-reload. netplan apply (netplan.io 0.106, cli/commands/apply.py) lists NetworkManager's
 * runtime profiles (`/run/NetworkManager/system-connections/netplan-*`), then opens each
 * (cli/utils.py nm_interfaces); systemd's netplan generator, which every `systemctl daemon-reload`
 * runs (our other steps' unit files on the same node, at the same time), writes those files anew
 * in between, and apply fails with FileNotFoundError naming one. Seen on the lab's DGX OS-like
 * nodes (netplan with NetworkManager). Any other failure is the apply's own: its output, at once.
 */
export const NETPLAN_APPLY_LIB = [
    `sc_netplan_try() {`,
    `  if netplan_out=$(netplan apply 2>&1); then netplan_rc=0; return 0; fi`,
    `  netplan_rc=1`,
    `  case "$netplan_out" in`,
    `    *FileNotFoundError*/run/NetworkManager/system-connections/netplan-*) sc_log "netplan apply: a NetworkManager runtime profile went away while it read it (a daemon-reload at the same time); again"; return 1 ;;`,
    `  esac`,
    `}`,
    `sc_netplan_apply() {`,
    `  netplan_out="" netplan_rc=1`,
    `  sc_wait 10 "netplan apply without a daemon-reload beside it" sc_netplan_try || true`,
    `  if [ "$netplan_rc" = 0 ]; then [ -z "$netplan_out" ] || printf '%s\\n' "$netplan_out"; return 0; fi`,
    `  printf '%s\\n' "$netplan_out" >&2`,
    `  return 1`,
    `}`,
];

/** True (exit 0) when the host route is in the main table as netplan puts it: to TO via VIA, out of IFACE. */
function routePresent(iface: string, route: { to: string; via: string }): string {
    return `ip -4 route show to exact ${shellQuote(route.to)} via ${shellQuote(route.via)} dev ${shellQuote(iface)} | grep -q .`;
}

/**
 * Installs the netplan file, applies it when anything differs, then verifies:
 * every address is up with the MTU and every peer answers over the link
 * (bounded wait, the peers converge in parallel). On failure it puts the
 * previous file back, re-applies, and fails.
 */
export function netplanApplyScript(spec: NetplanSpec, peerWaitSeconds = 120): string {
    const checks = spec.interfaces.map(
        (iface) =>
            `ip -o -4 addr show dev ${shellQuote(iface.name)} | grep -qF ${shellQuote(`inet ${iface.address}`)} && ` +
            `[ "$(cat /sys/class/net/${iface.name}/mtu)" = ${spec.mtu} ]` +
            (iface.routes ?? []).map((route) => ` && ${routePresent(iface.name, route)}`).join(""),
    );
    const originalMtu = spec.interfaces.map(
        (iface) =>
            `[ -e "$SC_STATE/mtu/${iface.name}" ] || { mkdir -p "$SC_STATE/mtu"; cat /sys/class/net/${shellQuote(iface.name)}/mtu > "$SC_STATE/mtu/${iface.name}"; }`,
    );
    const originalLinkLocal = spec.interfaces.map((iface) => `[ -e "$SC_STATE/ipv6ll/${iface.name}" ] || sc_save_link_local ${shellQuote(iface.name)}`);
    const peerChecks = spec.peers.map(
        (peer) =>
            `sc_wait ${peerWaitSeconds} ${shellQuote(`${peer.node} at ${peer.ip} over ${peer.via}`)} ` +
            `ping -c 1 -W 1 -I ${shellQuote(peer.via)} ${shellQuote(peer.ip)} >/dev/null`,
    );
    return bashScript([
        HOST_LIB,
        ...spec.interfaces.map((iface) => `[ -e /sys/class/net/${shellQuote(iface.name)} ] || { sc_log "no interface ${iface.name} on $(hostname)"; exit 1; }`),
        ...originalMtu,
        ...LINK_LOCAL_LIB,
        ...originalLinkLocal,
        ...NETPLAN_APPLY_LIB,
        `rollback=$(mktemp); had_previous=0`,
        `if [ -e ${NETPLAN_PATH} ]; then cp -a ${NETPLAN_PATH} "$rollback"; had_previous=1; fi`,
        heredoc(`result=$(sc_install_file ${NETPLAN_PATH} 600`, renderNetplan(spec)) + "\n)",
        `echo "$result"`,
        `addresses_ok() { ${checks.join(" && ") || "true"}; }`,
        `if [ "\${result%% *}" = changed ] || ! addresses_ok; then`,
        `  sc_log "netplan apply"`,
        `  sc_netplan_apply`,
        `fi`,
        `verify() {`,
        `  sc_wait 30 "interconnect addresses and MTU" addresses_ok || return 1`,
        ...peerChecks.map((line) => `  ${line} || return 1`),
        `}`,
        `if ! verify; then`,
        `  sc_log "verification failed: restoring the previous netplan file"`,
        `  if [ "$had_previous" = 1 ]; then cp -a "$rollback" ${NETPLAN_PATH}; else rm -f ${NETPLAN_PATH}; fi`,
        `  sc_netplan_apply || true`,
        `  rm -f "$rollback"`,
        `  exit 1`,
        `fi`,
        `rm -f "$rollback"`,
        ...linkCheckLines(spec, peerWaitSeconds),
        `sc_log "interconnect up: ${spec.interfaces.map((i) => `${i.name}=${i.address}`).join(" ")} mtu ${spec.mtu}; peers answer"`,
    ]);
}

/** Reads back the netplan file and each interface's address and MTU (changed by hand, or by another tool). */
export function netplanReadScript(spec: Pick<NetplanSpec, "interfaces" | "mtu" | "node"> & Partial<Pick<NetplanSpec, "peers" | "linkCheck">>): string {
    return readScript([
        fileDriftLine(NETPLAN_PATH, "600", renderNetplan(spec as NetplanSpec)),
        ...spec.interfaces.flatMap((iface) => {
            const dev = shellQuote(iface.name);
            return [
                `if [ ! -e /sys/class/net/${dev} ]; then echo ${shellQuote(`${iface.name}: no such interface`)}; else`,
                `  ip -o -4 addr show dev ${dev} | grep -F ${shellQuote(`inet ${iface.address} `)} >/dev/null || ` +
                    `echo "${iface.name}: address ${iface.address} missing (has: $(ip -o -4 addr show dev ${dev} | awk '{print $4}' | paste -sd, -))"`,
                `  mtu=$(cat /sys/class/net/${dev}/mtu); [ "$mtu" = ${spec.mtu} ] || echo "${iface.name}: MTU $mtu, want ${spec.mtu}"`,
                ...(iface.routes ?? []).map(
                    (route) => `  ${routePresent(iface.name, route)} || echo ${shellQuote(`${iface.name}: route to ${route.to} via ${route.via} missing`)}`,
                ),
                `fi`,
            ];
        }),
        ...linkReadLines({ peers: [], ...spec }),
    ]);
}

/** Removes our netplan file (restoring one we replaced), re-applies, clears our addresses, and puts back the MTU and IPv6 link-local state found. */
export function netplanDeleteScript(spec: Pick<NetplanSpec, "interfaces">): string {
    return bashScript([
        HOST_LIB,
        ...LINK_LOCAL_LIB,
        ...NETPLAN_APPLY_LIB,
        `sc_remove_file ${NETPLAN_PATH}`,
        `sc_netplan_apply`,
        ...spec.interfaces.flatMap((iface) => [
            `if [ -e /sys/class/net/${shellQuote(iface.name)} ]; then`,
            `  ip addr del ${shellQuote(iface.address)} dev ${shellQuote(iface.name)} 2>/dev/null || true`,
            `  if [ -e "$SC_STATE/mtu/${iface.name}" ]; then ip link set dev ${shellQuote(iface.name)} mtu "$(cat "$SC_STATE/mtu/${iface.name}")"; rm -f "$SC_STATE/mtu/${iface.name}"; fi`,
            `  sc_restore_link_local ${shellQuote(iface.name)}`,
            `fi`,
        ]),
        `sc_cleanup_state`,
    ]);
}

/** Everything the interconnect layer puts on one node: the netplan file, and its apply step's scripts. */
export interface NetplanPlan {
    /** The rendered netplan file (inside the apply script). */
    netplan: string;
    /** The apply step (`<layer>-apply`): install, apply and verify; remove and restore; read back. */
    step: StepScripts;
}

/** The interconnect layer's plan for one node, asked for once by its component. */
export function netplanPlan(spec: NetplanSpec): NetplanPlan {
    return {
        netplan: renderNetplan(spec),
        step: { create: netplanApplyScript(spec), delete: netplanDeleteScript(spec), read: netplanReadScript(spec) },
    };
}
