#!/usr/bin/env bash
# Tensor bodies of many small segments over HTTP: one sendfile per segment (zero-copy only) against
# small segments gathered into pooled direct buffers (the data plane's default), same store, same
# run, printed as a ratio. See bench/README.md ("Segment streaming").
#
#   bench/segment-stream.sh [rounds]   (default 7; ~1 min on 2 cores)
#
# Builds the data plane's test classes first when sources are newer than the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
dataplane_bench_setup segment-stream io.tensorcast.dataplane.bench.SegmentStreamBench

exec java -Xmx1g -XX:MaxDirectMemorySize=256m \
  -Dlogback.configurationFile="$repo/bench/logback-bench.xml" \
  -cp "$bench_cp" \
  "$main_class" "$@"
