#!/usr/bin/env bash
# Runs the project's Pulumi CLI with the project's environment (scripts/env.sh).
# Selects (creating it if needed) the stack named with --stack/-s, so
#   ./scripts/pulumi.sh --stack dev preview
# works on a fresh clone. For the lab stack "dev" the lab passphrase is used
# unless you set PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE.
# With --config-file (a stack kept under stacks/), the new stack's encryption
# salt goes into that file: `pulumi stack init` has no --config-file and would
# leave a Pulumi.<stack>.yaml of its own at the project's root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$SPARK_ROOT"

if [ ! -x .tools/bin/pulumi ]; then
  echo "pulumi.sh: the toolchain is not set up yet; run ./scripts/bootstrap.sh first" >&2
  exit 1
fi

stack=""
config_file=""
prev=""
for arg in "$@"; do
  case "$prev" in --stack|-s) stack="$arg" ;; --config-file) config_file="$arg" ;; esac
  case "$arg" in --stack=*) stack="${arg#--stack=}" ;; --config-file=*) config_file="${arg#--config-file=}" ;; esac
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
    file://*) dir=${PULUMI_BACKEND_URL#file://} && mkdir -p "${dir%%\?*}" ;;
  esac
  echo "pulumi.sh: creating stack '$stack' in $PULUMI_BACKEND_URL" >&2
  root_file="Pulumi.$stack.yaml"
  had_root_file=0
  [ -e "$root_file" ] && had_root_file=1
  pulumi stack init "$stack" --secrets-provider passphrase --non-interactive >&2
  if [ -n "$config_file" ] && [ "$had_root_file" = 0 ] && [ -f "$root_file" ] && [ "$(realpath -m "$config_file")" != "$(realpath -m "$root_file")" ]; then
    if [ -f "$config_file" ] && ! grep -q '^encryptionsalt:' "$config_file"; then
      salt=$(grep '^encryptionsalt:' "$root_file" || true)
      if [ -n "$salt" ]; then
        # The file may not end with a newline; the salt must start a line of its own.
        [ -n "$(tail -c 1 "$config_file")" ] && echo >>"$config_file"
        printf '%s\n' "$salt" >>"$config_file"
      fi
    fi
    rm -f -- "$root_file"
  fi
fi

exec pulumi "$@"
