#!/usr/bin/env bash
# The swarm simulator (not a test; nothing asserts on time): the data plane's real SwarmPolicy,
# one instance per simulated node, on a virtual clock over a modelled network (per-node up/down
# links shared max-min fairly among their transfers, 1 ms latency, an origin with its own uplink
# and request-rate limit). A run has no sockets and no threads; the same seed gives the same table. Prints
# the calibration against bench/p2p-netns.sh (N = 2 and 4 at 100 Mbit/s) and then, per N and
# scenario, p50 and last node's time / bound and origin bytes / S. See bench/README.md.
#
#   bench/swarm-sim.sh [--nodes "8 64 256 1000"] [--scenarios "uniform hetero slow churn"]
#                      [--seed 1] [--size BYTES] [--threads CORES] [--calibrate-only]
#                      [--skip-calibration] [--no-source-digests]
#
# The defaults run the whole matrix: N = 8 on the netns bench's 1.1 GB artifact, N = 64, 256 and
# 1,000 on 128 MiB (--size sets one size for every N), every scenario; the rows run on --threads
# threads at once (default: the cores) and each prints its wall and CPU seconds. Larger swarms
# take longer: every node runs the policy's scheduling rounds (~20 a node per virtual second; a
# round reads per-piece counts and no longer walks the members), every node connects to every
# other (N^2 connections) and every HAVE goes to every member (N^2 frames per piece, most of the
# CPU at N = 1,000: ~5 CPU-minutes a row; bench/README.md has the measured CPU seconds per row).
# The origin publishes a digest of every file unless --no-source-digests: a member may fetch a
# piece on its peers' claims and check it with its file, as the data plane does for S3 checksums,
# single-part ETags and the Hub's sha256.
# SWARM_SIM_JAVA_OPTS passes JVM options: -Dsim.trace=true (hand-overs, drops, completions) and
# -Dsim.tracePieces=true (every piece stored) to stderr; -Dsim.exact=true prints each row's p50, last
# and origin ratios unrounded to stderr.
# Builds the data plane's test classes first when sources are newer than the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
dataplane_bench_setup swarm-sim io.tensorcast.dataplane.p2p.sim.SwarmSimBench

exec java -Xmx8g ${SWARM_SIM_JAVA_OPTS:-} -cp "$bench_cp" "$main_class" "$@"
