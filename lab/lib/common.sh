# shellcheck shell=bash
# Shared paths and helpers for lab/lab.sh. Sourced, never executed.
set -euo pipefail

LAB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAB_STATE="${LAB_DIR}/.state"
LAB_CACHE="${XDG_CACHE_HOME:-${HOME}/.cache}/spark-cluster/lab"
LAB_KEY="${LAB_STATE}/id_ed25519"

# Fixed interface (see lab/README.md): bridge, addresses, names.
LAB_BRIDGE="sclab0"
LAB_BRIDGE_ADDR="10.77.0.1/24"
LAB_FABRIC_NS="sclab-fabric"          # netns that holds the switch-like interconnect segments
LAB_NS_PREFIX="sclab-"                # node netns: sclab-<node>
LAB_DEBIAN_SUITE="bookworm"
LAB_DEBIAN_MIRROR="${LAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Ray from PyPI in /opt/lab-venv of every node and in the Ray-carrying container image.
LAB_RAY_VERSION="2.60.0"
# The switch fabric carries jumbo frames; a node's NIC starts at the default MTU, like a
# fresh host: raising it to 9000 (and putting it back on destroy) is the product's job.
LAB_IC_MTU=9000
LAB_NIC_MTU=1500

log() { printf '[lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[lab] ERROR: %s\n' "$*" >&2; exit 1; }

node_addr() {
  case "$1" in
    spark-a) echo 10.77.0.11 ;;
    spark-b) echo 10.77.0.12 ;;
    spark-c) echo 10.77.0.13 ;;
    spark-d) echo 10.77.0.14 ;;
    thor-a) echo 10.77.0.21 ;;
    thor-b) echo 10.77.0.22 ;;
    thor-c) echo 10.77.0.23 ;;
    thor-d) echo 10.77.0.24 ;;
    thor-e) echo 10.77.0.25 ;;
    thor-f) echo 10.77.0.26 ;;
    thor-g) echo 10.77.0.27 ;;
    thor-h) echo 10.77.0.28 ;;
    ws-a) echo 10.77.0.31 ;;
    outsider) echo 10.77.0.99 ;;
    *) die "unknown node '$1'" ;;
  esac
}

node_kind() {
  case "$1" in
    spark-*) echo spark ;;
    thor-*) echo thor ;;
    ws-*) echo workstation ;;
    outsider) echo outsider ;;
    *) die "unknown node '$1'" ;;
  esac
}

# Short per-node tag used in host-side interface names (IFNAMSIZ is 16).
node_tag() {
  case "$1" in
    spark-a) echo sa ;; spark-b) echo sb ;; spark-c) echo sc ;; spark-d) echo sd ;; thor-a) echo ta ;; thor-b) echo tb ;; ws-a) echo wa ;;
    thor-c) echo tc ;; thor-d) echo td ;; thor-e) echo te ;; thor-f) echo tf ;; thor-g) echo tg ;; thor-h) echo th ;;
    outsider) echo ox ;;
    *) die "unknown node '$1'" ;;
  esac
}

# Every node a topology boots: its stack members and, last, the `outsider` (a plain host on the
# management network that is in no stack; see lab/README.md).
topology_nodes() {
  case "$1" in
    spark-pair) echo "spark-a spark-b outsider" ;;
    spark-workstation) echo "spark-a ws-a outsider" ;;
    hetero-4) echo "spark-a spark-b thor-a thor-b outsider" ;;
    # Switchless (issue 23): three Sparks in a full mesh, four in a ring (cables in lab/lib/net.sh).
    mesh-3) echo "spark-a spark-b spark-c outsider" ;;
    ring-4 | ring-4-miscabled) echo "spark-a spark-b spark-c spark-d outsider" ;;
    # The size sweep of `npm run bench`: N Thors (venv runtime, no Docker) on one switch.
    thor-switch-2) echo "thor-a thor-b outsider" ;;
    thor-switch-4) echo "thor-a thor-b thor-c thor-d outsider" ;;
    thor-switch-8) echo "thor-a thor-b thor-c thor-d thor-e thor-f thor-g thor-h outsider" ;;
    *) die "unknown topology '$1' (known: spark-pair, spark-workstation, hetero-4, mesh-3, ring-4, ring-4-miscabled, thor-switch-2, thor-switch-4, thor-switch-8)" ;;
  esac
}

# Every node the lab knows (down stops all of them, whatever the topology was).
LAB_ALL_NODES=(spark-a spark-b spark-c spark-d thor-a thor-b thor-c thor-d thor-e thor-f thor-g thor-h ws-a outsider)

# Bounded wait: wait_until TIMEOUT_S INTERVAL_S DESCRIPTION CMD...
wait_until() {
  local timeout="$1" interval="$2" what="$3"; shift 3
  local deadline=$(( $(date +%s) + timeout )) tries=0
  while (( tries < 10000 )); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    tries=$(( tries + 1 ))
    if (( $(date +%s) >= deadline )); then
      log "timed out after ${timeout}s waiting for: ${what}"
      return 1
    fi
    sleep "${interval}"
  done
  return 1
}

need_root() { [[ "$(id -u)" == 0 ]] || die "the lab needs root (network namespaces, mounts, systemd-nspawn)"; }

# Install missing Debian packages (a fresh machine has none of them).
ensure_host_tools() {
  local -a missing=()
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
  command -v ssh >/dev/null || missing+=(openssh-client)
  command -v ssh-keygen >/dev/null || missing+=(openssh-client)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v nsenter >/dev/null || missing+=(util-linux)
  command -v sha256sum >/dev/null || missing+=(coreutils)
  command -v flock >/dev/null || missing+=(util-linux)
  command -v unshare >/dev/null || missing+=(util-linux)
  command -v curl >/dev/null || missing+=(curl)
  command -v tar >/dev/null || missing+=(tar)
  command -v gzip >/dev/null || missing+=(gzip)
  [[ -e /usr/share/keyrings/debian-archive-keyring.gpg ]] || missing+=(debian-archive-keyring)
  # The layers' venvs are built on the host for the nodes' interpreter (lib/image.sh, node_venv).
  [[ -x /usr/bin/python3.11 ]] || missing+=(python3.11)
  if (( ${#missing[@]} > 0 )); then
    log "installing host packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}
