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
repo=$(pwd)
target="$repo/dataplane/target"
cp_file="$target/bench.classpath"
main_class=io.tensorcast.dataplane.bench.SourceSweepBench
class_file="$target/test-classes/${main_class//.//}.class"

command -v java >/dev/null || { echo "source-sweep: java is required" >&2; exit 2; }
[ -d /dev/shm ] || { echo "source-sweep: /dev/shm (tmpfs) is required for the store" >&2; exit 2; }

stale() {
  [ ! -f "$class_file" ] || [ ! -f "$cp_file" ] || [ ! -f "$target/test-servers/s3mock-exec.jar" ] \
    || [ -n "$(find "$repo/dataplane/src" "$repo/crds/src" "$repo/dataplane/pom.xml" "$repo/pom.xml" \
                 -newer "$cp_file" -print -quit)" ]
}
if stale; then
  command -v mvn >/dev/null || { echo "source-sweep: mvn is required to build" >&2; exit 2; }
  echo "[bench] building dataplane test classes (mvn -pl dataplane -am test-compile)" >&2
  mvn -B -q -ntp -pl dataplane -am test-compile dependency:build-classpath \
    -Dmdep.includeScope=test -Dmdep.outputFile="$cp_file"
fi

exec java -Xms1g -Xmx3g -XX:MaxDirectMemorySize=2g -Djdk.nio.maxCachedBufferSize=1048576 \
  -Dtensorcast.s3mock.jar="$target/test-servers/s3mock-exec.jar" \
  -Dlogback.configurationFile="$repo/bench/logback-bench.xml" \
  -cp "$target/test-classes:$target/classes:$(cat "$cp_file")" \
  "$main_class" "$@"
