#!/usr/bin/env bash
# docs/architecture.md's hop table matches the code: each numbered row names a file and a
# function, and that file must define a function of that name. Fails naming every stale row.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
rows=0
while IFS='|' read -r _ num _ file func _; do
  num=$(echo "$num" | tr -d ' ')
  [[ "$num" =~ ^[0-9]+$ ]] || continue
  file=$(echo "$file" | tr -d ' `')
  func=$(echo "$func" | tr -d ' `')
  rows=$((rows + 1))
  if [ ! -f "$file" ]; then
    echo "docs/architecture.md hop $num: $file does not exist"; fail=1
  elif ! grep -qE "^\s*(pub(\([a-z:]+\))? )?(async )?fn $func\b" "$file"; then
    echo "docs/architecture.md hop $num: $file defines no fn $func"; fail=1
  fi
done < docs/architecture.md
if [ "$rows" -lt 10 ]; then
  echo "docs/architecture.md: expected the hop table, found $rows rows"; fail=1
fi
exit $fail
