#!/usr/bin/env bash
# Loader throughput benchmark (not a test). Starts S3Mock, seeds a generated >= 1 GiB safetensors
# artifact, then measures in one run: (a) single-stream sequential GETs, (b) raw parallel ranged
# GETs over a concurrency x range-size sweep, (c) the full loader into a PinnedStore under
# /dev/shm. Prints MB/s and the ratios loader/(a) and loader/(b best). See README "Performance".
#
#   bench/load-throughput.sh [--gib N] [--shards N] [--reps N]      (defaults: 1 GiB, 8 shards, 3)
#
# Builds the data plane's test classes first when sources are newer than the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
target="$repo/dataplane/target"
cp_file="$target/bench.classpath"
main_class=io.tensorcast.dataplane.bench.LoadThroughputBench
class_file="$target/test-classes/${main_class//.//}.class"

command -v java >/dev/null || { echo "load-throughput: java is required" >&2; exit 2; }
[ -d /dev/shm ] || { echo "load-throughput: /dev/shm (tmpfs) is required for the store" >&2; exit 2; }

stale() {
  [ ! -f "$class_file" ] || [ ! -f "$cp_file" ] || [ ! -f "$target/test-servers/s3mock-exec.jar" ] \
    || [ -n "$(find "$repo/dataplane/src" "$repo/crds/src" "$repo/dataplane/pom.xml" "$repo/pom.xml" \
                 -newer "$cp_file" -print -quit)" ]
}
if stale; then
  command -v mvn >/dev/null || { echo "load-throughput: mvn is required to build" >&2; exit 2; }
  echo "[bench] building dataplane test classes (mvn -pl dataplane -am test-compile)" >&2
  mvn -B -q -ntp -pl dataplane -am test-compile dependency:build-classpath \
    -Dmdep.includeScope=test -Dmdep.outputFile="$cp_file"
fi

exec java -Xms1g -Xmx2g -XX:MaxDirectMemorySize=2g \
  -Dtensorcast.s3mock.jar="$target/test-servers/s3mock-exec.jar" \
  -Dlogback.configurationFile="$repo/bench/logback-bench.xml" \
  -cp "$target/test-classes:$target/classes:$(cat "$cp_file")" \
  "$main_class" "$@"
