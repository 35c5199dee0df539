# Sourced (from the checkout root) by the GPU-machine scripts: unpacks the carried build dependencies
# (.deps/debs/*.deb, the Debian -dev packages from scripts/gpu/fetch_deps.sh) into $prefix = /tmp/kimi-deps and
# puts their libraries on LD_LIBRARY_PATH. DEPS names the folder (default .deps; from a worktree inside the
# checkout, the carried one is ../.deps, found by itself); KIMI_DEPS_PREFIX replaces /tmp/kimi-deps (a dry run
# elsewhere). cpp-httplib (kimi serve) is found through the carried pkgconf and .pc files (below).
DEPS=${DEPS:-.deps}
[ -d "$DEPS/debs" ] || DEPS=../.deps
prefix=${KIMI_DEPS_PREFIX:-/tmp/kimi-deps}
mkdir -p "$prefix"
for f in "$DEPS"/debs/*.deb; do dpkg -x "$f" "$prefix"; done
# zlib1g puts libz.so.1 in /lib (not /usr/lib), hence both.
libs="$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:$prefix/usr/lib/x86_64-linux-gnu/openblas-pthread"
export LD_LIBRARY_PATH="$libs:${LD_LIBRARY_PATH:-}"
# pkg-config (cpp-httplib for kimi serve): the carried pkgconf, reading only the carried .pc files, whose
# prefix=/usr (and exec_prefix=/usr) now point into $prefix; zlib-dev's libz.so is an absolute link to /lib, which
# is repointed to the carried libz.so.1 too.
pcdir="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig"
if [ ! -x "$prefix/usr/bin/pkgconf" ] || [ ! -f "$pcdir/cpp-httplib.pc" ]; then
  echo "deps.sh: $DEPS/debs lacks pkgconf or cpp-httplib, which the build of kimi serve needs:" \
    "run scripts/gpu/fetch_deps.sh again" >&2
else
  sed -i -E "s#^(prefix|exec_prefix)=/usr\$#\1=$prefix/usr#" "$pcdir"/*.pc
  [ -e "$prefix/lib/x86_64-linux-gnu/libz.so.1" ] && ln -sf "$prefix/lib/x86_64-linux-gnu/libz.so.1" \
    "$prefix/usr/lib/x86_64-linux-gnu/libz.so"
  export PKG_CONFIG="$prefix/usr/bin/pkgconf" PKG_CONFIG_LIBDIR="$pcdir" PKG_CONFIG_PATH=
fi

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
  cmake --preset cuda -DCMAKE_PREFIX_PATH="$prefix/usr" -DKIMI_TESTS=ON -DKIMI_BENCH=ON -DKIMI_SERVE=ON \
    >"$OUT/configure.log" 2>&1 ||
    { tail -30 "$OUT/configure.log"; return 1; }
  cmake --build --preset cuda -j 16 --target "$@" >"$OUT/build.log" 2>&1 ||
    { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; return 1; }
}
