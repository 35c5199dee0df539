#!/usr/bin/env bash
# Fills .deps/ (git-ignored) with what scripts/gpu/run_all.sh needs on the GPU machine, which has no
# package registry: the Debian build dependencies as .deb files and the peer (FLA 0.6) as wheels.
# Add `.deps/` to .git/info/exclude and name `.deps` in the device tool's `carry`.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps/debs
(cd .deps/debs && apt-get download libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 \
  libgfortran5 nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9 libgtest-dev libbenchmark-dev libbenchmark1debian)
python3 -m pip download --no-deps -q -d .deps flash-linear-attention==0.6.0 fla-core==0.6.0 einops==0.8.2
