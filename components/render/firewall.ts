// The Firewall layer: an nftables table of our own on every node. Only the
// cluster's own nodes (their interconnect addresses) reach its internal ports
// — Ray's (pinned), torch/vLLM's and NCCL's (several random) — while SSH, the
// API port (head) and the ports the user lists stay reachable from outside.
// Nobody else's rules are touched: the file replaces our table alone, and a
// drop in our chain holds whatever other tables (ufw, docker) accept.
import type { FirewallPolicy } from "../../config";
import { renderTransitChain } from "./fabric";
import { HOST_LIB } from "./host/lib";
import { fileDriftLine, readScript, unitDriftLine } from "./host/read";
import { bashScript, heredoc, shellQuote } from "./host/shell";
import { systemdJoin } from "./host/systemd";
import { CONFIG_DIR, FIREWALLED_UNITS, FIREWALL_RULES_PATH, MANAGED_MARKER, UNITS, dropInDir, firewallDropInPath, unitPath } from "../../config/hostPaths";
import type { StepScripts } from "./step";
import { journalTailLine } from "./host/journal";

/** Our nftables table: `inet spark_cluster`. */
export const NFT_TABLE = "spark_cluster";
/** Where Debian and Ubuntu install nft. */
const NFT = "/usr/sbin/nft";

/** What one node's firewall lets in: the policy config/resolve.ts decides. */
export type FirewallSpec = FirewallPolicy;

function set(values: readonly (string | number)[]): string {
    return `{ ${values.join(", ")} }`;
}

/** The ruleset file: deletes our table and defines it again, in one atomic `nft -f`. */
export function renderFirewallRules(spec: FirewallSpec): string {
    const lines = [
        `# ${MANAGED_MARKER}`,
        `# Firewall of ${spec.node}: \`nft -f\` replaces the table inet ${NFT_TABLE} and nothing else.`,
        `table inet ${NFT_TABLE}`,
        `delete table inet ${NFT_TABLE}`,
        `table inet ${NFT_TABLE} {`,
        `    set members {`,
        `        type ipv4_addr`,
        `        elements = ${set(spec.members)}`,
        `    }`,
        `    chain input {`,
        `        type filter hook input priority filter; policy accept;`,
        `        iif "lo" accept`,
        `        ct state established,related accept`,
        `        ip saddr @members accept`,
        // ICMP and ICMPv6 by number: nft resolves names through /etc/protocols, which a minimal
        // system may lack (no netbase).
        `        meta l4proto { 1, 58 } accept`,
        // DHCP and DHCPv6 clients: the management address keeps its lease.
        `        udp dport { 68, 546 } accept`,
        ...(spec.openTcp.length > 0 ? [`        tcp dport ${set(spec.openTcp)} accept`] : []),
        ...(spec.api ? [`        ${spec.api.allowFrom.length > 0 ? `ip saddr ${set(spec.api.allowFrom)} ` : ""}tcp dport ${spec.api.port} accept`] : []),
        ...(spec.openUdp.length > 0 ? [`        udp dport ${set(spec.openUdp)} accept`] : []),
        `        meta l4proto tcp reject with tcp reset`,
        `        reject`,
        `    }`,
        ...(spec.transitInterfaces !== undefined && spec.transitInterfaces.length > 0 ? renderTransitChain(spec.transitInterfaces) : []),
        `}`,
    ];
    return lines.join("\n") + "\n";
}

/**
 * Loads our rules at boot, before the network and every unit of ours. A reload loads the file again
 * (`nft -f` replaces the table in one transaction): a changed rule set never leaves the node
 * without a table, and it does not restart the units that require this one (a restart would).
 */
export function renderFirewallUnit(): string {
    return (
        [
            `# ${MANAGED_MARKER}`,
            "[Unit]",
            "Description=spark-cluster: firewall (nftables table inet spark_cluster)",
            "DefaultDependencies=no",
            "Before=network-pre.target shutdown.target",
            "Wants=network-pre.target",
            "Conflicts=shutdown.target",
            "",
            "[Service]",
            "Type=oneshot",
            "RemainAfterExit=yes",
            `ExecStart=${systemdJoin([NFT, "-f", FIREWALL_RULES_PATH])}`,
            `ExecReload=${systemdJoin([NFT, "-f", FIREWALL_RULES_PATH])}`,
            `ExecStop=${systemdJoin([NFT, "delete", "table", "inet", NFT_TABLE])}`,
            "",
            "[Install]",
            "WantedBy=multi-user.target",
        ].join("\n") + "\n"
    );
}

/**
 * The drop-in that orders a unit of ours that listens (FIREWALLED_UNITS) after the firewall unit and
 * keeps it from starting without it: after a boot where our rules failed to load, Ray and the
 * engine stay down rather than listen unguarded. (Requires= also stops them if the firewall unit is
 * stopped by hand; a changed rule set reloads it, which does not reach them.)
 */
export function renderFirewallDropIn(): string {
    return (
        [
            `# ${MANAGED_MARKER}`,
            "# firewall.enabled: this unit starts only with spark-cluster's firewall loaded, and after it.",
            "[Unit]",
            `Requires=${UNITS.firewall}.service`,
            `After=${UNITS.firewall}.service`,
        ].join("\n") + "\n"
    );
}

/**
 * Installs the rules and the boot unit, loads the rules when they changed or are not loaded, and
 * verifies the table is there. Prints `status=…` last; says how to let members through when ufw
 * is active (its own rules may drop what ours accept).
 */
export function firewallApplyScript(spec: FirewallSpec): string {
    const ufwAllow = spec.members.map((ip) => `ufw allow from ${ip}`).join("; ");
    return bashScript([
        HOST_LIB,
        `command -v nft >/dev/null || { echo ${shellQuote(`nft is not installed on ${spec.node}: install nftables (apt-get install nftables), or set spark-cluster:firewall.enabled to false`)} >&2; exit 1; }`,
        heredoc(`rules=$(sc_install_file ${FIREWALL_RULES_PATH} 600`, renderFirewallRules(spec)) + "\n)",
        heredoc(`unit=$(sc_install_file ${unitPath(UNITS.firewall)} 644`, renderFirewallUnit()) + "\n)",
        `reload=no; if [ "\${unit%% *}" = changed ]; then reload=yes; fi`,
        ...FIREWALLED_UNITS.map(
            (unit) =>
                heredoc(`dropin=$(sc_install_file ${firewallDropInPath(unit)} 644`, renderFirewallDropIn()) +
                `\n)\nif [ "\${dropin%% *}" = changed ]; then reload=yes; fi`,
        ),
        `if [ "$reload" = yes ]; then systemctl daemon-reload; fi`,
        `systemctl enable --quiet ${UNITS.firewall}.service`,
        `${NFT} -c -f ${FIREWALL_RULES_PATH}`,
        // Loading can fail for a moment while netplan applies the interconnect beside it (the two
        // steps run in parallel): three tries, then the unit's log. A running unit is reloaded, not
        // restarted: a restart would restart every unit that requires it (the drop-ins above).
        `if [ "\${rules%% *}" = changed ] || ! ${NFT} list table inet ${NFT_TABLE} >/dev/null 2>&1; then`,
        `  for try in 1 2 3; do`,
        `    if systemctl is-active --quiet ${UNITS.firewall}.service; then action=reload; else action=start; fi`,
        `    if systemctl "$action" ${UNITS.firewall}.service; then break; fi`,
        `    if [ "$try" = 3 ]; then sc_log "the firewall unit failed 3 times; its last log lines:"; ${journalTailLine(UNITS.firewall, 20)}; exit 1; fi`,
        `    sc_log "the firewall unit failed (try $try of 3); trying again in 1 s"; sleep 1`,
        `  done`,
        `  sc_log "firewall rules loaded"`,
        `fi`,
        `${NFT} list table inet ${NFT_TABLE} >/dev/null || { sc_log "the table inet ${NFT_TABLE} is not loaded"; exit 1; }`,
        `if command -v ufw >/dev/null && ufw status 2>/dev/null | grep -q '^Status: active'; then`,
        `  echo ${shellQuote(`status=ufw active: it may drop what the cluster's nodes need from each other; let them through with: ${ufwAllow}`)}`,
        `else`,
        `  echo ${shellQuote(`status=enabled: only the cluster's nodes reach its internal ports; open to all: tcp ${spec.openTcp.join(",") || "-"}${spec.api ? `, api ${spec.api.port}${spec.api.allowFrom.length > 0 ? ` from ${spec.api.allowFrom.join(",")}` : ""}` : ""}${spec.openUdp.length > 0 ? `, udp ${spec.openUdp.join(",")}` : ""}`)}`,
        `fi`,
    ]);
}

/** Reads back the rules file, the boot unit (file, enabled), the drop-ins and that our table is loaded. */
export function firewallReadScript(spec: FirewallSpec): string {
    return readScript([
        fileDriftLine(FIREWALL_RULES_PATH, "600", renderFirewallRules(spec)),
        fileDriftLine(unitPath(UNITS.firewall), "644", renderFirewallUnit()),
        ...FIREWALLED_UNITS.map((unit) => fileDriftLine(firewallDropInPath(unit), "644", renderFirewallDropIn())),
        unitDriftLine(UNITS.firewall, true),
        `${NFT} list table inet ${NFT_TABLE} >/dev/null 2>&1 || echo ${shellQuote(`nftables table inet ${NFT_TABLE}: not loaded`)}`,
    ]);
}

/**
 * Removes the drop-ins first (so stopping the firewall unit stops nothing else), then our table,
 * unit and rules file; nobody else's rules are touched.
 */
export function firewallRemoveScript(): string {
    return bashScript([
        HOST_LIB,
        ...FIREWALLED_UNITS.flatMap((unit) => [`sc_remove_file ${firewallDropInPath(unit)}`, `rmdir ${dropInDir(unit)} 2>/dev/null || true`]),
        `systemctl daemon-reload`,
        `systemctl disable --now ${UNITS.firewall}.service 2>/dev/null || true`,
        `if command -v nft >/dev/null; then ${NFT} delete table inet ${NFT_TABLE} 2>/dev/null || true; fi`,
        `sc_remove_file ${unitPath(UNITS.firewall)}`,
        `sc_remove_file ${FIREWALL_RULES_PATH}`,
        `systemctl daemon-reload`,
        `systemctl reset-failed ${UNITS.firewall}.service 2>/dev/null || true`,
        `rmdir ${CONFIG_DIR} 2>/dev/null || true`,
        "sc_cleanup_state",
    ]);
}

/** Everything the firewall layer puts on one node: its apply step's scripts. */
export interface FirewallPlan {
    /** The apply step (`<layer>-apply`): rules file and boot unit, loaded; removed (nobody else's rules); read back. */
    step: StepScripts;
}

/** The firewall layer's plan for one node, asked for once by its component. */
export function firewallPlan(spec: FirewallSpec): FirewallPlan {
    return { step: { create: firewallApplyScript(spec), delete: firewallRemoveScript(), read: firewallReadScript(spec) } };
}
