#!/usr/bin/env bash
# Cold-load benchmark (not a test): Tensorcast's `dataplane load` against rclone and the AWS CLI
# (Debian packages, installed here when missing) and raw S3 GETs, from one S3Mock on loopback into
# /dev/shm, in interleaved rounds; every copy checked with `sha256sum -c`. Prints MB/s, CPU-seconds
# per GiB (user + sys) of each tool and the ratios. See bench/README.md "Cold load".
#
#   bench/load-throughput.sh [--gib N] [--shards N] [--reps N] [--checksum crc64nvme|crc32|sha256|none]
#                            [--adaptive | --adaptive-only] [--no-sweep]
#                            [--tensorcast 'NAME|JAR|JVM FLAGS|LOAD ARGS[|LAUNCHER]']...
#
# --adaptive adds Tensorcast's loads, fixed 4/16/64 in flight and adaptive, from three origins made
# by FaultInjectingProxy in front of S3Mock: 4 MB/s per connection; 40 MB/s in total with 503
# SlowDown above 8 in flight; 4 MB/s per connection with 4 requests/s (bursts of 8) and 429 +
# Retry-After above. They load a quarter of the shards; --adaptive-only skips the cold-load rounds
# and loads every shard (see bench/README.md "Adaptive source concurrency").
#
# Without --tensorcast it runs the data plane as built here the way a user's `load` starts: through
# the launcher (dataplane/src/main/launcher/dataplane: the image's entry point and `./tensorcast
# dataplane load`), which picks the JVM flags and maps the class-data archive that the first load
# on a machine writes; that first load runs before the rounds and is reported on its own. A variant
# with a LAUNCHER runs `sh LAUNCHER load ...` with TENSORCAST_DATAPLANE_JAR=JAR (and no JVM flags).
# Builds the jar and the test classes first when sources are newer.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
target="$repo/dataplane/target"
jar="$target/tensorcast-dataplane.jar"
cp_file="$target/bench.classpath"

command -v java >/dev/null || { echo "load-throughput: java is required" >&2; exit 2; }
[ -d /dev/shm ] || { echo "load-throughput: /dev/shm (tmpfs) is required" >&2; exit 2; }
[ -x /usr/bin/time ] || missing_time=1
if ! command -v rclone >/dev/null || [ ! -x /usr/bin/aws ] || [ -n "${missing_time:-}" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "load-throughput: needs rclone, awscli and time (apt-get install rclone awscli time, as root)" >&2
    exit 2
  fi
  echo "[bench] installing rclone, awscli and time (Debian packages)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q rclone awscli time >&2
fi

if [ ! -f "$jar" ] || [ ! -f "$cp_file" ] || [ ! -f "$target/test-classes/io/tensorcast/dataplane/bench/LoadThroughputBench.class" ] \
  || [ -n "$(find "$repo/dataplane/src" "$repo/crds/src" "$repo/dataplane/pom.xml" "$repo/pom.xml" \
               -newer "$cp_file" -print -quit)" ]; then
  command -v mvn >/dev/null || { echo "load-throughput: mvn is required to build" >&2; exit 2; }
  echo "[bench] building the data plane (mvn -pl dataplane -am package -DskipTests)" >&2
  mvn -B -q -ntp -pl dataplane -am package -DskipTests dependency:build-classpath \
    -Dmdep.includeScope=test -Dmdep.outputFile="$cp_file"
  touch "$cp_file"
fi

args=("$@")
has_variant=false
for a in "$@"; do [ "$a" = --tensorcast ] && has_variant=true; done
if ! $has_variant; then
  args+=(--tensorcast "tensorcast|$jar|||$repo/dataplane/src/main/launcher/dataplane")
fi

exec java -Xms512m -Xmx2g -XX:MaxDirectMemorySize=1g \
  -Dtensorcast.s3mock.jar="$target/test-servers/s3mock-exec.jar" \
  -Dlogback.configurationFile="$repo/bench/logback-bench.xml" \
  -cp "$target/test-classes:$target/classes:$(cat "$cp_file")" \
  io.tensorcast.dataplane.bench.LoadThroughputBench "${args[@]}"
