#!/usr/bin/env bash
# Installs the Debian packages kimi.cpp builds with (idempotent; needs root or sudo).
# nvcc and the CUDA libraries come from the CUDA toolkit, not from here. Python's headers and venv are for the
# bindings (pip brings nanobind and the rest: docs/python.md).
set -euo pipefail
# OpenMPI (libopenmpi-dev, openmpi-bin): the CPU transport of expert parallelism and its mpirun tests (docs/ep.md).
pkgs=(cmake ninja-build g++ libopenblas-dev nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev
      libbenchmark-dev libcpp-httplib-dev libopenmpi-dev openmpi-bin curl clang libclang-rt-14-dev python3-dev
      python3-venv)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  sudo_=""
  [ "$(id -u)" -ne 0 ] && sudo_=sudo
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}"
fi
