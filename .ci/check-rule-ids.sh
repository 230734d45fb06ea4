#!/usr/bin/env bash
# Every rule id cited in code, tests, migrations, scripts and docs (`LEDGER-9`, also the ends of a
# range such as `POLICY-30..POLICY-35`) exists in docs/rules.md: a citation is how a reader finds
# why code does what it does, so one that leads nowhere is a defect. Migrations are left out:
# an applied migration is checksummed by the ledger, so its text can never be edited again.
set -euo pipefail
cd "$(dirname "$0")/.."
areas='CALL|DECL|LEDGER|POLICY|DECIDE|EGRESS|MODEL|MCP|AUTH|INBOX|NOTIFY|OPS|AGENT|TEST'
defined=$(grep -oE "\*\*($areas)-[0-9]+\*\*" docs/rules.md | tr -d '*' | sort -u)
cited=$(git ls-files crates .ci docs README.md examples | grep -v '/migrations/' \
  | xargs grep -hoE "\b($areas)-[0-9]+\b" 2>/dev/null | sort -u)
missing=$(comm -23 <(echo "$cited") <(echo "$defined"))
if [ -n "$missing" ]; then
  echo "rule ids cited but not defined in docs/rules.md:"
  for id in $missing; do
    echo "  $id: $(git grep -lwF "$id" -- crates .ci docs README.md examples ':!*/migrations/*' | tr '\n' ' ')"
  done
  exit 1
fi
echo "rule ids: $(echo "$cited" | wc -l) cited, all defined"
