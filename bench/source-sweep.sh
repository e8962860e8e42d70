#!/usr/bin/env bash
# Source sweep benchmark (not a test). For s3:// (a private S3Mock) and hf:// (HubStandIn, a local
# Hugging Face Hub + LFS CDN), over a generated 512 MiB Llama-shaped artifact: at every
# concurrency x range size, raw parallel ranged GETs (no store) and the full loader into a
# PinnedStore under /dev/shm. Prints MB/s and loader / same-run raw ceiling. See docs/SOURCES.md
# "Throughput sweep".
#
#   bench/source-sweep.sh [--sources s3,hf] [--concurrency 1,4,16,64] [--range-mib 2,8,32]
#
# Builds the data plane's test classes first when sources are newer than the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
dataplane_bench_setup source-sweep io.tensorcast.dataplane.bench.SourceSweepBench test-servers/s3mock-exec.jar

exec java -Xms1g -Xmx3g -XX:MaxDirectMemorySize=2g -Djdk.nio.maxCachedBufferSize=1048576 \
  -Dtensorcast.s3mock.jar="$s3mock_jar" \
  -Dlogback.configurationFile="$repo/bench/logback-bench.xml" \
  -cp "$bench_cp" \
  "$main_class" "$@"
