#!/usr/bin/env bash
# Copies the repository's files (tracked, and untracked but not ignored) into a fresh directory
# `<mktemp -d>/airlock` with nothing beside it, makes it a git repository of its own (so
# `git ls-files` and `git grep` work there as in a clone), and prints its path. The previous copy
# made from this checkout is removed first, so at most one is left behind. Used by .ci/run.
#
# The files get fresh modification times (`tar -m`), so cargo rebuilds the workspace's own crates
# in every copy instead of reusing a test binary built elsewhere with another CARGO_MANIFEST_DIR
# compiled in (see CARGO_PROFILE_DEV_DEBUG in .ci/run for why the checkout is unaffected).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
mkdir -p target
last=target/ci-copy-path
if [ -f "$last" ]; then
  old=$(cat "$last")
  # Only ever remove a directory this script made: <tmp>/<mktemp name>/airlock.
  case "$old" in
    */airlock-ci.*/airlock) [ -d "$old" ] && rm -rf "$(dirname "$old")" ;;
  esac
fi
parent=$(mktemp -d "${TMPDIR:-/tmp}/airlock-ci.XXXXXX")
dest=$parent/airlock
mkdir "$dest"
printf '%s\n' "$dest" >"$last"
# A tracked file deleted in the work tree is skipped, as a clone of the next commit would lack it.
git -C "$src" ls-files -z --cached --others --exclude-standard \
  | (cd "$src" && tar --null --ignore-failed-read -T - -c 2>/dev/null) \
  | tar -x -m -C "$dest"
(
  cd "$dest"
  git init -q
  git add -A
)
printf '%s\n' "$dest"
