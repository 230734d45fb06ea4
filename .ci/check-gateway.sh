#!/usr/bin/env bash
# `Gateway` keeps the one call path: at most 40 inherent methods over all its `impl Gateway`
# blocks (crates/airlock-runtime/src). What only the MCP endpoint needs lives on `McpHost`
# (crates/airlock-runtime/src/mcp_host.rs); a gateway that grows past the bound has taken in
# a channel's work again. Counts the `fn` items directly inside each block.
set -euo pipefail
cd "$(dirname "$0")/.."
max=40
mapfile -t files < <(find crates/airlock-runtime/src -name '*.rs' | sort)
awk -v max="$max" '
  FNR == 1 { inside = 0 }
  {
    line = $0
    sub(/\/\/.*/, "", line)
    if (!inside && line ~ /^impl Gateway \{/) { inside = 1; depth = 0; blocks++ }
    if (!inside) next
    if (depth == 1 && line ~ /^[[:space:]]*(pub(\([^)]*\))?[[:space:]]+)?((async|const|unsafe)[[:space:]]+)*fn[[:space:]]/) fns++
    depth += gsub(/\{/, "{", line) - gsub(/\}/, "}", line)
    if (depth == 0) inside = 0
  }
  END {
    if (!blocks) { print "no `impl Gateway` block found: the check reads nothing"; exit 1 }
    if (fns > max) { printf "Gateway has %d methods over %d impl blocks (at most %d)\n", fns, blocks, max; exit 1 }
    printf "Gateway: %d methods over %d impl blocks (at most %d)\n", fns, blocks, max
  }
' "${files[@]}"
