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
