#!/usr/bin/env bash
# What would `pulumi up` change? Runs `pulumi preview --diff` for every stack in stacks/ (or the
# ones named) without any host, SSH key or secret, prints each diff and writes it to a file.
#
#   ./scripts/preview-diff.sh                  # every stacks/Pulumi.<stack>.yaml
#   ./scripts/preview-diff.sh spark-pair       # only these stacks
#
# Per stack it writes, under $PREVIEW_DIFF_DIR (default build/preview-diff/):
#   <stack>.diff   the preview's output (what is printed), and
#   <stack>.json   {stack, ok, exitCode, secrets, backend, counts}: what the CI comment needs.
# It exits non-zero if any preview failed (or printed a secret; the printed diff is then redacted).
#
# What it needs: ./scripts/bootstrap.sh run once (the project's Pulumi CLI and plugins). Nothing
# else: no host is contacted, the SSH key file is not read (a preview never reads it, see
# components/nodeConnection.ts), and the committed stack files are never modified (each preview
# uses a temporary copy). Optional, from the environment:
#   PULUMI_BACKEND_URL    diff against the stacks deployed in this backend (e.g. s3://bucket);
#                         a stack it does not hold is previewed against nothing. Unset: a
#                         throwaway file backend, so every resource shows as "create".
#   PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE
#                         decrypts the secrets committed (encrypted) in the stack files and they
#                         are used. Unset: each secret in a stack file is replaced by a
#                         placeholder, under a throwaway passphrase.
#   SPARK_API_KEY_<STACK>, SPARK_HF_TOKEN_<STACK>
#                         (<STACK>: the stack name upper-cased, - and . as _, e.g.
#                         SPARK_API_KEY_SPARK_PAIR) the stack's apiKey / hfToken, used instead
#                         of the one in the stack file or a placeholder.
#   A required secret that is still missing (apiKey) gets a placeholder. Placeholders and
#   secrets are never printed: Pulumi shows them as [secret], and the output is checked for them.
#   PREVIEW_DIFF_DIR      where the files go (default build/preview-diff/).
#   PREVIEW_STACKS_DIR    where the stack files are (default stacks/).
#   PREVIEW_ISOLATE       auto (default): with a file backend, run each preview in its own network
#                         namespace with only loopback (unshare --net as root, else
#                         unshare --map-root-user --net), so it cannot reach any host; when
#                         neither works it runs without. 1: fail instead. 0: never isolate.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Decided before scripts/env.sh, which would default the backend to the project's own state.
user_backend="${PULUMI_BACKEND_URL:-}"
for var in PULUMI_CONFIG_PASSPHRASE PULUMI_CONFIG_PASSPHRASE_FILE; do
  # An empty value (e.g. a CI secret that is not set) means "not given".
  if [ -z "${!var:-}" ]; then unset "$var"; fi
done
real_passphrase=no
if [ -n "${PULUMI_CONFIG_PASSPHRASE:-}" ] || [ -n "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  real_passphrase=yes
fi
# shellcheck source=scripts/env.sh
source "$ROOT/scripts/env.sh"
cd "$ROOT"

say() { printf '[preview-diff] %s\n' "$*" >&2; }
die() { printf '[preview-diff] error: %s\n' "$*" >&2; exit 2; }

[ -x .tools/bin/pulumi ] || die "the toolchain is not set up yet; run ./scripts/bootstrap.sh first"
stacks_dir="${PREVIEW_STACKS_DIR:-$ROOT/stacks}"
out_dir="${PREVIEW_DIFF_DIR:-$ROOT/build/preview-diff}"
isolate="${PREVIEW_ISOLATE:-auto}"
case "$isolate" in auto|1|0) ;; *) die "PREVIEW_ISOLATE must be auto, 1 or 0 (got '$isolate')" ;; esac

stacks=("$@")
if [ ${#stacks[@]} -eq 0 ]; then
  for f in "$stacks_dir"/Pulumi.*.yaml; do
    [ -e "$f" ] || continue
    s=${f##*/Pulumi.}; stacks+=("${s%.yaml}")
  done
  [ ${#stacks[@]} -gt 0 ] || die "no stack files (Pulumi.<stack>.yaml) in $stacks_dir"
fi
for s in "${stacks[@]}"; do
  [ -f "$stacks_dir/Pulumi.$s.yaml" ] || die "no stack file $stacks_dir/Pulumi.$s.yaml"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/spark-preview-diff.XXXXXX")
chmod 700 "$work"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out_dir" "$work/project" "$work/backend"
# Stacks are created from a copy of Pulumi.yaml alone: `stack init` with the passphrase provider
# writes Pulumi.<stack>.yaml next to Pulumi.yaml, and that must not happen in the repository.
cp Pulumi.yaml "$work/project/"
throwaway_backend="file://$work/backend"

if [ "$real_passphrase" = no ]; then
  PULUMI_CONFIG_PASSPHRASE="throwaway-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
  export PULUMI_CONFIG_PASSPHRASE
fi
placeholder_id=$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')
# Every placeholder contains "preview-placeholder-" (test/mocked/preview.test.ts looks for it).
placeholder_for() { # key
  case "$1" in
    sshPrivateKey) printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\npreview-placeholder-%s\n-----END OPENSSH PRIVATE KEY-----\n' "$placeholder_id" ;;
    rayAuthToken) printf 'preview-placeholder-%s%s' "$placeholder_id" "$placeholder_id" ;;
    *) printf 'preview-placeholder-%s' "$placeholder_id" ;;
  esac
}

# The network namespace each preview runs in (file backends only: others need the network).
netns=()
netns_for() { # backend-url
  netns=()
  if [ "$isolate" = 0 ]; then return 0; fi
  if [[ "$1" != file://* ]]; then
    [ "$isolate" = auto ] || die "PREVIEW_ISOLATE=1 needs a file:// backend (got $1)"
    return 0
  fi
  if command -v ip >/dev/null && command -v unshare >/dev/null; then
    if [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
      netns=(unshare --net); return 0
    fi
    if unshare --map-root-user --net true 2>/dev/null; then
      netns=(unshare --map-root-user --net); return 0
    fi
  fi
  [ "$isolate" = auto ] || die "PREVIEW_ISOLATE=1 but no network namespace can be made here (needs ip, unshare and root or unprivileged user namespaces)"
  say "note: no network namespace available here; previews run with the network (they contact no host anyway)"
}

stack_exists() { # stack (in the current PULUMI_BACKEND_URL)
  pulumi -C "$work/project" stack ls --json --non-interactive 2>/dev/null |
    node -e 'const l = JSON.parse(require("fs").readFileSync(0, "utf8")); process.exit(l.some((s) => s.name === process.argv[1] || s.name.endsWith("/" + process.argv[1])) ? 0 : 1);' "$1"
}

# Pulumi config of a stack file: the keys under spark-cluster: that are secret (no decryption).
secret_keys_of() { # stack config-file
  pulumi --stack "$1" config --json --config-file "$2" --non-interactive |
    node -e 'const c = JSON.parse(require("fs").readFileSync(0, "utf8")); for (const [k, v] of Object.entries(c)) if (v.secret && k.startsWith("spark-cluster:")) console.log(k.slice("spark-cluster:".length));'
}

# One stack, in a subshell (set -e holds there even though the caller checks its status). Its
# exit status is the preview's; it writes $out_dir/<stack>.{diff,json} and prints the diff.
preview_stack() { # stack
  local stack=$1 env_suffix cfg backend_kind secrets_kind key var pair known raw rc leaked
  local -a secret_keys
  env_suffix=$(printf '%s' "$stack" | tr 'a-z.-' 'A-Z__')
  cfg="$work/Pulumi.$stack.yaml"
  cp "$stacks_dir/Pulumi.$stack.yaml" "$cfg"

  # Backend: the user's, if it holds this stack; else a throwaway one (the diff is against nothing).
  backend_kind=throwaway
  export PULUMI_BACKEND_URL="$throwaway_backend"
  if [ -n "$user_backend" ]; then
    export PULUMI_BACKEND_URL="$user_backend"
    if stack_exists "$stack"; then
      backend_kind=PULUMI_BACKEND_URL
    else
      say "  $stack is not in PULUMI_BACKEND_URL: previewed against nothing (throwaway backend)"
      export PULUMI_BACKEND_URL="$throwaway_backend"
    fi
  fi
  if [ "$backend_kind" = throwaway ] && ! stack_exists "$stack"; then
    pulumi -C "$work/project" stack init "$stack" --secrets-provider passphrase --non-interactive >/dev/null 2>"$work/init.err" ||
      { cat "$work/init.err" >&2; return 1; }
  fi

  # Secrets: the stack file's own (real passphrase), else placeholders; env values win.
  mapfile -t secret_keys < <(secret_keys_of "$stack" "$cfg")
  secrets_kind=real
  if [ "$real_passphrase" = no ]; then
    secrets_kind=none
    for key in "${secret_keys[@]}"; do
      pulumi --stack "$stack" config rm "spark-cluster:$key" --config-file "$cfg" --non-interactive
    done
    # The committed salt belongs to a passphrase we do not have; the throwaway one makes its own.
    sed -i -E '/^(encryptionsalt|secretsprovider|encryptedkey):/d' "$cfg"
    for key in "${secret_keys[@]}"; do
      placeholder_for "$key" | pulumi --stack "$stack" config set --secret "spark-cluster:$key" --config-file "$cfg" --non-interactive
      secrets_kind=placeholders
    done
  fi
  for pair in apiKey:SPARK_API_KEY_ hfToken:SPARK_HF_TOKEN_; do
    key=${pair%%:*}
    var="${pair#*:}$env_suffix"
    if [ -n "${!var:-}" ]; then
      printf '%s' "${!var}" | pulumi --stack "$stack" config set --secret "spark-cluster:$key" --config-file "$cfg" --non-interactive
      [ "$secrets_kind" = placeholders ] || secrets_kind=real
    fi
  done
  if ! pulumi --stack "$stack" config get spark-cluster:apiKey --config-file "$cfg" --non-interactive >/dev/null 2>&1; then
    placeholder_for apiKey | pulumi --stack "$stack" config set --secret spark-cluster:apiKey --config-file "$cfg" --non-interactive
    secrets_kind=placeholders
  fi

  # Every secret value the preview knows, to check the output for them (mode 600, removed at exit).
  known="$work/$stack.secrets.json"
  (umask 077 && pulumi --stack "$stack" config --json --show-secrets --config-file "$cfg" --non-interactive >"$known")

  netns_for "$PULUMI_BACKEND_URL"
  # --show-full-output: the CLI otherwise cuts a changed line at 150 characters, and the change of
  # a long ExecStart= line (a vLLM flag) is often further right than that.
  raw="$work/$stack.out"
  rc=0
  if [ ${#netns[@]} -gt 0 ]; then
    "${netns[@]}" bash -c 'ip link set lo up && exec "$@"' preview-netns \
      pulumi --stack "$stack" preview --diff --show-full-output --non-interactive --color never --config-file "$cfg" >"$raw" 2>&1 || rc=$?
  else
    pulumi --stack "$stack" preview --diff --show-full-output --non-interactive --color never --config-file "$cfg" >"$raw" 2>&1 || rc=$?
  fi

  # Redact any secret value that made it into the output (none should) and fail if one did.
  leaked=$(node -e '
    const fs = require("fs");
    const [known, raw, diff] = process.argv.slice(1);
    const config = JSON.parse(fs.readFileSync(known, "utf8"));
    const secrets = Object.values(config).filter((v) => v.secret && typeof v.value === "string").map((v) => v.value);
    // Whole values, and each line of a multi-line one (a key) but its -----BEGIN/END----- lines.
    const lines = secrets.flatMap((s) => s.split("\n")).filter((l) => !l.startsWith("-----"));
    const values = [...new Set([...secrets, ...secrets.map((s) => s.trim()), ...lines.map((l) => l.trim())])];
    let text = fs.readFileSync(raw, "utf8");
    let count = 0;
    for (const v of values.filter((v) => v.length >= 8).sort((a, b) => b.length - a.length)) {
      if (text.includes(v)) {
        count++;
        text = text.split(v).join("[secret]");
      }
    }
    if (/preview-placeholder-/.test(text)) {
      count++;
      text = text.replace(/preview-placeholder-[0-9a-f]*/g, "[secret]");
    }
    fs.writeFileSync(diff, text);
    console.log(count);
  ' "$known" "$raw" "$out_dir/$stack.diff")
  rm -f "$known" "$raw"
  if [ "$leaked" != 0 ]; then
    say "  error: the preview of $stack printed a secret; it is redacted below and in $out_dir/$stack.diff"
    [ "$rc" != 0 ] || rc=3
  fi
  write_json "$stack" "$rc" "$secrets_kind" "$backend_kind"
  printf '==== preview-diff: stack %s (secrets: %s, backend: %s) ====\n' "$stack" "$secrets_kind" "$backend_kind"
  cat "$out_dir/$stack.diff"
  return "$rc"
}

write_json() { # stack exit-code secrets backend
  node -e '
    const fs = require("fs");
    const [diff, json, stack, rc, secrets, backend] = process.argv.slice(1);
    const text = fs.existsSync(diff) ? fs.readFileSync(diff, "utf8") : "";
    const counts = {};
    const at = text.lastIndexOf("\nResources:");
    if (at >= 0) {
      for (const m of text.slice(at).matchAll(/^\s+(?:[-+~]|\+-)?\s*(\d+) (to create|to update|to delete|to replace|unchanged)$/gm)) {
        counts[m[2]] = Number(m[1]);
      }
    }
    fs.writeFileSync(json, JSON.stringify({ stack, ok: rc === "0", exitCode: Number(rc), secrets, backend, counts }, null, 2) + "\n");
  ' "$out_dir/$1.diff" "$out_dir/$1.json" "$1" "$2" "$3" "$4"
}

failed=()
for stack in "${stacks[@]}"; do
  say "stack $stack"
  rm -f "$out_dir/$stack.diff" "$out_dir/$stack.json"
  set +e
  (
    set -e
    # Errors while preparing the stack also go into its diff file (for the CI comment).
    exec 2> >(tee -a "$work/$stack.log" >&2)
    preview_stack "$stack"
  )
  rc=$?
  set -e
  if [ ! -f "$out_dir/$stack.json" ]; then
    # Failed before the preview ran: its diff is what went wrong.
    { echo "preparing the preview of $stack failed:"; cat "$work/$stack.log" 2>/dev/null || true; } >"$out_dir/$stack.diff"
    write_json "$stack" "$rc" unknown unknown
    cat "$out_dir/$stack.diff"
  fi
  if [ "$rc" = 0 ]; then
    printf '==== preview-diff: stack %s: ok ====\n\n' "$stack"
  else
    printf '==== preview-diff: stack %s: FAILED (exit %s) ====\n\n' "$stack" "$rc"
    failed+=("$stack")
  fi
done

say "diffs written to $out_dir"
if [ ${#failed[@]} -gt 0 ]; then
  say "failed: ${failed[*]}"
  exit 1
fi
