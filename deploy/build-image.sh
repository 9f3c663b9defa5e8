#!/usr/bin/env bash
# Builds the pv-controller image with docker or podman and checks that it
# runs: `--version` and `--help`, and dra-publish's `--version`. Usage:
# deploy/build-image.sh [IMAGE] (default pv-controller:<workspace version>;
# CONTAINER_ENGINE picks the engine). Exits 2, saying why, when no engine can be reached.
set -euo pipefail
cd "$(dirname "$0")/.."

engine="${CONTAINER_ENGINE:-}"
if [ -z "$engine" ]; then
  for candidate in docker podman; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" info >/dev/null 2>&1; then
      engine="$candidate"
      break
    fi
  done
fi
if [ -z "$engine" ]; then
  echo "build-image: no container engine can be reached (docker or podman); nothing built" >&2
  exit 2
fi

version="$(awk '/^\[workspace.package\]/{w=1} w && /^version =/{gsub(/"/,"",$3); print $3; exit}' Cargo.toml)"
image="${1:-pv-controller:${version}}"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
"$engine" build -f deploy/Dockerfile --build-arg "VERSION=${version}" \
  --build-arg "REVISION=${revision}" -t "$image" .
"$engine" run --rm "$image" --version
"$engine" run --rm "$image" --help >/dev/null
"$engine" run --rm --entrypoint /dra-publish "$image" --version
echo "build-image: built and ran $image"
