#!/usr/bin/env bash
# Regenerate the vLLM stand-in's flag table from a vLLM release on PyPI:
#   lab/vllm_standin/gen_flags.sh [VERSION]      (default: the version the table names now)
# pip downloads the release's wheel (no dependencies, nothing installed, nothing imported: the
# sdist cannot be downloaded without running vLLM's build backend, which wants torch), then
# gen_flags.py reads vLLM's own argument definitions from it with Python's ast module and writes
# vllm_standin/flags_generated.py. Commit that file; the lab copies it into every node at `up`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${here}/vllm_standin/flags_generated.py"
version="${1:-}"
if [[ -z "${version}" ]]; then
  version="$(sed -n "s/^VLLM_VERSION = '\(.*\)'$/\1/p" "${out}")"
  [[ -n "${version}" ]] || { echo "gen_flags.sh: give a vLLM version (e.g. 0.33.0)" >&2; exit 2; }
fi
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
echo "gen_flags.sh: downloading vllm==${version} (wheel, no dependencies) from PyPI" >&2
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
  "vllm==${version}" -d "${tmp}"
wheel="$(find "${tmp}" -maxdepth 1 -name 'vllm-*.whl' | head -n 1)"
[[ -n "${wheel}" ]] || { echo "gen_flags.sh: pip downloaded no vllm wheel" >&2; exit 1; }
python3 "${here}/gen_flags.py" "${wheel}" -o "${out}"
