#!/usr/bin/env bash
# The skip summary stays the last thing `cargo test --workspace` prints (docs/testing.md, "The
# skip summary"): cargo runs test binaries package by package in name order, then every doc
# test. So airlock-testkit, whose last test target is the summary, must sort last of the
# workspace's packages, and no library may have doc tests. A new crate that breaks either fails
# here, naming the fix, instead of silently pushing the summary up the output.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
meta = json.load(sys.stdin)
fail = False
names = sorted(p["name"] for p in meta["packages"])
if names[-1] != "airlock-testkit":
    print(f"test order: {names[-1]} sorts after airlock-testkit, so its tests would run after the skip summary; rename it")
    fail = True
for package in meta["packages"]:
    name = package["name"]
    for target in package["targets"]:
        if "lib" in target["kind"] and target.get("doctest", False):
            print(f"test order: {name} has doc tests, which run after the skip summary; set doctest = false in its [lib]")
            fail = True
sys.exit(1 if fail else 0)
'
echo "test order: the skip summary runs last (airlock-testkit sorts last; no doc tests)"
