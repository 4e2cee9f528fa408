#!/usr/bin/env bash
# The README's first command. Today it sets up the toolchain and previews the
# lab stack (`pulumi preview --stack dev`); it grows into "bring up the lab,
# pulumi up, answer a chat request" as the lab and the components land.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
./scripts/bootstrap.sh
./scripts/pulumi.sh --stack dev preview --non-interactive --diff
