#!/usr/bin/env bash
# The repository explains itself (docs/rules.md TEST-6): nothing outside docs/ may cite documents
# that live outside the repository (the old requirement and design notes) or read files beside
# the clone. Code and tests cite docs/rules.md ids instead. Fails listing every hit.
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='\.\./shared\|shared/[a-z-]*\.\(md\|tsv\|txt\)\|seed 00\|seeds/\|DESIGN §\|DESIGN\.md\|ledger case\($\| [0-9]\)\|ledger-cases\|egress-global\|style\.md §'
if git grep -n "$pattern" -- ':!docs' ':!.ci/check-self-contained.sh'; then
  echo "self-containment: the lines above cite documents outside the repository; cite docs/rules.md ids instead"
  exit 1
fi
