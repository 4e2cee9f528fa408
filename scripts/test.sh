#!/usr/bin/env bash
# The project's whole test suite: the README's test command, and exactly what
# .ci/run runs. Sets itself up first (scripts/bootstrap.sh), so it works on a
# fresh clone of a fresh machine; a second run reuses the caches.
#   scripts/test.sh          every tier, lint and the Go tests (CI)
#   scripts/test.sh --fast   `npm test`: the tiers without the lab (test/unit, test/mocked,
#                            test/process) after the type check; no lint, no Go tests, no lab;
#                            the sinks property test beside the other files, two at a time, and the
#                            property tests with 40 samples (SPARK_PROPERTY_COUNT; their own
#                            defaults here: 150 a key, 300)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fast=0
case "${1:-}" in
  --fast) fast=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--fast]" >&2; exit 2 ;;
esac
./scripts/bootstrap.sh
source scripts/env.sh

echo "== host tools the tests run (Debian packages): nft checks the rendered firewall rules, netplan reads the rendered netplan files, rsync runs the model sync's scripts"
if ! command -v nft >/dev/null; then
  apt-get install -y -q nftables >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q nftables >/dev/null; }
fi
if ! command -v netplan >/dev/null; then
  apt-get install -y -q netplan.io >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q netplan.io >/dev/null; }
fi
if ! command -v rsync >/dev/null; then
  apt-get install -y -q rsync >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q rsync >/dev/null; }
fi

echo "== typecheck (tsc, strict, incremental: build/.tsbuildinfo; the JavaScript by tsconfig.js.json)"
# No stale compiled file: one whose source is gone (a test file removed or moved) goes, as `node
# --test` would run it. The rest of build/ stays for tsc's incremental build (a full one: 14-24 s).
if [[ -d build ]]; then
  while IFS= read -r -d '' js; do
    src="${js#build/}"
    [[ -f "${src%.js}.ts" ]] || rm -f "$js" "$js.map"
  done < <(find build -name '*.js' -print0)
fi
tsc -p tsconfig.json --incremental --tsBuildInfoFile build/.tsbuildinfo
tsc -p tsconfig.js.json

if ((fast)); then
  mapfile -t found < <(find build/test -name '*.test.js' ! -path 'build/test/lab/*' ! -path 'build/test/integration/*' | sort)
  # The longest file, the sinks property test (about 40 s), starts at once beside the others:
  # `node --test` runs the files it is given in its own order, and given among them it started
  # late and ran alone at the end (141 s in all against 169, 2026-12-02).
  long=build/test/process/sinks.property.test.js
  rest=()
  for f in "${found[@]}"; do [[ "$f" == "$long" ]] || rest+=("$f"); done
  echo "== Node tests without the lab: test/unit, test/mocked, test/process (${#found[@]} files: ${long} beside the others, two at a time; lint: npm run lint; the whole suite: scripts/test.sh)"
  started=$(date +%s)
  long_out=$(mktemp) rest_out=$(mktemp)
  SPARK_PROPERTY_COUNT="${SPARK_PROPERTY_COUNT:-40}" node --test "$long" > "$long_out" 2>&1 &
  long_pid=$!
  trap 'kill "$long_pid" 2>/dev/null || true; rm -f "$long_out" "$rest_out"' EXIT
  rc=0
  SPARK_PROPERTY_COUNT="${SPARK_PROPERTY_COUNT:-40}" node --test --test-concurrency=2 "${rest[@]}" 2>&1 | tee "$rest_out" || rc=$?
  wait "$long_pid" || rc=1
  echo "== ${long}:"
  cat "$long_out"
  awk '/^# (tests|pass|fail|cancelled|skipped|todo) [0-9]+$/ { n[$2] += $3 } END { printf "== %d tests: %d passed, %d failed, %d cancelled, %d skipped\n", n["tests"], n["pass"], n["fail"], n["cancelled"], n["skipped"] }' "$rest_out" "$long_out"
  echo "== ${#found[@]} test files in $(( $(date +%s) - started )) s"
  exit "${rc}"
fi

echo "== Node tests, every tier: test/unit, test/mocked, test/process, test/lab, test/integration"
# Lab files run one at a time because they share the lab. Only *.test.js: node 20 would also
# run every other file under a test/ folder.
# The lab's files run grouped by topology, and with SPARK_LAB_KEEP_UP=1 a file that ends with the
# lab clean leaves it up for the next file of its topology (test/lab/lab-harness.ts, withLabUp):
# one bring-up per topology instead of one per file. The lab goes down at the end, whatever happened.
# `node --test` sorts the files it is given, so the tiers without the lab run in one `node --test`
# (beside the lab's files, see below) and each lab file in its own, in this order; the closing
# lines add up every run.
lab_order=(
  # spark-pair, kept up from file to file. lab-netplan-restore first: it needs the interconnect's
  # IPv6 link-local as a fresh node has it, and spark-pair's last test deploys with a commit older
  # than the link-local restore, whose destroy cannot put it back. hostState last: it leaves
  # spark-b as a node that is gone leaves it (everything of ours still there), so the lab goes
  # down after it
  lab/lab-netplan-restore integration/blastRadius integration/modelsync integration/sglang integration/openWebui integration/provider integration/spark-pair
  integration/failures integration/hostState
  # the README's lab commands as printed: the demo brings the lab up itself and demo-down takes it down
  integration/readmeLab
  # spark-pair, each file its own bring-up (they test the bring-up, or run alone)
  lab/lab-links lab/lab-unified-memory lab/lab-serving lab/lab-spark-pair
  # other topologies and lab variants
  integration/hetero4 lab/lab-hetero4 integration/workers integration/realVllm integration/switchless
  # the dgx-os flavour of the Spark pair (NetworkManager, an admin user with sudo, no root login)
  integration/dgxOs
)
mapfile -t found < <(find build/test -name '*.test.js' | sort)
declare -A listed=()
plain=() lab=()
for f in "${found[@]}"; do  # the tiers without the lab, as found
  case "$f" in build/test/lab/* | build/test/integration/*) ;; *) plain+=("$f") ;; esac
done
for name in "${lab_order[@]}"; do
  f="build/test/${name}.test.js"
  if [[ -f "$f" ]]; then lab+=("$f"); listed["$f"]=1; fi
done
for f in "${found[@]}"; do  # lab files not in the list above: last, each with its own bring-up
  case "$f" in build/test/lab/* | build/test/integration/*) [[ -n "${listed[$f]:-}" ]] || lab+=("$f") ;; esac
done
(( ${#plain[@]} + ${#lab[@]} == ${#found[@]} )) || { echo "test.sh: $(( ${#plain[@]} + ${#lab[@]} )) files ordered, ${#found[@]} found" >&2; exit 1; }
beside_pid=""
stop_beside() { # the job beside the lab's files, if it still runs (by its PID and its children's)
  [[ -n "$beside_pid" ]] && kill -0 "$beside_pid" 2>/dev/null || return 0
  pkill -TERM -P "$beside_pid" 2>/dev/null || true
  kill "$beside_pid" 2>/dev/null || true
}
trap 'stop_beside; lab/lab.sh down >/dev/null 2>&1 || true' EXIT
results=$(mktemp) digest=$(mktemp)
failed=()
run_node_tests() { # label concurrency files...: one `node --test`; its closing counts are kept for the total
  local label=$1 concurrency=$2 out rc=0 began
  shift 2
  out=$(mktemp)
  began=$(date +%s)
  SPARK_LAB_KEEP_UP=1 node --test --test-concurrency="$concurrency" "$@" 2>&1 | tee "$out" || rc=$?
  grep -E '^# (tests|pass|fail|cancelled|skipped|todo) [0-9]+$' "$out" >> "$results" || true
  echo "== $label: $(( $(date +%s) - began )) s"
  if (( rc != 0 )); then failed+=("$label"); failure_digest "$label" < "$out" >> "$digest"; fi
  rm -f "$out"
}
# The failed tests of one run, for the end of the output (CI keeps only its tail): each "not ok"
# line with its YAML block (no stack), its first 10 and last 30 lines when it is longer (an error
# from the Pulumi CLI has its progress first and its diagnostics last).
failure_digest() { # label < TAP
  echo "-- $1"
  awk '
    function flush(  i) {
      if (n <= 40) { for (i = 1; i <= n; i++) print line[i] }
      else { for (i = 1; i <= 10; i++) print line[i]; print pre "(" n - 40 " lines cut)"; for (i = n - 29; i <= n; i++) print line[i] }
      blk = 0; n = 0
    }
    /^ *not ok / { if (blk) flush(); ind = match($0, /[^ ]/) - 1; pre = sprintf("%*s", ind + 2, ""); blk = 1; skip = 0; print; next }
    blk && $0 == pre "..." { flush(); next }
    blk {
      if (substr($0, 1, ind + 2) == pre && substr($0, ind + 3, 1) ~ /[A-Za-z_]/) skip = ($0 ~ /^ *stack:/)
      if (!skip) line[++n] = $0
    }
    END { if (blk) flush() }'
}
started=$(date +%s)
# Everything that needs no lab (lint, format, the Go tests, the tiers without the lab) runs beside
# the lab's files, one file at a time (one core for it, one for the lab, whose files mostly wait
# on their nodes); its output is kept and printed after the lab's files. Nothing of it touches
# the lab: the tests that load nft rules or run the CLI do it in network namespaces and scratch
# backends of their own.
beside=$(mktemp) beside_results=$(mktemp) beside_rc=$(mktemp)
(
  rc=0
  echo "== lint (eslint + @pulumi/eslint-plugin) and format (prettier)"
  { eslint --max-warnings 0 . && prettier --check --log-level warn "**/*.{ts,mjs,js}"; } || rc=1
  echo "== Go tests of the project-built plugins (toolchain/plugins)"
  (cd toolchain/plugins && go test -count=1 ./...) || rc=1
  echo "== the tiers without the lab (test/unit, test/mocked, test/process): ${#plain[@]} files"
  began=$(date +%s)
  node --test --test-concurrency=1 "${plain[@]}" > "${beside}.tap" 2>&1 || rc=1
  cat "${beside}.tap"
  grep -E '^# (tests|pass|fail|cancelled|skipped|todo) [0-9]+$' "${beside}.tap" > "$beside_results" || true
  rm -f "${beside}.tap"
  echo "== the tiers without the lab: $(( $(date +%s) - began )) s"
  echo "$rc" > "$beside_rc"
) > "$beside" 2>&1 &
beside_pid=$!
echo "== lint, format, Go tests and the tiers without the lab: running beside the lab's files (pid ${beside_pid}; printed after them)"
for f in "${lab[@]}"; do run_node_tests "$f" 1 "$f"; done
wait "$beside_pid" || true
echo "== beside the lab's files (lint, format, Go tests, the tiers without the lab):"
cat "$beside"
cat "$beside_results" >> "$results"
if [[ "$(cat "$beside_rc")" != 0 ]]; then
  failed+=("lint, format, Go tests or the tiers without the lab (printed just above)")
  failure_digest "the tiers without the lab" < "$beside" >> "$digest"
fi
rm -f "$beside" "$beside_results" "$beside_rc"
echo "== the suite: ${#found[@]} test files in $(( ${#lab[@]} + 1 )) runs, $(( $(date +%s) - started )) s"
awk '{ n[$2] += $3 } END { for (k in n) printf "# total %s %d\n", k, n[k] }' "$results" | sort
rm -f "$results"
if (( ${#failed[@]} > 0 )); then
  echo "== the failed tests, again (each run's \"not ok\" lines and their errors):"
  cat "$digest"; rm -f "$digest"
  printf '== FAILED: %s (its failing tests: "not ok" above)\n' "${failed[@]}"
  exit 1
fi
echo "== every test file passed"
