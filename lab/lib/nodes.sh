# shellcheck shell=bash
# Lab nodes: an overlay root per node (lowerdir = cached layers, upperdir under lab/.state) booted
# with systemd-nspawn inside the node's own network namespace. PIDs are recorded in
# lab/.state/nodes/<node>/ and everything is stopped by those recorded ids.

node_dir() { echo "${LAB_STATE}/nodes/$1"; }

# Docker engine runs in Spark nodes unless LAB_DOCKER=0 (see lab/README.md, "Docker runtime").
node_has_docker() { [[ "${LAB_DOCKER:-1}" == 1 && "$(node_kind "$1")" == spark ]]; }
# The vLLM version the stand-in in every node's /opt/lab-venv plays (a Thor's source build of the
# newest vLLM); it needs a table in config/vllmFlags/.
LAB_VENV_VLLM_VERSION=0.33.0
# The SGLang version the SGLang stand-in in /opt/lab-venv plays (lab/sglang_standin); it needs a
# table in config/sglangFlags/.
LAB_VENV_SGLANG_VERSION=0.5.23
# Container images in every Docker-running node, "TAG VARIANT VLLM_VERSION" (see node-files/docker/
# usr/local/sbin/lab-docker-image), as NVIDIA's release notes give them (lab/README.md, "Docker
# runtime"): 25.09-py3 vLLM 0.10.1.1 with Ray, 26.05-py3 vLLM 0.20.1 and 26.10-py3 vLLM 0.31.0
# without Ray.
LAB_DOCKER_IMAGES=(
  "nvcr.io/nvidia/vllm:25.09-py3 ray 0.10.1.1"
  "nvcr.io/nvidia/vllm:26.05-py3 noray 0.20.1"
  "nvcr.io/nvidia/vllm:26.10-py3 noray 0.31.0"
)
# SGLang's own images (lmsysorg/sglang on Docker Hub, tagged v<version>-cu130: the CUDA 13 build a
# Spark's driver needs), "TAG SGLANG_VERSION": LAB STAND-INs made by lab-docker-image from the same
# base with the SGLang stand-in in place of the vLLM one; the version must be LAB_VENV_SGLANG_VERSION
# (the one the stand-in plays). Kept apart from LAB_DOCKER_IMAGES, which lists vLLM images only.
LAB_DOCKER_SGLANG_IMAGES=(
  "lmsysorg/sglang:v0.5.23-cu130 0.5.23"
)
LAB_DOCKER_IMAGE_TAGS=()
for _img in "${LAB_DOCKER_IMAGES[@]}" "${LAB_DOCKER_SGLANG_IMAGES[@]}"; do LAB_DOCKER_IMAGE_TAGS+=("${_img%% *}"); done
unset _img

# True when PID is alive and is the systemd-nspawn that runs NODE (guards against PID reuse).
pid_is_node_nspawn() {
  local pid="$1" node="$2"
  [[ -n "${pid}" && -r "/proc/${pid}/cmdline" ]] || return 1
  # (no `grep -q`: an early exit could SIGPIPE `tr` and fail the pipeline under pipefail)
  tr '\0' '\n' <"/proc/${pid}/cmdline" | grep -x -- "--directory=$(node_dir "${node}")/root" >/dev/null
}

node_nspawn_pid() {
  local f
  f="$(node_dir "$1")/nspawn.pid"
  [[ -f "${f}" ]] && cat "${f}"
  return 0
}

node_running() {
  local pid
  pid="$(node_nspawn_pid "$1")"
  pid_is_node_nspawn "${pid}" "$1"
}

# The running lab's flavour (LAB_FLAVOUR at `up`): debian, or dgx-os (see populate_dgx_os).
lab_flavour() { cat "${LAB_STATE}/flavour" 2>/dev/null || echo "${LAB_FLAVOUR:-debian}"; }
# A Spark of the dgx-os flavour: no root login over SSH, an admin user whose sudo asks for a password.
node_is_dgx_os() { [[ "$(lab_flavour)" == dgx-os && "$(node_kind "$1")" == spark ]]; }
# The dgx-os flavour's admin user and its password: lab-only values, documented in lab/README.md
# (the user NVIDIA's playbooks show; the password protects nothing but the lab).
LAB_DGX_USER=nvidia
LAB_DGX_PASSWORD='spark lab sudo 1'

# Run a command line as root inside NODE without SSH: nsenter into its container's namespaces
# (by the recorded leader pid), with the node's root, a clean environment and this stdin.
node_exec() {
  local node="$1" leader; shift
  leader="$(recorded_leader "${node}")"
  [[ -n "${leader}" ]] || { echo "lab: ${node} is not running" >&2; return 1; }
  nsenter --target "${leader}" --mount --uts --ipc --net --pid --root --wd -- \
    /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 /bin/bash -c "$*"
}

# Root on NODE for the lab's own work: SSH as root, or (dgx-os Sparks, which offer no root login) node_exec.
ssh_node() {
  local node="$1"; shift
  if node_is_dgx_os "${node}"; then
    node_exec "${node}" "$@"
    return
  fi
  ssh -i "${LAB_KEY}" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
    -o BatchMode=yes -o ConnectTimeout=3 "root@$(node_addr "${node}")" "$@"
}

# A login as the node's SSH user (root, or the dgx-os flavour's admin user): what a stack does.
ssh_login() {
  local node="$1" user=root; shift
  node_is_dgx_os "${node}" && user="${LAB_DGX_USER}"
  ssh -i "${LAB_KEY}" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
    -o BatchMode=yes -o ConnectTimeout=3 "${user}@$(node_addr "${node}")" "$@"
}

is_mounted() { findmnt -rn --mountpoint "$1" >/dev/null 2>&1; }

node_json() {
  local node="$1" kind uuid
  kind="$(node_kind "${node}")"
  uuid="GPU-$(printf '%s' "${node}" | sha256sum | cut -c1-8)-1ab0-4c00-8000-$(printf '%s' "${node}" | sha256sum | cut -c9-20)"
  case "${kind}" in
    spark)
      cat <<JSON
{
  "_comment": "LAB STAND-IN hardware description read by the simulated tools (nvidia-smi, ibdev2netdev, mlnx_qos, modprobe). Real GB10 drivers may report memory.total as [N/A]: set memory_total_mib to null to simulate that.",
  "node": "${node}", "kind": "spark", "arch": "aarch64",
  "gpus": [{"name": "NVIDIA GB10", "memory_total_mib": 131072, "uuid": "${uuid}", "driver_version": "580.95.05",
            "cuda_version": "13.0", "compute_cap": "12.1", "pci_bus_id": "0000000F:01:00.0"}],
  "roce": [{"dev": "rocep1s0f0", "netdev": "enp1s0f0np0", "pci": "0000:01:00.0"},
           {"dev": "rocep1s0f1", "netdev": "enp1s0f1np1", "pci": "0000:01:00.1"},
           {"dev": "roceP2p1s0f0", "netdev": "enP2p1s0f0np0", "pci": "0002:01:00.0"},
           {"dev": "roceP2p1s0f1", "netdev": "enP2p1s0f1np1", "pci": "0002:01:00.1"}]
}
JSON
      ;;
    thor)
      cat <<JSON
{
  "_comment": "LAB STAND-IN hardware description (Jetson Thor: no RoCE device).",
  "node": "${node}", "kind": "thor", "arch": "aarch64",
  "gpus": [{"name": "NVIDIA Thor", "memory_total_mib": 131072, "uuid": "${uuid}", "driver_version": "580.00",
            "cuda_version": "13.0", "compute_cap": "11.0", "pci_bus_id": "00000000:01:00.0"}],
  "roce": []
}
JSON
      ;;
    workstation)
      cat <<JSON
{
  "_comment": "LAB STAND-IN hardware description (x86 workstation with one ConnectX port).",
  "node": "${node}", "kind": "workstation", "arch": "x86_64",
  "gpus": [{"name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "memory_total_mib": 97887, "uuid": "${uuid}",
            "driver_version": "580.95.05", "cuda_version": "13.0", "compute_cap": "12.0", "pci_bus_id": "00000000:01:00.0"}],
  "roce": [{"dev": "mlx5_0", "netdev": "enp1s0f1np1", "pci": "0000:02:00.1"}]
}
JSON
      ;;
    outsider)
      cat <<JSON
{
  "_comment": "LAB STAND-IN hardware description (the outsider: a plain host with a GPU that is in no stack; no RoCE device, no Docker).",
  "node": "${node}", "kind": "outsider", "arch": "x86_64",
  "gpus": [{"name": "NVIDIA GeForce RTX 5090", "memory_total_mib": 32607, "uuid": "${uuid}",
            "driver_version": "580.95.05", "cuda_version": "13.0", "compute_cap": "12.0", "pci_bus_id": "00000000:01:00.0"}],
  "roce": []
}
JSON
      ;;
  esac
}

# Write the node's identity, keys and simulated hardware into its (fresh) overlay.
populate_node() {
  local node="$1" topology="$2" root kind addr n
  root="$(node_dir "${node}")/root"
  kind="$(node_kind "${node}")"
  addr="$(node_addr "${node}")"
  echo "${node}" >"${root}/etc/hostname"
  {
    printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "${node}"
    printf '# lab management network (lab/lab.sh)\n'
    for n in $(topology_nodes "${topology}"); do
      printf '%s\t%s\n' "$(node_addr "${n}")" "${n}"
    done
  } >"${root}/etc/hosts"
  mkdir -p "${root}/etc/systemd/network"
  cat >"${root}/etc/systemd/network/10-lab-mgmt.network" <<EOF2
# Lab management interface (the real Spark's 10 GbE port name). Written by lab/lab.sh.
[Match]
Name=enP7s7

[Network]
Address=${addr}/24
LinkLocalAddressing=no
IPv6AcceptRA=no
EOF2
  # Root's user manager stays running (linger). In these nspawn nodes, stopping it (logind does,
  # UserStopDelaySec=10 s after root's last session ends) hangs until its 120 s stop timeout, and
  # an SSH login that arrives meanwhile waits for it: a step sat ~115 s with no output before its
  # script even started (found with `npm run bench`'s event logs; 5 of 10 model switches).
  mkdir -p "${root}/var/lib/systemd/linger"
  : >"${root}/var/lib/systemd/linger/root"
  install -d -m 0700 "${root}/root/.ssh"
  install -m 0600 "${LAB_KEY}.pub" "${root}/root/.ssh/authorized_keys"
  ssh-keygen -q -A -f "${root}" >/dev/null
  # Simulated hardware and tools (LAB STAND-INs, see lab/README.md).
  cp -rT "${LAB_DIR}/node-files/all" "${root}"
  if [[ "${kind}" != thor && "${kind}" != outsider ]]; then
    cp -rT "${LAB_DIR}/node-files/roce" "${root}"
  fi
  if node_has_docker "${node}"; then
    cp -rT "${LAB_DIR}/node-files/docker" "${root}"
    mkdir -p "${root}/var/lib/lab-sim/images"
    : >"${root}/var/lib/lab-sim/images/vllm-image.tar.gz"   # bind-mount target (see start_node)
    printf '%s\n' "${LAB_DOCKER_IMAGES[@]}" >"${root}/var/lib/lab-sim/images/tags"
    printf '%s\n' "${LAB_DOCKER_SGLANG_IMAGES[@]}" >"${root}/var/lib/lab-sim/images/sglang-tags"
  fi
  case "${topology}" in
    mesh-3 | ring-4 | ring-4-miscabled)
      # The real lldpd (fetch_debs lldpd), started at boot by its own unit: the product's cabling
      # check reads its neighbours. From the node's debs layer (node_deb_sets).
      # A lab deviation: lldpd sends every 5 s here, not every 30 s (its default). It sends once at
      # start, before the neighbour that boots after it listens, so with 30 s a node heard its
      # later-booted neighbours up to 30 s after the last boot; a Spark's lldpd has been running
      # for long when the product reads it. lldpd applies /etc/lldpd.d/*.conf at start (lldpcli).
      mkdir -p "${root}/etc/lldpd.d"
      printf '# LAB: see lab/lib/nodes.sh (populate_node)\nconfigure lldp tx-interval 5\n' >"${root}/etc/lldpd.d/lab-tx-interval.conf"
      ;;
    spark-pair)
      # Prometheus and node_exporter (fetch_debs metrics), as an owner who installed both packages
      # for metrics.enabled. Debian's packages enable their own services (prometheus on :9090,
      # node_exporter on :9100); this owner stopped them (the product's units run the same binaries
      # on ports of their own, so the lab runs no second pair beside them). The packages come from
      # the node's debs layer (node_deb_sets).
      if [[ "${kind}" == spark ]]; then
        chroot "${root}" systemctl disable --quiet prometheus.service prometheus-node-exporter.service >/dev/null 2>&1 || true
      fi
      ;;
  esac
  if node_is_dgx_os "${node}"; then populate_dgx_os "${node}" "${root}"; fi
  mkdir -p "${root}/var/lib/lab-sim/hub"
  node_json "${node}" >"${root}/var/lib/lab-sim/node.json"
  cp -rT "${LAB_CACHE}/models" "${root}/var/lib/lab-sim/hub"
  chroot "${root}" dpkg-divert --quiet --local --rename --add --divert /sbin/modprobe.lab-real /sbin/modprobe
  chroot "${root}" dpkg-divert --quiet --local --rename --add --divert /sbin/lsmod.lab-real /sbin/lsmod
  install -m 0755 "${root}/usr/local/sbin/lab-modprobe" "${root}/sbin/modprobe"
  install -m 0755 "${root}/usr/local/sbin/lab-lsmod" "${root}/sbin/lsmod"
  ln -sf /etc/systemd/system/lab-sim-modules.service "${root}/etc/systemd/system/sysinit.target.wants/lab-sim-modules.service"
  # vLLM stand-in into the venv (pure Python, so copied rather than pip-installed at every up).
  local site="${root}/opt/lab-venv/lib/python3.11/site-packages"
  [[ -d "${site}" ]] || die "venv layer has no ${site}"
  cp -rT "${LAB_DIR}/vllm_standin/vllm_standin" "${site}/vllm_standin"
  # Its flag tables (the product's own, config/vllmFlags), and the version it plays: a `vllm`
  # dist-info (vllm_standin/set_version.py), which the images replace with theirs.
  mkdir -p "${site}/vllm_standin/tables"
  cp "${LAB_DIR}/../config/vllmFlags/"*.json "${site}/vllm_standin/tables/"
  chroot "${root}" /opt/lab-venv/bin/python3 -m vllm_standin.set_version "${LAB_VENV_VLLM_VERSION}" >/dev/null \
    || die "could not make ${node}'s vLLM stand-in play ${LAB_VENV_VLLM_VERSION}"
  cat >"${root}/opt/lab-venv/bin/vllm" <<'EOF2'
#!/opt/lab-venv/bin/python3
# LAB STAND-IN: `vllm` console script (lab/vllm_standin), not the real vLLM.
import sys
from vllm_standin.cli import main
sys.exit(main())
EOF2
  chmod 0755 "${root}/opt/lab-venv/bin/vllm"
  # SGLang stand-in (lab/sglang_standin, SGLang 0.5.23) beside it: `python3 -m sglang.launch_server`
  # and `sglang serve`, its flag table (the product's, config/sglangFlags), and an `sglang`
  # dist-info so importlib.metadata (the product's SGLang probe) reports its version.
  cp -rT "${LAB_DIR}/sglang_standin/sglang_standin" "${site}/sglang_standin"
  cp -rT "${LAB_DIR}/sglang_standin/sglang" "${site}/sglang"
  mkdir -p "${site}/sglang_standin/tables" "${site}/sglang-${LAB_VENV_SGLANG_VERSION}.dist-info"
  cp "${LAB_DIR}/../config/sglangFlags/"*.json "${site}/sglang_standin/tables/"
  printf 'Metadata-Version: 2.1\nName: sglang\nVersion: %s+lab.standin\nSummary: LAB STAND-IN for SGLang (lab/sglang_standin), not SGLang\n' \
    "${LAB_VENV_SGLANG_VERSION}" >"${site}/sglang-${LAB_VENV_SGLANG_VERSION}.dist-info/METADATA"
  : >"${site}/sglang-${LAB_VENV_SGLANG_VERSION}.dist-info/RECORD"
  cat >"${root}/opt/lab-venv/bin/sglang" <<'EOF2'
#!/opt/lab-venv/bin/python3
# LAB STAND-IN: `sglang` console script (lab/sglang_standin), not SGLang.
import sys
from sglang_standin.launch import cli
sys.exit(cli())
EOF2
  chmod 0755 "${root}/opt/lab-venv/bin/sglang"
  ln -sf /usr/local/bin/hf "${root}/opt/lab-venv/bin/hf"
  ln -sf /usr/local/bin/hf "${root}/opt/lab-venv/bin/huggingface-cli"
  # Torch lent by the host (see ensure_torch), after the venv's own packages on sys.path.
  echo "${LAB_TORCH_MOUNT}" >"${site}/lab-torch.pth"
  mkdir -p "${root}${LAB_TORCH_MOUNT}"
}

# A stable UUID from a text (the dgx-os flavour's NetworkManager profiles have the same UUIDs at every up).
lab_uuid() { printf '%s' "$1" | sha256sum | sed -E 's/^(.{8})(.{4}).(.{3}).(.{3})(.{12}).*/\1-\2-4\3-8\4-\5/'; }

# The dgx-os flavour of a Spark (LAB_FLAVOUR=dgx-os): the node as DGX OS and its owner leave it.
#  - NetworkManager (Debian 12's real network-manager 1.42, fetch_debs network-manager) renders netplan
#    (01-network-manager-all.yaml) and keeps profiles on the CX-7 ports stored as netplan YAML, as
#    DGX OS's NetworkManager does (90-NM-<uuid>.yaml, ids NM-<uuid> matched by name): link-local
#    IPv4 on enp1s0f1np1, a manual 192.168.200.x/24 on enP2p1s0f1np1.
#  - No root login (root has no key, as on a fresh DGX OS), and an admin user (LAB_DGX_USER) with
#    the lab's key whose sudo asks for its password (LAB_DGX_PASSWORD; Debian's %sudo rule).
#  - LAB deviation: the management port (enP7s7) stays systemd-networkd's (lab/lib/net.sh gives it
#    its address), marked unmanaged for NetworkManager so the lab keeps its SSH; on DGX OS
#    NetworkManager manages it too.
# nvidia-peermem fails as on GB10 in every flavour (lab-modprobe). Ubuntu's NetworkManager patch
# that writes nmcli's profiles back as 90-NM files is not in Debian's: profiles made with nmcli in
# the lab are keyfiles.
populate_dgx_os() {
  local node="$1" root="$2" n uuid
  if [[ ! -x "${root}/usr/sbin/NetworkManager" ]]; then install_node_debs network-manager "${node}" "${root}"; fi
  mkdir -p "${root}/etc/netplan" "${root}/etc/NetworkManager/conf.d"
  printf '# Let NetworkManager manage all devices on this system\nnetwork:\n  version: 2\n  renderer: NetworkManager\n' \
    >"${root}/etc/netplan/01-network-manager-all.yaml"
  uuid="$(lab_uuid "${node}-enp1s0f1np1")"
  cat >"${root}/etc/netplan/90-NM-${uuid}.yaml" <<EOF2
network:
  version: 2
  ethernets:
    NM-${uuid}:
      renderer: NetworkManager
      match:
        name: "enp1s0f1np1"
      dhcp4: false
      link-local: [ipv4]
      networkmanager:
        uuid: "${uuid}"
        name: "Wired connection 2"
EOF2
  uuid="$(lab_uuid "${node}-enP2p1s0f1np1")"
  n="${node##*-}"; n="$(( $(printf '%d' "'${n}") - 96 + 10 ))"
  cat >"${root}/etc/netplan/90-NM-${uuid}.yaml" <<EOF2
network:
  version: 2
  ethernets:
    NM-${uuid}:
      renderer: NetworkManager
      match:
        name: "enP2p1s0f1np1"
      addresses:
        - "192.168.200.${n}/24"
      networkmanager:
        uuid: "${uuid}"
        name: "Wired connection 3"
EOF2
  chmod 600 "${root}"/etc/netplan/*.yaml
  printf '# LAB deviation (lab/lib/nodes.sh populate_dgx_os): the management port stays systemd-networkd'"'"'s.\n[keyfile]\nunmanaged-devices=interface-name:enP7s7\n' \
    >"${root}/etc/NetworkManager/conf.d/10-lab-management.conf"
  chroot "${root}" systemctl enable NetworkManager.service >/dev/null 2>&1 || true
  # The admin user, and no way in for root.
  if ! chroot "${root}" id "${LAB_DGX_USER}" >/dev/null 2>&1; then
    chroot "${root}" useradd -m -s /bin/bash -G sudo "${LAB_DGX_USER}"
  fi
  printf '%s:%s\n' "${LAB_DGX_USER}" "${LAB_DGX_PASSWORD}" | chroot "${root}" chpasswd
  install -d -m 0700 -o "$(chroot "${root}" id -u "${LAB_DGX_USER}")" -g "$(chroot "${root}" id -g "${LAB_DGX_USER}")" "${root}/home/${LAB_DGX_USER}/.ssh"
  install -m 0600 -o "$(chroot "${root}" id -u "${LAB_DGX_USER}")" -g "$(chroot "${root}" id -g "${LAB_DGX_USER}")" "${LAB_KEY}.pub" "${root}/home/${LAB_DGX_USER}/.ssh/authorized_keys"
  rm -f "${root}/root/.ssh/authorized_keys"
  : >"${root}/var/lib/systemd/linger/${LAB_DGX_USER}"
}

# Unmount and forget a node's overlay (its processes must be gone).
discard_node_root() {
  local node="$1" d
  d="$(node_dir "${node}")"
  unmount_node_root "${node}"
  rm -rf --one-file-system "${d}"
}

unmount_node_root() {
  local d
  d="$(node_dir "$1")"
  if is_mounted "${d}/root"; then
    umount "${d}/root" 2>/dev/null || umount -l "${d}/root"
  fi
}

# Overlay lower layers of a node (read-only cache layers), by kind; without the debs layer
# (node_lowerdir adds it).
node_base_lowerdir() {
  local lower
  lower="$(venv_layer_dir):$(base_layer_dir)"
  # Open WebUI's venv (/opt/lab-open-webui), on every node; only a stack with frontend.openWebui runs it.
  lower="$(open_webui_layer_dir):${lower}"
  if node_has_docker "$1"; then lower="$(docker_layer_dir):${lower}"; fi
  # The real vLLM (opt-in, recorded by `up` so a reboot mounts the same layers).
  if [[ "$(cat "${LAB_STATE}/real-vllm" 2>/dev/null)" == 1 ]]; then lower="$(vllm_layer_dir):${lower}"; fi
  echo "${lower}"
}

# The Debian package sets NODE gets as a layer (image.sh, LAB_DEB_SETS_*), by the running lab's
# topology: lldpd on every node of the switchless topologies, Prometheus and node_exporter on the
# spark-pair's Sparks. Not NetworkManager (the dgx-os flavour): installed from a layer, its
# Sparks came up with netplan's NetworkManager profiles active where DGX OS has its own, and
# dgxOs.test's doctor found them (2026-11-29); populate_dgx_os installs it into each node's layer.
node_deb_sets() {
  local node="$1"
  case "$(cat "${LAB_STATE}/topology" 2>/dev/null)" in
    mesh-3 | ring-4 | ring-4-miscabled) echo lldpd ;;
    spark-pair) [[ "$(node_kind "${node}")" == spark ]] && echo metrics ;;
  esac
  return 0
}

# Overlay lower layers of a node: node_base_lowerdir, under the layer of its package sets if any.
node_lowerdir() {
  local lower sets
  lower="$(node_base_lowerdir "$1")"
  mapfile -t sets < <(node_deb_sets "$1")
  if (( ${#sets[@]} > 0 )); then lower="$(debs_layer_dir "${lower}" "${sets[@]}"):${lower}"; fi
  echo "${lower}"
}

# Before the nodes mount their roots: the package sets' layers they need (built once, cached).
build_node_debs_layers() {
  local n sets
  mkdir -p "${LAB_CACHE}/layers"
  exec 8>"${LAB_CACHE}/build.lock"
  flock -w 3600 8 || die "could not lock ${LAB_CACHE}/build.lock"
  for n in "$@"; do
    mapfile -t sets < <(node_deb_sets "${n}")
    if (( ${#sets[@]} > 0 )); then build_debs_layer "$(node_base_lowerdir "${n}")" "${sets[@]}"; fi
  done
  flock -u 8
}

mount_node_root() {
  local node="$1" d
  d="$(node_dir "${node}")"
  mkdir -p "${d}/upper" "${d}/work" "${d}/root"
  is_mounted "${d}/root" && return 0
  mount -t overlay overlay -o "lowerdir=$(node_lowerdir "${node}"),upperdir=${d}/upper,workdir=${d}/work" "${d}/root"
}

start_node() {
  local node="$1" topology="$2"
  if node_running "${node}"; then
    return 0
  fi
  # Leftovers of a crashed run: start clean.
  stop_node "${node}"
  mount_node_root "${node}"
  populate_node "${node}" "${topology}"
  seed_node_docker "${node}"
  log "booting ${node} ($(node_kind "${node}"), $(node_addr "${node}"))"
  launch_nspawn "${node}"
}

# LAB_NODE_NICE, checked: a nice value from 0 to 19 (default 0).
node_nice() {
  local nice="${LAB_NODE_NICE:-0}"
  [[ "${nice}" =~ ^([0-9]|1[0-9])$ ]] || die "LAB_NODE_NICE=${nice}: give a nice value from 0 to 19 (or leave it unset for 0)"
  echo "${nice}"
}

# Boot the (mounted, populated) root of NODE with systemd-nspawn and record its pids.
launch_nspawn() {
  local node="$1" d ns pid leader i
  d="$(node_dir "${node}")"
  ns="$(ns_of "${node}")"
  local -a extra=(--capability=CAP_NET_ADMIN,CAP_NET_RAW)
  local torch_site
  torch_site="$(lab_torch_site)" || exit 1
  local -a torch=("--bind-ro=${torch_site}:${LAB_TORCH_MOUNT}")
  if node_has_docker "${node}"; then
    # Docker inside a node (see lab/README.md "Docker runtime"): all capabilities, keyring+bpf
    # syscalls, and /var/lib/docker on the host filesystem (overlay2 cannot sit on an overlay).
    mkdir -p "${d}/docker"
    extra=(--capability=all "--system-call-filter=@keyring bpf" "--bind=${d}/docker:/var/lib/docker"
      "--bind-ro=$(docker_image_tarball):/var/lib/lab-sim/images/vllm-image.tar.gz")
  fi
  # nspawn itself runs inside the node's netns (nsenter execs, so the pid stays the same): the
  # sysfs it mounts for the container then lists the node's interfaces in /sys/class/net, not the
  # host's. (`ip netns exec` would also remount the host-side /sys and hide the cgroup mounts
  # nspawn needs.) The pid is recorded by the subshell itself before it execs, so a crash of
  # `up` at any point leaves a pid file that `down` can use.
  # Switchless topologies: a ring node forwards between its ports, and the product sets that in
  # /proc/sys/net/ipv4/conf/IF/forwarding, as on a real Spark. nspawn mounts /proc/sys read-only
  # for a container in a network namespace it did not make; "network" keeps /proc/sys/net
  # writable (systemd-nspawn(1), $SYSTEMD_NSPAWN_API_VFS_WRITABLE), which is what nspawn gives a
  # container with --private-network.
  local -a nspawn_env=()
  case "$(cat "${LAB_STATE}/topology" 2>/dev/null)" in
    mesh-3 | ring-4 | ring-4-miscabled) nspawn_env=(SYSTEMD_NSPAWN_API_VFS_WRITABLE=network) ;;
  esac
  # The node and all it runs at LAB_NODE_NICE (node_nice), below the host's own processes: npm
  # run bench measures the control plane, which shares the host's cores with the nodes here and has
  # cores of its own beside real nodes. A node already up keeps the value it booted with.
  (
    echo "${BASHPID}" >"${d}/nspawn.pid"
    exec setsid nice -n "$(node_nice)" nsenter --net="/run/netns/${ns}" -- env "${nspawn_env[@]}" systemd-nspawn --quiet --boot --keep-unit --register=no \
      --directory="${d}/root" --machine="${node}" --hostname="${node}" \
      --network-namespace-path="/run/netns/${ns}" \
      "${extra[@]}" "${torch[@]}" \
      --resolv-conf=off --timezone=off --link-journal=no --console=read-only \
      </dev/null >>"${d}/console.log" 2>&1 8>&- 9>&-
  ) &
  pid=$!
  leader=""
  for i in $(seq 1 100); do
    # nspawn's short-lived helper child execs nothing; the container's PID 1 becomes `systemd`.
    leader="$(cat "/proc/${pid}/task/${pid}/children" 2>/dev/null | awk '{print $1}' || true)"
    if [[ -n "${leader}" && "$(cat "/proc/${leader}/comm" 2>/dev/null)" == systemd ]]; then break; fi
    leader=""
    [[ -e "/proc/${pid}" ]] || break
    sleep 0.1
  done
  [[ -n "${leader}" ]] || { tail -n 20 "${d}/console.log" >&2; die "${node}: systemd-nspawn did not start (see ${d}/console.log)"; }
  echo "${leader} $(proc_starttime "${leader}")" >"${d}/leader.pid"
}

# Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat): with the PID it
# identifies one process, so a recycled PID is never signalled.
proc_starttime() { sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}'; }

# The recorded container leader (PID 1 of the node, seen from the host), if it is still that process.
recorded_leader() {
  local f pid start
  f="$(node_dir "$1")/leader.pid"
  [[ -f "${f}" ]] || return 0
  read -r pid start <"${f}" || true
  if [[ -n "${pid}" && -n "${start}" && "$(proc_starttime "${pid}")" == "${start}" ]]; then
    echo "${pid}"
  fi
  return 0
}

# True when every Docker image tag of the lab is present on NODE.
node_images_present() {
  local t cmd="systemctl is-active --quiet lab-docker-image.service"
  for t in "${LAB_DOCKER_IMAGE_TAGS[@]}"; do cmd+=" && docker image inspect ${t} >/dev/null"; done
  ssh_node "$1" "${cmd}"
}

# True when NODE's docker images are there, or its lab-docker-cgroups failed (they never will be).
node_docker_settled() {
  node_images_present "$1" || ssh_node "$1" "systemctl is-failed --quiet lab-docker-cgroups.service"
}

wait_node_ssh() {
  local node="$1"
  wait_until 120 1 "ssh on ${node}" ssh_login "${node}" true \
    || { tail -n 30 "$(node_dir "${node}")/console.log" >&2; die "${node}: ssh did not answer within 120s"; }
  if node_has_docker "${node}"; then
    # The image import (lab-docker-image.service) must be done before the node counts as up; a
    # failed lab-docker-cgroups (which containerd and docker Require) ends the wait at once.
    { wait_until 300 2 "docker images on ${node}" node_docker_settled "${node}" && node_images_present "${node}"; } \
      || { ssh_node "${node}" "systemctl status --no-pager docker lab-docker-image; systemctl --failed --no-pager; journalctl -b --no-pager -o short-monotonic -u lab-docker-cgroups -u containerd -u docker.socket -u docker | tail -n 25" >&2 || true
           die "${node}: the docker images are not there (lab-docker-cgroups failed, or 300 s passed: see above)"; }
  fi
}

# The image ID each lab tag has on NODE, one "TAG ID" line per tag.
node_image_ids() {
  local t cmd="true"
  for t in "${LAB_DOCKER_IMAGE_TAGS[@]}"; do cmd+="; echo ${t} \$(docker image inspect --format '{{.Id}}' ${t})"; done
  ssh_node "$1" "${cmd}"
}

# One tag, one image, on every Docker node, as when each node pulls the same tag from a registry.
# A node that booted without the docker seed made its images itself (lab-docker-image: docker
# import, then commits), and every import or commit gets its own creation time, hence its own image
# ID; the product refuses a tag naming different images on two nodes. So the first Docker node's
# images are copied to the others (docker save | docker load through this host; layers already
# there are not stored twice) when their IDs differ, and the IDs are checked afterwards. Nodes
# seeded from one seed have the same IDs already: nothing is copied.
sync_node_images() {
  local first="" n want
  for n in "$@"; do
    node_has_docker "${n}" || continue
    if [[ -z "${first}" ]]; then first="${n}"; want="$(node_image_ids "${n}")"; continue; fi
    [[ "$(node_image_ids "${n}")" == "${want}" ]] && continue
    log "copying the docker images of ${first} to ${n} (one image per tag on every node)"
    # shellcheck disable=SC2029
    ssh_node "${first}" "docker save ${LAB_DOCKER_IMAGE_TAGS[*]}" | ssh_node "${n}" "docker load >/dev/null" \
      || die "${n}: could not load ${first}'s docker images"
    [[ "$(node_image_ids "${n}")" == "${want}" ]] || die "${n}: its image IDs still differ from ${first}'s"
    # The images the node made itself are now untagged: remove them (ignoring those still in use).
    ssh_node "${n}" 'docker image prune -f >/dev/null' || true
  done
}

# The docker seed (LAB_CACHE/docker-seed/KEY/data): a Docker data directory (/var/lib/docker) as
# lab-docker-image leaves it on a freshly booted node, kept from the first `up` that made it
# (save_docker_seed) and copied into every new Docker node's /var/lib/docker before it boots. The
# node's lab-docker-image then finds every image made and labelled and changes nothing, and every
# node holds the same image ID under each tag, as a registry pull gives (sync_node_images copies
# nothing): about 30 s less per Spark at every `up` (the import and commits, ~27 s a node, both
# nodes at once on 2 cores), and the ~14 s copy to each other Spark. The seed's files must never
# be written through a node: only the image layers' files are linked (seed_node_docker). KEY is a
# hash of everything lab-docker-image makes the images from: the image tarball's layer, the
# script, the tag lists and what it copies in from the node (the stand-ins, their dist-infos, hf,
# lab-torch.pth, the hub).
docker_seed_key() {
  local root="$1" site=opt/lab-venv/lib/python3.11/site-packages
  local -a paths=(usr/local/sbin/lab-docker-image var/lib/lab-sim/images/tags var/lib/lab-sim/images/sglang-tags
    usr/local/bin/hf var/lib/lab-sim/hub opt/lab-venv/bin/vllm opt/lab-venv/bin/sglang "${site}/lab-torch.pth")
  local p
  for p in "${root}/${site}"/vllm* "${root}/${site}"/sglang*; do paths+=("${p#"${root}/"}"); done
  {
    basename "$(docker_image_tarball)"
    # Contents, names and modes only (no times, no owners, no bytecode the node's Python wrote).
    tar -C "${root}" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --exclude=__pycache__ -cf - "${paths[@]}"
  } | sha256sum | cut -c1-16
}

# Before NODE first boots: the seed of its key into its (empty) /var/lib/docker, when the cache has
# it. The key is recorded for save_docker_seed.
seed_node_docker() {
  local node="$1" d key seed
  node_has_docker "${node}" || return 0
  d="$(node_dir "${node}")"
  key="$(docker_seed_key "${d}/root")" || die "${node}: could not hash what its docker images are made from"
  echo "${key}" >"${d}/docker-seed-key"
  seed="${LAB_CACHE}/docker-seed/${key}"
  [[ -f "${seed}/.complete" ]] || return 0
  mkdir -p "${d}/docker"
  [[ -z "$(ls -A "${d}/docker")" ]] || return 0
  # The image layers' files (overlay2/<layer>/diff: read-only lower layers of every container's
  # overlay, which docker never writes into; removing an image unlinks them) are hard links to the
  # seed's: ~630 of its ~640 MB, linked in well under a second instead of copied in 5-13 s a node.
  # Every other file (the image and layer databases, the layers' link files) is the node's own copy.
  cp -al "${seed}/data/." "${d}/docker/" || die "${node}: could not link the docker seed ${seed}"
  local rel
  while IFS= read -r -d '' rel; do
    cp -p --remove-destination "${seed}/data/${rel}" "${d}/docker/${rel}" || die "${node}: could not copy ${rel} of the docker seed"
  done < <(cd "${seed}/data" && find . -path './overlay2/*/diff' -prune -o -type f -print0)
}

# After the nodes are up: when the first Docker node booted without a seed (it made its images
# itself), its Docker data directory becomes the seed of its key, copied with the node's docker
# stopped (a consistent copy), and docker started again. Seeds of other keys are removed (one
# seed, ~640 MB).
save_docker_seed() {
  local n d key seed tmp
  for n in "$@"; do
    node_has_docker "${n}" || continue
    d="$(node_dir "${n}")"
    key="$(cat "${d}/docker-seed-key" 2>/dev/null)" || return 0
    seed="${LAB_CACHE}/docker-seed/${key}"
    [[ -f "${seed}/.complete" ]] && return 0
    log "keeping ${n}'s docker images as the seed of the next up (${seed}; once per change to the images' inputs)"
    ssh_node "${n}" 'systemctl stop docker.socket docker.service' || die "${n}: could not stop docker to copy its images"
    tmp="${seed}.tmp.$$"
    rm -rf --one-file-system "${tmp}"
    mkdir -p "${tmp}"
    if cp -a "${d}/docker" "${tmp}/data"; then
      touch "${tmp}/.complete"
      find "${LAB_CACHE}/docker-seed" -mindepth 1 -maxdepth 1 ! -name "${key}" ! -name "${key}.tmp.$$" -exec rm -rf --one-file-system {} +
      mv -T "${tmp}" "${seed}"
    else
      rm -rf --one-file-system "${tmp}"
      log "could not copy ${n}'s docker images (the next up makes them again)"
    fi
    # lab-docker-image stopped with docker (Requires=); it finds every image made and changes nothing.
    ssh_node "${n}" 'systemctl start docker.service lab-docker-image.service' || die "${n}: docker did not start again"
    wait_until 120 2 "docker images on ${n}" node_images_present "${n}" || die "${n}: the docker images are not back"
    return 0
  done
}

# Ask a running node to halt (SIGTERM to its recorded nspawn) without waiting: `down` asks all
# nodes first, then waits for each, so halts run in parallel.
request_halt() {
  local pid
  pid="$(node_nspawn_pid "$1")"
  if pid_is_node_nspawn "${pid}" "$1"; then
    kill -TERM "${pid}" 2>/dev/null || true
  fi
}

# Halt a node by its recorded ids and keep its disk: SIGTERM to systemd-nspawn (clean halt of the
# container), then SIGKILL to the recorded nspawn and container leader if they outlive a bounded
# wait (HALT_S seconds, default 30).
halt_node() {
  local node="$1" halt_s="${2:-30}" pid leader i
  pid="$(node_nspawn_pid "${node}")"
  if pid_is_node_nspawn "${pid}" "${node}"; then
    kill -TERM "${pid}" 2>/dev/null || true
    for i in $(seq 1 $(( halt_s * 2 ))); do
      pid_is_node_nspawn "${pid}" "${node}" || break
      sleep 0.5
    done
    if pid_is_node_nspawn "${pid}" "${node}"; then
      log "${node}: container did not halt in ${halt_s}s; killing recorded pids. Its console said last:"
      tail -c 2000 "$(node_dir "${node}")/console.log" 2>/dev/null | tr '\r' '\n' | grep -a . | tail -n 4 >&2 || true
      kill -KILL "${pid}" 2>/dev/null || true
      for i in $(seq 1 40); do
        pid_is_node_nspawn "${pid}" "${node}" || break
        sleep 0.25
      done
    fi
  fi
  # A container whose nspawn died (crash, kill) keeps running under its leader: kill it by its
  # recorded pid + start time; the kernel then tears down the node's whole pid namespace.
  leader="$(recorded_leader "${node}")"
  if [[ -n "${leader}" ]]; then
    kill -KILL "${leader}" 2>/dev/null || true
    for i in $(seq 1 40); do
      [[ -n "$(recorded_leader "${node}")" ]] || break
      sleep 0.25
    done
  fi
  rm -rf "/run/systemd/nspawn/propagate/${node}"
}

# Stop a node and discard its disk (every `up` after `down` starts from a clean image).
stop_node() {
  halt_node "$1"
  discard_node_root "$1"
}

# Power-cycle NODE: halt (clean, bounded, then kill by recorded pid), NICs back to their power-on
# state, and boot the same disk again (overlay upper and /var/lib/docker kept; not re-populated),
# so units enabled on the node start at boot and the imported images are still there.
reboot_node() {
  local node="$1" halt_s="${2:-30}" d
  d="$(node_dir "${node}")"
  [[ -d "${d}/upper" ]] || die "${node} has no disk under ${d} (is it part of the running lab?)"
  log "rebooting ${node}"
  halt_node "${node}" "${halt_s}"
  unmount_node_root "${node}"
  reset_node_links "${node}"
  mount_node_root "${node}"
  printf '\n--- lab reboot %s ---\n' "$(date -Is)" >>"${d}/console.log"
  launch_nspawn "${node}"
}
