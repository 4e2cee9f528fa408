#!/usr/bin/env bash
# Runs the project's Pulumi CLI with the project's environment (scripts/env.sh).
# Selects (creating it if needed) the stack named with --stack/-s, so
#   ./scripts/pulumi.sh --stack dev preview
# works on a fresh clone. For the lab stack "dev" the lab passphrase is used
# unless you set PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE.
# A stack kept under stacks/ (stacks/Pulumi.<stack>.yaml, with no Pulumi.<stack>.yaml
# at the project's root) is found without --config-file: the commands that take one
# (up, preview, destroy, refresh, config, import, watch) get it added after their name.
# With --config-file (given, or found so), the new stack's encryption salt goes into
# that file: `pulumi stack init` has no --config-file and would leave a
# Pulumi.<stack>.yaml of its own at the project's root.
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

# The stack's file under stacks/, when it has no file at the root and none was given.
found_config_file=""
if [ -z "$config_file" ] && [ -n "$stack" ] && [ ! -e "Pulumi.$stack.yaml" ] && [ -f "stacks/Pulumi.$stack.yaml" ]; then
  found_config_file="stacks/Pulumi.$stack.yaml"
  config_file="$found_config_file"
fi

if [ "$stack" = "dev" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  export PULUMI_CONFIG_PASSPHRASE="$SPARK_LAB_PASSPHRASE"
fi

# Whether `pulumi stack select "$stack"` has nothing left to do: a file backend whose state file
# for the stack is there, in a workspace that has it selected for this backend already. Saves the
# CLI's start and its read of the whole state before every command (0.1 CPU s, 0.15-0.2 s on the
# lab's 2 cores; docs/speed.md). Reads the CLI's own records (Pulumi 3.274: the state at
# <dir>/.pulumi/stacks/<project>/<stack>.json, the selection in
# $PULUMI_HOME/workspaces/<project>-<SHA-1 of Pulumi.yaml's path>-workspace.json, keyed by the
# backend's URL); wherever one of them is not where and as expected, the answer is no, and
# `stack select` runs as before.
selected_already() {
  local dir project workspace
  case "$PULUMI_BACKEND_URL" in file:///*) ;; *) return 1 ;; esac
  [[ "$stack" =~ ^[A-Za-z0-9_.-]+$ ]] || return 1
  project=$(sed -n 's/^name: *\([A-Za-z0-9_.-]*\) *$/\1/p' Pulumi.yaml)
  [ -n "$project" ] || return 1
  dir=${PULUMI_BACKEND_URL#file://}
  [ -f "${dir%%\?*}/.pulumi/stacks/$project/$stack.json" ] || return 1
  workspace="$PULUMI_HOME/workspaces/$project-$(printf '%s' "$PWD/Pulumi.yaml" | sha1sum | cut -c1-40)-workspace.json"
  grep -qF "\"$PULUMI_BACKEND_URL\": \"organization/$project/$stack\"" "$workspace" 2>/dev/null
}

if [ -n "$stack" ] && ! selected_already && ! pulumi stack select "$stack" --non-interactive >/dev/null 2>&1; then
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

# A stack deployed before our provider had its own name (its state names Pulumi's `command`
# package) moves to it first, by a rewrite of its state that touches no host
# (scripts/migrate-provider.sh). Run on a stack that has it, the program would otherwise create
# every step anew and leave the old ones to a `command` plugin. With the file backend the check
# reads the stack's state file (a few ms); with another backend, or a state file not where Pulumi
# 3.274 keeps it, it asks the CLI for the state (one `pulumi stack export`: a CLI start and a read of
# the state).
has_old_provider() {
  local dir project file
  project=$(sed -n 's/^name: *\([A-Za-z0-9_.-]*\) *$/\1/p' Pulumi.yaml)
  case "$PULUMI_BACKEND_URL" in
    file://*)
      dir=${PULUMI_BACKEND_URL#file://}
      for file in "${dir%%\?*}/.pulumi/stacks/$project/$stack.json" "${dir%%\?*}/.pulumi/stacks/$project/$stack.json.gz"; do
        [ -f "$file" ] || continue
        case "$file" in
          *.gz) zgrep -qE '"type": ?"pulumi:providers:command"' "$file" ;;
          *) grep -qE '"type": ?"pulumi:providers:command"' "$file" ;;
        esac
        return
      done ;;
  esac
  pulumi stack export --stack "$stack" 2>/dev/null | grep -qE '"type": ?"pulumi:providers:command"'
}
if [ -n "$stack" ] && has_old_provider; then
  echo "pulumi.sh: stack '$stack' was deployed before our provider had its own name; moving it (scripts/migrate-provider.sh)" >&2
  "$SPARK_ROOT/scripts/migrate-provider.sh" --stack "$stack"
fi

# --config-file goes right after the command's name (the flags of `config` are inherited by its
# subcommands), and only to the commands that have it.
if [ -n "$found_config_file" ]; then
  args=() added=0 prev=""
  for arg in "$@"; do
    args+=("$arg")
    if [ "$added" = 0 ] && [[ "$arg" != -* ]] && [ "$prev" != --stack ] && [ "$prev" != -s ]; then
      case "$arg" in
        up | update | preview | pre | destroy | down | refresh | config | import | watch)
          args+=(--config-file "$found_config_file"); added=1 ;;
        *) added=2 ;;  # another command: no --config-file
      esac
    fi
    prev="$arg"
  done
  set -- "${args[@]}"
fi

exec pulumi "$@"
