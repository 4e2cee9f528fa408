# Sourced by every script that runs Pulumi: puts the project's toolchain first
# on PATH and keeps Pulumi off the network and off Pulumi Cloud.
# shellcheck shell=bash
SPARK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SPARK_ROOT
export PATH="$SPARK_ROOT/.tools/bin:$SPARK_ROOT/node_modules/.bin:$PATH"
# Plugins are installed where the CLI looks for them (scripts/bootstrap.sh, step 4):
# the language host next to the CLI, our spark-remote provider in this project's own
# Pulumi home. Never download one, and never pick one up from $PATH.
export PULUMI_HOME="$SPARK_ROOT/.tools/pulumi-home"
export PULUMI_IGNORE_AMBIENT_PLUGINS=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_SKIP_UPDATE_CHECK=true
# Steps at once. Pulumi's default is 4 per CPU of the controller (GOMAXPROCS*4 in
# pkg/cmd/pulumi/operations/up.go, Pulumi 3.274.1): 8 on a 2-core one. Our steps mostly wait on
# the nodes, so at 8 nodes the probes queued for a slot, and the model's pulls (each waiting for
# the head to serve) could hold every slot while the serve step queued behind them
# (docs/speed.md). 64 unless you set PULUMI_PARALLEL yourself (or pass --parallel).
export PULUMI_PARALLEL="${PULUMI_PARALLEL:-64}"
# Go's garbage collector in the CLI and its plugins runs when the heap has grown 400% over what the
# last collection kept, not Go's default 100%. The CLI marshals the whole state afresh at every
# state write (as each step starts and ends), all of it garbage at once. Measured with the bench:
# the CLI's CPU 0.09-0.2 s less per cold up at 4 and 8 lab nodes (at 2, within the noise), and its
# peak at 8 nodes 248 MB instead of 174 (docs/speed.md). 400 unless you set GOGC yourself (scripts/test.sh's go test
# runs with it too).
export GOGC="${GOGC:-400}"
# Local file backend inside the project unless the user chose another one. metadata=skip: the file
# driver (gocloud.dev's fileblob) writes no .attrs file (content type and MD5) beside each state
# file it writes; Pulumi uses neither, and it writes the whole state as each step starts and ends,
# so that MD5 and file were part of every step's cost (docs/speed.md).
export PULUMI_BACKEND_URL="${PULUMI_BACKEND_URL:-file://$SPARK_ROOT/.pulumi-state?metadata=skip}"
# The lab stack's secrets use a fixed, documented passphrase (docs/lab.md).
# Real stacks use your own: set PULUMI_CONFIG_PASSPHRASE(_FILE) yourself.
SPARK_LAB_PASSPHRASE="spark-cluster-lab-only"
export SPARK_LAB_PASSPHRASE
