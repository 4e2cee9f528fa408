#!/usr/bin/env bash
# Prints the path of a Python interpreter that has torch with the gloo backend,
# for the NCCL check's local tests (test/process/check.test.ts: two processes on
# loopback, gloo on CPU tensors). Uses python3 when it already has torch;
# otherwise installs torch from PyPI into a venv cached per user and version in
# ${XDG_CACHE_HOME:-~/.cache}/spark-cluster/torch-<version>/ (shared by every
# clone on the machine, so CI's fresh clone reuses it) and prints its python.
#
# PyPI's Linux x86_64 torch wheel is the CUDA build and pulls the nvidia-*
# wheels (a few GB); it runs on CPU all the same (torch.cuda.is_available() is
# false), and that is the path the check takes without a GPU. The first install
# is timed and the time is kept in the cache's .complete file.
# Progress goes to stderr; stdout is only the interpreter's path.
set -euo pipefail
version=${SPARK_TORCH_VERSION:-2.11.0}
probe='import torch, torch.distributed as dist; assert dist.is_available() and dist.is_gloo_available(), "torch without gloo"'

if [ "${SPARK_TORCH_FORCE_VENV:-0}" != 1 ] && command -v python3 >/dev/null && python3 -c "$probe" 2>/dev/null; then
  command -v python3
  exit 0
fi

cache=${XDG_CACHE_HOME:-$HOME/.cache}/spark-cluster/torch-$version
python=$cache/venv/bin/python
if [ -f "$cache/.complete" ] && "$python" -c "$probe" 2>/dev/null; then
  echo "$python"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -w 3600 9; then
  echo "torch-python.sh: another install holds $cache/.lock for over an hour" >&2
  exit 1
fi
if [ -f "$cache/.complete" ] && "$python" -c "$probe" 2>/dev/null; then
  echo "$python"
  exit 0
fi

base=$(command -v python3 || true)
if [ -z "$base" ]; then
  echo "torch-python.sh: no python3 on PATH to build the torch venv with" >&2
  exit 1
fi
echo "torch-python.sh: installing torch==$version from PyPI into $cache/venv (first time only; a few GB)" >&2
start=$(date +%s)
rm -rf "$cache/venv" "$cache/.complete"
"$base" -m venv "$cache/venv" >&2
"$python" -m pip install --no-input --progress-bar off --disable-pip-version-check "torch==$version" numpy >&2
if ! "$python" -c "$probe" >&2; then
  echo "torch-python.sh: torch==$version installed but 'import torch.distributed' with gloo fails" >&2
  exit 1
fi
took=$(( $(date +%s) - start ))
printf 'torch=%s python=%s installed=%s seconds=%s\n' "$version" "$("$python" -c 'import sys; print(sys.version.split()[0])')" "$(date -u +%FT%TZ)" "$took" >"$cache/.complete"
echo "torch-python.sh: torch==$version installed in ${took}s" >&2
echo "$python"
