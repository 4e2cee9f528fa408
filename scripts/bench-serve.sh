#!/usr/bin/env bash
# Benchmarks the deployed endpoint with `vllm bench serve`, run on the head node
# inside the head's own runtime (docker exec into the vLLM container, or the
# venv's vllm) against 127.0.0.1, the community guides' way.
#
#   scripts/bench-serve.sh --stack STACK [options] [-- more vllm bench serve flags]
#
# The head, its runtime, the API port and the model come from the stack's
# `cluster` output (./scripts/pulumi.sh --stack STACK stack output cluster).
# The API key never leaves the head: the remote script reads it from the
# root-only /etc/spark-cluster/vllm.env (as the readiness probe does) and hands
# it to the benchmark as OPENAI_API_KEY in the environment. The remote script is
# rendered by components/render/bench.ts (unit-tested).
#
# Options (defaults: the community guides' random 1024 in / 128 out, 100 prompts, rate inf):
#   --stack S               Pulumi stack (required unless --cluster-json)
#   --config-file F         the stack's config file, e.g. stacks/Pulumi.spark-pair.yaml (for the SSH key)
#   --random-input-len N    tokens per prompt (1024)
#   --random-output-len N   tokens per answer (128)
#   --num-prompts N         requests (100)
#   --request-rate R        requests per second, or inf: all at once (inf)
#   --max-concurrency N     at most N requests in flight (no limit)
#   --seed N                dataset and arrival seed (0)
#   --backend B             openai (/v1/completions) or openai-chat (openai)
#   --endpoint P            API path (/v1/completions)
#   --identity FILE         SSH key; default: spark-cluster:sshPrivateKeyPath, the head's
#                           ssh.privateKeyPath, the secret spark-cluster:sshPrivateKey, or ssh's own
#   --no-host-key-check     do not check the head's host key (default for the lab stack "dev",
#                           whose nodes get new host keys on every lab up)
#   --cluster-json FILE     read the cluster output from FILE instead of the stack
#   --dry-run               print the SSH target and the remote script; run nothing
# Exit status: the remote script's (1 when no request succeeded or any failed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$SPARK_ROOT"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
stack="" config_file="" identity="" cluster_json="" dry_run=0 no_host_key_check=0
options="{}"
opt() { options=$(node -e 'const o = JSON.parse(process.argv[1]); o[process.argv[2]] = process.argv[3] === "" ? undefined : (process.argv[4] === "n" ? Number(process.argv[3]) : process.argv[3]); console.log(JSON.stringify(o));' "$options" "$1" "$2" "$3"); }
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --stack) stack=${2:?}; shift 2 ;;
    --config-file) config_file=${2:?}; shift 2 ;;
    --random-input-len) opt randomInputLen "${2:?}" n; shift 2 ;;
    --random-output-len) opt randomOutputLen "${2:?}" n; shift 2 ;;
    --num-prompts) opt numPrompts "${2:?}" n; shift 2 ;;
    --request-rate) opt requestRate "${2:?}" s; shift 2 ;;
    --max-concurrency) opt maxConcurrency "${2:?}" n; shift 2 ;;
    --seed) opt seed "${2:?}" n; shift 2 ;;
    --backend) opt backend "${2:?}" s; shift 2 ;;
    --endpoint) opt endpoint "${2:?}" s; shift 2 ;;
    --identity) identity=${2:?}; shift 2 ;;
    --no-host-key-check) no_host_key_check=1; shift ;;
    --cluster-json) cluster_json=${2:?}; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "bench-serve.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$stack" ] || [ -n "$cluster_json" ] || { echo "bench-serve.sh: --stack STACK is required" >&2; exit 2; }
[ "$stack" = dev ] && no_host_key_check=1

pulumi_args=(--stack "$stack")
# `config get` reads the stack file; `stack output` takes no --config-file.
config_args=()
[ -n "$config_file" ] && config_args=(--config-file "$config_file")

work=$(mktemp -d "${TMPDIR:-/tmp}/spark-cluster-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"

if [ -n "$cluster_json" ]; then
  cp "$cluster_json" "$work/cluster.json"
else
  ./scripts/pulumi.sh "${pulumi_args[@]}" stack output cluster --json >"$work/cluster.json"
fi
node -e 'console.log(JSON.stringify(process.argv.slice(1)))' -- "${extra[@]}" >"$work/extra.json"

# Render the remote script (components/render/bench.ts) and the head's SSH target.
BENCH_DIR="$work" BENCH_OPTIONS="$options" node -r ts-node/register/transpile-only -e '
const fs = require("node:fs");
const { benchTargetFromCluster, benchServeScript } = require("./components/render/bench");
const { remoteCommand } = require("./components/render/host/shell");
const dir = process.env.BENCH_DIR;
const cluster = JSON.parse(fs.readFileSync(`${dir}/cluster.json`, "utf8"));
const options = { ...JSON.parse(process.env.BENCH_OPTIONS), extraArgs: JSON.parse(fs.readFileSync(`${dir}/extra.json`, "utf8")) };
try {
    const target = benchTargetFromCluster(cluster, options);
    const script = benchServeScript(target.spec);
    fs.writeFileSync(`${dir}/remote.sh`, script);
    fs.writeFileSync(`${dir}/remote-command`, remoteCommand(script, target.ssh.user));
    fs.writeFileSync(`${dir}/target`, [target.node, target.ssh.user, target.ssh.host, target.ssh.port].join("\n") + "\n");
} catch (err) {
    console.error(`bench-serve.sh: ${err.message}`);
    process.exit(2);
}
'
{ read -r node; read -r user; read -r host; read -r port; } <"$work/target"

if [ "$dry_run" = 1 ]; then
  echo "== head $node: ssh -p $port $user@$host, remote script:"
  cat "$work/remote.sh"
  exit 0
fi

# The SSH key: --identity, else the stack's configuration, else ssh's own defaults.
if [ -z "$identity" ] && [ -n "$stack" ]; then
  identity=$(./scripts/pulumi.sh "${pulumi_args[@]}" config get "${config_args[@]}" spark-cluster:sshPrivateKeyPath 2>/dev/null || true)
  if [ -z "$identity" ]; then
    identity=$(./scripts/pulumi.sh "${pulumi_args[@]}" config get "${config_args[@]}" spark-cluster:nodes 2>/dev/null \
      | node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => { try { const n = JSON.parse(s).find((x) => x.name === process.argv[1]); console.log(n?.ssh?.privateKeyPath ?? ""); } catch { console.log(""); } });' "$node" || true)
  fi
  if [ -z "$identity" ] && ./scripts/pulumi.sh "${pulumi_args[@]}" config get "${config_args[@]}" spark-cluster:sshPrivateKey >"$work/id" 2>/dev/null && [ -s "$work/id" ]; then
    chmod 600 "$work/id"
    identity="$work/id"
  fi
fi
ssh_args=(-o BatchMode=yes -o ConnectTimeout=15 -o LogLevel=ERROR -p "$port")
[ -n "$identity" ] && ssh_args+=(-i "$identity" -o IdentitiesOnly=yes)
if [ "$no_host_key_check" = 1 ]; then
  ssh_args+=(-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null)
else
  ssh_args+=(-o StrictHostKeyChecking=accept-new)
fi

echo "== vllm bench serve on the head $node ($user@$host)"
rc=0
ssh "${ssh_args[@]}" "$user@$host" "$(cat "$work/remote-command")" </dev/null || rc=$?
exit "$rc"
