#!/usr/bin/env bash
# Peer-to-peer distribution benchmark with real bandwidth limits (not a test; nothing asserts on
# time). Needs root (network namespaces, veth, tc), java, curl and jq.
#
# Topology: one namespace per data-plane node (tcb-n1..tcb-nN), one for the origin (tcb-origin,
# S3Mock) and one hub namespace holding a bridge; nothing is attached to the host's own network.
# Every node's link is shaped with tc tbf in both directions (egress on the node side, egress on
# the hub side = the node's ingress) at --rate; the origin's uplink at --origin-rate. A generated
# Llama-shaped artifact (dataplane generate, default medium-llama ~1.1 GiB) is put into S3Mock.
# For each N in --nodes it runs (a) every node from the source (--distribution source-only) and
# (b) Tensorcast peer-to-peer (static --peers), and prints, per run: wall time (launch of the N
# data-plane JVMs to the last node Ready: JVM start, listing, headers, allocation + mlock, transfer,
# verification), its ratio to the baseline of the same N; the transfer window (first node with its
# store opened to last node Ready, from the data planes' log timestamps: allocation + mlock, every
# byte, verification) and its ratio to the bound S/B + (N-1)*piece/B; for p2p the swarm window (the
# last member's peer transport up to the last node Ready: without the seconds N JVMs on a small VM
# take to allocate and mlock N copies one after another) and its ratio to the bound; and source
# bytes / S, counted twice: by the nodes' /status bytesFromSourceOnWire (every byte received from
# the source, re-reads included) and by the origin link's tx byte counter (includes HTTP/TCP
# overhead).
#
# Mode bittorrent (the baseline of a BitTorrent swarm on the same links): mktorrent builds a
# torrent of the same files (piece length = --piece-size), opentracker runs in the origin namespace
# and one aria2c seeder there (its uplink shaped like the origin's), one aria2c leecher per node
# namespace into /dev/shm (no DHT, no local peer discovery, peer exchange on, every node keeps
# seeding after it is done). Wall is launch of the N leechers to the last one done (every piece
# SHA-1-checked by aria2c); there is no transfer or swarm window (aria2c has no start-up phase to
# leave out) and no /status bytes, only the origin link's tx. Debian's aria2, mktorrent and
# opentracker are installed when missing. Tracker and seeder start before the clock, anew per run.
#
#   sudo bench/p2p-netns.sh [--nodes "2 4 8"] [--rate 1gbit] [--origin-rate 1gbit]
#                           [--preset medium-llama] [--piece-size 1Mi] [--reps 1] [--keep-logs]
#                           [--modes "source-only p2p bittorrent"] [--trace] [--trace-sockets]
#                           [--serve-args "ARGS"]
#                           [--java-args "ARGS"] [--class-data image|none]
#
# --trace writes, per run (BitTorrent's too), $work/MODE-N-links.tsv: every second the origin's tx
# bytes and each node's rx/tx bytes (link counters), to see when a link sat idle, and for p2p
# each node's bytes from the source by its /status (nK_src: how the origin is split among the
# members), and after each run every namespace's TCP retransmissions (SYNs, segments, timeouts);
# implies --keep-logs. A p2p node is Ready at its own log's "ready" line (its copy verified;
# /readyz must then say Ready), as a leecher is done at aria2c's completion hook: each tool's own
# event.
# --trace-sockets (implies --trace) also writes, per p2p run, $work/p2p-N-sockets-nK.log: once a
# second `ss -tin` of node K's peer connections (port 8472): congestion window, round trip, and the
# bytes the kernel holds unsent (notsent), which is how a REQUEST queued behind a peer's pieces was
# found. It forks `ip netns exec ss` once a second per node, on the CPUs the nodes share.
# --serve-args adds flags to every node's `dataplane serve` (e.g. "--concurrency 4"), for trying
# settings; the header line prints them. --java-args adds JVM flags to every node's java (e.g.
# "-XX:TieredStopAtLevel=1"). After each run a line gives every node's CPU-seconds (user + system
# of its process, from /proc, read just before it is stopped).
# --class-data image (the default) starts every node as the data-plane image does: through its
# launcher (dataplane/src/main/launcher/dataplane) from an install directory laid out like the
# image's, with the class-data archive its build trains (train-class-data, run here first against a
# loopback S3Mock, ~1 min) beside the jar; none runs `java -jar` without an archive.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

nodes_list="2 4 8"
rate=1gbit
origin_rate=""
preset=medium-llama
piece_size=1Mi
reps=1
keep_logs=false
modes="source-only p2p"
trace=false
trace_sockets=false
serve_args=""
java_args=""
class_data=image
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes_list=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --origin-rate) origin_rate=$2; shift 2 ;;
    --preset) preset=$2; shift 2 ;;
    --piece-size) piece_size=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --keep-logs) keep_logs=true; shift ;;
    --trace) trace=true; keep_logs=true; shift ;;
    --trace-sockets) trace_sockets=true; trace=true; keep_logs=true; shift ;;
    --serve-args) serve_args=$2; shift 2 ;;
    --java-args) java_args=$2; shift 2 ;;
    --class-data) class_data=$2; shift 2 ;;
    -h|--help) sed -n 2,45p "$0"; exit 0 ;;
    *) echo "p2p-netns: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
origin_rate=${origin_rate:-$rate}
case "$class_data" in
  image | none) ;;
  *) echo "p2p-netns: --class-data is image or none, got $class_data" >&2; exit 2 ;;
esac

[ "$(id -u)" = 0 ] || { echo "p2p-netns: needs root (ip netns, tc)" >&2; exit 2; }
for c in java curl jq ip tc; do
  command -v "$c" >/dev/null || { echo "p2p-netns: $c is required" >&2; exit 2; }
done

bittorrent=false
case " $modes " in *" bittorrent "*) bittorrent=true ;; esac
if $bittorrent && ! { command -v aria2c && command -v mktorrent && command -v opentracker; } >/dev/null; then
  echo "[bench] installing aria2, mktorrent and opentracker (Debian packages)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q aria2 mktorrent opentracker >&2
fi

jar="$repo/dataplane/target/tensorcast-dataplane.jar"
s3mock="$repo/dataplane/target/test-servers/s3mock-exec.jar"
if [ ! -f "$jar" ] || [ ! -f "$s3mock" ] \
  || [ -n "$(find "$repo/dataplane/src/main" "$repo/crds/src/main" -newer "$jar" -print -quit)" ]; then
  echo "[bench] building the data plane (mvn -pl dataplane -am package -DskipTests)" >&2
  mvn -B -q -ntp -pl dataplane -am package -DskipTests
fi

# --- rates: bits per second from tc-style rates (kbit, mbit, gbit) --------------------------
bits_per_s() {
  local v=${1,,}
  case "$v" in
    *gbit) echo $(( ${v%gbit} * 1000000000 )) ;;
    *mbit) echo $(( ${v%mbit} * 1000000 )) ;;
    *kbit) echo $(( ${v%kbit} * 1000 )) ;;
    *bit) echo "${v%bit}" ;;
    *) echo "p2p-netns: rate must end in kbit/mbit/gbit, got $1" >&2; exit 2 ;;
  esac
}
bytes_of() {  # 4Mi, 64Ki, 1Gi or a plain byte count
  local v=$1
  case "$v" in
    *Gi) echo $(( ${v%Gi} * 1073741824 )) ;;
    *Mi) echo $(( ${v%Mi} * 1048576 )) ;;
    *Ki) echo $(( ${v%Ki} * 1024 )) ;;
    *) echo "$v" ;;
  esac
}
B=$(bits_per_s "$rate")
PIECE=$(bytes_of "$piece_size")

work=$(mktemp -d /tmp/tcb.XXXXXX)
store_base=/dev/shm/tcb-$$
pids=()
max_nodes=0
for n in $nodes_list; do [ "$n" -gt "$max_nodes" ] && max_nodes=$n; done

cleanup() {
  set +e
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for ns in tcb-origin tcb-hub $(seq -f 'tcb-n%g' 1 "$max_nodes"); do
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$store_base"
  if $keep_logs; then echo "[bench] logs kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

# --- the nodes' install directory, laid out as the data-plane image's (dataplane/Dockerfile) ---
if [ "$class_data" = image ]; then
  opt="$work/opt"
  mkdir -p "$opt/bin"
  cp -p "$jar" "$opt/tensorcast-dataplane.jar"
  if [ -d "${jar%.jar}.natives" ]; then cp -rp "${jar%.jar}.natives" "$opt/tensorcast-dataplane.natives"; fi
  cp "$repo/dataplane/src/main/launcher/dataplane" "$repo/dataplane/src/main/launcher/load.jvm-options" \
    "$opt/bin/"
  echo "[bench] training the image's class-data archive (train-class-data)" >&2
  sh "$repo/dataplane/src/main/launcher/train-class-data" "$opt/tensorcast-dataplane.jar" "$s3mock" \
    "$opt/tensorcast-dataplane.jsa" >&2
fi

# --- network --------------------------------------------------------------------------------
shape() {  # namespace dev rate
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst 512kb latency 50ms
}
ip netns add tcb-hub
ip netns exec tcb-hub ip link add br0 type bridge
ip netns exec tcb-hub ip link set br0 up
# The bridge's own address: the tracer asks the nodes' control endpoints from the hub (--trace).
ip netns exec tcb-hub ip addr add 10.231.0.254/24 dev br0
ip netns exec tcb-hub ip link set lo up
attach() {  # namespace address hub-side-name rate
  local ns=$1 addr=$2 hub=$3 r=$4
  ip netns add "$ns"
  ip link add "$hub" netns tcb-hub type veth peer name eth0 netns "$ns"
  ip netns exec tcb-hub ip link set "$hub" master br0 up
  ip netns exec "$ns" ip addr add "$addr/24" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip link set lo up
  shape "$ns" eth0 "$r"
  shape tcb-hub "$hub" "$r"
}
attach tcb-origin 10.231.0.1 h-origin "$origin_rate"
for k in $(seq 1 "$max_nodes"); do attach "tcb-n$k" "10.231.0.$((10 + k))" "h-n$k" "$rate"; done

# --- origin ---------------------------------------------------------------------------------
mkdir -p "$work/s3root" "$work/model"
ip netns exec tcb-origin java -Xmx1g -jar "$s3mock" --server.port=0 \
  --com.adobe.testing.s3mock.httpPort=9090 \
  --com.adobe.testing.s3mock.store.root="$work/s3root" \
  --com.adobe.testing.s3mock.max-payload-size=2GB \
  --spring.main.banner-mode=off >"$work/s3mock.log" 2>&1 &
pids+=($!)
origin=http://10.231.0.1:9090
for _ in $(seq 1 120); do
  ip netns exec tcb-origin curl -sf -o /dev/null "$origin/" && break
  sleep 1
done
ip netns exec tcb-origin curl -sf -o /dev/null "$origin/" \
  || { echo "p2p-netns: S3Mock did not start; see $work/s3mock.log" >&2; keep_logs=true; exit 1; }
java -jar "$jar" generate --preset "$preset" "$work/model" >&2
ip netns exec tcb-origin curl -sf --retry 3 --retry-connrefused -X PUT "$origin/bench" -o /dev/null
S=0
for f in "$work/model"/*; do
  ip netns exec tcb-origin curl -sf --retry 3 --retry-connrefused -X PUT --data-binary @"$f" \
    "$origin/bench/model/$(basename "$f")" -o /dev/null
  S=$(( S + $(stat -c %s "$f") ))
done
if $bittorrent; then
  # The piece length as a power of two (mktorrent -l), the same as Tensorcast's piece.
  lg=0; while [ $(( 1 << lg )) -lt "$PIECE" ]; do lg=$(( lg + 1 )); done
  mktorrent -a "http://10.231.0.1:6969/announce" -l "$lg" -n model -o "$work/bench.torrent" \
    "$work/model" >&2
  mkdir -p "$work/bt-done" "$work/ot"
  # Debian's opentracker serves only the info hashes of its whitelist.
  aria2c -S "$work/bench.torrent" | sed -n 's/^Info Hash: //p' >"$work/ot/whitelist"
  cat >"$work/bt-done.sh" <<'HOOK'
#!/bin/sh
date +%s.%N >"$BT_DONE_DIR/$BT_NODE"
HOOK
  chmod +x "$work/bt-done.sh"
  bt_common=(--enable-dht=false --enable-dht6=false --bt-enable-lpd=false --enable-peer-exchange=true
    --seed-ratio=0.0 --bt-max-peers=0 --file-allocation=none --summary-interval=0
    --console-log-level=warn --log-level=info --listen-port=6881 --bt-tracker-interval=5 --check-certificate=false)
else
  rm -rf "$work/model"
fi
echo "[bench] artifact: $S bytes ($preset); node rate $rate; origin rate $origin_rate;" \
  "piece $PIECE bytes; class data: $class_data${serve_args:+; serve args: $serve_args}${java_args:+; java args: $java_args}" >&2

has_distribution=false
java -jar "$jar" serve --help 2>/dev/null | grep -q -- --distribution && has_distribution=true
# Data planes with the authenticated peer port and control tokens: one peer secret for the swarm,
# one read token to poll /status, plain http to the origin allowed explicitly.
has_auth=false
java -jar "$jar" serve --help 2>/dev/null | grep -q -- --peer-secret-file && has_auth=true
read_token=bench-read-token-0123456789abcdef
if $has_auth; then
  (umask 077; head -c 32 /dev/urandom | base64 >"$work/peer-secret"
   printf '%s' "$read_token" >"$work/read-token"
   printf 'bench-admin-%s' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$work/admin-token")
fi
auth_args=()
$has_auth && auth_args=(--allow-insecure-endpoint --read-token-file "$work/read-token"
  --admin-token-file "$work/admin-token")

stamp() {  # a log line's time of day, HH:MM:SS.mmm, with or without the ISO date before it
  sed -E 's/^([0-9]{4}-[0-9]{2}-[0-9]{2}T)?([0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]+).*/\2/'
}

secs() {  # HH:MM:SS.mmm -> seconds of the day
  local h m rest
  IFS=: read -r h m rest <<<"$1"
  echo "$h * 3600 + $m * 60 + $rest" | bc -l
}

origin_tx() { ip netns exec tcb-origin cat /sys/class/net/eth0/statistics/tx_bytes; }

readyz() {  # K -> node nK's /readyz body (empty when it does not answer)
  ip netns exec "tcb-n$1" curl -s -m 5 "http://10.231.0.$((10 + $1)):8471/readyz" 2>/dev/null || true
}

# start_tracer MODE N: every second a row of $work/MODE-N-links.tsv (the origin's tx bytes, each
# node's rx and tx bytes) from the hub-side ends of the veth pairs (a hub end's tx is its node's
# rx), sampled by one long-lived shell in the hub namespace with builtins only: the tracer must not
# take the CPU the nodes share (2N + 1 `ip netns exec cat` a second did; no fork a second). A p2p run's rows also
# carry each node's bytesFromSource from its /status (nK_src; empty until its control endpoint
# answers), read over bash's /dev/tcp: how the origin's link is split among the members, which
# the link counters cannot tell apart from peer traffic. Sets tracer to its PID.
start_tracer() {
  local mode=$1 n=$2 k header=$'t\torigin_tx' status=0
  for k in $(seq 1 "$n"); do header+=$'\t'"n${k}_rx"$'\t'"n${k}_tx"; done
  if [ "$mode" = p2p ]; then
    status=1
    for k in $(seq 1 "$n"); do header+=$'\t'"n${k}_src"; done
  fi
  echo "$header" >"$work/$mode-$n-links.tsv"
  ip netns exec tcb-hub bash -c '
    n=$1; out=$2; status=$3; token=$4
    # sets got to the bytesFromSource of node K from its /status, or empty (no subshell)
    src() {
      local body="" l
      got=""
      { exec 3<>"/dev/tcp/10.231.0.$((10 + $1))/8471"; } 2>/dev/null || return 0
      printf "GET /status HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n" "$token" >&3
      # the body ends without a newline: its last read fails with the line in l
      while IFS= read -r -t 2 l <&3 || [ -n "$l" ]; do body+=$l; l=""; done
      exec 3<&-
      [[ $body =~ \"bytesFromSource\":([0-9]+) ]] && got=${BASH_REMATCH[1]}
      return 0
    }
    # sleeps by a read that times out on a pipe nobody writes: no process a second
    exec {pause}<> <(:)
    while true; do
      read -r o </sys/class/net/h-origin/statistics/rx_bytes
      line="$EPOCHREALTIME	$o"
      for ((k = 1; k <= n; k++)); do
        read -r rx </sys/class/net/h-n$k/statistics/tx_bytes
        read -r tx </sys/class/net/h-n$k/statistics/rx_bytes
        line+="	$rx	$tx"
      done
      if ((status)); then
        for ((k = 1; k <= n; k++)); do src "$k"; line+="	$got"; done
      fi
      echo "$line" >>"$out"
      read -r -t 1 -u "$pause" || true
    done' tracer "$n" "$work/$mode-$n-links.tsv" "$status" "$read_token" &
  tracer=$!
  pids+=("$tracer")
}

# --- one run ----------------------------------------------------------------------------------
# run MODE N -> sets result="wall_seconds transfer_seconds source_status_bytes origin_tx_bytes"
result=""
# cpu_seconds MODE N PID... -> prints each process's CPU-seconds so far (utime + stime of
# /proc/PID/stat, all its threads) to stderr; `ip netns exec` execs its command, so the PID is the
# node's java (or aria2c).
cpu_seconds() {
  local mode=$1 n=$2 line="" p k=0 tck
  shift 2
  tck=$(getconf CLK_TCK)
  for p in "$@"; do
    k=$((k + 1))
    if [ -r "/proc/$p/stat" ]; then
      line+=" n$k $(awk -v t="$tck" '{ sub(/^.*\) /, ""); printf "%.1f", ($12 + $13) / t }' \
        "/proc/$p/stat")"
    else
      line+=" n$k ?"
    fi
  done
  echo "[bench] $mode N=$n CPU s per node:$line" >&2
}

# tcp_counters MODE N -> prints, with --trace, each namespace's TCP retransmissions so far (SYNs
# retransmitted, segments retransmitted, retransmission timeouts; counted since the namespaces were
# made, so a later run's numbers include the earlier runs'): new connections on a saturated link.
tcp_counters() {
  [ "$trace" = true ] || return 0
  local mode=$1 n=$2 line="" ns
  for ns in tcb-origin $(for k in $(seq 1 "$n"); do echo "tcb-n$k"; done); do
    line+=" ${ns#tcb-} $(ip netns exec "$ns" nstat -az TcpExtTCPSynRetrans TcpRetransSegs \
      TcpExtTCPTimeouts 2>/dev/null | awk '
        $1 == "TcpExtTCPSynRetrans" { syn = $2 } $1 == "TcpRetransSegs" { seg = $2 }
        $1 == "TcpExtTCPTimeouts" { rto = $2 } END { printf "%d/%d/%d", syn, seg, rto }')"
  done
  echo "[bench] $mode N=$n TCP retransmitted SYNs/segments/timeouts:$line" >&2
}

# run_bittorrent N -> sets result like run (transfer = wall; no status bytes, no swarm window)
run_bittorrent() {
  local n=$1 k bt_pids=() run_pids=()
  rm -rf "$store_base" "$work/bt-done"/*
  (cd "$work/ot" && exec ip netns exec tcb-origin opentracker -i 10.231.0.1 -p 6969 -P 6969 \
    -d "$work/ot" -w whitelist) \
    >"$work/bittorrent-$n-tracker.log" 2>&1 &
  bt_pids+=($!); pids+=($!)
  ip netns exec tcb-origin aria2c -d "$work" -l "$work/bittorrent-seeder.alog" --bt-seed-unverified=true --check-integrity=false \
    "${bt_common[@]}" "$work/bench.torrent" >"$work/bittorrent-$n-seeder.log" 2>&1 &
  bt_pids+=($!); pids+=($!)
  sleep 2  # the tracker listening and the seeder announced, before the clock starts
  local tx0 start end
  tx0=$(origin_tx)
  local tracer=""
  $trace && start_tracer bittorrent "$n"
  start=$(date +%s.%N)
  for k in $(seq 1 "$n"); do
    mkdir -p "$store_base/n$k"
    ip netns exec "tcb-n$k" env BT_NODE="n$k" BT_DONE_DIR="$work/bt-done" aria2c -l "$work/bittorrent-n$k.alog" \
      -d "$store_base/n$k" "${bt_common[@]}" --on-bt-download-complete="$work/bt-done.sh" \
      "$work/bench.torrent" >"$work/bittorrent-$n-n$k.log" 2>&1 &
    run_pids+=($!); pids+=($!)
  done
  local deadline=$(( $(date +%s) + 1800 )) done_count=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    done_count=$(find "$work/bt-done" -type f | wc -l)
    [ "$done_count" -ge "$n" ] && break
    for p in "${run_pids[@]}"; do
      kill -0 "$p" 2>/dev/null || { echo "p2p-netns: an aria2c leecher exited (N=$n); see" \
        "$work/bittorrent-$n-n*.log" >&2; keep_logs=true; exit 1; }
    done
    sleep 0.5
  done
  [ "$done_count" -ge "$n" ] || { echo "p2p-netns: timed out (bittorrent, N=$n)" >&2; keep_logs=true; exit 1; }
  end=$(cat "$work/bt-done"/* | sort -n | tail -1)
  [ -n "$tracer" ] && { kill "$tracer" 2>/dev/null; wait "$tracer" 2>/dev/null || true; }
  local tx1
  tx1=$(origin_tx)
  cpu_seconds bittorrent "$n" "${run_pids[@]}"
  tcp_counters bittorrent "$n"
  for p in "${run_pids[@]}" "${bt_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${run_pids[@]}" "${bt_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  local wall
  wall=$(echo "$end - $start" | bc -l)
  result="$wall $wall - $(( tx1 - tx0 )) -"
}

run() {
  local mode=$1 n=$2 peers="" k
  if [ "$mode" = bittorrent ]; then run_bittorrent "$n"; return; fi
  for k in $(seq 1 "$n"); do peers+="${peers:+,}n$k=10.231.0.$((10 + k)):8472"; done
  rm -rf "$store_base"
  local tx0 start end run_pids=()
  tx0=$(origin_tx)
  start=$(date +%s.%N)
  local tracer=""
  $trace && start_tracer "$mode" "$n"
  local sockets=()
  if $trace_sockets; then
    for k in $(seq 1 "$n"); do
      (while true; do
        echo "T $(date +%s.%N)"
        ip netns exec "tcb-n$k" ss -tinH state established '( sport = :8472 or dport = :8472 )'
        sleep 1
      done >"$work/$mode-$n-sockets-n$k.log" 2>&1) &
      sockets+=($!)
      pids+=($!)
    done
  fi
  for k in $(seq 1 "$n"); do
    local args=(serve --uri s3://bench/model --endpoint "$origin" --path-style --region us-east-1
      --artifact-id bench --store-root "$store_base/n$k" --lock-policy BEST_EFFORT
      --listen "10.231.0.$((10 + k)):8471" "${auth_args[@]}")
    if [ "$mode" = p2p ]; then
      args+=(--distribution peer-to-peer --peer-id "n$k" --peers "$peers"
        --peer-listen "10.231.0.$((10 + k)):8472" --piece-size "$PIECE")
      $has_auth && args+=(--peer-secret-file "$work/peer-secret")
    elif $has_distribution; then
      args+=(--distribution source-only)
    fi
    # shellcheck disable=SC2206 # word splitting of the extra flags is intended
    [ -n "$serve_args" ] && args+=($serve_args)
    local jvm="-Xms256m -Xmx768m -XX:MaxDirectMemorySize=512m $java_args"
    if [ "$class_data" = image ]; then
      # The launcher execs java: the PID stays the node's JVM.
      AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench JAVA_TOOL_OPTIONS="$jvm" \
        ip netns exec "tcb-n$k" sh "$opt/bin/dataplane" "${args[@]}" \
        >"$work/$mode-$n-n$k.log" 2>&1 &
    else
      # shellcheck disable=SC2086 # word splitting of the extra JVM flags is intended
      AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench \
        ip netns exec "tcb-n$k" java $jvm -jar "$jar" "${args[@]}" >"$work/$mode-$n-n$k.log" 2>&1 &
    fi
    run_pids+=($!)
    pids+=($!)
  done
  # Wait for every node to be Ready (or one Failed, or one's process gone: e.g. a flag of
  # --serve-args that `serve` refuses). A node's own log says when it is Ready (the loader's
  # "ready" line, when its last byte is verified), as aria2c's completion hook does for the
  # BitTorrent mode: the wall ends at the last node's line, not at a poll that sees it up to a
  # poll round later, and the wait costs a grep per node, not N `ip netns exec curl` against the
  # nodes' control endpoints twice a second on the CPUs the nodes share. /readyz is asked every 5 s
  # (a Failed phase) and, at the end, must say Ready on every node.
  local ready=0 deadline=$(( $(date +%s) + 1800 )) phase polls=0 ready_line='ArtifactLoader - artifact [^ ]* ready:'
  local -a is_ready=()
  while [ "$ready" -lt "$n" ] && [ "$(date +%s)" -lt "$deadline" ]; do
    polls=$((polls + 1))
    for k in $(seq 1 "$n"); do
      [ -n "${is_ready[$k]:-}" ] && continue
      if grep -q -m1 -- "$ready_line" "$work/$mode-$n-n$k.log"; then
        is_ready[$k]=1; ready=$((ready + 1)); continue
      fi
      if ! kill -0 "${run_pids[$((k - 1))]}" 2>/dev/null; then
        echo "p2p-netns: node n$k exited before it was Ready ($mode, N=$n):" >&2
        grep -v "^Picked up" "$work/$mode-$n-n$k.log" | head -n 3 >&2
        keep_logs=true; exit 1
      fi
      if [ $((polls % 10)) -eq 0 ]; then
        phase=$(readyz "$k")
        case "$phase" in
          Failed*) echo "p2p-netns: node n$k failed ($mode, N=$n); see $work/$mode-$n-n$k.log" >&2
                   keep_logs=true; exit 1 ;;
        esac
      fi
    done
    [ "$ready" -lt "$n" ] && sleep 0.5
  done
  local polled
  polled=$(date +%s.%N)
  [ -n "$tracer" ] && { kill "$tracer" 2>/dev/null; wait "$tracer" 2>/dev/null || true; }
  for p in "${sockets[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  [ "$ready" -eq "$n" ] || { echo "p2p-netns: timed out ($mode, N=$n)" >&2; keep_logs=true; exit 1; }
  for k in $(seq 1 "$n"); do
    phase=""
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      phase=$(readyz "$k")
      case "$phase" in Ready*) break ;; esac
      sleep 0.2
    done
    case "$phase" in
      Ready*) ;;
      *) echo "p2p-netns: node n$k logged its copy ready but /readyz says '$phase' ($mode, N=$n)" >&2
         keep_logs=true; exit 1 ;;
    esac
  done
  # The last "ready" line's time of day (UTC) on the clock's day of the launch.
  local last_ready day
  last_ready=$(grep -h -m1 -- "$ready_line" "$work/$mode-$n-"n*.log | stamp | sort | tail -1)
  day=$(( ${start%.*} - ${start%.*} % 86400 ))
  end=$(echo "$day + $(secs "$last_ready")" | bc -l)
  if [ "$(echo "$end < $start" | bc)" = 1 ]; then end=$(echo "$end + 86400" | bc -l); fi
  echo "[bench] $mode N=$n last node Ready $(printf '%.1f' "$(echo "$end - $start" | bc -l)") s after" \
    "launch by its log, seen by the wait loop at $(printf '%.1f' "$(echo "$polled - $start" | bc -l)") s" >&2
  # The transfer window, from the data planes' own log timestamps (HH:MM:SS.mmm): the first node
  # that opened its store (listing and headers done) to the last node Ready (allocation + mlock,
  # every byte, verification). Polling cannot time this: with 8 JVMs on 2 cores one poll round
  # takes seconds.
  local t0
  t0=$(grep -h -m1 'PinnedStore - store ' "$work/$mode-$n-"n*.log | stamp | sort | head -1)
  # The swarm window (p2p): the LAST member's peer transport up (store allocated and mlocked) to
  # the last node Ready. N JVMs allocating and mlocking N copies on this VM's 2 cores come up
  # seconds apart (up to ~20 s at N = 8), and the plan starts only when every member is up; on a
  # cluster each node allocates on its own CPUs.
  local tu swarm=-
  tu=$( (grep -h -m1 'peer transport of' "$work/$mode-$n-"n*.log || true) | stamp | sort | tail -1)
  local first_byte all_loaded
  first_byte=$(secs "$t0")
  all_loaded=$(secs "$last_ready")
  [ -n "$tu" ] && swarm=$(echo "$all_loaded - $(secs "$tu")" | bc -l)
  local src=0 b
  for k in $(seq 1 "$n"); do
    b=$(ip netns exec "tcb-n$k" curl -sf -H "Authorization: Bearer $read_token" \
      "http://10.231.0.$((10 + k)):8471/status" | jq .bytesFromSourceOnWire)
    src=$(( src + b ))
  done
  local tx1
  tx1=$(origin_tx)
  cpu_seconds "$mode" "$n" "${run_pids[@]}"
  tcp_counters "$mode" "$n"
  for p in "${run_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${run_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  result="$(echo "$end - $start" | bc -l) $(echo "$all_loaded - $first_byte" | bc -l) $src $(( tx1 - tx0 )) $swarm"
}

printf '\n%-4s %-12s %7s %9s %7s %9s %9s %7s %10s %13s %11s\n' N mode wall transfer bound \
  wall/base xfer/bound swarm swarm/bound "src/S(status)" "src/S(link)"
for n in $nodes_list; do
  bound=$(echo "($S * 8 / $B) + ($n - 1) * $PIECE * 8 / $B" | bc -l)
  for r in $(seq 1 "$reps"); do
    tb=""
    for mode in $modes; do
      run "$mode" "$n"
      read -r t x src link w <<<"$result"
      [ "$mode" = source-only ] && tb=$t
      printf '%-4s %-12s %7.1f %9.1f %7.1f %9s %9.2f %7s %10s %13s %11.3f\n' "$n" "$mode" \
        "$t" "$x" "$bound" \
        "$([ -n "$tb" ] && printf '%.2f' "$(echo "$t / $tb" | bc -l)" || echo -)" \
        "$(echo "$x / $bound" | bc -l)" \
        "$([ "$w" = - ] && echo - || printf '%.1f' "$w")" \
        "$([ "$w" = - ] && echo - || printf '%.2f' "$(echo "$w / $bound" | bc -l)")" \
        "$([ "$src" = - ] && echo - || printf '%.3f' "$(echo "$src / $S" | bc -l)")" \
        "$(echo "$link / $S" | bc -l)"
    done
  done
done
