#!/usr/bin/env bash
# No trait the ledger declares `pub` (any visibility) has more than 15 methods: the store is
# split into role traits (crates/airlock-ledger/src/store.rs) so a test double implements only
# the role it changes, and a trait that grows past the bound is a role that wants splitting.
# Counts the `fn` items of each trait body (not those inside its default methods' bodies);
# fails naming every trait over the bound.
set -euo pipefail
cd "$(dirname "$0")/.."
max=15
mapfile -t files < <(find crates/airlock-ledger/src -name '*.rs' | sort)
awk -v max="$max" '
  FNR == 1 { name = "" }
  {
    line = $0
    sub(/\/\/.*/, "", line)
    if (name == "" && match(line, /(^|[^[:alnum:]_])pub(\([^)]*\))?[[:space:]]+trait[[:space:]]+[[:alnum:]_]+/)) {
      header = substr(line, RSTART, RLENGTH)
      sub(/.*trait[[:space:]]+/, "", header)
      name = header; file = FILENAME; at = FNR; depth = 0; opened = 0; fns = 0; found++
    }
    if (name == "") next
    if (depth == 1 && line ~ /^[[:space:]]*((unsafe|async|const)[[:space:]]+)*fn[[:space:]]/) fns++
    depth += gsub(/\{/, "{", line) - gsub(/\}/, "}", line)
    if (depth > 0) opened = 1
    if (opened && depth == 0) {
      if (fns > max) { printf "%s:%d: trait %s has %d methods (at most %d)\n", file, at, name, fns, max; bad = 1 }
      name = ""
    }
  }
  END {
    if (!found) { print "no pub trait found in crates/airlock-ledger/src: the check reads nothing"; exit 1 }
    exit bad
  }
' "${files[@]}"
