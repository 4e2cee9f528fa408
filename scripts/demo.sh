#!/usr/bin/env bash
# The README's first command: sets up the toolchain and the lab (two simulated
# DGX Sparks on this machine), runs `pulumi up --stack dev` against it, then
# sends a chat request to the endpoint the stack exports and prints the answer.
# `./scripts/demo-down.sh` undoes it (pulumi destroy, then lab down).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
./scripts/bootstrap.sh
lab_was_up=1
lab/lab.sh status >/dev/null 2>&1 || lab_was_up=0
lab/lab.sh up
if [ "$lab_was_up" = 0 ] && ./scripts/pulumi.sh --stack dev stack export 2>/dev/null | grep -q '"type": "spark-remote:index:Step"'; then
  # A freshly booted lab has bare nodes: state from an earlier lab describes nothing.
  echo "== the lab was rebuilt: forgetting the dev stack's state from the previous lab"
  ./scripts/pulumi.sh stack rm dev --force --yes --preserve-config
fi
./scripts/pulumi.sh --stack dev up --yes --non-interactive --skip-preview

endpoint=$(./scripts/pulumi.sh --stack dev stack output endpoint)
model=$(./scripts/pulumi.sh --stack dev stack output servedModel)
echo "== asking $model at $endpoint"
# The key travels in the environment, never on a command line.
SPARK_API_KEY=$(./scripts/pulumi.sh --stack dev config get spark-cluster:apiKey) \
SPARK_ENDPOINT="$endpoint" SPARK_MODEL="$model" node -e '
const { SPARK_API_KEY: key, SPARK_ENDPOINT: url, SPARK_MODEL: model } = process.env;
fetch(`${url}/chat/completions`, {
  method: "POST",
  headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
  body: JSON.stringify({ model, messages: [{ role: "user", content: "Hello! Where are you running?" }] }),
  signal: AbortSignal.timeout(60000),
}).then(async (r) => {
  const body = await r.json();
  if (!r.ok) { console.error(`HTTP ${r.status}:`, body); process.exit(1); }
  console.log(body.choices[0].message.content);
}).catch((e) => { console.error(e.message); process.exit(1); });
'
echo "== the cluster is up; ./scripts/demo-down.sh takes it down"
