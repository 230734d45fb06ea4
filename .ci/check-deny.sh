#!/usr/bin/env bash
# cargo-deny against deny.toml: advisories, licences, bans and sources (docs/testing.md,
# "Dependency policy"). Offline: CI cannot reach the RustSec database's git host, so the
# advisories are the snapshot committed in .ci/advisory-db (refreshed with
# .ci/refresh-advisory-db.sh), laid out where cargo-deny looks and opened with `--offline`.
#
# Proves itself first, each run: the check must fail on a database holding one synthetic
# advisory against a crate in Cargo.lock (naming that advisory), and must pass on the snapshot.
# A check that could not fail (an empty or misplaced database, advisories switched off) would
# otherwise pass silently.
#
# Needs cargo-deny: $CARGO_DENY, or `cargo-deny` on PATH (.ci/run installs the pinned one).
# Downloads the crates of Cargo.lock first (`--offline` reads them from cargo's cache).
set -euo pipefail
cd "$(dirname "$0")/.."
deny=${CARGO_DENY:-cargo-deny}
# A build downloads only the host's crates; `--offline` needs every platform's in the lock
# (on a fresh machine the cache holds none of the others).
cargo fetch --locked --quiet
snapshot=.ci/advisory-db
date=$(sed -n 's/^date: //p' "$snapshot/SNAPSHOT")
commit=$(sed -n 's/^commit: //p' "$snapshot/SNAPSHOT")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The directory cargo-deny opens for deny.toml's database URL under the root $1 (a name it
# derives from a hash of the URL): asked of cargo-deny itself, on an empty root, so this script
# does not depend on how it derives it.
db_dir() {
  local said
  # Fails, as the root is empty: only what it said on the way matters.
  said=$(AIRLOCK_ADVISORY_DBS=$1 "$deny" -L debug --offline check advisories 2>&1 || true)
  sed -n "s/.*Opening advisory database at '\(.*\)'.*/\1/p" <<<"$said" | sed -n 1p
}

# Lays the snapshot out as a database under the root $1 and prints the database's directory.
# cargo-deny reads a database from a git checkout (it asks git for the time of the last update),
# so the copy is made one, committed with the snapshot's own date.
lay_out() {
  local root=$1 dir
  mkdir -p "$root"
  dir=$(db_dir "$root")
  [ -n "$dir" ] || { echo "check-deny: cargo-deny did not say where it looks for the database" >&2; exit 1; }
  mkdir -p "$dir"
  cp -r "$snapshot/." "$dir/"
  git -C "$dir" init -q -b main
  git -C "$dir" add -A
  GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date git -C "$dir" \
    -c user.name=airlock-ci -c user.email=ci@airlock.invalid -c commit.gpgsign=false \
    commit -q -m "RustSec advisory-db $commit (subset for Cargo.lock)"
  printf '%s\n' "$dir"
}

run_deny() { # root, check options and names...
  local root=$1
  shift
  AIRLOCK_ADVISORY_DBS=$root "$deny" --color never --offline check "$@"
}

echo "cargo-deny $("$deny" --version | awk '{print $2}'), RustSec snapshot $commit ($date)"

# The self-test: a synthetic advisory against every version of a crate in Cargo.lock.
victim=serde_json
grep -qx "name = \"$victim\"" Cargo.lock || { echo "check-deny: $victim is not in Cargo.lock; pick another crate" >&2; exit 1; }
fake=$(lay_out "$work/fake")
mkdir -p "$fake/crates/$victim"
cat >"$fake/crates/$victim/RUSTSEC-2999-0001.md" <<EOF
\`\`\`toml
[advisory]
id = "RUSTSEC-2999-0001"
package = "$victim"
date = "2999-01-01"
url = "https://example.invalid/airlock-ci-self-test"
categories = ["memory-corruption"]

[versions]
patched = []
\`\`\`

# Synthetic advisory: .ci/check-deny.sh proves the check fails on a matching advisory
EOF
git -C "$fake" add -A
git -C "$fake" -c user.name=airlock-ci -c user.email=ci@airlock.invalid -c commit.gpgsign=false \
  commit -q -m "synthetic advisory"
if out=$(run_deny "$work/fake" advisories 2>&1); then
  printf '%s\n' "$out"
  echo "check-deny: FAILED: cargo-deny passed with a synthetic advisory against $victim" >&2
  exit 1
fi
if ! grep -q "RUSTSEC-2999-0001" <<<"$out"; then
  printf '%s\n' "$out"
  echo "check-deny: FAILED: cargo-deny failed, but not on the synthetic advisory" >&2
  exit 1
fi
echo "self-test: a synthetic advisory against $victim fails the check, as it must"

# The real check, on the snapshot as committed. The duplicate-version warnings' inclusion
# graphs run to thousands of lines, so they are shown only to explain a failure.
lay_out "$work/real" >/dev/null
if ! run_deny "$work/real" --hide-inclusion-graph; then
  echo "check-deny: FAILED; again with the inclusion graphs, to show where each crate comes from:" >&2
  run_deny "$work/real" || true
  exit 1
fi

# The snapshot is only as good as its date: say when it is getting old (refreshing needs network,
# so it is a person's step, not a failure of an unrelated change).
age_days=$(( ($(date +%s) - $(date -d "$date" +%s)) / 86400 ))
if [ "$age_days" -gt 90 ]; then
  echo "warning: the RustSec snapshot is $age_days days old ($date): refresh it with" \
    "bash .ci/refresh-advisory-db.sh (needs network) and commit .ci/advisory-db" >&2
fi
