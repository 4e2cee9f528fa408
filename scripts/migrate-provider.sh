#!/usr/bin/env bash
# Moves a stack deployed before our provider had its own name (until the commit that introduced
# this script, every step was a `command:remote:Command` of Pulumi's `command` package, version
# 1.2.1, served by our plugin under that name) onto our provider, package `spark-remote`: a rewrite
# of the stack's state (toolchain/migrate-provider.js says what changes and why not `aliases`).
# Nothing runs on any host. scripts/pulumi.sh runs it by itself before any command on a stack whose
# state still names the old provider; run it by hand for a stack you reach otherwise.
#   scripts/migrate-provider.sh --stack NAME
# It exports the state, keeps that export as a backup (.pulumi-state-backups/, mode 600; secrets in
# it stay encrypted as in the state), rewrites it and imports it. A stack with nothing to move is
# left alone (exit 0). To undo: `pulumi stack import --stack NAME --file BACKUP`, with the commit
# before the rename (its bootstrap installs the old plugin).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$SPARK_ROOT"
# shellcheck source=../toolchain/versions.env
source toolchain/versions.env

stack=""
while [ $# -gt 0 ]; do
  case "$1" in
    --stack|-s) stack="${2:-}"; shift 2 ;;
    --stack=*) stack="${1#--stack=}"; shift ;;
    *) echo "usage: $0 --stack NAME" >&2; exit 2 ;;
  esac
done
[ -n "$stack" ] || { echo "usage: $0 --stack NAME" >&2; exit 2; }
[ -x .tools/bin/pulumi ] || { echo "migrate-provider: the toolchain is not set up yet; run ./scripts/bootstrap.sh first" >&2; exit 1; }
if [ "$stack" = "dev" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  export PULUMI_CONFIG_PASSPHRASE="$SPARK_LAB_PASSPHRASE"
fi

backups="$SPARK_ROOT/.pulumi-state-backups"
mkdir -p "$backups"
chmod 700 "$backups"
work=$(mktemp -d "${TMPDIR:-/tmp}/spark-cluster-migrate.XXXXXX")
trap 'rm -rf "$work"' EXIT
umask 077

pulumi stack export --stack "$stack" --file "$work/exported.json"
rc=0
node toolchain/migrate-provider.js "$SPARK_REMOTE_VERSION" <"$work/exported.json" >"$work/migrated.json" || rc=$?
case "$rc" in
  0) ;;
  3) exit 0 ;;
  *) echo "migrate-provider: the state of stack '$stack' was not changed" >&2; exit 1 ;;
esac
backup="$backups/$stack-$(date -u +%Y%m%dT%H%M%SZ)-before-spark-remote.json"
cp "$work/exported.json" "$backup"
pulumi stack import --stack "$stack" --file "$work/migrated.json" >&2
echo "migrate-provider: stack '$stack' now uses the spark-remote provider; nothing ran on any host. The state before: $backup" >&2
