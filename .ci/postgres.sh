#!/usr/bin/env bash
# Starts the local PostgreSQL cluster if it is not accepting connections, and creates the
# role `airlock` (password `airlock`) and database `airlock_test` the tests use. Works with
# trust auth (this machine) and with Debian's default scram/peer setup (a fresh install).
set -euo pipefail

ready() { pg_isready -h 127.0.0.1 -p 5432 -q; }

if ! ready; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
fi
for _ in $(seq 1 60); do ready && break; sleep 0.5; done
ready || { echo "PostgreSQL did not start on 127.0.0.1:5432" >&2; exit 1; }

as_postgres() { su postgres -c "psql -v ON_ERROR_STOP=1 -qAt $*"; }
if [ "$(as_postgres "-c \"SELECT 1 FROM pg_roles WHERE rolname='airlock'\"")" != "1" ]; then
  as_postgres "-c \"CREATE ROLE airlock LOGIN SUPERUSER PASSWORD 'airlock'\""
fi
if [ "$(as_postgres "-c \"SELECT 1 FROM pg_database WHERE datname='airlock_test'\"")" != "1" ]; then
  as_postgres "-c \"CREATE DATABASE airlock_test OWNER airlock\""
fi
echo "PostgreSQL ready: postgres://airlock:***@127.0.0.1:5432/airlock_test"
