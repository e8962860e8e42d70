#!/usr/bin/env bash
# Operator scale check (a benchmark, not a test). Starts a local Kubernetes 1.20 control plane,
# S3Mock with a tiny generated model, N simulated RDMA nodes whose data-plane pods run in the
# bench JVM (InProcessContainerRuntime), the operator in process; creates M ModelArtifacts
# (replicas 1) at once and reports time to all Ready, reconciles and status writes per artifact,
# and heap. See bench/README.md ("Operator scale").
#
#   bench/operator-scale.sh [--artifacts 100] [--nodes 50] [--skip-baseline] [--timeout PT10M]
#
# Needs the Kubernetes binaries (hack/k8s/build-binaries.sh). Builds the e2e jar first when
# sources are newer than it. Heap flags can be overridden with BENCH_JAVA_OPTS.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
jar="$repo/e2e/target/tensorcast-demo.jar"
s3mock="$repo/e2e/target/test-servers/s3mock-exec.jar"

command -v java >/dev/null || { echo "operator-scale: java is required" >&2; exit 2; }

stale() {
  [ ! -f "$jar" ] || [ ! -f "$s3mock" ] \
    || [ -n "$(find "$repo/e2e/src/main" "$repo/operator/src/main" "$repo/dataplane/src" \
                 "$repo/crds/src/main" "$repo"/*/pom.xml "$repo/pom.xml" -newer "$jar" -print -quit)" ]
}
if stale; then
  command -v mvn >/dev/null || { echo "operator-scale: mvn is required to build" >&2; exit 2; }
  echo "[bench] building the e2e jar (mvn -pl e2e -am package -DskipTests)" >&2
  mvn -B -q -ntp -pl e2e -am package -DskipTests
fi

# shellcheck disable=SC2086
exec java ${BENCH_JAVA_OPTS:--Xmx1g} \
  -Dlogback.configurationFile="$repo/bench/logback-bench.xml" \
  -cp "$jar" io.tensorcast.e2e.bench.OperatorScaleBench \
  --s3mock-jar "$s3mock" --workdir "$repo/e2e/target/bench-scale" "$@"
