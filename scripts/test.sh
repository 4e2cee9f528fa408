#!/usr/bin/env bash
# The project's whole test suite: the README's test command, and exactly what
# .ci/run runs. Sets itself up first (scripts/bootstrap.sh), so it works on a
# fresh clone of a fresh machine; a second run reuses the caches.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
./scripts/bootstrap.sh
source scripts/env.sh

echo "== host tools the tests run (Debian packages): nft checks the rendered firewall rules, netplan reads the rendered netplan files"
if ! command -v nft >/dev/null; then
  apt-get install -y -q nftables >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q nftables >/dev/null; }
fi
if ! command -v netplan >/dev/null; then
  apt-get install -y -q netplan.io >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q netplan.io >/dev/null; }
fi

echo "== typecheck (tsc, strict), lint (eslint + @pulumi/eslint-plugin) and format (prettier)"
rm -rf build  # no stale compiled tests from files that no longer exist
tsc -p tsconfig.json
eslint --max-warnings 0 .
prettier --check --log-level warn "**/*.{ts,mjs}"

echo "== Go tests of the project-built plugins (toolchain/plugins)"
(cd toolchain/plugins && go test -count=1 ./...)

echo "== Node tests, every tier: test/unit, test/mocked, test/process, test/lab, test/integration"
# One runner for all TypeScript tests; files run one at a time because the
# integration tests share the lab. Its closing lines are the suite's result.
# Only *.test.js: node 20 would also run every other file under a test/ folder.
mapfile -t tests < <(find build/test -name '*.test.js' | sort)
node --test --test-concurrency=1 "${tests[@]}"
