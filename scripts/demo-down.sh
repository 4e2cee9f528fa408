#!/usr/bin/env bash
# Undoes ./scripts/demo.sh: `pulumi destroy --stack dev` puts the lab nodes
# back as they were, then the lab itself is taken down.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if lab/lab.sh status >/dev/null 2>&1; then
  ./scripts/pulumi.sh --stack dev destroy --yes --non-interactive --skip-preview
else
  # No lab, no nodes to put back: just forget the state (the config stays).
  ./scripts/pulumi.sh stack rm dev --force --yes --preserve-config
fi
lab/lab.sh down
