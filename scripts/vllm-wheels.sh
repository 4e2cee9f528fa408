#!/usr/bin/env bash
# The wheel each vLLM flag table (config/vllmFlags/<version>.json) was generated from, fetched
# from PyPI once into ${XDG_CACHE_HOME:-~/.cache}/spark-cluster/vllm-wheels/ (the cache
# lab/vllm_standin/gen_flags.sh fills too) and checked against the sha256 the table records.
# Prints one "VERSION<TAB>WHEEL_PATH" line per table. Used by test/process/vllmFlagsParity.test.ts.
#   scripts/vllm-wheels.sh [VERSION...]     (default: every table)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cache="${XDG_CACHE_HOME:-${HOME}/.cache}/spark-cluster/vllm-wheels"
mkdir -p "${cache}"
# One download at a time (test/process/vllmFlagsParity.test.ts and scripts/vllm-parser.sh may ask
# at once, under `npm test`'s two files at a time).
exec 9>"${cache}/.lock"
flock -w 1800 9 || { echo "vllm-wheels.sh: another download holds ${cache}/.lock for over 30 minutes" >&2; exit 1; }
tables=()
if [[ $# -eq 0 ]]; then
  tables=(config/vllmFlags/*.json)
else
  for v in "$@"; do tables+=("config/vllmFlags/${v}.json"); done
fi
for table in "${tables[@]}"; do
  [[ -f "${table}" ]] || { echo "vllm-wheels.sh: no table ${table}" >&2; exit 2; }
  read -r version dist wheel sha < <(python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); print(t["version"], t["distribution"], t["wheel"], t["sha256"])' "${table}")
  dir="${cache}/${dist}-${version}"
  if [[ ! -f "${dir}/${wheel}" ]]; then
    echo "vllm-wheels.sh: downloading ${dist}==${version} (wheel, no dependencies) from PyPI" >&2
    python3 -m pip download --quiet --disable-pip-version-check --no-cache-dir --no-deps --only-binary :all: "${dist}==${version}" -d "${dir}" >&2
  fi
  [[ -f "${dir}/${wheel}" ]] || { echo "vllm-wheels.sh: pip did not fetch ${wheel} for ${dist}==${version}" >&2; exit 1; }
  got="$(sha256sum "${dir}/${wheel}" | cut -d' ' -f1)"
  [[ "${got}" == "${sha}" ]] || { echo "vllm-wheels.sh: ${dir}/${wheel} has sha256 ${got}, the table says ${sha}" >&2; exit 1; }
  printf '%s\t%s\n' "${version}" "${dir}/${wheel}"
done
