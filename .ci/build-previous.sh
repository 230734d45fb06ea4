#!/usr/bin/env bash
# Builds the `airlock` binary of the pinned previous release (.ci/previous-release) and prints its
# path on standard output; the rolling-upgrade tests (docs/rules.md OPS-87, OPS-88) run it beside
# the current build: `export AIRLOCK_PREVIOUS_BIN=$(bash .ci/build-previous.sh)`.
#
# - Source: `git archive` of that commit, from the git repository at $AIRLOCK_CI_CHECKOUT (which
#   .ci/run sets to the checkout it was started in, as its copy of the files has no history) or
#   else this checkout. A shallow clone is deepened (`git fetch --unshallow`, then the commit
#   itself from `origin`); a commit that still cannot be had fails the script, never skips.
# - Expand only (OPS-86): every migration file of the previous release must still be here, byte
#   for byte. An edited or removed migration fails the script, naming the file.
# - Cache: the binary is kept as <build cache>/previous-release/<commit>/airlock, so a re-run
#   does not rebuild. The build has a target dir of its own beside it: its workspace crates have
#   the same relative paths as the current ones, and in one target dir the two builds would
#   overwrite each other's artifacts. Debug build of `-p airlock --bin airlock` only.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
say() { printf 'build-previous: %s\n' "$*" >&2; }
fail() {
  say "ERROR: $*"
  exit 1
}

commit=$(grep -Ev '^[[:space:]]*(#|$)' .ci/previous-release | head -n 1 | tr -d '[:space:]')
[[ $commit =~ ^[0-9a-f]{40}$ ]] || fail ".ci/previous-release must hold one full 40-hex commit, not '$commit'"

repo=${AIRLOCK_CI_CHECKOUT:-$here}
has_commit() { git -C "$repo" cat-file -e "$commit^{commit}" 2>/dev/null; }
if ! has_commit; then
  if [ "$(git -C "$repo" rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
    say "shallow clone: fetching its history for $commit"
    git -C "$repo" fetch --quiet --unshallow >&2 || true
  fi
  has_commit || git -C "$repo" fetch --quiet origin "$commit" >&2 || true
  has_commit || fail "commit $commit (.ci/previous-release) is not in the git repository at $repo, even after fetching; fetch it (git fetch --unshallow origin) or correct the pin"
fi

# OPS-86: migrations are only ever added.
previous_migrations=$(mktemp -d)
trap 'rm -rf "$previous_migrations"' EXIT
git -C "$repo" archive "$commit" crates/airlock-ledger/migrations | tar -x -C "$previous_migrations"
changed=0
while IFS= read -r -d '' file; do
  rel=${file#"$previous_migrations"/}
  if [ ! -f "$here/$rel" ]; then
    say "migration $rel of the previous release was removed"
    changed=1
  elif ! cmp -s "$file" "$here/$rel"; then
    say "migration $rel of the previous release was edited"
    changed=1
  fi
done < <(find "$previous_migrations" -type f -print0)
[ "$changed" = 0 ] || fail "a release's migrations are never edited or removed, only added (docs/rules.md OPS-86); a change is a new migration"

target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$here/$target ;; esac
cache=$target/previous-release
bin=$cache/$commit/airlock
if [ -x "$bin" ]; then
  say "cached: $bin"
  printf '%s\n' "$bin"
  exit 0
fi

src=$cache/src-$commit
rm -rf "$src"
mkdir -p "$src" "$cache/$commit"
# Fresh modification times (`-m`): `git archive` stamps files with the commit's time, which may
# be older than another commit's artifacts in the shared target dir, and cargo would take those
# for up to date.
git -C "$repo" archive "$commit" | tar -x -m -C "$src"
say "building airlock at $commit (debug, -p airlock --bin airlock) into $cache/target"
(cd "$src" && CARGO_TARGET_DIR=$cache/target cargo build --locked -p airlock --bin airlock >&2)
cp "$cache/target/debug/airlock" "$bin.tmp"
mv "$bin.tmp" "$bin"
rm -rf "$src"
printf '%s\n' "$bin"
