#!/usr/bin/env bash
# Throttling-storm benchmark (not a test): time to Ready of one `dataplane serve` load from the
# source alone, unthrottled and under 429 storms that admit 1 request in N (Retry-After: 1 s), in
# interleaved rounds, with S3Mock behind the test proxy. Prints a Markdown table: seconds to Ready,
# the ratio to unthrottled and the source bytes on the wire per artifact byte. See bench/README.md
# "Time to Ready under a 429 storm".
#
#   bench/throttle-storm.sh [--storms 2,4,8] [--reps 3] [--retry-after-s 1] [--limit-s 120]
#
# Needs the corpus (-Dtensorcast.corpus, or TENSORCAST_CORPUS); builds the data plane and its test
# classes first when sources are newer.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
target="$repo/dataplane/target"
cp_file="$target/bench.classpath"
corpus="${TENSORCAST_CORPUS:-$repo/../shared/corpus}"

command -v java >/dev/null || { echo "throttle-storm: java is required" >&2; exit 2; }
[ -d /dev/shm ] || { echo "throttle-storm: /dev/shm (tmpfs) is required" >&2; exit 2; }
[ -f "$corpus/MANIFEST.tsv" ] || { echo "throttle-storm: no corpus at $corpus (set TENSORCAST_CORPUS)" >&2; exit 2; }

if [ ! -f "$cp_file" ] || [ ! -f "$target/test-classes/io/tensorcast/dataplane/bench/ThrottleStormBench.class" ] \
  || [ -n "$(find "$repo/dataplane/src" "$repo/crds/src" "$repo/test-support/src" "$repo/dataplane/pom.xml" \
               "$repo/pom.xml" -newer "$cp_file" -print -quit)" ]; then
  command -v mvn >/dev/null || { echo "throttle-storm: mvn is required to build" >&2; exit 2; }
  echo "[bench] building the data plane (mvn -pl dataplane -am package -DskipTests)" >&2
  mvn -B -q -ntp -pl dataplane -am package -DskipTests -Dtensorcast.spotbugs.skip=true \
    dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile="$cp_file"
  touch "$cp_file"
fi

exec java -Xms256m -Xmx1g -XX:MaxDirectMemorySize=512m \
  -Dtensorcast.corpus="$corpus" \
  -Dtensorcast.s3mock.jar="$target/test-servers/s3mock-exec.jar" \
  -Dlogback.configurationFile="$repo/bench/logback-bench.xml" \
  -cp "$target/test-classes:$target/classes:$(cat "$cp_file")" \
  io.tensorcast.dataplane.bench.ThrottleStormBench "$@"
