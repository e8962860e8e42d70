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
repo=$(pwd)
target="$repo/dataplane/target"
cp_file="$target/bench.classpath"
main_class=io.tensorcast.dataplane.bench.TensorIoBench
class_file="$target/test-classes/${main_class//.//}.class"

command -v java >/dev/null || { echo "tensor-io: java is required" >&2; exit 2; }

stale() {
  [ ! -f "$class_file" ] || [ ! -f "$cp_file" ] \
    || [ ! -f "$target/test-classes/META-INF/BenchmarkList" ] \
    || [ -n "$(find "$repo/dataplane/src" "$repo/crds/src" "$repo/dataplane/pom.xml" "$repo/pom.xml" \
                 -newer "$cp_file" -print -quit)" ]
}
if stale; then
  command -v mvn >/dev/null || { echo "tensor-io: mvn is required to build" >&2; exit 2; }
  echo "[bench] building dataplane test classes (mvn -pl dataplane -am test-compile)" >&2
  mvn -B -q -ntp -pl dataplane -am test-compile dependency:build-classpath \
    -Dmdep.includeScope=test -Dmdep.outputFile="$cp_file"
fi

corpus="${TENSORCAST_CORPUS:-$repo/../shared/corpus}"
[ -d "$corpus" ] || corpus=/work/shared/corpus

exec java -Xmx1g -XX:MaxDirectMemorySize=1g \
  -Dtensorcast.corpus="$corpus" \
  -Dlogback.configurationFile="$repo/bench/logback-bench.xml" \
  -cp "$target/test-classes:$target/classes:$(cat "$cp_file")" \
  "$main_class" "$@"
