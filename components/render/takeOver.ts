// The take-over (interconnect.takeOver: true): other tools' claims on the interconnect's ports,
// moved aside with a backup before our netplan file is applied, and put back by destroy.
//   - netplan files of other tools that define a port of ours (NVIDIA's 40-cx7.yaml, NVIDIA
//     Sync's 99-nvidia-sync-cluster.yaml, eugr's 98-spark-vllm-docker.yaml, DGX OS's
//     NetworkManager profiles stored as 90-NM-<uuid>.yaml): a file that defines only our ports is
//     moved aside; one that defines other interfaces too is rewritten without ours. The original
//     is kept byte for byte (cp -a) and restored by destroy.
//   - NetworkManager: a conf.d drop-in marks our ports unmanaged (and `nmcli device set … managed
//     no` takes effect at once); the connections active on them are recorded, and destroy removes
//     the drop-in and brings them up again.
//   - addresses on our ports that our config does not give them are removed (their owner, netplan
//     or NetworkManager, puts them back after destroy).
// The node check (./firstContactFindings.ts) refuses what the take-over cannot do (a port that is
// a member of a bond, bridge or vlan), so this script only acts on what it was shown.
import { HOST_LIB } from "./host/lib";
import { fileDriftLine, readScript } from "./host/read";
import { bashScript, heredoc, shellQuote } from "./host/shell";
import { NETPLAN_APPLY_LIB } from "./netplan";
import { MANAGED_MARKER, NETPLAN_PATH, NM_UNMANAGED_CONF, TAKEOVER_STATE_DIR } from "../../config/hostPaths";
import type { StepScripts } from "./step";

export interface TakeOverSpec {
    node: string;
    /** The interconnect ports and the address each gets from us. */
    interfaces: { name: string; address: string }[];
}

/** NetworkManager's drop-in: our ports unmanaged (NetworkManager.conf(5), [device-*] `managed`). */
export function renderNmUnmanagedConf(interfaces: readonly string[]): string {
    return [
        `# ${MANAGED_MARKER}`,
        "# The interconnect's ports belong to spark-cluster's netplan file (renderer networkd); removed by `pulumi destroy`.",
        "[device-spark-cluster-interconnect]",
        `match-device=${interfaces.map((i) => `interface-name:${i}`).join(",")}`,
        "managed=0",
        "",
    ].join("\n");
}

/**
 * Python (PyYAML, which netplan.io needs) that finds every netplan file but ours defining one of
 * the ports named on its command line (after the mode) and, in mode `apply`, backs it up into
 * the take-over's directory (once: a later run keeps the first backup), then moves it aside or
 * rewrites it without our ports' definitions; it prints `moved PATH` / `rewrote PATH`. In mode
 * `check` it only prints `PATH defines IFACE` for each. A bond, bridge or vlan built on one of our
 * ports stops it (`refuse …`, exit 3): the node check refuses that before anything runs.
 */
export const TAKE_OVER_PY = String.raw`import fnmatch, glob, os, subprocess, sys, tempfile
import yaml
mode, ours_file, state = sys.argv[1], sys.argv[2], sys.argv[3]
ports = set(sys.argv[4:])
files = {}
for d in ("/lib/netplan", "/usr/lib/netplan", "/etc/netplan", "/run/netplan"):
    for p in sorted(glob.glob(os.path.join(d, "*.yaml"))):
        files[os.path.basename(p)] = p
def port_info(p):
    base = "/sys/class/net/" + p
    try:
        mac = open(base + "/address").read().strip().lower()
    except OSError:
        mac = ""
    drv = os.path.basename(os.path.realpath(base + "/device/driver")) if os.path.exists(base + "/device/driver") else ""
    return mac, drv
info = {p: port_info(p) for p in ports}
def targets(ident, d):
    m = d.get("match")
    if isinstance(m, dict):
        names = set()
        for p, (mac, drv) in info.items():
            drivers = m["driver"] if isinstance(m.get("driver"), list) else [m.get("driver")]
            if ("name" in m and not fnmatch.fnmatchcase(p, str(m["name"]))) or \
               ("macaddress" in m and str(m["macaddress"]).lower() != mac) or \
               ("driver" in m and not any(fnmatch.fnmatchcase(drv, str(x)) for x in drivers)):
                continue
            names.add(p)
    else:
        names = {str(ident)}
    if "set-name" in d:
        names.add(str(d["set-name"]))
    return names & ports
listed = {}
manifest = os.path.join(state, "netplan.list")
if os.path.exists(manifest):
    for line in open(manifest):
        n, _, path = line.rstrip("\n").partition(" ")
        listed[path] = n
for name in sorted(files):
    path = files[name]
    if path == ours_file:
        continue
    with open(path) as f:
        doc = yaml.safe_load(f)
    net = doc.get("network") if isinstance(doc, dict) else None
    if not isinstance(net, dict):
        continue
    eth = net.get("ethernets") if isinstance(net.get("ethernets"), dict) else {}
    mine = [i for i, d in eth.items() if targets(i, d if isinstance(d, dict) else {})]
    for kind in ("bonds", "bridges"):
        for i, d in (net.get(kind) or {}).items():
            members = set(str(m) for m in ((d or {}).get("interfaces") or []))
            if members & (ports | set(mine)):
                print("refuse %s: %s %s is built on an interconnect port" % (path, kind, i)); sys.exit(3)
    for i, d in (net.get("vlans") or {}).items():
        if str((d or {}).get("link")) in (ports | set(mine)):
            print("refuse %s: vlan %s is built on an interconnect port" % (path, i)); sys.exit(3)
    if not mine:
        continue
    if mode == "check":
        for i in mine:
            print("%s defines %s" % (path, i))
        continue
    if path not in listed:
        n = str(len(listed) + 1)
        os.makedirs(os.path.join(state, "netplan"), exist_ok=True)
        subprocess.run(["cp", "-a", "--", path, os.path.join(state, "netplan", n)], check=True)
        with open(manifest, "a") as m:
            m.write("%s %s\n" % (n, path))
        listed[path] = n
    others = [k for k in net if k not in ("version", "renderer", "ethernets")] + [i for i in eth if i not in mine]
    if not others:
        os.unlink(path)
        print("moved %s" % path)
    else:
        for i in mine:
            del eth[i]
        if not eth:
            del net["ethernets"]
        st = os.stat(path)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".spark-cluster.")
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(doc, f, default_flow_style=False, sort_keys=False)
        os.chmod(tmp, st.st_mode & 0o7777)
        os.chown(tmp, st.st_uid, st.st_gid)
        os.rename(tmp, path)
        print("rewrote %s" % path)
`;

function portsArgs(spec: TakeOverSpec): string {
    return spec.interfaces.map((i) => shellQuote(i.name)).join(" ");
}

/** The take-over's create: NetworkManager off our ports, other tools' netplan files aside, foreign addresses gone. */
export function takeOverApplyScript(spec: TakeOverSpec): string {
    const ports = spec.interfaces.map((i) => i.name);
    const state = TAKEOVER_STATE_DIR;
    return bashScript([
        HOST_LIB,
        ...NETPLAN_APPLY_LIB,
        `mkdir -p ${state}`,
        // NetworkManager first, so that it does not take the ports back while netplan changes.
        `if [ -d /etc/NetworkManager ] || command -v nmcli >/dev/null; then`,
        `  nm_running=0; systemctl is-active --quiet NetworkManager && nm_running=1`,
        `  if [ "$nm_running" = 1 ] && [ ! -e ${state}/nm-active ]; then`,
        `    nmcli -t -f DEVICE,UUID connection show --active | awk -F: -v ports=${shellQuote(` ${ports.join(" ")} `)} 'index(ports, " " $1 " ") > 0 { print $1, $2 }' > ${state}/nm-active.tmp`,
        `    mv ${state}/nm-active.tmp ${state}/nm-active`,
        `  fi`,
        heredoc(`  conf=$(sc_install_file ${NM_UNMANAGED_CONF} 644`, renderNmUnmanagedConf(ports)) + "\n  )",
        `  if [ "$nm_running" = 1 ]; then`,
        `    [ "\${conf%% *}" = changed ] && nmcli general reload conf`,
        ...ports.flatMap((p) => [
            `    nmcli device set ${shellQuote(p)} managed no 2>/dev/null || true`,
            `    sc_wait 30 ${shellQuote(`NetworkManager to leave ${p} alone`)} sh -c ${shellQuote(`nmcli -g GENERAL.STATE device show ${shellQuote(p)} 2>/dev/null | grep -q unmanaged || ! nmcli -g GENERAL.DEVICE device show ${shellQuote(p)} >/dev/null 2>&1`)}`,
        ]),
        `  fi`,
        `  sc_log "NetworkManager leaves ${ports.join(", ")} alone (${NM_UNMANAGED_CONF})"`,
        `fi`,
        // Other tools' netplan files.
        heredoc(`if ! out=$(python3 - apply ${shellQuote(NETPLAN_PATH)} ${state} ${portsArgs(spec)}`, TAKE_OVER_PY) + '\n); then sc_log "$out"; exit 1; fi',
        `if [ -n "$out" ]; then`,
        `  printf '%s\\n' "$out" | while IFS= read -r line; do sc_log "take-over: $line (backup in ${state}/netplan, put back by destroy)"; done`,
        `  sc_netplan_apply`,
        `fi`,
        // Addresses on our ports that our config does not give them.
        ...spec.interfaces.flatMap((i) => [
            `for address in $(ip -o addr show dev ${shellQuote(i.name)} | awk '$3 == "inet" || ($3 == "inet6" && $0 !~ / scope link /) { print $4 }'); do`,
            `  [ "$address" = ${shellQuote(i.address)} ] && continue`,
            `  ip addr del "$address" dev ${shellQuote(i.name)} && sc_log "take-over: removed $address from ${i.name}"`,
            `done`,
        ]),
        `echo "take-over: in place on ${spec.node}"`,
    ]);
}

/** Puts back what the take-over moved: the other tools' netplan files (byte for byte), NetworkManager's hold on the ports and its active connections. */
export function takeOverRestoreScript(spec: TakeOverSpec): string {
    const ports = spec.interfaces.map((i) => i.name);
    const state = TAKEOVER_STATE_DIR;
    return bashScript([
        HOST_LIB,
        ...NETPLAN_APPLY_LIB,
        `restored=0`,
        `if [ -f ${state}/netplan.list ]; then`,
        `  while read -r n path; do`,
        `    [ -e "${state}/netplan/$n" ] || continue`,
        `    mv -f "${state}/netplan/$n" "$path" && sc_log "take-over: put back $path" && restored=1`,
        `  done < ${state}/netplan.list`,
        `fi`,
        `sc_remove_file ${NM_UNMANAGED_CONF}`,
        `if systemctl is-active --quiet NetworkManager 2>/dev/null; then`,
        `  nmcli general reload conf || true`,
        ...ports.map((p) => `  nmcli device set ${shellQuote(p)} managed yes 2>/dev/null || true`),
        `fi`,
        `if [ "$restored" = 1 ]; then sc_netplan_apply; fi`,
        `if [ -f ${state}/nm-active ] && systemctl is-active --quiet NetworkManager 2>/dev/null; then`,
        `  while read -r device uuid; do`,
        `    nmcli -w 30 connection up "$uuid" ifname "$device" >/dev/null 2>&1 && sc_log "take-over: NetworkManager connection $uuid is up again on $device" || sc_log "take-over: warning: NetworkManager could not bring $uuid up on $device again (nmcli connection up $uuid)"`,
        `  done < ${state}/nm-active`,
        `fi`,
        `rm -rf ${state}`,
        `sc_cleanup_state`,
    ]);
}

/** Drift: our drop-in gone or edited, or another tool's file defining one of our ports again. */
export function takeOverReadScript(spec: TakeOverSpec): string {
    const ports = spec.interfaces.map((i) => i.name);
    return readScript([
        `if [ -d /etc/NetworkManager ] || command -v nmcli >/dev/null; then`,
        `  ${fileDriftLine(NM_UNMANAGED_CONF, "644", renderNmUnmanagedConf(ports))}`,
        `fi`,
        heredoc(`python3 - check ${shellQuote(NETPLAN_PATH)} ${TAKEOVER_STATE_DIR} ${portsArgs(spec)}`, TAKE_OVER_PY) + " || true",
    ]);
}

/** The take-over's step: its scripts, asked for once by the node's component. */
export function takeOverPlan(spec: TakeOverSpec): StepScripts {
    return { create: takeOverApplyScript(spec), delete: takeOverRestoreScript(spec), read: takeOverReadScript(spec) };
}
