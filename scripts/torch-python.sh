#!/usr/bin/env bash
# Prints the path of a Python interpreter that has torch with the gloo backend. One torch serves
# every test that needs one (all from this one venv, so its ~4.6 GB are on disk once):
#   - the NCCL check's local tests (test/process/check.test.ts: two processes on loopback, gloo on
#     CPU tensors), and the lab's nodes, which borrow its site-packages read-only as
#     /opt/lab-torch (lab/lib/image.sh, ensure_torch) for the check and for the real-vLLM runtime;
#   - the vLLM parser venvs (scripts/vllm-parser.sh), through a .pth file.
# Uses python3 when it already has torch (unless SPARK_TORCH_FORCE_VENV=1); otherwise installs
# torch==SPARK_TORCH_VERSION (default 2.13.0: what the lab's real vLLM 0.31.0 asks for) from PyPI
# with the project's pinned uv (scripts/uv.sh) into a venv cached per user and version in
# ${XDG_CACHE_HOME:-~/.cache}/spark-cluster/venvs/torch-<version>/ (shared by every clone on the
# machine, so CI's fresh clone reuses it), and prints its python.
#
# PyPI's Linux x86_64 torch wheel is the CUDA build and pulls the nvidia-* wheels (about 2.5 GB
# to download, 4.6 GB installed for 2.13.0); it runs on CPU all the same
# (torch.cuda.is_available() is false), and that is the path the check takes without a GPU. uv
# installs from its cache by hard links, so a rebuilt venv costs neither the download nor the
# bytes again. The first install is timed and the time is kept in the venv's .complete file.
# Progress goes to stderr; stdout is only the interpreter's path.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=${SPARK_TORCH_VERSION:-2.13.0}
probe='import torch, torch.distributed as dist; assert dist.is_available() and dist.is_gloo_available(), "torch without gloo"'

if [ "${SPARK_TORCH_FORCE_VENV:-0}" != 1 ] && command -v python3 >/dev/null && python3 -c "$probe" 2>/dev/null; then
  command -v python3
  exit 0
fi

cache=${XDG_CACHE_HOME:-$HOME/.cache}/spark-cluster/venvs/torch-$version
python=$cache/venv/bin/python
# Installed, and checked (the probe) when it was: its files still there is enough. Importing torch
# to check again took 5-10 s at every call (every lab bring-up and the parser script ask).
installed() {
  [ -f "$cache/.complete" ] && [ -x "$python" ] && compgen -G "$cache/venv/lib/python3*/site-packages/torch/distributed/__init__.py" >/dev/null
}
if installed; then
  echo "$python"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -w 3600 9; then
  echo "torch-python.sh: another install holds $cache/.lock for over an hour" >&2
  exit 1
fi
if installed; then
  echo "$python"
  exit 0
fi

base=$(command -v python3 || true)
if [ -z "$base" ]; then
  echo "torch-python.sh: no python3 on PATH to build the torch venv with" >&2
  exit 1
fi
base=$("$base" -c 'import sys; print(sys.executable)')
uv=$("$root/scripts/uv.sh")
while IFS= read -r kv; do export "${kv?}"; done < <("$root/scripts/uv.sh" --env)
echo "torch-python.sh: installing torch==$version from PyPI with uv into $cache/venv (first time only; a few GB: 4.6 GB installed for 2.13.0)" >&2
start=$(date +%s)
rm -rf "$cache/venv" "$cache/.complete"
"$uv" venv --quiet --python "$base" "$cache/venv" >&2
"$uv" pip install --quiet --python "$python" "torch==$version" numpy >&2
if ! "$python" -c "$probe" >&2; then
  echo "torch-python.sh: torch==$version installed but 'import torch.distributed' with gloo fails" >&2
  exit 1
fi
took=$(( $(date +%s) - start ))
printf 'torch=%s python=%s installed=%s seconds=%s uv=%s\n' "$version" "$("$python" -c 'import sys; print(sys.version.split()[0])')" "$(date -u +%FT%TZ)" "$took" "$("$uv" --version | cut -d' ' -f2)" >"$cache/.complete"
echo "torch-python.sh: torch==$version installed in ${took}s" >&2
echo "$python"
