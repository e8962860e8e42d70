#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and kube-scheduler 1.20.2 from Debian bookworm's
# "kubernetes" source package and puts them, with a link to Debian's etcd, into one bin directory:
#
#   ${TENSORCAST_K8S_CACHE:-$HOME/.cache/tensorcast/k8s-1.20.2}/bin/
#
# Idempotent: when all four binaries are there and run, it prints the bin dir and exits at once.
# Needs root (apt-get) and Debian package mirrors; no Docker, no internet otherwise.
# Each step below says why it is there (package names, build flags, the binaries kept).
# Output: the bin dir on stdout (last line). Build log: $CACHE/build.log (tail printed on failure).
set -euo pipefail

CACHE="${TENSORCAST_K8S_CACHE:-$HOME/.cache/tensorcast/k8s-1.20.2}"
BIN="$CACHE/bin"
LOG="$CACHE/build.log"
SRC_DIR="$CACHE/src"
COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler)

binaries_ok() {
  local c
  for c in "${COMPONENTS[@]}"; do
    [[ -x "$BIN/$c" ]] || return 1
    "$BIN/$c" --version >/dev/null 2>&1 || return 1
  done
  [[ -x "$BIN/etcd" ]] || return 1
  "$BIN/etcd" --version >/dev/null 2>&1 || return 1
}

if binaries_ok; then
  echo "$BIN"
  exit 0
fi

if [[ $EUID -ne 0 ]]; then
  echo "build-binaries.sh: must run as root (it installs Debian packages with apt-get)" >&2
  exit 1
fi

mkdir -p "$CACHE" "$BIN"
: >"$LOG"
echo "build-binaries.sh: building Kubernetes 1.20.2 control-plane binaries into $BIN (log: $LOG)" >&2

on_error() {
  local rc=$?
  echo "build-binaries.sh: FAILED (exit $rc). Last 60 lines of $LOG:" >&2
  tail -n 60 "$LOG" >&2 || true
  exit "$rc"
}
trap on_error ERR

log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }

# 1. A deb-src entry for bookworm (apt-get source needs one). Keep it minimal: one deb822 file.
has_deb_src() {
  grep -rhsE '^[[:space:]]*Types:.*deb-src' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -q . && return 0
  grep -rhsE '^[[:space:]]*deb-src[[:space:]].*bookworm' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | grep -q .
}
if ! has_deb_src; then
  log "adding deb-src entry /etc/apt/sources.list.d/tensorcast-deb-src.sources"
  cat >/etc/apt/sources.list.d/tensorcast-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi

# 2. Build tools (rsync: without it the code generators come out as empty files).
log "apt-get update + install build tools"
export DEBIAN_FRONTEND=noninteractive
apt-get update >>"$LOG" 2>&1
apt-get install -y --no-install-recommends \
  golang-go rsync jq etcd-server dpkg-dev make git ca-certificates \
  golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev >>"$LOG" 2>&1

# 3. Source: Debian's orig tarball carries vendor/.
mkdir -p "$SRC_DIR"
cd "$SRC_DIR"
if ! ls kubernetes_*.orig.tar.gz >/dev/null 2>&1; then
  log "apt-get source --download-only kubernetes"
  apt-get source --download-only kubernetes >>"$LOG" 2>&1
fi
TARBALL="$(ls kubernetes_*.orig.tar.gz | head -n1)"
TREE="$SRC_DIR/tree"
if [[ ! -f "$TREE/.tensorcast-unpacked" ]]; then
  log "unpacking $TARBALL"
  rm -rf "$TREE" "$SRC_DIR/unpack"
  mkdir -p "$SRC_DIR/unpack"
  tar -xzf "$TARBALL" -C "$SRC_DIR/unpack"
  top="$(find "$SRC_DIR/unpack" -mindepth 1 -maxdepth 1 -type d | head -n1)"
  mv "$top" "$TREE"
  rmdir "$SRC_DIR/unpack"

  # 4. The vendored reflect2 1.0.1 crashes under Go >= 1.18 once a custom resource is created.
  #    Replace it and json-iterator with Debian's newer sources, without their tests.
  for pkg in github.com/modern-go/reflect2 github.com/json-iterator/go; do
    src="/usr/share/gocode/src/$pkg"
    [[ -d "$src" ]] || { log "missing $src (Debian -dev package)"; false; }
    log "replacing vendor/$pkg with $src"
    rm -rf "$TREE/vendor/$pkg"
    mkdir -p "$TREE/vendor/$pkg"
    cp -rL "$src/." "$TREE/vendor/$pkg/"
    find "$TREE/vendor/$pkg" -name '*_test.go' -delete
  done
  touch "$TREE/.tensorcast-unpacked"
fi

# 5. Build in GOPATH mode through the tree's own make.
log "make (go $(go version | awk '{print $3}')), several minutes on 2 cores"
cd "$TREE"
GOPROXY=off CGO_ENABLED=0 GOFLAGS= \
  make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler" >>"$LOG" 2>&1

OUT="$TREE/_output/bin"
[[ -d "$OUT" ]] || OUT="$(dirname "$(find "$TREE/_output" -type f -name kube-apiserver | head -n1)")"
for c in "${COMPONENTS[@]}"; do
  install -m 0755 "$OUT/$c" "$BIN/$c"
done
ETCD="$(command -v etcd || echo /usr/bin/etcd)"
ln -sf "$ETCD" "$BIN/etcd"

binaries_ok || { log "built binaries do not run"; false; }
log "done: $("$BIN/kube-apiserver" --version)"
trap - ERR
echo "$BIN"
