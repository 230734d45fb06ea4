#!/usr/bin/env bash
# Crate arrows point one way: from user to used, never back (the crate map in
# docs/architecture.md, "The crates"). Fails if a crate reaches upward or into a forbidden
# dependency; the spec crate is checked transitively (it must stay free of network, async
# runtime and database crates).
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
deny() { # crate, regex, extra cargo-tree flags
  cargo metadata --format-version 1 --no-deps | grep -q "\"name\":\"$1\"" || return 0
  if cargo tree -p "$1" -e normal --prefix none $3 2>/dev/null | tail -n +2 | grep -qE "^($2) v"; then
    echo "layering: $1 must not depend on $2"; fail=1
  fi
}
deny airlock-spec    'tokio|mio|socket2|sqlx|reqwest|hyper|hickory-resolver|axum|rmcp|airlock-[a-z]+' ""
deny airlock-egress  'airlock-[a-z]+|sqlx|rmcp|axum'                  "--depth 1"
deny airlock-ledger  'reqwest|axum|rmcp|airlock-(egress|mcp|runtime)' "--depth 1"
deny airlock-mcp     'sqlx|airlock-(ledger|runtime)'                  "--depth 1"
deny airlock-model  'sqlx|rmcp|axum|airlock-(ledger|mcp|runtime)'     "--depth 1"
deny airlock-runtime 'axum|airlock'                                   "--depth 1"
# The testkit is a dev-dependency only: no crate's normal dependency tree may contain it.
for crate in airlock-spec airlock-egress airlock-ledger airlock-mcp airlock-model airlock-runtime airlock; do
  deny "$crate" 'airlock-testkit' ""
done
if grep -rn 'rmcp::' crates --include=*.rs | grep -v '^crates/airlock-mcp/'; then
  echo "layering: rmcp types must stay inside airlock-mcp"; fail=1
fi
# Unsafe code is denied workspace-wide; the allocator calls in memory.rs (OPS-61, OPS-62) are the one exception.
if grep -rn 'allow(unsafe_code)' crates --include=*.rs | grep -v '^crates/airlock/src/memory.rs:'; then
  echo "layering: unsafe code is allowed only in crates/airlock/src/memory.rs"; fail=1
fi
exit $fail
