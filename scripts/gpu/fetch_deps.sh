#!/usr/bin/env bash
# Fills .deps/ (git-ignored) with what scripts/gpu/run_all.sh and python_tests.sh need on the GPU machine, which
# has no package registry: the Debian build dependencies as .deb files, the peer (FLA 0.6) as wheels, and for the
# Python bindings nanobind + pytest wheels and Python 3.11's headers (used only when the interpreter lacks its own).
# Add `.deps/` to .git/info/exclude and name `.deps` in the device tool's `carry`.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps/debs
(cd .deps/debs && apt-get download libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 \
  libgfortran5 nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9 libgtest-dev libbenchmark-dev libbenchmark1debian \
  libpython3.11-dev python3.11-dev)
# kimi serve: cpp-httplib (found through pkg-config: its .pc file requires openssl, zlib and brotli's), the
# libraries its shared object needs at link and run time, and pkgconf itself (the GPU image may lack pkg-config).
(cd .deps/debs && apt-get download libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 zlib1g-dev zlib1g \
  libbrotli-dev libbrotli1 pkgconf-bin libpkgconf3)
python3 -m pip download --no-deps -q -d .deps flash-linear-attention==0.6.0 fla-core==0.6.0 einops==0.8.2
python3 -m pip download --no-deps -q -d .deps nanobind==3.1.0 pytest iniconfig pluggy packaging pygments
