#!/usr/bin/env bash
# RL checkpoint hand-off with real bandwidth limits (not a test; nothing asserts on time). Needs
# root (network namespaces, veth, tc), java, python3, curl and jq.
#
# Topology as bench/p2p-netns.sh: one namespace per node (twb-w the writer node, twb-r1..twb-rN the
# reader nodes) on a private bridge in twb-hub, every node's link shaped with tc tbf at --rate in
# both directions; nothing is attached to the host's network. The writer node runs
# `dataplane serve-writes --writer`, each reader node `serve-writes --want all` following it. A
# writer process (WriteBench, in the host namespace, over the writer node's unix socket) puts a
# --size-mib checkpoint zero-copy as a TP=2 layout (two rank files) and seals it. Measured:
#
#   - T: from the seal (the writer's clock after the seal call returned) to the last reader's
#     readyAt of that version (its /v1/versions), on one host's clock; and the swarm window, the
#     last reader's swarm up (copy allocated and page-locked) to the last reader Ready;
#   - the broadcast bound S/B (every reader must receive S bytes through its own link of rate B;
#     the writer must send at least S through its link) and T / bound;
#   - writer upload / S: the writer's peer bytes sent (tensorcast_dataplane_peer_bytes_sent_total)
#     and its link's tx counter (includes TCP/framing overhead);
#   - baseline in the same run: the readers each download the sealed files from the writer node
#     with curl at once (python3 -m http.server on the writer node), T_base and T / T_base.
#
#   sudo bench/write-netns.sh [--readers 3] [--rate 200mbit] [--size-mib 1024] [--tensors 32]
#                             [--piece-size 1Mi] [--keep-logs] [--no-baseline]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

readers=3
rate=200mbit
size=1024
tensors=32
piece=1Mi
keep_logs=false
baseline=true
while [ $# -gt 0 ]; do
  case "$1" in
    --readers) readers=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --size-mib) size=$2; shift 2 ;;
    --tensors) tensors=$2; shift 2 ;;
    --piece-size) piece=$2; shift 2 ;;
    --keep-logs) keep_logs=true; shift ;;
    --no-baseline) baseline=false; shift ;;
    -h|--help) sed -n 2,26p "$0"; exit 0 ;;
    *) echo "write-netns: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "write-netns: needs root (ip netns, tc)" >&2; exit 2; }
for c in java curl jq ip tc python3 bc; do
  command -v "$c" >/dev/null || { echo "write-netns: $c is required" >&2; exit 2; }
done

. bench/lib.sh
dataplane_bench_setup write-netns io.tensorcast.dataplane.bench.WriteBench
jar="$repo/dataplane/target/tensorcast-dataplane.jar"
if [ ! -f "$jar" ] || [ -n "$(find "$repo/dataplane/src/main" "$repo/crds/src/main" -newer "$jar" -print -quit)" ]; then
  echo "[bench] building the data plane (mvn -pl dataplane -am package -DskipTests)" >&2
  mvn -B -q -ntp -pl dataplane -am package -DskipTests
fi

bits_per_s() {
  local v=${1,,}
  case "$v" in
    *gbit) echo $(( ${v%gbit} * 1000000000 )) ;;
    *mbit) echo $(( ${v%mbit} * 1000000 )) ;;
    *) echo "write-netns: rate must end in mbit or gbit, got $1" >&2; exit 2 ;;
  esac
}
B=$(bits_per_s "$rate")

work=$(mktemp -d /tmp/twb.XXXXXX)
store=/dev/shm/twb-$$
pids=()
cleanup() {
  set +e
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for ns in twb-w twb-hub $(seq -f 'twb-r%g' 1 "$readers"); do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$store"
  if $keep_logs; then echo "[bench] logs kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

# --- network (as p2p-netns.sh) ---------------------------------------------------------------
shape() { ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst 512kb latency 50ms; }
ip netns add twb-hub
ip netns exec twb-hub ip link add br0 type bridge
ip netns exec twb-hub ip link set br0 up
attach() {  # namespace address hub-side-name
  ip netns add "$1"
  ip link add "$3" netns twb-hub type veth peer name eth0 netns "$1"
  ip netns exec twb-hub ip link set "$3" master br0 up
  ip netns exec "$1" ip addr add "$2/24" dev eth0
  ip netns exec "$1" ip link set eth0 up
  ip netns exec "$1" ip link set lo up
  shape "$1" eth0 "$rate"
  shape twb-hub "$3" "$rate"
}
attach twb-w 10.232.0.10 h-w
for k in $(seq 1 "$readers"); do attach "twb-r$k" "10.232.0.$((10 + k))" "h-r$k"; done

# --- data planes ----------------------------------------------------------------------------
echo bench-write-token-0123456789 >"$work/write.token"
echo bench-control-token-0123456789 >"$work/control.token"
echo bench-read-token-0123456789 >"$work/read.token"
head -c 32 /dev/urandom | base64 >"$work/peer.secret"
H="Authorization: Bearer bench-control-token-0123456789"
peers="w=10.232.0.10:8472"
for k in $(seq 1 "$readers"); do peers+=",r$k=10.232.0.$((10 + k)):8472"; done
node() {  # namespace id address extra-args...
  local ns=$1 id=$2 addr=$3
  shift 3
  ip netns exec "$ns" java -Xms256m -Xmx512m -XX:MaxDirectMemorySize=512m -jar "$jar" serve-writes \
    --artifact-id "bench-$id" --store-root "$store/$id" --lock-policy BEST_EFFORT \
    --listen "$addr:8471" --admin-token-file "$work/control.token" \
    --read-token-file "$work/read.token" --peer-secret-file "$work/peer.secret" \
    --peer-id "$id" --peer-listen "$addr:8472" --peers "$peers" --piece-size "$piece" \
    --writers w=10.232.0.10:8471 --follow-interval 200ms "$@" >"$work/$id.log" 2>&1 &
  pids+=($!)
}
node twb-w w 10.232.0.10 --writer --write-token-file "$work/write.token"
for k in $(seq 1 "$readers"); do node "twb-r$k" "r$k" "10.232.0.$((10 + k))" --want all; done
up() { ip netns exec "$1" curl -sf -m 2 -o /dev/null "http://$2:8471/healthz"; }
for _ in $(seq 1 120); do
  all=true
  up twb-w 10.232.0.10 || all=false
  for k in $(seq 1 "$readers"); do up "twb-r$k" "10.232.0.$((10 + k))" || all=false; done
  $all && break
  sleep 1
done
$all || { echo "write-netns: a data plane did not start; see $work" >&2; keep_logs=true; exit 1; }
socket="$store/w/.writes/write.sock"
for _ in $(seq 1 60); do [ -S "$socket" ] && break; sleep 0.5; done

echo "started $(date -u +%FT%TZ); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg);" \
  "readers $readers; rate $rate per node; checkpoint $size MiB in $tensors BF16 tensors (TP=2);" \
  "piece $piece" >&2

tx0=$(ip netns exec twb-w cat /sys/class/net/eth0/statistics/tx_bytes)
java -Xmx512m -XX:MaxDirectMemorySize=2g -Dlogback.configurationFile=bench/logback-bench.xml \
  -cp "$bench_cp" io.tensorcast.dataplane.bench.WriteBench write "$socket" "$work/write.token" \
  "$store/w/.writes" step-1 "$size" "$tensors" >"$work/writer.out"
sealed=$(sed -n 's/^sealed_at_ms=//p' "$work/writer.out")
seal_ms=$(sed -n 's/^seal_ms=//p' "$work/writer.out")

ready_ms() {  # namespace address -> readyAt of step-1 in epoch ms, or empty
  local at
  at=$(ip netns exec "$1" curl -sf -m 5 -H "$H" "http://$2:8471/v1/versions" \
    | jq -r '.versions[] | select(.name == "step-1" and .state == "Ready") | .readyAt' 2>/dev/null || true)
  [ -n "$at" ] && [ "$at" != null ] && date -d "$at" +%s%3N
}
deadline=$(( $(date +%s) + 1800 ))
last=0
while true; do
  done_n=0
  for k in $(seq 1 "$readers"); do
    t=$(ready_ms "twb-r$k" "10.232.0.$((10 + k))" || true)
    if [ -n "$t" ]; then done_n=$((done_n + 1)); [ "$t" -gt "$last" ] && last=$t; fi
  done
  [ "$done_n" -eq "$readers" ] && break
  [ "$(date +%s)" -lt "$deadline" ] || { echo "write-netns: timed out" >&2; keep_logs=true; exit 1; }
  sleep 0.5
done
tx1=$(ip netns exec twb-w cat /sys/class/net/eth0/statistics/tx_bytes)
S=$(ip netns exec twb-w curl -sf -H "$H" http://10.232.0.10:8471/v1/versions \
  | jq '.versions[] | select(.name == "step-1") | .bytes')
sent=$(ip netns exec twb-w curl -sf http://10.232.0.10:8471/metrics \
  | awk '/^tensorcast_dataplane_peer_bytes_sent_total/ {s += $2} END {printf "%.0f", s}')
T=$(echo "($last - $sealed) / 1000" | bc -l)
# The swarm window: the last reader's swarm up (its copy allocated and page-locked) to the last
# reader Ready, from the readers' log timestamps (HH:MM:SS.mmm): the transfer without the seconds
# a small VM takes to allocate and mlock N copies at once.
secs() { local h m rest; IFS=: read -r h m rest <<<"$1"; echo "$h * 3600 + $m * 60 + $rest" | bc -l; }
up=$(grep -h -m1 'OriginSwarm - version step-1: .* pieces of' "$work"/r*.log | cut -c1-12 | sort | tail -1)
rd=$(grep -h -m1 'version step-1 is ready here' "$work"/r*.log | cut -c1-12 | sort | tail -1)
W=$(echo "$(secs "$rd") - $(secs "$up")" | bc -l)
bound=$(echo "$S * 8 / $B" | bc -l)

base="-"
if $baseline; then
  # The same bytes pulled by every reader straight from the writer node at once (curl over HTTP).
  ip netns exec twb-w python3 -m http.server 8080 --bind 10.232.0.10 --directory "$store/w/step-1" \
    >"$work/http.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 50); do ip netns exec twb-w curl -sf -o /dev/null http://10.232.0.10:8080/ && break; sleep 0.2; done
  files=$(cd "$store/w/step-1" && ls)
  b0=$(date +%s%3N)
  cpids=()
  for k in $(seq 1 "$readers"); do
    mkdir -p "$store/base-r$k"
    (
      for f in $files; do
        ip netns exec "twb-r$k" curl -sf -o "$store/base-r$k/$f" "http://10.232.0.10:8080/$f"
      done
    ) &
    cpids+=($!)
  done
  for p in "${cpids[@]}"; do wait "$p"; done
  b1=$(date +%s%3N)
  base=$(echo "($b1 - $b0) / 1000" | bc -l)
  for k in $(seq 1 "$readers"); do
    (cd "$store/base-r$k" && sha256sum $files) >"$work/base-r$k.sha"
    cmp -s "$work/base-r$k.sha" "$work/base-r1.sha" || { echo "write-netns: baseline copy differs" >&2; exit 1; }
    rm -rf "$store/base-r$k"
  done
fi

printf '\n%-8s %8s %9s %8s %9s %8s %10s %9s %12s %11s %12s %10s\n' readers rate "S MiB" "seal s" "T s" \
  "bound s" "T/bound" "swarm s" "swarm/bound" "up/S(peer)" "up/S(link)" "T/T_base"
printf '%-8s %8s %9.0f %8.2f %9.2f %8.2f %10.2f %9.2f %12.2f %11.3f %12.3f %10s\n' "$readers" "$rate" \
  "$(echo "$S / 1048576" | bc -l)" "$(echo "$seal_ms / 1000" | bc -l)" "$T" "$bound" \
  "$(echo "$T / $bound" | bc -l)" "$W" "$(echo "$W / $bound" | bc -l)" "$(echo "$sent / $S" | bc -l)" \
  "$(echo "($tx1 - $tx0) / $S" | bc -l)" \
  "$([ "$base" = - ] && echo - || printf '%.2f' "$(echo "$T / $base" | bc -l)")"
[ "$base" = - ] || printf 'baseline (every reader curls the files from the writer node at once): %.2f s\n' "$base"
