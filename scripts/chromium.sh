#!/usr/bin/env bash
# Prints the path of a headless-capable Chromium for the Open WebUI lab test
# (test/integration/openWebui.test.ts): Debian's own `chromium` package, installed
# with apt-get when missing. The downloaded .debs are kept in
# ${XDG_CACHE_HOME:-~/.cache}/spark-cluster/chromium/debs, so a machine that lost the
# package reinstalls from there without the mirror. Needs root (apt-get).
# Progress goes to stderr; stdout is only the browser's path.
set -euo pipefail
browser=/usr/bin/chromium
probe() { "${browser}" --headless=new --no-sandbox --version >/dev/null 2>&1; }
if [ -x "${browser}" ] && probe; then
  echo "${browser}"
  exit 0
fi
cache=${XDG_CACHE_HOME:-$HOME/.cache}/spark-cluster/chromium
mkdir -p "${cache}/debs/partial"
exec 9>"${cache}/.lock"
flock -w 1800 9 || { echo "chromium.sh: another install holds ${cache}/.lock" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then
  echo "chromium.sh: ${browser} is missing and installing it needs root (apt-get install chromium)" >&2
  exit 1
fi
start=$(date +%s)
apt_opts=(-o "Dir::Cache::archives=${cache}/debs" -o APT::Sandbox::User=root)
echo "chromium.sh: installing Debian's chromium (apt-get; .debs kept in ${cache}/debs)" >&2
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_opts[@]}" chromium >&2; then
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_opts[@]}" chromium >&2
fi
probe || { echo "chromium.sh: ${browser} does not start after the install" >&2; exit 1; }
echo "chromium.sh: $("${browser}" --version 2>/dev/null) installed in $(($(date +%s) - start)) s" >&2
echo "${browser}"
