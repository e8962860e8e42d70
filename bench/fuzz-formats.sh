#!/usr/bin/env bash
# Fuzzes the safetensors, torch and index readers for hours (not a benchmark; it lives with the
# long-running scripts). Runs FormatFuzzTest, which CI runs for 20 s, for the given time: seeded
# random mutations of the corpus's real files and generated ones. Stops at the first crash (any
# exception but the reader's own refusal, an Error such as OutOfMemoryError, an input slower than
# the per-input timeout) and leaves the input in dataplane/target/fuzz-crashes/; turn it into a
# test built in code (see TorchResourceBoundsTest, SafetensorsLimitsTest, ShardIndexTest).
#
#   bench/fuzz-formats.sh [hours] [seed]      (defaults: 1 hour, the clock)
set -euo pipefail
cd "$(dirname "$0")/.."
hours=${1:-1}
seed=${2:-$(date +%s%N)}
seconds=$(awk -v h="$hours" 'BEGIN { printf "%d", h * 3600 }')
corpus="${TENSORCAST_CORPUS:-$(pwd)/../shared/corpus}"
echo "[fuzz] ${hours} h, seed ${seed}, corpus ${corpus}" >&2
exec mvn -B -ntp -q -pl dataplane -am test \
  -Dtest=FormatFuzzTest -Dsurefire.failIfNoSpecifiedTests=false \
  -Dtensorcast.fuzz.seconds="$seconds" -Dtensorcast.fuzz.seed="$seed" \
  -Dtensorcast.corpus="$corpus" -Dsurefire.printSummary=true
