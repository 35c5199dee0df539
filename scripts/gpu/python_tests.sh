#!/usr/bin/env bash
# The Python bindings on the GPU machine (the device tool's `run`), beside FLA 0.6:
#   run(command="bash scripts/gpu/python_tests.sh", carry=[".deps"])      after scripts/gpu/fetch_deps.sh here
# Builds kimi_cpp._C with the CUDA backend (CMake, not pip: the GPU machine has no package registry; nanobind
# and pytest come from .deps/*.whl like FLA), then runs tests/python: every CPU and CUDA case, the CUDA stream /
# graph / torch.compile tests (test_gpu.py) and the same FLA-style script through FLA and kimi_cpp (test_fla.py).
# PYTEST_ARGS (default tests/python, shell words) picks a subset, e.g. PYTEST_ARGS=tests/python/test_gpu.py or
# PYTEST_ARGS="tests/python/test_fla.py -k 'not chunk'".
# Output: $OUT/python-summary.txt (pytest's summary and the FLA vs kimi error table, for docs/gpu/), full logs.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."

. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
peer_python             # FLA, nanobind, pytest on PYTHONPATH
py=$(command -v python3)

# Python headers: the interpreter's own, else the carried Debian python3.11-dev (CPATH finds its multiarch pyconfig.h).
extra=()
if ! "$py" -c "import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" 2>/dev/null; then
  inc=$(ls -d "$prefix"/usr/include/python3.* 2>/dev/null | head -1)
  [ -n "$inc" ] && extra=(-DPython_INCLUDE_DIR="$inc") && export CPATH="$prefix/usr/include:${CPATH:-}"
fi

t0=$(date +%s)
cmake --preset cuda -B build/cuda-python -DCMAKE_PREFIX_PATH="$prefix/usr" -DKIMI_TESTS=OFF -DKIMI_BENCH=OFF \
  -DKIMI_CLI=OFF -DKIMI_PYTHON=ON -DPython_EXECUTABLE="$py" "${extra[@]}" >"$OUT/python-configure.log" 2>&1 \
  || { tail -30 "$OUT/python-configure.log"; exit 1; }
cmake --build build/cuda-python -j 16 --target _C kimi_cpp_py >"$OUT/python-build.log" 2>&1 \
  || { grep -E "error|FAILED" -A5 "$OUT/python-build.log" | head -60; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s" | tee "$OUT/python-summary.txt"

eval "args=(${PYTEST_ARGS:-tests/python})"  # shell words: PYTEST_ARGS="tests/python/test_fla.py -k 'not chunk'"
PYTHONPATH="build/cuda-python/python:$PYTHONPATH" timeout 480 "$py" -m pytest -v -s -rs -p no:cacheprovider \
  "${args[@]}" >"$OUT/python-tests.log" 2>&1
rc=$?
{
  echo "# kimi_cpp Python tests on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1): exit $rc"
  grep -oE "(chunk|recurrent)-[a-z0-9-]+ kimi_o=.*" "$OUT/python-tests.log"
  grep -E "FAILED|ERROR|^SKIPPED|passed|failed" "$OUT/python-tests.log" | tail -40
} | tee -a "$OUT/python-summary.txt"
exit $rc
