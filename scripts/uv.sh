#!/usr/bin/env bash
# Prints the path of the project's pinned uv (UV_VERSION in toolchain/versions.env), the Python
# package installer the test venvs are built with (scripts/torch-python.sh, scripts/vllm-parser.sh,
# the lab's real-vLLM layer). uv is a PyPI package: the first run installs uv==UV_VERSION with
# python3's own pip into a venv cached per user and version in
# ${XDG_CACHE_HOME:-~/.cache}/spark-cluster/uv-<version>/ (about 60 MB, a few seconds).
#
# Why uv and not pip: it resolves from metadata alone, downloads in parallel, and installs from its
# own cache of unpacked wheels by hard links, so a wheel that two venvs share (torch's nvidia-*
# wheels, vLLM's dependencies) is downloaded, unpacked and stored once (`du` counts it once).
# Every caller sets, through `scripts/uv.sh --env` (print KEY=VALUE lines to export):
#   UV_CACHE_DIR=${XDG_CACHE_HOME:-~/.cache}/spark-cluster/uv-cache   the one cache (hard links
#     need the venvs on its file system: they all live under ~/.cache/spark-cluster)
#   UV_LINK_MODE=hardlink            never silently copy (uv warns and copies across file systems)
#   UV_PYTHON_DOWNLOADS=never        the interpreter is the machine's python3, never one uv fetches
#   UV_NO_CONFIG=1                   no uv.toml of the user's changes what the tests install
# Progress goes to stderr; stdout is only the path (or, with --env, the variables).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../toolchain/versions.env
source "${root}/toolchain/versions.env"
cache_root="${XDG_CACHE_HOME:-${HOME}/.cache}/spark-cluster"

if [[ "${1:-}" == --env ]]; then
  printf 'UV_CACHE_DIR=%s\nUV_LINK_MODE=hardlink\nUV_PYTHON_DOWNLOADS=never\nUV_NO_CONFIG=1\n' "${cache_root}/uv-cache"
  exit 0
fi

dir="${cache_root}/uv-${UV_VERSION}"
uv="${dir}/venv/bin/uv"
runs() { [[ "$("${uv}" --version 2>/dev/null)" == "uv ${UV_VERSION} "* ]]; }
ready() { [[ -f "${dir}/.complete" ]] && runs; }
if ready; then
  echo "${uv}"
  exit 0
fi
mkdir -p "${dir}"
exec 9>"${dir}/.lock"
flock -w 600 9 || { echo "uv.sh: another install holds ${dir}/.lock for over 10 minutes" >&2; exit 1; }
if ! ready; then
  base=$(command -v python3 || true)
  [[ -n "${base}" ]] || { echo "uv.sh: no python3 on PATH to install uv with" >&2; exit 1; }
  echo "uv.sh: installing uv==${UV_VERSION} from PyPI into ${dir}/venv (first time only)" >&2
  rm -rf "${dir}/venv" "${dir}/.complete"
  "${base}" -m venv "${dir}/venv" >&2
  "${dir}/venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check --no-cache-dir "uv==${UV_VERSION}" >&2
  runs || { echo "uv.sh: installed uv==${UV_VERSION} but ${uv} --version says: $("${uv}" --version 2>&1)" >&2; exit 1; }
  printf 'uv=%s installed=%s\n' "${UV_VERSION}" "$(date -u +%FT%TZ)" >"${dir}/.complete"
fi
echo "${uv}"
