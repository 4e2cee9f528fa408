#!/usr/bin/env bash
# Installs everything this project needs, from the registries this machine can
# reach, and caches it so the next run takes seconds:
#   1. Node.js dependencies (npm ci, lockfile pinned; install scripts off, so no
#      package tries to download a plugin);
#   2. the Pulumi CLI: one on PATH that is at least PULUMI_VERSION (toolchain/versions.env), else
#      built from its Go module at PULUMI_VERSION (newer than @pulumi/pulumi,
#      PULUMI_NODEJS_SDK_VERSION, while npm lags the Go module proxy);
#   3. the project-built Node.js language host and our own provider plugin, spark-remote
#      (toolchain/plugins, see toolchain/README.md);
#   5. actionlint, which checks .github/workflows (built from its Go module).
# Built binaries live in a per-user cache keyed by version (and, for the
# project's own plugins, by a hash of their sources), outside the work tree, so
# a fresh clone on the same machine reuses them. .tools/ links to them (step 4).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=../toolchain/versions.env
source toolchain/versions.env
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/spark-cluster/toolchain"
TOOLS="$ROOT/.tools/bin"
started=$(date +%s)

say() { printf '[bootstrap] %s\n' "$*" >&2; }
die() { printf '[bootstrap] error: %s\n' "$*" >&2; exit 1; }

need_version() { # name have want
  if ! printf '%s\n%s\n' "$3" "$2" | sort -V -C; then
    die "$1 $2 is too old; this project needs $1 >= $3"
  fi
}

# Runs a long command in the background, printing a heartbeat until it ends.
with_progress() { # label logfile cmd...
  local label=$1 log=$2; shift 2
  local t0 pid rc
  t0=$(date +%s)
  "$@" >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    if kill -0 "$pid" 2>/dev/null && (( ($(date +%s) - t0) % 30 < 5 )); then
      say "  ... $label: $(( $(date +%s) - t0 ))s, last: $(tail -n 1 "$log" | cut -c1-100)"
    fi
  done
  rc=0; wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$log" >&2
    die "$label failed (exit $rc); full log: $log"
  fi
  say "  $label done in $(( $(date +%s) - t0 ))s"
}

# --- prerequisites -----------------------------------------------------------
command -v go >/dev/null || die "Go is not installed (needs >= 1.26.6): it builds the Pulumi CLI"
command -v node >/dev/null || die "Node.js is not installed (needs >= 20)"
command -v npm >/dev/null || die "npm is not installed"
# Go: the `go` line of pkg/v3 and sdk/v3 (toolchain/*/go.mod) at PULUMI_VERSION.
need_version go "$(go env GOVERSION | sed 's/^go//')" 1.26.6
need_version node "$(node --version | sed 's/^v//')" 20
mkdir -p "$CACHE" "$TOOLS"

# --- 1. Node.js dependencies -------------------------------------------------
lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.spark-cluster-lock 2>/dev/null)" != "$lock_hash" ]; then
  say "installing Node.js dependencies (npm ci)"
  with_progress "npm ci" "$CACHE/npm-ci.log" npm ci --ignore-scripts --no-audit --no-fund
  echo "$lock_hash" > node_modules/.spark-cluster-lock
else
  say "Node.js dependencies up to date"
fi
# The Node.js SDK has its own pin: npm's newest @pulumi/pulumi (3.270.0 on 2026-11-25) is older
# than the CLI the Go module proxy serves, so it cannot equal PULUMI_VERSION.
have_sdk=$(node -p 'require("./node_modules/@pulumi/pulumi/package.json").version')
[ "$have_sdk" = "$PULUMI_NODEJS_SDK_VERSION" ] || die "node_modules has @pulumi/pulumi $have_sdk, expected $PULUMI_NODEJS_SDK_VERSION"

# --- 2. Pulumi CLI -------------------------------------------------------------
# A Pulumi CLI already on PATH (the official installer's ~/.pulumi/bin/pulumi, a package
# manager's) is used when it is at least PULUMI_VERSION, the version this project tests, and of
# the same major version (scripts/pulumi-on-path.sh); SPARK_BUILD_PULUMI=1 builds ours all the same.
# Otherwise the CLI is built from its Go module at PULUMI_VERSION, once per user and version.
# Either way the project's own plugins (step 3) are the ones it runs with (step 4).
if [ "${SPARK_BUILD_PULUMI:-0}" != 1 ] && ambient=$(scripts/pulumi-on-path.sh "$PULUMI_VERSION" 2>"$CACHE/pulumi-on-path.log"); then
  cli_path=$(readlink -f "${ambient%%$'\t'*}")
  cli_version=${ambient#*$'\t'}
  cli_key="v$cli_version-$(printf '%s' "$cli_path" | sha256sum | cut -c1-8)"
  say "using the Pulumi CLI on PATH: ${ambient%%$'\t'*} (v$cli_version; this project tests v$PULUMI_VERSION)"
else
  [ "${SPARK_BUILD_PULUMI:-0}" = 1 ] || say "$(sed 's/^pulumi-on-path.sh: //' "$CACHE/pulumi-on-path.log"): using the project's own build"
  cli_dir="$CACHE/pulumi-v$PULUMI_VERSION"
  if [ ! -x "$cli_dir/pulumi" ]; then
    say "building the Pulumi CLI v$PULUMI_VERSION from its Go module (first time only: about 4-5 minutes on 2 cores)"
    mkdir -p "$cli_dir"
    # Its own Go module and build caches, removed once the binary is built: the CLI is built once
    # per version, and its modules and compiled packages would only take up space in the user's
    # Go caches (about 3 GB: ~/go/pkg/mod and ~/.cache/go-build held 4.0 GB after a bootstrap on
    # 2026-11-27, 1.0 GB for the plugins and actionlint alone).
    gotmp="$CACHE/pulumi-build-caches"
    rm -rf "$gotmp" 2>/dev/null || { chmod -R u+w "$gotmp" && rm -rf "$gotmp"; }
    with_progress "go build pulumi" "$CACHE/pulumi-build.log" \
      env -C toolchain/pulumi-cli GOMODCACHE="$gotmp/mod" GOCACHE="$gotmp/build" \
        go build -mod=readonly -trimpath -o "$cli_dir/pulumi.tmp" \
        -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
        github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
    mv "$cli_dir/pulumi.tmp" "$cli_dir/pulumi"
    chmod -R u+w "$gotmp" && rm -rf "$gotmp"
  else
    say "Pulumi CLI v$PULUMI_VERSION cached"
  fi
  cli_path=$(readlink -f "$cli_dir/pulumi")
  cli_version=$PULUMI_VERSION
  cli_key=$PULUMI_VERSION
fi

# --- 3. Project-built plugins ------------------------------------------------
plugins_key=$( { echo "$PULUMI_VERSION $SPARK_REMOTE_VERSION"; \
  find toolchain/plugins -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) ! -name '*_test.go' -print0 \
  | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16)
plugins_dir="$CACHE/plugins-$plugins_key"
if [ ! -x "$plugins_dir/pulumi-resource-spark-remote" ] || [ ! -x "$plugins_dir/pulumi-language-nodejs" ]; then
  say "building the language host and the spark-remote provider plugins (toolchain/plugins)"
  mkdir -p "$plugins_dir.tmp"
  with_progress "go build plugins" "$CACHE/plugins-build.log" \
    env -C toolchain/plugins go build -mod=readonly -trimpath -o "$plugins_dir.tmp/" \
      -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION -X spark-cluster.local/toolchain/plugins/internal/commandprovider.Version=$SPARK_REMOTE_VERSION" \
      ./cmd/pulumi-language-nodejs ./cmd/pulumi-resource-spark-remote
  rm -rf "$plugins_dir"
  mv "$plugins_dir.tmp" "$plugins_dir"
else
  say "plugins cached ($plugins_key)"
fi

# --- 4. Install where the CLI looks for plugins ------------------------------
# The CLI finds the Node.js language host (a "bundled" plugin) next to its own
# executable, and our provider in $PULUMI_HOME/plugins/resource-spark-remote-vX/.
# Installed there, neither is an "ambient" plugin from $PATH, so Pulumi prints no
# "using ... from $PATH" warning (scripts/env.sh sets PULUMI_HOME and ignores
# ambient plugins). dist-* holds hard links (a copy where that fails), not symlinks:
# the CLI resolves symlinks before it looks next to itself.
dist="$CACHE/dist-$cli_key-$plugins_key"
if ! { [ "$dist/pulumi" -ef "$cli_path" ] || cmp -s "$dist/pulumi" "$cli_path"; } || [ ! -x "$dist/pulumi-language-nodejs" ]; then
  rm -rf "$dist.tmp"; mkdir -p "$dist.tmp"
  ln "$cli_path" "$dist.tmp/pulumi" 2>/dev/null || cp "$cli_path" "$dist.tmp/pulumi"
  ln "$plugins_dir/pulumi-language-nodejs" "$dist.tmp/" 2>/dev/null || cp "$plugins_dir/pulumi-language-nodejs" "$dist.tmp/"
  rm -rf "$dist"; mv "$dist.tmp" "$dist"
fi
home="$ROOT/.tools/pulumi-home"
provider_dir="$home/plugins/resource-spark-remote-v$SPARK_REMOTE_VERSION"
mkdir -p "$provider_dir"
ln -sfn "$dist/pulumi" "$TOOLS/pulumi"
ln -sfn "$plugins_dir/pulumi-resource-spark-remote" "$provider_dir/pulumi-resource-spark-remote"
# Earlier layouts: the plugins linked into .tools/bin (ambient plugins), and our provider installed
# as Pulumi's `command` 1.2.1 (what it announced itself as until the rename; scripts/migrate-provider.sh
# moves a stack deployed then). Neither is used now: removed, so that no stack can load it.
rm -f "$TOOLS/pulumi-language-nodejs" "$TOOLS/pulumi-resource-command"
rm -rf "$home"/plugins/resource-command-v1.2.1 "$home"/plugins/resource-command-v1.2.1.*

# --- 5. actionlint -----------------------------------------------------------------
# Lints .github/workflows (test/mocked/preview.test.ts runs it). Built from its Go module through the
# module proxy at ACTIONLINT_VERSION (toolchain/versions.env), cached per user by version like
# the CLI, linked into .tools/bin.
actionlint_dir="$CACHE/actionlint-v$ACTIONLINT_VERSION"
if [ ! -x "$actionlint_dir/actionlint" ]; then
  say "building actionlint v$ACTIONLINT_VERSION from its Go module"
  rm -rf "$actionlint_dir.tmp"; mkdir -p "$actionlint_dir.tmp"
  with_progress "go install actionlint" "$CACHE/actionlint-build.log" \
    env GOBIN="$actionlint_dir.tmp" go install -trimpath -ldflags "-s -w" \
      "github.com/rhysd/actionlint/cmd/actionlint@v$ACTIONLINT_VERSION"
  rm -rf "$actionlint_dir"; mv "$actionlint_dir.tmp" "$actionlint_dir"
else
  say "actionlint v$ACTIONLINT_VERSION cached"
fi
ln -sfn "$actionlint_dir/actionlint" "$TOOLS/actionlint"
have_actionlint=$("$TOOLS/actionlint" -version | sed -n 1p)
[ "$have_actionlint" = "v$ACTIONLINT_VERSION" ] || die "built actionlint reports $have_actionlint, expected v$ACTIONLINT_VERSION"

have=$("$TOOLS/pulumi" version)
[ "${have%%+*}" = "v${cli_version%%+*}" ] || die "$TOOLS/pulumi reports $have, expected v$cli_version"
say "ready in $(( $(date +%s) - started ))s: pulumi $have in $TOOLS, the spark-remote provider in $provider_dir"
