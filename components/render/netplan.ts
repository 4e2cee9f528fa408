// The interconnect's netplan file and the scripts that apply, verify and
// remove it. Only the interconnect interfaces appear: the management
// interface is never touched.
import * as yaml from "js-yaml";
import { HOST_LIB } from "./host/lib";
import { fileDriftLine, readScript } from "./host/read";
import { bashScript, heredoc, shellQuote } from "./host/shell";
import { MANAGED_MARKER, NETPLAN_PATH } from "./paths";
import type { StepScripts } from "./step";

export interface NetplanSpec {
    node: string;
    mtu: number;
    interfaces: { name: string; address: string }[];
    /** Interconnect addresses of the other nodes that must answer, with the interface to reach them by. */
    peers: { node: string; ip: string; via: string }[];
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
            { dhcp4: false, dhcp6: false, "link-local": [], addresses: [iface.address], mtu: spec.mtu, optional: true },
        ]),
    );
    const header = [`# ${MANAGED_MARKER}`, `# Interconnect of ${spec.node}; removed by \`pulumi destroy\`.`];
    return header.join("\n") + "\n" + yaml.dump({ network: { version: 2, renderer: "networkd", ethernets } }, NETPLAN_DUMP_OPTIONS);
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
            `[ "$(cat /sys/class/net/${iface.name}/mtu)" = ${spec.mtu} ]`,
    );
    const originalMtu = spec.interfaces.map(
        (iface) =>
            `[ -e "$SC_STATE/mtu/${iface.name}" ] || { mkdir -p "$SC_STATE/mtu"; cat /sys/class/net/${shellQuote(iface.name)}/mtu > "$SC_STATE/mtu/${iface.name}"; }`,
    );
    const peerChecks = spec.peers.map(
        (peer) =>
            `sc_wait ${peerWaitSeconds} ${shellQuote(`${peer.node} at ${peer.ip} over ${peer.via}`)} ` +
            `ping -c 1 -W 1 -I ${shellQuote(peer.via)} ${shellQuote(peer.ip)} >/dev/null`,
    );
    return bashScript([
        HOST_LIB,
        ...spec.interfaces.map((iface) => `[ -e /sys/class/net/${shellQuote(iface.name)} ] || { sc_log "no interface ${iface.name} on $(hostname)"; exit 1; }`),
        ...originalMtu,
        `rollback=$(mktemp); had_previous=0`,
        `if [ -e ${NETPLAN_PATH} ]; then cp -a ${NETPLAN_PATH} "$rollback"; had_previous=1; fi`,
        heredoc(`result=$(sc_install_file ${NETPLAN_PATH} 600`, renderNetplan(spec)) + "\n)",
        `echo "$result"`,
        `addresses_ok() { ${checks.join(" && ") || "true"}; }`,
        `if [ "\${result%% *}" = changed ] || ! addresses_ok; then`,
        `  sc_log "netplan apply"`,
        `  netplan apply`,
        `fi`,
        `verify() {`,
        `  sc_wait 30 "interconnect addresses and MTU" addresses_ok || return 1`,
        ...peerChecks.map((line) => `  ${line} || return 1`),
        `}`,
        `if ! verify; then`,
        `  sc_log "verification failed: restoring the previous netplan file"`,
        `  if [ "$had_previous" = 1 ]; then cp -a "$rollback" ${NETPLAN_PATH}; else rm -f ${NETPLAN_PATH}; fi`,
        `  netplan apply || true`,
        `  rm -f "$rollback"`,
        `  exit 1`,
        `fi`,
        `rm -f "$rollback"`,
        `sc_log "interconnect up: ${spec.interfaces.map((i) => `${i.name}=${i.address}`).join(" ")} mtu ${spec.mtu}; peers answer"`,
    ]);
}

/** Reads back the netplan file and each interface's address and MTU (changed by hand, or by another tool). */
export function netplanReadScript(spec: Pick<NetplanSpec, "interfaces" | "mtu" | "node">): string {
    return readScript([
        fileDriftLine(NETPLAN_PATH, "600", renderNetplan(spec as NetplanSpec)),
        ...spec.interfaces.flatMap((iface) => {
            const dev = shellQuote(iface.name);
            return [
                `if [ ! -e /sys/class/net/${dev} ]; then echo ${shellQuote(`${iface.name}: no such interface`)}; else`,
                `  ip -o -4 addr show dev ${dev} | grep -F ${shellQuote(`inet ${iface.address} `)} >/dev/null || ` +
                    `echo "${iface.name}: address ${iface.address} missing (has: $(ip -o -4 addr show dev ${dev} | awk '{print $4}' | paste -sd, -))"`,
                `  mtu=$(cat /sys/class/net/${dev}/mtu); [ "$mtu" = ${spec.mtu} ] || echo "${iface.name}: MTU $mtu, want ${spec.mtu}"`,
                `fi`,
            ];
        }),
    ]);
}

/** Removes our netplan file (restoring one we replaced), re-applies, and clears our addresses and MTU. */
export function netplanDeleteScript(spec: Pick<NetplanSpec, "interfaces">): string {
    return bashScript([
        HOST_LIB,
        `sc_remove_file ${NETPLAN_PATH}`,
        `netplan apply`,
        ...spec.interfaces.flatMap((iface) => [
            `if [ -e /sys/class/net/${shellQuote(iface.name)} ]; then`,
            `  ip addr del ${shellQuote(iface.address)} dev ${shellQuote(iface.name)} 2>/dev/null || true`,
            `  if [ -e "$SC_STATE/mtu/${iface.name}" ]; then ip link set dev ${shellQuote(iface.name)} mtu "$(cat "$SC_STATE/mtu/${iface.name}")"; rm -f "$SC_STATE/mtu/${iface.name}"; fi`,
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
