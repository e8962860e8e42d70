#!/usr/bin/env bash
# TensorShardSet fetch: TP=4 on one node by ranged reads against loading the whole ModelArtifact and
# slicing it, same S3-compatible server, same run; plus one rank alone under the cost model's
# defaults and with a read per row. Prints a markdown table. See bench/README.md ("TensorShardSet
# fetch").
#
#   bench/shard-fetch.sh [rounds]   (default 3; ~2 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
dataplane_bench_setup shard-fetch io.tensorcast.dataplane.bench.ShardFetchBench test-servers/s3mock-exec.jar

exec java -Xmx1500m -Dtensorcast.s3mock.jar="$s3mock_jar" \
  -Dlogback.configurationFile="$repo/bench/logback-bench.xml" \
  -cp "$bench_cp" \
  "$main_class" "$@"
