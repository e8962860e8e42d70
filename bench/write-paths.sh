#!/usr/bin/env bash
# The put API's two ways in, measured against each other (not a test; nothing asserts on time):
# one version of SIZE MiB in BF16 tensors put into a write service on its unix socket, (a) as an
# HTTP body streamed through the socket into the page-locked store, (b) zero-copy: the data plane
# reserves the batch's file in the store, the writer writes the bytes into it through the shared
# writes directory, commits; then each is sealed. Rounds alternate the two paths.
#
#   bench/write-paths.sh [--size-mib 1024] [--tensors 32] [--rounds 3] [--store-root DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
size=1024
tensors=32
rounds=3
store=/dev/shm/tensorcast-write-paths-$$
while [ $# -gt 0 ]; do
  case "$1" in
    --size-mib) size=$2; shift 2 ;;
    --tensors) tensors=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --store-root) store=$2; shift 2 ;;
    -h|--help) sed -n 2,9p "$0"; exit 0 ;;
    *) echo "write-paths: unknown option $1" >&2; exit 2 ;;
  esac
done
. bench/lib.sh
dataplane_bench_setup write-paths io.tensorcast.dataplane.bench.WriteBench
trap 'rm -rf "$store"' EXIT
echo "started $(date -u +%FT%TZ); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg); $(java -version 2>&1 | head -1)"
java -Xmx512m -XX:MaxDirectMemorySize=2g -cp "$bench_cp" -Dlogback.configurationFile=bench/logback-bench.xml \
  io.tensorcast.dataplane.bench.WriteBench paths "$store" "$size" "$tensors" "$rounds"
