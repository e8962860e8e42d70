#!/usr/bin/env bash
# Parallel tensor IO benchmarks (JMH; not a test): header parse of a 100k-tensor safetensors
# header, range planning for the corpus's 70B Llama layout (TP=8 shards from a TP=4 store), and
# reconstruction throughput of a full tensor from 4 shards as a ratio to a plain memory copy
# measured in the same run. Prints one table. See bench/README.md.
#
#   bench/tensor-io.sh [forks] [warmup-iterations] [measurement-iterations]   (defaults: 1 2 3)
#
# Builds the data plane's test classes first when sources are newer than the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
dataplane_bench_setup tensor-io io.tensorcast.dataplane.bench.TensorIoBench \
  test-classes/META-INF/BenchmarkList

corpus="${TENSORCAST_CORPUS:-$repo/../shared/corpus}"

exec java -Xmx1g -XX:MaxDirectMemorySize=1g \
  -Dtensorcast.corpus="$corpus" \
  -Dlogback.configurationFile="$repo/bench/logback-bench.xml" \
  -cp "$bench_cp" \
  "$main_class" "$@"
