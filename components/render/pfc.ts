// The RocePfc layer: PFC on the RoCE priority with mlnx_qos, the boot-time unit
// that re-applies it, nvidia-peermem, and the script that puts it all back.
import { MANAGED_MARKER, PEERMEM_CONF, PFC_STATE_DIR, STATE_DIR, UNITS, unitPath } from "../../config/hostPaths";
import { HOST_LIB } from "./host/lib";
import { fileDriftLine, readScript, unitDriftLine } from "./host/read";
import { bashScript, heredoc, shellQuote } from "./host/shell";
import { systemdJoin } from "./host/systemd";
import type { StepScripts } from "./step";

/** PFC enable vector with only `priority` lossless: 3 → "0,0,0,1,0,0,0,0". */
export function pfcVector(priority: number): string {
    return Array.from({ length: 8 }, (_, p) => (p === priority ? "1" : "0")).join(",");
}

/**
 * Oneshot unit re-applying PFC, trust and the DSCP → priority entry at boot (mlnx_qos settings do
 * not survive a reboot). mlnx_qos refuses `--trust` and `--dscp2prio` in one call, and setting
 * trust dscp resets the map to its default, so the map entry is set by a second call, after it.
 * `dscp` is the DSCP NCCL marks with (see ./roceChain.ts); it is only set where trust is dscp.
 */
export function renderPfcUnit(interfaces: readonly string[], priority: number, trustDscp: boolean, dscp?: number): string {
    const devices = interfaces.map((i) => `sys-subsystem-net-devices-${systemdEscape(i)}.device`).join(" ");
    return (
        [
            `# ${MANAGED_MARKER}`,
            "[Unit]",
            `Description=spark-cluster: PFC on priority ${priority} for RoCE`,
            `After=network-pre.target ${devices}`,
            `Wants=${devices}`,
            "",
            "[Service]",
            "Type=oneshot",
            "RemainAfterExit=yes",
            ...interfaces.flatMap((iface) => [
                `ExecStart=${systemdJoin(["/usr/bin/env", "mlnx_qos", "-i", iface, "--pfc", pfcVector(priority), ...(trustDscp ? ["--trust", "dscp"] : [])])}`,
                ...(trustDscp && dscp !== undefined
                    ? [`ExecStart=${systemdJoin(["/usr/bin/env", "mlnx_qos", "-i", iface, "--dscp2prio", dscp2prioEntry(dscp, priority)])}`]
                    : []),
            ]),
            "",
            "[Install]",
            "WantedBy=multi-user.target",
        ].join("\n") + "\n"
    );
}

/** `systemd-escape` for an interface name: `-` and other odd bytes become `\xNN`. */
export function systemdEscape(name: string): string {
    return name.replace(/[^A-Za-z0-9_.:]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

/** The `--dscp2prio` argument that maps one DSCP to a priority: `set,26,3`. */
export function dscp2prioEntry(dscp: number, priority: number): string {
    return `set,${dscp},${priority}`;
}

export function renderPeermemConf(): string {
    return `# ${MANAGED_MARKER}\nnvidia-peermem\n`;
}

export interface PfcSpec {
    interfaces: string[];
    /** e.g. "0,0,0,1,0,0,0,0" for priority 3. */
    pfcVector: string;
    trustDscp: boolean;
    /** The priority PFC is enabled on (the one set in `pfcVector`). */
    priority: number;
    /** The DSCP NCCL marks with: with trust dscp the NIC's map must put it on `priority`. */
    dscp: number;
    peermem: boolean;
    /** The persistence unit's content (re-applies PFC at boot). */
    unitContent: string;
    peermemConf: string;
}

/** `pfc_of IF`: the PFC enable vector mlnx_qos prints, as `0,0,0,1,0,0,0,0`. */
const PFC_OF = `pfc_of() { mlnx_qos -i "$1" | awk '/PFC configuration/{p=1} p && $1=="enabled"{v=$2; for(i=3;i<=9;i++) v=v","$i; print v; exit}'; }`;
/** `trust_of IF`: `dscp` or `pcp`. */
const TRUST_OF = `trust_of() { mlnx_qos -i "$1" | awk -F': ' '/Priority trust state/{print $2; exit}'; }`;
/**
 * `prio_of_dscp IF DSCP`: the priority the map gives DSCP, or nothing when the map does not list it
 * (trust pcp prints no map). mlnx_qos prints `prio:P dscp:D,D,…,` lines, eight DSCPs a line, between
 * `dscp2prio mapping:` and `default priority:`.
 */
const PRIO_OF_DSCP =
    `prio_of_dscp() { mlnx_qos -i "$1" | awk -v d="$2" '/^dscp2prio mapping:/{m=1; next} /^default priority:/{m=0} ` +
    `m && match($0, /prio:[0-7] dscp:/){p=substr($0, RSTART+5, 1); n=split(substr($0, RSTART+RLENGTH), a, ","); ` +
    `for(i=1;i<=n;i++) if(a[i]!="" && a[i]+0==d+0){print p; exit}}'; }`;

/**
 * PFC on the RoCE priority, persisted by a oneshot unit, and nvidia-peermem.
 * Records what it found first so delete can restore it. Where mlnx_qos is
 * absent it changes nothing and reports lossy RoCE (last line `status=…`).
 */
export function pfcApplyScript(spec: PfcSpec): string {
    const trust = spec.trustDscp ? " --trust dscp" : "";
    const entry = dscp2prioEntry(spec.dscp, spec.priority);
    return bashScript([
        HOST_LIB,
        PFC_OF,
        TRUST_OF,
        PRIO_OF_DSCP,
        ...(spec.interfaces.length === 0 ? [`echo "status=skipped: ibdev2netdev shows no RoCE device on the interconnect"`, "exit 0"] : []),
        `if ! command -v mlnx_qos >/dev/null; then`,
        `  echo "status=lossy: mlnx_qos not found, RoCE runs without PFC"`,
        `  exit 0`,
        `fi`,
        `mkdir -p ${PFC_STATE_DIR}`,
        ...spec.interfaces.flatMap((iface) => [
            // What we found, for delete: PFC vector, trust, our DSCP and the priority it had (- if unmapped).
            `[ -e ${PFC_STATE_DIR}/${iface} ] || { was=$(prio_of_dscp ${shellQuote(iface)} ${spec.dscp}); printf '%s %s %s %s\\n' "$(pfc_of ${shellQuote(iface)})" "$(trust_of ${shellQuote(iface)})" ${spec.dscp} "\${was:--}" > ${PFC_STATE_DIR}/${iface}; }`,
            `if [ "$(pfc_of ${shellQuote(iface)})" != ${spec.pfcVector} ]${spec.trustDscp ? ` || [ "$(trust_of ${shellQuote(iface)})" != dscp ]` : ""}; then`,
            `  mlnx_qos -i ${shellQuote(iface)} --pfc ${spec.pfcVector}${trust} >/dev/null`,
            `  sc_log "PFC ${spec.pfcVector} set on ${iface}"`,
            `fi`,
            `[ "$(pfc_of ${shellQuote(iface)})" = ${spec.pfcVector} ] || { sc_log "PFC did not take on ${iface}"; exit 1; }`,
            ...(spec.trustDscp
                ? [
                      `[ "$(trust_of ${shellQuote(iface)})" = dscp ] || { sc_log "trust dscp did not take on ${iface}"; exit 1; }`,
                      `was=$(prio_of_dscp ${shellQuote(iface)} ${spec.dscp})`,
                      `if [ "$was" != ${spec.priority} ]; then`,
                      `  mlnx_qos -i ${shellQuote(iface)} --dscp2prio ${entry} >/dev/null`,
                      `  sc_log "DSCP ${spec.dscp} -> priority ${spec.priority} on ${iface} (was \${was:-unmapped})"`,
                      `fi`,
                      `now=$(prio_of_dscp ${shellQuote(iface)} ${spec.dscp})`,
                      `[ "$now" = ${spec.priority} ] || { sc_log "${iface}: DSCP ${spec.dscp} maps to priority \${now:-none}, want ${spec.priority} (mlnx_qos --dscp2prio ${entry} did not take)"; exit 1; }`,
                  ]
                : []),
        ]),
        heredoc(`unit=$(sc_install_file ${unitPath(UNITS.pfc)} 644`, spec.unitContent) + "\n)",
        `if [ "\${unit%% *}" = changed ]; then systemctl daemon-reload; fi`,
        `systemctl enable --quiet ${UNITS.pfc}.service`,
        ...(spec.peermem
            ? [
                  `[ -e ${STATE_DIR}/peermem-was-loaded ] || { if lsmod | grep -q '^nvidia_peermem '; then echo yes; else echo no; fi > ${STATE_DIR}/peermem-was-loaded; }`,
                  heredoc(`sc_install_file ${PEERMEM_CONF} 644 >/dev/null`, spec.peermemConf),
                  `if modprobe nvidia-peermem; then peermem=loaded; else peermem="not available"; fi`,
              ]
            : [
                  // An earlier apply with nvidia-peermem on (the default before it depended on the node's GPU): undo it.
                  `sc_remove_file ${PEERMEM_CONF} >/dev/null`,
                  `if [ "$(cat ${STATE_DIR}/peermem-was-loaded 2>/dev/null)" = no ]; then modprobe -r nvidia-peermem 2>/dev/null || true; fi`,
                  `rm -f ${STATE_DIR}/peermem-was-loaded`,
                  `peermem=off`,
              ]),
        `echo "status=enabled: PFC ${spec.pfcVector} on ${spec.interfaces.join(",")}${spec.trustDscp ? `, trust dscp, DSCP ${spec.dscp} -> priority ${spec.priority}` : ", trust pcp"}; nvidia-peermem $peermem"`,
    ]);
}

/**
 * Reads back PFC (and trust) on each interface, the boot unit (file, enabled) and nvidia-peermem.
 * The module only counts where the last apply loaded it: its status line, on stdin, says so
 * (a Thor has no such module, and that is no drift).
 */
export function pfcReadScript(spec: PfcSpec): string {
    if (spec.interfaces.length === 0) {
        return readScript([]);
    }
    return readScript([
        `last=$(cat)`,
        `command -v mlnx_qos >/dev/null || exit 0`,
        PFC_OF,
        TRUST_OF,
        PRIO_OF_DSCP,
        ...spec.interfaces.flatMap((iface) => [
            `v=$(pfc_of ${shellQuote(iface)} || true); [ "$v" = ${spec.pfcVector} ] || echo "${iface}: PFC $v, want ${spec.pfcVector}"`,
            ...(spec.trustDscp
                ? [
                      `t=$(trust_of ${shellQuote(iface)} || true); [ "$t" = dscp ] || echo "${iface}: trust $t, want dscp"`,
                      `p=$(prio_of_dscp ${shellQuote(iface)} ${spec.dscp} || true); [ "$p" = ${spec.priority} ] || echo "${iface}: DSCP ${spec.dscp} -> priority \${p:-none}, want ${spec.priority}"`,
                  ]
                : []),
        ]),
        fileDriftLine(unitPath(UNITS.pfc), "644", spec.unitContent),
        unitDriftLine(UNITS.pfc, true),
        ...(spec.peermem
            ? [
                  fileDriftLine(PEERMEM_CONF, "644", spec.peermemConf),
                  `case "$last" in *"nvidia-peermem loaded"*) lsmod | grep '^nvidia_peermem ' >/dev/null || echo "nvidia-peermem: not loaded" ;; esac`,
              ]
            : []),
    ]);
}

/** Puts back the PFC state recorded before we changed it, and removes our unit and module config. */
export function pfcRestoreScript(spec: Pick<PfcSpec, "interfaces">): string {
    return bashScript([
        HOST_LIB,
        // --now: the oneshot stays "active (exited)" after a boot ran it, and a removed unit that is
        // still active (or failed) stays listed until reboot; it has no ExecStop, so stopping changes nothing.
        `systemctl disable --now ${UNITS.pfc}.service 2>/dev/null || true`,
        `sc_remove_file ${unitPath(UNITS.pfc)}`,
        `systemctl daemon-reload`,
        `systemctl reset-failed ${UNITS.pfc}.service 2>/dev/null || true`,
        ...spec.interfaces.flatMap((iface) => [
            `if [ -e ${PFC_STATE_DIR}/${iface} ] && command -v mlnx_qos >/dev/null; then`,
            `  read -r vector trust dscp dprio < ${PFC_STATE_DIR}/${iface} || true`,
            // The map entry first: setting trust pcp afterwards hides the whole map.
            `  if [ -n "\${dscp:-}" ] && [ -n "\${dprio:-}" ] && [ "$dprio" != - ]; then mlnx_qos -i ${shellQuote(iface)} --dscp2prio "set,$dscp,$dprio" >/dev/null || true; fi`,
            `  if [ -n "$vector" ]; then mlnx_qos -i ${shellQuote(iface)} --pfc "$vector" >/dev/null; fi`,
            `  if [ -n "\${trust:-}" ]; then mlnx_qos -i ${shellQuote(iface)} --trust "$trust" >/dev/null; fi`,
            `  sc_log "PFC on ${iface} restored to $vector (trust $trust)"`,
            `fi`,
            `rm -f ${PFC_STATE_DIR}/${iface}`,
        ]),
        `sc_remove_file ${PEERMEM_CONF}`,
        `if [ "$(cat ${STATE_DIR}/peermem-was-loaded 2>/dev/null)" = no ]; then modprobe -r nvidia-peermem 2>/dev/null || true; fi`,
        `rm -f ${STATE_DIR}/peermem-was-loaded`,
        "sc_cleanup_state",
    ]);
}

/** The PFC settings of the cluster (config `roce.*`). */
export interface PfcSettings {
    /** Priority that carries RoCE traffic. */
    priority: number;
    /** Also set `--trust dscp`. */
    trustDscp: boolean;
    /** The DSCP NCCL marks with: with trust dscp the NIC's map must put it on `priority`. */
    dscp: number;
    /** Load and persist nvidia-peermem (GPUDirect RDMA). */
    peermem: boolean;
}

/** Everything the PFC layer puts on one node: the spec it renders from, and its apply step's scripts. */
export interface PfcPlan {
    spec: PfcSpec;
    /** The apply step (`<layer>-apply`): set and persist PFC; put back what was found; read back. */
    step: StepScripts;
}

/** The PFC layer's plan for one node's RoCE interfaces, asked for once by its component. */
export function pfcPlan(interfaces: string[], settings: PfcSettings): PfcPlan {
    const spec: PfcSpec = {
        interfaces,
        pfcVector: pfcVector(settings.priority),
        trustDscp: settings.trustDscp,
        priority: settings.priority,
        dscp: settings.dscp,
        peermem: settings.peermem,
        unitContent: renderPfcUnit(interfaces, settings.priority, settings.trustDscp, settings.dscp),
        peermemConf: renderPeermemConf(),
    };
    return { spec, step: { create: pfcApplyScript(spec), delete: pfcRestoreScript(spec), read: pfcReadScript(spec) } };
}
