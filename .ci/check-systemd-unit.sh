#!/usr/bin/env bash
# examples/systemd/airlock.service is a unit systemd accepts (docs/operations.md): `systemd-analyze
# verify` on a copy whose ExecStart names an executable that exists without a build (/bin/true)
# must print nothing, since systemd only warns about an unknown or misspelled key and would
# otherwise start a service without the hardening the file claims. Missing systemd-analyze
# fails under CI (which installs it) and is skipped, saying so, elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v systemd-analyze >/dev/null; then
  if [ -n "${CI:-}" ]; then echo "systemd-analyze is missing: apt-get install -y systemd"; exit 1; fi
  echo "skipped: systemd-analyze is missing (apt-get install -y systemd)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed 's#^ExecStart=/usr/local/bin/airlock #ExecStart=/bin/true #' examples/systemd/airlock.service \
  > "$tmp/airlock.service"
grep -q '^ExecStart=/bin/true ' "$tmp/airlock.service" || { echo "no ExecStart=/usr/local/bin/airlock line"; exit 1; }
if ! out=$(systemd-analyze verify "$tmp/airlock.service" 2>&1) || [ -n "$out" ]; then
  echo "examples/systemd/airlock.service does not verify:"
  echo "$out"
  exit 1
fi
echo "systemd unit: examples/systemd/airlock.service verifies"
