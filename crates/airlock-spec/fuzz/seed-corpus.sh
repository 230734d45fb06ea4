#!/usr/bin/env bash
# Seeds corpus/declarations from the repository's examples: one input per example directory
# (every file it holds) and one per declaration file beside its directory's airlock.toml.
set -euo pipefail
cd "$(dirname "$0")"
examples=../../../examples
out=corpus/declarations
mkdir -p "$out"
section() { printf '==> %s\n' "$1"; cat "$2"; printf '\n'; }
for dir in "$examples"/*/; do
  name=$(basename "$dir")
  files=$(cd "$dir" && find airlock.toml agents connections apis -maxdepth 1 -name '*.yml' -o -name airlock.toml 2>/dev/null | sort || true)
  { for f in $files; do section "$f" "$dir/$f"; done; } > "$out/dir-$name"
  for f in $files; do
    [ "$f" = airlock.toml ] && continue
    { [ -f "$dir/airlock.toml" ] && section airlock.toml "$dir/airlock.toml"; section "$f" "$dir/$f"; } \
      > "$out/file-$name-$(echo "$f" | tr / -)"
  done
done
# quickstart/optional holds a connection file kept out of the offline example.
for f in "$examples"/*/optional/*.yml; do
  { section airlock.toml "$(dirname "$f")/../airlock.toml"; section "connections/$(basename "$f")" "$f"; } \
    > "$out/optional-$(basename "$f")"
done
# Deep block nesting, which the parser does not bound (the builder does, DECL-43).
{ printf '==> agents/deep.yml\n'; for _ in $(seq 100); do printf -- '- '; done; printf 'x\n'; } > "$out/deep-nesting"
echo "$(ls "$out" | wc -l) seeds in $out"
