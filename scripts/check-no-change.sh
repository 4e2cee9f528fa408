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
# share this checkout's Pulumi CLI, language host and lab key; the state lives in
# a throwaway file backend. Each side runs with its own commit's npm packages
# (this checkout's node_modules when the lockfiles are the same, else `npm ci`)
# and its own commit's provider plugin (built from its toolchain/plugins as its
# bootstrap would, into the same per-user cache), in a Pulumi home of its own:
# a commit from before our provider had its own name runs as Pulumi's `command`
# 1.2.1, as it did then. When NEW has toolchain/migrate-provider.js and the state
# OLD left still names that provider, the state is moved to ours between the two
# (what scripts/pulumi.sh does for a user; nothing runs on a host). Exit 0 only
# when NEW shows no change, or exactly the changes SPARK_EXPECTED_CHANGES lists
# (`name(op)`, comma-separated: what NEW changes on purpose on every deployed
# stack, e.g. the serving units starting their image by its ID since issue 36), and
# the stack's outputs after NEW's up are OLD's (but those SPARK_CHANGED_OUTPUTS lists).
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
    (cd "$deployed" && PULUMI_HOME="$deployed-home" pulumi destroy --stack dev --yes --skip-preview --non-interactive >"$work/destroy.log" 2>&1) \
      || { echo "check-no-change: destroy failed:" >&2; tail -n 30 "$work/destroy.log" >&2; }
  fi
  git worktree remove --force "$work/old" 2>/dev/null || true
  git worktree remove --force "$work/new" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cache="${XDG_CACHE_HOME:-$HOME/.cache}/spark-cluster/toolchain"
# The side's provider plugin, installed in its own Pulumi home: the build its bootstrap makes (same
# cache key and flags), built here when that cache has none.
install_provider() { # side
  local dir="$work/$1" home="$work/$1-home" cmd name version key built
  cmd=$(cd "$dir/toolchain/plugins/cmd" && ls -d pulumi-resource-*)
  name=${cmd#pulumi-resource-}
  # shellcheck disable=SC1091
  version=$(source "$dir/toolchain/versions.env" && echo "${SPARK_REMOTE_VERSION:-${COMMAND_PROVIDER_VERSION:-}}")
  key=$(cd "$dir" && source toolchain/versions.env && { echo "$PULUMI_VERSION $version"; \
    find toolchain/plugins -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) ! -name '*_test.go' -print0 \
    | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16)
  built="$cache/plugins-$key/$cmd"
  if [ ! -x "$built" ]; then
    echo "== building $1's provider plugin ($name $version, toolchain/plugins of ${!1:0:12})"
    mkdir -p "$cache/plugins-$key"
    # shellcheck disable=SC1091
    (cd "$dir/toolchain/plugins" && source ../versions.env && go build -mod=readonly -trimpath -o "$built.tmp" \
      -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION -X spark-cluster.local/toolchain/plugins/internal/commandprovider.Version=$version" \
      "./cmd/$cmd") >"$work/$1-plugin-build.log" 2>&1 || { tail -n 30 "$work/$1-plugin-build.log" >&2; exit 1; }
    mv "$built.tmp" "$built"
  fi
  mkdir -p "$home/plugins/resource-$name-v$version"
  ln -s "$built" "$home/plugins/resource-$name-v$version/$cmd"
}
# Runs pulumi as the side: its Pulumi home, its directory.
side_pulumi() { # side args...
  local side=$1; shift
  (cd "$work/$side" && PULUMI_HOME="$work/$side-home" pulumi "$@")
}

for side in old new; do
  git worktree add --quiet --detach "$work/$side" "${!side}"
  if cmp -s "$work/$side/package-lock.json" "$SPARK_ROOT/package-lock.json"; then
    ln -s "$SPARK_ROOT/node_modules" "$work/$side/node_modules"
  else
    echo "== npm ci for $side (${!side:0:12}: its package-lock.json is not this checkout's)"
    (cd "$work/$side" && npm ci --ignore-scripts --no-audit --no-fund >"$work/$side-npm.log" 2>&1) || { tail -n 30 "$work/$side-npm.log" >&2; exit 1; }
  fi
  install_provider "$side"
  ln -s "$SPARK_ROOT/lab/.state" "$work/$side/lab/.state"
  if [ "$venv" = 1 ]; then
    sed -i -E 's#^(\s*)runtime: \{kind: docker[^}]*\}$#\1runtime: {kind: venv, path: /opt/lab-venv}#' "$work/$side/Pulumi.dev.yaml"
    grep -q 'runtime: {kind: venv' "$work/$side/Pulumi.dev.yaml" || { echo "check-no-change: could not switch $side to the venv runtime" >&2; exit 1; }
  fi
done

echo "== deploying the lab stack with $old"
side_pulumi old stack init dev --secrets-provider passphrase --non-interactive >/dev/null
deployed="$work/old"
side_pulumi old up --stack dev --yes --skip-preview --non-interactive >"$work/up-old.log" 2>&1 \
  || { tail -n 40 "$work/up-old.log" >&2; echo "check-no-change: up with $old failed" >&2; exit 1; }
tail -n 3 "$work/up-old.log"
side_pulumi old stack output --stack dev --json --non-interactive >"$work/outputs-old.json"

if [ -f "$work/new/toolchain/migrate-provider.js" ]; then
  side_pulumi new stack export --stack dev --file "$work/exported.json"
  rc=0
  # shellcheck disable=SC1091
  node "$work/new/toolchain/migrate-provider.js" "$(source "$work/new/toolchain/versions.env" && echo "$SPARK_REMOTE_VERSION")" \
    <"$work/exported.json" >"$work/migrated.json" || rc=$?
  case "$rc" in
    0) side_pulumi new stack import --stack dev --file "$work/migrated.json" >/dev/null
       echo "check-no-change: moved the state to $new's provider (toolchain/migrate-provider.js)" ;;
    3) ;;
    *) echo "check-no-change: the state's migration failed" >&2; exit 1 ;;
  esac
fi

echo "== previewing and updating with $new: nothing may change"
cd "$work/new"
export PULUMI_HOME="$work/new-home"
deployed="$work/new"
# Every resource OLD deployed must be unchanged ("same"). The only thing NEW may add are
# component resources (grouping in the state: no provider, nothing runs on a host), e.g. the
# ClusterNode per node; their types are listed in SPARK_NEW_COMPONENTS (default: none).
pulumi preview --stack dev --diff --non-interactive
pulumi preview --stack dev --json --non-interactive >"$work/preview.json"
allowed="${SPARK_NEW_COMPONENTS:-}" expected="${SPARK_EXPECTED_CHANGES:-}" node -e '
  const preview = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const steps = preview.steps ?? [];
  const allowed = (process.env.allowed || "").split(",").filter(Boolean);
  const expected = (process.env.expected || "").split(",").filter(Boolean).sort();
  const named = (s) => `${s.urn.split("::").pop()}(${s.op})`;
  const isNewComponent = (s) => s.op === "create" && allowed.includes(s.newState?.type) && !s.newState?.custom;
  const changed = steps.filter((s) => s.op !== "same" && !isNewComponent(s));
  const bad = changed.filter((s) => !expected.includes(named(s)));
  const missing = expected.filter((e) => !changed.some((s) => named(s) === e));
  const created = steps.filter(isNewComponent).map((s) => s.urn.split("::").pop());
  for (const s of bad) console.error(`check-no-change: ${s.op} ${s.urn}`);
  for (const e of missing) console.error(`check-no-change: expected ${e}, which the preview does not show`);
  console.log(`check-no-change: ${preview.changeSummary?.same ?? 0} unchanged, new components: ${created.join(", ") || "none"}` +
    (expected.length > 0 ? `, expected changes: ${changed.map(named).sort().join(", ")}` : ""));
  process.exit(bad.length > 0 || missing.length > 0 ? 1 : 0);
' "$work/preview.json"
pulumi up --stack dev --yes --skip-preview --non-interactive >"$work/up-new.log" 2>&1 \
  || { tail -n 40 "$work/up-new.log" >&2; echo "check-no-change: up with $new failed" >&2; exit 1; }
pulumi up --stack dev --yes --expect-no-changes --non-interactive
# The stack's outputs (what a user reads: the endpoint, each node's facts) as OLD left them; secret
# ones compare as "[secret]". SPARK_CHANGED_OUTPUTS lists (comma-separated) the outputs NEW changes
# on purpose.
pulumi stack output --stack dev --json --non-interactive >"$work/outputs-new.json"
changed_outputs="${SPARK_CHANGED_OUTPUTS:-}" node -e '
  const fs = require("fs");
  const [before, after] = process.argv.slice(1, 3).map((f) => JSON.parse(fs.readFileSync(f, "utf8")));
  const allowed = (process.env.changed_outputs || "").split(",").filter(Boolean);
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  const changed = keys.filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
  const bad = changed.filter((k) => !allowed.includes(k));
  for (const k of bad) console.error(`check-no-change: the output ${k} changed: ${JSON.stringify(before[k])} -> ${JSON.stringify(after[k])}`);
  console.log(`check-no-change: ${keys.length - changed.length} of ${keys.length} outputs unchanged` + (changed.length > bad.length ? `, changed as SPARK_CHANGED_OUTPUTS lists: ${changed.filter((k) => allowed.includes(k)).join(", ")}` : ""));
  process.exit(bad.length > 0 ? 1 : 0);
' "$work/outputs-old.json" "$work/outputs-new.json"
types=$(pulumi stack export --stack dev | node -e '
  const state = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const types = new Set((state.deployment.resources ?? []).filter((r) => r.custom).map((r) => r.type));
  console.log([...types].sort().join(" "));
')
echo "check-no-change: custom resource types in the state after $new: $types"
if [ -n "${SPARK_EXPECTED_CHANGES:-}" ]; then
  echo "check-no-change: $new changes only what SPARK_EXPECTED_CHANGES lists on a stack deployed with $old"
else
  echo "check-no-change: $new changes nothing on a stack deployed with $old"
fi
