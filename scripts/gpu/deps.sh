# Sourced (from the checkout root) by the GPU-machine scripts: unpacks the carried build dependencies
# (.deps/debs/*.deb, the Debian -dev packages from scripts/gpu/fetch_deps.sh) into $prefix = /tmp/kimi-deps and
# puts their libraries on LD_LIBRARY_PATH. DEPS names the folder (default .deps; from a worktree inside the
# checkout, the carried one is ../.deps, found by itself).
DEPS=${DEPS:-.deps}
[ -d "$DEPS/debs" ] || DEPS=../.deps
prefix=/tmp/kimi-deps
mkdir -p "$prefix"
for f in "$DEPS"/debs/*.deb; do dpkg -x "$f" "$prefix"; done
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$prefix/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"

# peer_python: the carried Python wheels ($DEPS/*.whl: FLA 0.6 and einops, nanobind, pytest) into /tmp/kimi-site on
# PYTHONPATH, and Triton's cache (its compiled kernels and autotuning results) in build/triton-cache, which a warm
# machine keeps between calls: FLA's chunk_kda autotunes for minutes on its first calls (docs/BENCHMARKS.md, Method).
peer_python() {
  python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target /tmp/kimi-site \
    "$DEPS"/*.whl
  export PYTHONPATH=/tmp/kimi-site TRITON_CACHE_DIR=$PWD/build/triton-cache
}

# cuda_build TARGET...: configures the cuda preset (build/cuda) against $prefix's packages, with the tests and the
# benchmarks, and builds the targets; logs in $OUT/configure.log and $OUT/build.log; on failure prints the errors and
# returns 1 (the caller exits).
cuda_build() {
  # KIMI_SERVE=OFF: cpp-httplib (kimi serve) is not among the carried packages yet
  cmake --preset cuda -DCMAKE_PREFIX_PATH="$prefix/usr" -DKIMI_TESTS=ON -DKIMI_BENCH=ON -DKIMI_SERVE=OFF \
    >"$OUT/configure.log" 2>&1 ||
    { tail -30 "$OUT/configure.log"; return 1; }
  cmake --build --preset cuda -j 16 --target "$@" >"$OUT/build.log" 2>&1 ||
    { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; return 1; }
}
