#!/usr/bin/env bash
# Download one SGLang release from PyPI (wheel, no dependencies, nothing installed or imported) into
# ${XDG_CACHE_HOME:-~/.cache}/spark-cluster/sglang-src-<version>/ and print the wheel's path.
#   lab/sglang_standin/fetch_src.sh 0.5.23
# A second call finds the cached wheel and downloads nothing. gen_flags.sh calls this.
set -euo pipefail
version="${1:?usage: fetch_src.sh VERSION (like 0.5.23)}"
[[ "${version}" =~ ^[0-9]+(\.[0-9]+)+(\.post[0-9]+)?$ ]] || { echo "fetch_src.sh: '${version}' is not a release version (like 0.5.23)" >&2; exit 2; }
dir="${XDG_CACHE_HOME:-${HOME}/.cache}/spark-cluster/sglang-src-${version}"
mkdir -p "${dir}"
wheel="$(find "${dir}" -maxdepth 1 -name 'sglang-*.whl' 2>/dev/null | head -n 1)"
if [[ -z "${wheel}" ]]; then
  echo "fetch_src.sh: downloading sglang==${version} (wheel, no dependencies) from PyPI" >&2
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    "sglang==${version}" -d "${dir}"
  wheel="$(find "${dir}" -maxdepth 1 -name 'sglang-*.whl' | head -n 1)"
fi
[[ -n "${wheel}" ]] || { echo "fetch_src.sh: pip downloaded no sglang wheel" >&2; exit 1; }
echo "${wheel}"
