#!/usr/bin/env bash
# Finds a Pulumi CLI already on PATH (the official installer's ~/.pulumi/bin/pulumi, a package
# manager's) that scripts/bootstrap.sh may use instead of building one: the first `pulumi` on PATH,
# outside the project's own .tools/bin, whose `pulumi version` is at least MIN (the version this
# project tests, PULUMI_VERSION in toolchain/versions.env) and of the same major version (a new
# major may break what the program and the project-built plugins rely on).
#   scripts/pulumi-on-path.sh MIN     prints "PATH<TAB>VERSION" and exits 0, or says why not on
#                                     stderr and exits 1
# Versions compare as semver: MAJOR.MINOR.PATCH numerically, then a pre-release
# (`3.275.0-alpha.1`) before its release; a leading `v` and build metadata (`+dirty`) are ignored.
# A CLI that prints something else is not used, nor one that is not the `pulumi` binary itself
# once symlinks are resolved (a version manager's shim: a script, or a binary of another name that
# execs the real one), since bootstrap puts the CLI next to the project's language host, where
# the CLI looks for it, and a shim's CLI would look next to itself instead.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: scripts/pulumi-on-path.sh MIN_VERSION" >&2; exit 2; }
min=$1
tools=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.tools/bin

# Splits a version into "MAJOR MINOR PATCH PRE" (PRE empty for a release); fails on anything else.
semver() {
  local v=${1#v}
  v=${v%%+*}
  [[ "${v}" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)(-([0-9A-Za-z.-]+))?$ ]] || return 1
  echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]} ${BASH_REMATCH[5]}"
}

# Whether version $1 >= version $2 (both valid semver).
at_least() {
  local a b i
  read -r -a a <<<"$(semver "$1")"
  read -r -a b <<<"$(semver "$2")"
  for i in 0 1 2; do
    ((10#${a[i]} > 10#${b[i]})) && return 0
    ((10#${a[i]} < 10#${b[i]})) && return 1
  done
  # Same release: a pre-release of it is older than the release; two pre-releases compare by
  # `sort -V`, close enough to semver's rule for Pulumi's alpha/dev tags.
  [[ -z "${a[3]:-}" ]] && return 0
  [[ -z "${b[3]:-}" ]] && return 1
  [[ "$(printf '%s\n%s\n' "${a[3]}" "${b[3]}" | sort -V | head -n 1)" == "${b[3]}" ]]
}

semver "${min}" >/dev/null || { echo "pulumi-on-path.sh: ${min} is not a version" >&2; exit 2; }
cli=$(PATH=$(printf '%s' "${PATH}" | tr ':' '\n' | grep -vxF "${tools}" | paste -sd:) command -v pulumi || true)
if [[ -z "${cli}" ]]; then
  echo "pulumi-on-path.sh: no pulumi on PATH" >&2
  exit 1
fi
real=$(readlink -f "${cli}")
shim=""
if [[ "$(head -c 4 "${real}" | od -An -c | tr -d ' ')" != '177ELF' ]]; then
  shim="a script, not the pulumi binary"
elif [[ "$(basename "${real}")" != pulumi ]]; then
  shim="${real}, not a binary named pulumi"
fi
if [[ -n "${shim}" ]]; then
  echo "pulumi-on-path.sh: ${cli} is ${shim} (a version manager's shim?): not used; put the directory of Pulumi's own binary first on PATH" >&2
  exit 1
fi
have=$(timeout 60 "${cli}" version 2>/dev/null | head -n 1 || true)
if ! semver "${have}" >/dev/null; then
  echo "pulumi-on-path.sh: ${cli} version printed '${have}', not a version: not used" >&2
  exit 1
fi
if [[ "$(semver "${have}" | cut -d' ' -f1)" != "$(semver "${min}" | cut -d' ' -f1)" ]]; then
  echo "pulumi-on-path.sh: ${cli} is ${have}, another major version than ${min}, the version this project tests: not used" >&2
  exit 1
fi
if ! at_least "${have}" "${min}"; then
  echo "pulumi-on-path.sh: ${cli} is ${have}, older than ${min}, the version this project tests: not used" >&2
  exit 1
fi
printf '%s\t%s\n' "${cli}" "${have#v}"
