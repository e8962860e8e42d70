#!/usr/bin/env bash
# Pins the images' base (eclipse-temurin:17-jre) to the digest of its multi-platform index as the
# registry serves it now, in every Dockerfile, so builds are reproducible until the next run.
# Needs a registry and one of: docker (buildx), crane, skopeo. Usage: hack/images/pin-base-image.sh [TAG]
set -euo pipefail
cd "$(dirname "$0")/../.."
image=${1:-eclipse-temurin:17-jre}
if command -v crane >/dev/null; then
  digest=$(crane digest "$image")
elif command -v docker >/dev/null; then
  digest=$(docker buildx imagetools inspect "$image" --format '{{json .Manifest}}' | sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p')
elif command -v skopeo >/dev/null; then
  digest=$(skopeo inspect --raw "docker://$image" | sha256sum | sed 's/^\([0-9a-f]*\).*/sha256:\1/')
else
  echo "pin-base-image: needs crane, docker (buildx) or skopeo" >&2
  exit 2
fi
[[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "pin-base-image: no digest for $image: '$digest'" >&2; exit 1; }
for f in operator/Dockerfile dataplane/Dockerfile rdma-device-plugin/Dockerfile csi-driver/Dockerfile; do
  sed -i "s|^ARG BASE_IMAGE=.*|ARG BASE_IMAGE=${image}@${digest}|" "$f"
  echo "$f: ${image}@${digest}"
done
