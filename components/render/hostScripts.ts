// Scripts for the host steps that are not netplan: installing and removing
// managed files and systemd units, PFC, and the readiness probes. Each one
// probes, acts only when something differs, and verifies the result.
import { HOST_LIB, STATE_DIR } from "./hostLib";
import { bashScript, heredoc, shellQuote } from "./shell";
import { unitPath } from "./systemd";

export interface ManagedFile {
    path: string;
    mode: "600" | "644";
    content: string;
}

function installLines(files: readonly ManagedFile[]): string[] {
    return files.map((file) => heredoc(`sc_install_file ${shellQuote(file.path)} ${file.mode}`, file.content));
}

/** Writes files whose content is in the script itself (nothing secret). */
export function installFilesScript(files: readonly ManagedFile[]): string {
    return bashScript([HOST_LIB, ...installLines(files)]);
}

/**
 * Writes one file from the command's stdin (used for secrets: they stay out of
 * the script and out of its output). When it changed and `restartUnit` is
 * running, restarts it so the process reads the new values.
 */
export function installFileFromStdinScript(path: string, mode: "600" | "644", restartUnit?: string): string {
    return bashScript([
        HOST_LIB,
        `result=$(sc_install_file ${shellQuote(path)} ${mode})`,
        ...(restartUnit
            ? [
                  `if [ "\${result%% *}" = changed ] && systemctl is-active --quiet ${restartUnit}.service; then`,
                  `  systemctl restart ${restartUnit}.service`,
                  `  echo "restarted ${restartUnit} for the new ${path}"`,
                  `fi`,
              ]
            : []),
        `echo "installed ${path}"`,
    ]);
}

/** Removes files we wrote, restoring any we replaced, then empty directories of ours. */
export function removeFilesScript(paths: readonly string[], emptyDirs: readonly string[] = []): string {
    return bashScript([
        HOST_LIB,
        ...paths.map((path) => `sc_remove_file ${shellQuote(path)}`),
        ...emptyDirs.map((dir) => `rmdir ${shellQuote(dir)} 2>/dev/null || true`),
        "sc_cleanup_state",
    ]);
}

/**
 * Installs a unit, enables it, and (re)starts it when the unit changed or it
 * is not running; then verifies it stays active.
 */
export function installUnitScript(name: string, content: string): string {
    const path = unitPath(name);
    return bashScript([
        HOST_LIB,
        heredoc(`result=$(sc_install_file ${path} 644`, content) + "\n)",
        `echo "$result"`,
        `systemctl daemon-reload`,
        `systemctl enable --quiet ${name}.service`,
        `if [ "\${result%% *}" = changed ] || ! systemctl is-active --quiet ${name}.service; then`,
        `  sc_log "restarting ${name}"`,
        `  systemctl restart ${name}.service`,
        `fi`,
        `if ! sc_wait 60 "${name} to be active" systemctl is-active --quiet ${name}.service; then`,
        `  sc_log "${name} is not running; last log lines:"`,
        `  journalctl -u ${name}.service -n 40 --no-pager || true`,
        `  exit 1`,
        `fi`,
        `sc_log "${name} active (pid $(systemctl show -p MainPID --value ${name}.service))"`,
    ]);
}

/** Stops, disables and removes a unit of ours. */
export function removeUnitScript(name: string): string {
    return bashScript([
        HOST_LIB,
        `systemctl disable --now ${name}.service 2>/dev/null || true`,
        `sc_remove_file ${unitPath(name)}`,
        `systemctl daemon-reload`,
        `systemctl reset-failed ${name}.service 2>/dev/null || true`,
        "sc_cleanup_state",
    ]);
}

/** A bounded wait for the Ray cluster to show the expected nodes and GPUs. */
export function rayReadyScript(rayStatusCommand: string, nodes: number, gpus: number, seconds = 300): string {
    return bashScript([
        HOST_LIB,
        `ray_ready() {`,
        `  local out; out=$(${rayStatusCommand} 2>/dev/null) || return 1`,
        `  local n g`,
        `  n=$(printf '%s\\n' "$out" | awk '/^Active:/{a=1;next} /^Pending:/{a=0} a && /node_/{c++} END{print c+0}')`,
        `  g=$(printf '%s\\n' "$out" | grep -oE '[0-9.]+/[0-9.]+ GPU' | head -n 1 | sed 's#.*/##; s# GPU##')`,
        `  echo "ray: $n node(s), \${g:-0} GPU(s)"`,
        `  [ "$n" -ge ${nodes} ] && awk -v g="\${g:-0}" 'BEGIN{exit !(g+0 >= ${gpus})}'`,
        `}`,
        `if ! sc_wait ${seconds} "Ray to show ${nodes} nodes and ${gpus} GPUs" ray_ready; then`,
        `  ${rayStatusCommand} || true`,
        `  exit 1`,
        `fi`,
    ]);
}

/**
 * Ready only when a real chat request returns text (sparkrun's rule: /health
 * can be green before the model answers). The API key is read on the node
 * from the root-only env file, never passed on a command line.
 */
export function chatReadyScript(opts: { port: number; model: string; envFile: string; unit: string; seconds?: number }): string {
    const seconds = opts.seconds ?? 600;
    const probe = [
        "import json, os, sys, urllib.request",
        `key = ""`,
        `for line in open(${JSON.stringify(opts.envFile)}):`,
        `    if line.startswith("VLLM_API_KEY="): key = line.split("=", 1)[1].strip()`,
        `body = json.dumps({"model": ${JSON.stringify(opts.model)}, "max_tokens": 32,`,
        `    "messages": [{"role": "user", "content": "Say hello."}]}).encode()`,
        `req = urllib.request.Request("http://127.0.0.1:${opts.port}/v1/chat/completions", data=body,`,
        `    headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})`,
        `try:`,
        `    reply = json.load(urllib.request.urlopen(req, timeout=60))`,
        `    text = reply["choices"][0]["message"]["content"]`,
        `except Exception as exc:`,
        `    print("not ready:", exc); sys.exit(1)`,
        `if not text: sys.exit(1)`,
        `print("answer:", text)`,
    ].join("\n");
    return bashScript([
        HOST_LIB,
        `mkdir -p "$SC_STATE"`,
        heredoc(`cat > "$SC_STATE/chat-probe.py"`, probe),
        `chat_ready() { python3 "$SC_STATE/chat-probe.py" | tail -n 1; [ "\${PIPESTATUS[0]}" = 0 ]; }`,
        `if ! sc_wait ${seconds} "a chat completion from ${opts.model}" chat_ready; then`,
        `  sc_log "vLLM never answered; last log lines of ${opts.unit}:"`,
        `  journalctl -u ${opts.unit}.service -n 60 --no-pager || true`,
        `  rm -f "$SC_STATE/chat-probe.py"`,
        `  exit 1`,
        `fi`,
        `rm -f "$SC_STATE/chat-probe.py"`,
        `sc_cleanup_state`,
    ]);
}

/** Directory of recorded original PFC state per interface. */
const PFC_STATE = `${STATE_DIR}/pfc`;
export const PFC_UNIT = "spark-cluster-pfc";
export const PEERMEM_CONF = "/etc/modules-load.d/nvidia-peermem.conf";

export interface PfcSpec {
    interfaces: string[];
    /** e.g. "0,0,0,1,0,0,0,0" for priority 3. */
    pfcVector: string;
    trustDscp: boolean;
    peermem: boolean;
    /** The persistence unit's content (re-applies PFC at boot). */
    unitContent: string;
    peermemConf: string;
}

/**
 * PFC on the RoCE priority, persisted by a oneshot unit, and nvidia-peermem.
 * Records what it found first so delete can restore it. Where mlnx_qos is
 * absent it changes nothing and reports lossy RoCE (last line `status=…`).
 */
export function pfcApplyScript(spec: PfcSpec): string {
    const trust = spec.trustDscp ? " --trust dscp" : "";
    return bashScript([
        HOST_LIB,
        `pfc_of() { mlnx_qos -i "$1" | awk '/PFC configuration/{p=1} p && $1=="enabled"{v=$2; for(i=3;i<=9;i++) v=v","$i; print v; exit}'; }`,
        `trust_of() { mlnx_qos -i "$1" | awk -F': ' '/Priority trust state/{print $2; exit}'; }`,
        ...(spec.interfaces.length === 0 ? [`echo "status=skipped: ibdev2netdev shows no RoCE device on the interconnect"`, "exit 0"] : []),
        `if ! command -v mlnx_qos >/dev/null; then`,
        `  echo "status=lossy: mlnx_qos not found, RoCE runs without PFC"`,
        `  exit 0`,
        `fi`,
        `mkdir -p ${PFC_STATE}`,
        ...spec.interfaces.flatMap((iface) => [
            `[ -e ${PFC_STATE}/${iface} ] || printf '%s %s\\n' "$(pfc_of ${shellQuote(iface)})" "$(trust_of ${shellQuote(iface)})" > ${PFC_STATE}/${iface}`,
            `if [ "$(pfc_of ${shellQuote(iface)})" != ${spec.pfcVector} ]${spec.trustDscp ? ` || [ "$(trust_of ${shellQuote(iface)})" != dscp ]` : ""}; then`,
            `  mlnx_qos -i ${shellQuote(iface)} --pfc ${spec.pfcVector}${trust} >/dev/null`,
            `  sc_log "PFC ${spec.pfcVector} set on ${iface}"`,
            `fi`,
            `[ "$(pfc_of ${shellQuote(iface)})" = ${spec.pfcVector} ] || { sc_log "PFC did not take on ${iface}"; exit 1; }`,
            ...(spec.trustDscp ? [`[ "$(trust_of ${shellQuote(iface)})" = dscp ] || { sc_log "trust dscp did not take on ${iface}"; exit 1; }`] : []),
        ]),
        heredoc(`unit=$(sc_install_file ${unitPath(PFC_UNIT)} 644`, spec.unitContent) + "\n)",
        `if [ "\${unit%% *}" = changed ]; then systemctl daemon-reload; fi`,
        `systemctl enable --quiet ${PFC_UNIT}.service`,
        ...(spec.peermem
            ? [
                  `[ -e ${STATE_DIR}/peermem-was-loaded ] || { if lsmod | grep -q '^nvidia_peermem '; then echo yes; else echo no; fi > ${STATE_DIR}/peermem-was-loaded; }`,
                  heredoc(`sc_install_file ${PEERMEM_CONF} 644 >/dev/null`, spec.peermemConf),
                  `if modprobe nvidia-peermem; then peermem=loaded; else peermem="not available"; fi`,
              ]
            : [`peermem=off`]),
        `echo "status=enabled: PFC ${spec.pfcVector} on ${spec.interfaces.join(",")}${spec.trustDscp ? ", trust dscp" : ""}; nvidia-peermem $peermem"`,
    ]);
}

/** Puts back the PFC state recorded before we changed it, and removes our unit and module config. */
export function pfcRestoreScript(spec: Pick<PfcSpec, "interfaces">): string {
    return bashScript([
        HOST_LIB,
        `systemctl disable ${PFC_UNIT}.service 2>/dev/null || true`,
        `sc_remove_file ${unitPath(PFC_UNIT)}`,
        `systemctl daemon-reload`,
        ...spec.interfaces.flatMap((iface) => [
            `if [ -e ${PFC_STATE}/${iface} ] && command -v mlnx_qos >/dev/null; then`,
            `  read -r vector trust < ${PFC_STATE}/${iface} || true`,
            `  if [ -n "$vector" ]; then mlnx_qos -i ${shellQuote(iface)} --pfc "$vector" >/dev/null; fi`,
            `  if [ -n "\${trust:-}" ]; then mlnx_qos -i ${shellQuote(iface)} --trust "$trust" >/dev/null; fi`,
            `  sc_log "PFC on ${iface} restored to $vector (trust $trust)"`,
            `fi`,
            `rm -f ${PFC_STATE}/${iface}`,
        ]),
        `sc_remove_file ${PEERMEM_CONF}`,
        `if [ "$(cat ${STATE_DIR}/peermem-was-loaded 2>/dev/null)" = no ]; then modprobe -r nvidia-peermem 2>/dev/null || true; fi`,
        `rm -f ${STATE_DIR}/peermem-was-loaded`,
        "sc_cleanup_state",
    ]);
}
