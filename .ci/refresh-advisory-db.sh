#!/usr/bin/env bash
# Refreshes .ci/advisory-db, the slice of the RustSec advisory database that .ci/check-deny.sh
# checks Cargo.lock against. CI has no route to the database's git host, so the slice is
# committed, and this script is the one way it changes: run it (with network) after a
# `cargo update`, after adding a dependency, and whenever the snapshot's date in
# .ci/advisory-db/SNAPSHOT is getting old; then commit the result.
#
#   bash .ci/refresh-advisory-db.sh [SOURCE]
#
# SOURCE is anything `git clone` takes: by default the RustSec repository on GitHub; a local
# clone or mirror of it works too (for a machine that can bring a snapshot but cannot clone).
#
# Keeps only what cargo-deny reads for this repository: `crates/<name>/RUSTSEC-*.md` for every
# crate name in Cargo.lock (every version's advisories, so a version bump is still checked),
# laid out as in the database; plus its licence files (CC0-1.0, some advisories CC-BY-4.0, which
# asks for attribution) and SNAPSHOT naming the commit and its date.
set -euo pipefail
cd "$(dirname "$0")/.."
source=${1:-https://github.com/rustsec/advisory-db.git}
out=.ci/advisory-db

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q --depth=1 --branch main "$source" "$tmp/db"
commit=$(git -C "$tmp/db" rev-parse HEAD)
date=$(git -C "$tmp/db" show -s --format=%cI HEAD)

rm -rf "$out"
mkdir -p "$out/crates"
cp "$tmp/db/LICENSE.txt" "$out/"
cp -r "$tmp/db/LICENSES" "$out/"
kept=0
for name in $(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.lock | sort -u); do
  if [ -d "$tmp/db/crates/$name" ]; then
    cp -r "$tmp/db/crates/$name" "$out/crates/"
    kept=$((kept + 1))
  fi
done
cat >"$out/SNAPSHOT" <<EOF
source: https://github.com/rustsec/advisory-db
commit: $commit
date: $date
crates: $kept of Cargo.lock's crate names have advisories, kept under crates/
refresh: bash .ci/refresh-advisory-db.sh (needs network; see the script)
EOF
echo "advisory-db: $commit ($date), $kept crates with advisories -> $out"
