#!/usr/bin/env bash
# Proves a refactor changes nothing on a deployed stack: deploys the lab stack
# with the program as of commit OLD, then previews it with the program as of
# commit NEW: every resource must be unchanged (new component resources listed in
# SPARK_NEW_COMPONENTS may appear: they only group others in the state). Then
# `up` with NEW, and a second `up --expect-no-changes`; then destroys it. Needs
# the lab up (lab/lab.sh up) and git history.
#   scripts/check-no-change.sh [--venv] OLD NEW
# --venv runs the lab stack with the venv runtime on both sides (the same edit to
# both worktrees' Pulumi.dev.yaml): an OLD program that predates what today's lab
# image needs in containers can still be deployed on it.
# Both commits are checked out as git worktrees in a temporary directory that
# share this checkout's node_modules, toolchain and lab key; the state lives in
# a throwaway file backend. Exit 0 only when NEW shows no change.
set -euo pipefail
venv=0
if [ "${1:-}" = --venv ]; then venv=1; shift; fi
[ $# -eq 2 ] || { echo "usage: $0 [--venv] OLD NEW" >&2; exit 2; }
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$SPARK_ROOT"
old=$(git rev-parse --verify "$1^{commit}") new=$(git rev-parse --verify "$2^{commit}")
[ -e lab/.state/id_ed25519 ] || { echo "check-no-change: the lab is not up (lab/.state/id_ed25519 missing); run lab/lab.sh up" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/spark-cluster-no-change.XXXXXX")
export PULUMI_BACKEND_URL="file://$work/backend" PULUMI_CONFIG_PASSPHRASE="$SPARK_LAB_PASSPHRASE"
unset PULUMI_CONFIG_PASSPHRASE_FILE
mkdir -p "$work/backend"
deployed=""
cleanup() {
  if [ -n "$deployed" ]; then
    (cd "$deployed" && pulumi destroy --stack dev --yes --skip-preview --non-interactive >"$work/destroy.log" 2>&1) \
      || { echo "check-no-change: destroy failed:" >&2; tail -n 30 "$work/destroy.log" >&2; }
  fi
  git worktree remove --force "$work/old" 2>/dev/null || true
  git worktree remove --force "$work/new" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

for side in old new; do
  git worktree add --quiet --detach "$work/$side" "${!side}"
  ln -s "$SPARK_ROOT/node_modules" "$work/$side/node_modules"
  ln -s "$SPARK_ROOT/lab/.state" "$work/$side/lab/.state"
  if [ "$venv" = 1 ]; then
    sed -i -E 's#^(\s*)runtime: \{kind: docker[^}]*\}$#\1runtime: {kind: venv, path: /opt/lab-venv}#' "$work/$side/Pulumi.dev.yaml"
    grep -q 'runtime: {kind: venv' "$work/$side/Pulumi.dev.yaml" || { echo "check-no-change: could not switch $side to the venv runtime" >&2; exit 1; }
  fi
done

echo "== deploying the lab stack with $old"
cd "$work/old"
pulumi stack init dev --secrets-provider passphrase --non-interactive >/dev/null
deployed="$work/old"
pulumi up --stack dev --yes --skip-preview --non-interactive >"$work/up-old.log" 2>&1 \
  || { tail -n 40 "$work/up-old.log" >&2; echo "check-no-change: up with $old failed" >&2; exit 1; }
tail -n 3 "$work/up-old.log"

echo "== previewing and updating with $new: nothing may change"
cd "$work/new"
deployed="$work/new"
# Every resource OLD deployed must be unchanged ("same"). The only thing NEW may add are
# component resources (grouping in the state: no provider, nothing runs on a host), e.g. the
# ClusterNode per node; their types are listed in SPARK_NEW_COMPONENTS (default: none).
pulumi preview --stack dev --diff --non-interactive
pulumi preview --stack dev --json --non-interactive >"$work/preview.json"
allowed="${SPARK_NEW_COMPONENTS:-}" node -e '
  const preview = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const steps = preview.steps ?? [];
  const allowed = (process.env.allowed || "").split(",").filter(Boolean);
  const bad = steps.filter((s) => s.op !== "same" && !(s.op === "create" && allowed.includes(s.newState?.type) && !s.newState?.custom));
  const created = steps.filter((s) => s.op === "create").map((s) => s.urn.split("::").pop());
  for (const s of bad) console.error(`check-no-change: ${s.op} ${s.urn}`);
  console.log(`check-no-change: ${preview.changeSummary?.same ?? 0} unchanged, new components: ${created.join(", ") || "none"}`);
  process.exit(bad.length > 0 ? 1 : 0);
' "$work/preview.json"
pulumi up --stack dev --yes --skip-preview --non-interactive >"$work/up-new.log" 2>&1 \
  || { tail -n 40 "$work/up-new.log" >&2; echo "check-no-change: up with $new failed" >&2; exit 1; }
pulumi up --stack dev --yes --expect-no-changes --non-interactive
echo "check-no-change: $new changes nothing on a stack deployed with $old"
