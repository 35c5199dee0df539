# Sourced (from the checkout root) by the GPU-machine scripts that time a change beside what it replaced in one
# call (verify_kda.sh AB_OVERLAY, quick_ab.sh AB): overlay_tree SRC DIR makes SRC a copy of the tracked
# tree with DIR's files (at their repository paths) laid over it, and the carried .deps linked in, so that
# `cmake --preset cuda` builds it in SRC/build/cuda.
overlay_tree() {
  local src=$1 dir=$2
  # (tracked and untracked-unignored files that exist: the GPU machine's copy of the index may be an older one,
  # listing a file renamed since or missing a new one, which would drop that file from the copy)
  rm -rf "$src" && mkdir -p "$src" &&
    git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    xargs -0 cp --parents -t "$src" && cp -r "$dir"/. "$src"/ &&
    ln -s "$PWD/.deps" "$src/.deps"
}
