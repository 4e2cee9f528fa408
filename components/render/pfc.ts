// Files of the RocePfc component: the boot-time unit and the modules-load.d entry.
import { MANAGED_MARKER } from "./hostLib";
import { systemdJoin } from "./systemd";

/** PFC enable vector with only `priority` lossless: 3 → "0,0,0,1,0,0,0,0". */
export function pfcVector(priority: number): string {
    return Array.from({ length: 8 }, (_, p) => (p === priority ? "1" : "0")).join(",");
}

/** Oneshot unit re-applying PFC at boot (mlnx_qos settings do not survive a reboot). */
export function renderPfcUnit(interfaces: readonly string[], priority: number, trustDscp: boolean): string {
    const devices = interfaces.map((i) => `sys-subsystem-net-devices-${systemdEscape(i)}.device`).join(" ");
    return [
        `# ${MANAGED_MARKER}`,
        "[Unit]",
        `Description=spark-cluster: PFC on priority ${priority} for RoCE`,
        `After=network-pre.target ${devices}`,
        `Wants=${devices}`,
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        ...interfaces.map(
            (iface) => `ExecStart=${systemdJoin(["/usr/bin/env", "mlnx_qos", "-i", iface, "--pfc", pfcVector(priority), ...(trustDscp ? ["--trust", "dscp"] : [])])}`,
        ),
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ].join("\n") + "\n";
}

/** `systemd-escape` for an interface name: `-` and other odd bytes become `\xNN`. */
export function systemdEscape(name: string): string {
    return name.replace(/[^A-Za-z0-9_.:]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

export function renderPeermemConf(): string {
    return `# ${MANAGED_MARKER}\nnvidia-peermem\n`;
}
