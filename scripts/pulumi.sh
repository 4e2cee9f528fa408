#!/usr/bin/env bash
# Runs the project's Pulumi CLI with the project's environment (scripts/env.sh).
# Selects (creating it if needed) the stack named with --stack/-s, so
#   ./scripts/pulumi.sh --stack dev preview
# works on a fresh clone. For the lab stack "dev" the lab passphrase is used
# unless you set PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$SPARK_ROOT"

if [ ! -x .tools/bin/pulumi ]; then
  echo "pulumi.sh: the toolchain is not set up yet; run ./scripts/bootstrap.sh first" >&2
  exit 1
fi

stack=""
prev=""
for arg in "$@"; do
  case "$prev" in --stack|-s) stack="$arg" ;; esac
  case "$arg" in --stack=*) stack="${arg#--stack=}" ;; esac
  prev="$arg"
done

if [ "$stack" = "dev" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  export PULUMI_CONFIG_PASSPHRASE="$SPARK_LAB_PASSPHRASE"
fi

if [ -n "$stack" ] && ! pulumi stack select "$stack" --non-interactive >/dev/null 2>&1; then
  # Tools that only read a deployed stack (npm run status, logs) must not create one.
  if [ -n "${SPARK_STACK_MUST_EXIST:-}" ]; then
    echo "pulumi.sh: there is no stack '$stack' in $PULUMI_BACKEND_URL (deploy it with up first)" >&2
    exit 1
  fi
  case "$PULUMI_BACKEND_URL" in
    file://*) mkdir -p "${PULUMI_BACKEND_URL#file://}" ;;
  esac
  echo "pulumi.sh: creating stack '$stack' in $PULUMI_BACKEND_URL" >&2
  pulumi stack init "$stack" --secrets-provider passphrase --non-interactive >&2
fi

exec pulumi "$@"
