#!/usr/bin/env bash
# A source file holds at most 600 lines of non-test code, so each file stays one concern a reader
# can hold in mind; over 600 is a warning, over 1000 fails. Tests and benches are not counted.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
for f in $(git ls-files 'crates/*.rs' | grep -v '/tests/' | grep -v '/benches/'); do
  n=$(awk '/^#\[cfg\(test\)\]/{exit} {c++} END{print c+0}' "$f")
  if [ "$n" -gt 1000 ]; then echo "$f: $n non-test lines (hard limit 1000)"; fail=1
  elif [ "$n" -gt 600 ]; then echo "warning: $f: $n non-test lines (aim for 600)"; fi
done
exit $fail
