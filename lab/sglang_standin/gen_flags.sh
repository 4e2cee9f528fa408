#!/usr/bin/env bash
# Generate SGLang's server flag table, config/sglangFlags/<version>.json, from the release on PyPI:
#   lab/sglang_standin/gen_flags.sh            regenerate every table there
#   lab/sglang_standin/gen_flags.sh VERSION... add or regenerate these (e.g. 0.5.23)
# fetch_src.sh downloads the release's wheel (no dependencies, nothing installed or imported) into
# ${XDG_CACHE_HOME:-~/.cache}/spark-cluster/sglang-src-<version>/ (once; later runs read the cache),
# then gen_flags.py reads SGLang's own argument definitions from it with Python's ast module.
# Commit the tables: the product's tests and the lab's SGLang stand-in read them.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out_dir="$(cd "${here}/../.." && pwd)/config/sglangFlags"
mkdir -p "${out_dir}"
versions=("$@")
if [[ ${#versions[@]} -eq 0 ]]; then
  for f in "${out_dir}"/*.json; do
    [[ -e "${f}" ]] && versions+=("$(basename "${f}" .json)")
  done
  [[ ${#versions[@]} -gt 0 ]] || { echo "gen_flags.sh: no tables in ${out_dir}: give versions (e.g. 0.5.23)" >&2; exit 2; }
fi
for version in "${versions[@]}"; do
  wheel="$("${here}/fetch_src.sh" "${version}")"
  python3 "${here}/gen_flags.py" "${wheel}" -o "${out_dir}/${version}.json"
  got="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "${out_dir}/${version}.json")"
  [[ "${got}" == "${version}" ]] || { echo "gen_flags.sh: ${wheel} says it is SGLang ${got}, not ${version}" >&2; exit 1; }
done
