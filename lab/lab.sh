#!/usr/bin/env bash
# spark-cluster lab: simulated DGX Spark / Jetson Thor / workstation nodes on one machine.
#   lab/lab.sh up [--topology spark-pair|spark-workstation|hetero-4|mesh-3|ring-4|ring-4-miscabled|thor-switch-N]   (default spark-pair)
#   lab/lab.sh down
#   lab/lab.sh status
#   lab/lab.sh reboot NODE [--halt-timeout S]   power-cycle one node, keeping its disk
#   lab/lab.sh kill NODE UNIT [--signal SIG]    systemctl kill --signal=SIG (default SIGKILL) UNIT on NODE
#   lab/lab.sh kill NODE --container NAME       docker kill NAME on NODE (SIGKILL)
#   lab/lab.sh vllm-layer                       build the real-vLLM layer alone; prints its directory
#   lab/lab.sh exec NODE SCRIPT                 run SCRIPT with bash as root inside NODE (nsenter; no SSH needed)
#   lab/lab.sh set-memory NODE GIB|host         LAB STAND-IN: NODE's /proc/meminfo reports GIB GiB in all, or the host's again
#   (LAB_REAL_VLLM=1 lab/lab.sh up ... gives every node the real vLLM in /opt/lab-vllm)
#   (LAB_FLAVOUR=dgx-os lab/lab.sh up ... gives the Sparks DGX OS's shape: NetworkManager, an admin user, no root login)
#   lab/lab.sh open-webui-layer                 build the Open WebUI layer alone (every node has it: /opt/lab-open-webui)
# See lab/README.md for how it works, what it costs and what is simulated.
set -euo pipefail

# shellcheck source=lib/common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/common.sh"
# shellcheck source=lib/image.sh
source "${LAB_DIR}/lib/image.sh"
# shellcheck source=lib/net.sh
source "${LAB_DIR}/lib/net.sh"
# shellcheck source=lib/nodes.sh
source "${LAB_DIR}/lib/nodes.sh"

usage() {
  sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

lock_lab() {
  mkdir -p "${LAB_STATE}"
  exec 9>"${LAB_STATE}/lab.lock"
  flock -w 900 9 || die "another lab.sh holds ${LAB_STATE}/lab.lock"
}

ensure_key() {
  if [[ ! -f "${LAB_KEY}" ]]; then
    ssh-keygen -q -t ed25519 -N '' -C "spark-cluster-lab" -f "${LAB_KEY}"
  fi
}

cmd_up() {
  local topology="spark-pair"
  while (( $# > 0 )); do
    case "$1" in
      --topology) [[ $# -ge 2 ]] || usage; topology="$2"; shift 2 ;;
      --topology=*) topology="${1#*=}"; shift ;;
      *) usage ;;
    esac
  done
  local nodes n current
  nodes="$(topology_nodes "${topology}")"
  node_nice >/dev/null
  need_root
  lock_lab
  current=""
  [[ -f "${LAB_STATE}/topology" ]] && current="$(cat "${LAB_STATE}/topology")"
  if [[ -n "${current}" && "${current}" != "${topology}" ]]; then
    die "the lab is up with topology '${current}'; run 'lab/lab.sh down' first"
  fi
  local t0
  t0="$(date +%s)"
  ensure_host_tools
  mkdir -p "${LAB_CACHE}" "${LAB_STATE}/nodes"
  if [[ -n "${current}" && "$(cat "${LAB_STATE}/real-vllm" 2>/dev/null || echo 0)" != "${LAB_REAL_VLLM:-0}" ]]; then
    die "the lab is up with LAB_REAL_VLLM=$(cat "${LAB_STATE}/real-vllm" 2>/dev/null || echo 0); run 'lab/lab.sh down' first"
  fi
  local flavour="${LAB_FLAVOUR:-debian}"
  [[ "${flavour}" == debian || "${flavour}" == dgx-os ]] || die "LAB_FLAVOUR=${flavour}: give debian (the default) or dgx-os"
  if [[ -n "${current}" && "$(cat "${LAB_STATE}/flavour" 2>/dev/null || echo debian)" != "${flavour}" ]]; then
    die "the lab is up with LAB_FLAVOUR=$(cat "${LAB_STATE}/flavour" 2>/dev/null || echo debian); run 'lab/lab.sh down' first"
  fi
  build_layers
  case "${topology}" in
    mesh-3 | ring-4 | ring-4-miscabled) fetch_debs lldpd ;;
    spark-pair) fetch_debs metrics ;;
  esac
  [[ "${flavour}" == dgx-os ]] && fetch_debs network-manager
  ensure_key
  echo "${topology}" >"${LAB_STATE}/topology"
  echo "${LAB_REAL_VLLM:-0}" >"${LAB_STATE}/real-vllm"
  echo "${flavour}" >"${LAB_STATE}/flavour"
  # shellcheck disable=SC2086
  build_node_debs_layers ${nodes}
  ensure_mgmt_bridge
  for n in ${nodes}; do
    ensure_ns "$(ns_of "${n}")"
    ensure_mgmt_link "${n}"
  done
  ensure_interconnect "${topology}"
  for n in ${nodes}; do
    start_node "${n}" "${topology}"
  done
  for n in ${nodes}; do
    wait_node_ssh "${n}"
  done
  case "${topology}" in
    mesh-3 | ring-4 | ring-4-miscabled)
      # lldpd has heard a neighbour on both ports of every Spark (it sends at start, then every 30 s).
      for n in ${nodes}; do
        [[ "${n}" == outsider ]] && continue
        wait_until 90 1 "lldpd on ${n} hearing both ports' neighbours" \
          ssh_node "${n}" '[ "$(lldpcli show neighbors -f keyvalue | grep -cE "^lldp\.(enp1s0f0np0|enp1s0f1np1)\.chassis\.name=")" = 2 ]' ||
          die "lldpd on ${n} did not hear both neighbours within 90 s"
      done
      ;;
  esac
  # shellcheck disable=SC2086
  save_docker_seed ${nodes}
  # shellcheck disable=SC2086
  sync_node_images ${nodes}
  log "lab '${topology}' is up in $(( $(date +%s) - t0 ))s: ${nodes}"
  cmd_status_inner
}

cmd_down() {
  need_root
  lock_lab
  local n
  for n in "${LAB_ALL_NODES[@]}"; do
    request_halt "${n}"
  done
  for n in "${LAB_ALL_NODES[@]}"; do
    stop_node "${n}"
  done
  teardown_network
  rm -f "${LAB_STATE}/topology" "${LAB_STATE}/real-vllm" "${LAB_STATE}/flavour"
  rmdir "${LAB_STATE}/nodes" 2>/dev/null || true
  log "lab is down"
}

# The running lab's topology, or fail; NODE (if given) must be one of its nodes.
require_running_node() {
  local node="$1" topology
  [[ -f "${LAB_STATE}/topology" ]] || die "the lab is down"
  topology="$(cat "${LAB_STATE}/topology")"
  [[ " $(topology_nodes "${topology}") " == *" ${node} "* ]] \
    || die "'${node}' is not a node of the running lab (topology ${topology}: $(topology_nodes "${topology}"))"
}

cmd_reboot() {
  [[ $# -ge 1 ]] || usage
  local node="$1" halt_s=30 t0; shift
  while (( $# > 0 )); do
    case "$1" in
      --halt-timeout) [[ $# -ge 2 ]] || usage; halt_s="$2"; shift 2 ;;
      *) usage ;;
    esac
  done
  [[ "${halt_s}" =~ ^[0-9]+$ ]] || die "--halt-timeout takes whole seconds"
  need_root
  lock_lab
  require_running_node "${node}"
  t0="$(date +%s)"
  reboot_node "${node}" "${halt_s}"
  wait_node_ssh "${node}"
  log "${node} rebooted in $(( $(date +%s) - t0 ))s"
}

# Fault injection: SIGKILL (or SIG) a unit's processes, or a container, on one node over SSH.
cmd_kill() {
  [[ $# -ge 2 ]] || usage
  local node="$1" target="$2" sig=SIGKILL; shift 2
  if [[ "${target}" == --container ]]; then
    [[ $# -eq 1 ]] || usage
    need_root
    require_running_node "${node}"
    ssh_node "${node}" "docker kill $(printf '%q' "$1")" >/dev/null
    log "${node}: killed container $1"
    return 0
  fi
  while (( $# > 0 )); do
    case "$1" in
      --signal) [[ $# -ge 2 ]] || usage; sig="$2"; shift 2 ;;
      *) usage ;;
    esac
  done
  [[ "${sig}" =~ ^(SIG)?[A-Z0-9+]+$ ]] || die "bad signal '${sig}'"
  [[ "${target}" =~ ^[A-Za-z0-9@_.:-]+$ ]] || die "bad unit name '${target}'"
  need_root
  require_running_node "${node}"
  ssh_node "${node}" "systemctl kill --signal=${sig} ${target}"
  log "${node}: sent ${sig} to ${target}"
}

cmd_status_inner() {
  local topology n rc=0 state
  if [[ ! -f "${LAB_STATE}/topology" ]]; then
    echo "lab: down"
    return 1
  fi
  topology="$(cat "${LAB_STATE}/topology")"
  echo "lab: topology ${topology}"
  for n in $(topology_nodes "${topology}"); do
    if ! node_running "${n}"; then
      state="NOT RUNNING"; rc=1
    elif ssh_login "${n}" true >/dev/null 2>&1; then
      state="ssh ok"
    else
      state="SSH NOT ANSWERING"; rc=1
    fi
    printf '%-8s %-12s %-12s %s\n' "${n}" "$(node_kind "${n}")" "$(node_addr "${n}")" "${state}"
  done
  return "${rc}"
}

# LAB STAND-IN for a node's memory: a DGX Spark has 128 GB or (since 2026) 64 GB of unified memory,
# which the OS reports in /proc/meminfo (NVML says [N/A] on GB10). The lab's nodes share this
# host's memory, so a node "has" GIB GiB by a file bind-mounted over its /proc/meminfo (the host's
# lines, with MemTotal set to GIB GiB and MemFree/MemAvailable at most 90% of it). `host` removes it.
cmd_set_memory() {
  [[ $# -eq 2 ]] || usage
  local node="$1" gib="$2" kib
  need_root
  require_running_node "${node}"
  if [[ "${gib}" == host ]]; then
    node_exec "${node}" 'if mountpoint -q /proc/meminfo; then umount /proc/meminfo; fi; rm -f /run/lab-sim/meminfo'
    log "${node}: /proc/meminfo is the host's again"
    return 0
  fi
  [[ "${gib}" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "set-memory: give GiB as a number (e.g. 59.6) or host"
  kib="$(awk -v g="${gib}" 'BEGIN { printf "%d", g * 1048576 }')"
  awk -v total="${kib}" '
    $1 == "MemTotal:" { printf "MemTotal:       %8d kB\n", total; next }
    $1 == "MemFree:" || $1 == "MemAvailable:" { v = $2; if (v > total * 0.9) v = int(total * 0.9); printf "%-16s%8d kB\n", $1, v; next }
    { print }' /proc/meminfo |
    node_exec "${node}" 'mkdir -p /run/lab-sim && cat > /run/lab-sim/meminfo && { mountpoint -q /proc/meminfo || mount --bind /run/lab-sim/meminfo /proc/meminfo; }'
  log "${node}: /proc/meminfo reports ${gib} GiB in all (LAB STAND-IN)"
}

# Build (or find) the real-vLLM layer without touching any lab; prints its directory.
cmd_vllm_layer() {
  need_root
  ensure_host_tools
  mkdir -p "${LAB_CACHE}/layers"
  exec 8>"${LAB_CACHE}/build.lock"
  flock -w 3600 8 || die "could not lock ${LAB_CACHE}/build.lock"
  build_base_layer
  build_vllm_layer
  flock -u 8
  vllm_layer_dir
}

# Build (or find) the Open WebUI layer without touching any lab; prints its directory.
cmd_open_webui_layer() {
  need_root
  ensure_host_tools
  mkdir -p "${LAB_CACHE}/layers"
  exec 8>"${LAB_CACHE}/build.lock"
  flock -w 3600 8 || die "could not lock ${LAB_CACHE}/build.lock"
  build_base_layer
  build_open_webui_layer
  flock -u 8
  open_webui_layer_dir
}

main() {
  [[ $# -ge 1 ]] || usage
  local cmd="$1"; shift
  case "${cmd}" in
    up) cmd_up "$@" ;;
    down) [[ $# -eq 0 ]] || usage; cmd_down ;;
    status) [[ $# -eq 0 ]] || usage; cmd_status_inner ;;
    reboot) cmd_reboot "$@" ;;
    kill) cmd_kill "$@" ;;
    exec) [[ $# -eq 2 ]] || usage; require_running_node "$1"; node_exec "$1" "$2" ;;
    set-memory) cmd_set_memory "$@" ;;
    vllm-layer) [[ $# -eq 0 ]] || usage; cmd_vllm_layer ;;
    open-webui-layer) [[ $# -eq 0 ]] || usage; cmd_open_webui_layer ;;
    -h|--help|help) usage ;;
    *) usage ;;
  esac
}

main "$@"
