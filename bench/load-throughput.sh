#!/usr/bin/env bash
# Loader throughput benchmark (not a test). Starts S3Mock, seeds a generated >= 1 GiB safetensors
# artifact, then measures in one run: (a) single-stream sequential GETs, (b) raw parallel ranged
# GETs over a concurrency x range-size sweep, (c) the full loader into a PinnedStore under
# /dev/shm. Prints MB/s and the ratios loader/(a) and loader/(b best). See bench/README.md ("Loader throughput").
#
#   bench/load-throughput.sh [--gib N] [--shards N] [--reps N]      (defaults: 1 GiB, 8 shards, 3)
#
# Builds the data plane's test classes first when sources are newer than the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
dataplane_bench_setup load-throughput io.tensorcast.dataplane.bench.LoadThroughputBench test-servers/s3mock-exec.jar

exec java -Xms1g -Xmx2g -XX:MaxDirectMemorySize=2g \
  -Dtensorcast.s3mock.jar="$s3mock_jar" \
  -Dlogback.configurationFile="$repo/bench/logback-bench.xml" \
  -cp "$bench_cp" \
  "$main_class" "$@"
