#!/usr/bin/env bash
# The declared MSRV builds: reads `rust-version` from Cargo.toml's [workspace.package] and runs
# `cargo +<that version> check --workspace --all-targets --locked` with exactly that toolchain.
# We declare only what CI proves (docs/testing.md, "MSRV"): a missing toolchain fails the check
# rather than skipping it, and rustup is kept from downloading one (CI has no route to it).
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTUP_AUTO_INSTALL=0
msrv=$(sed -n '/^\[workspace\.package\]/,/^\[/s/^rust-version *= *"\([^"]*\)".*/\1/p' Cargo.toml)
[ -n "$msrv" ] || { echo "check-msrv: no rust-version in Cargo.toml's [workspace.package]" >&2; exit 1; }
# rustup names a release by its full version: rust-version 1.95 is the toolchain 1.95.0.
case $msrv in
  *.*.*) toolchain=$msrv ;;
  *) toolchain=$msrv.0 ;;
esac
if ! version=$(rustup run "$toolchain" rustc --version 2>&1); then
  echo "check-msrv: FAILED: rust-version is $msrv, but the toolchain $toolchain is not installed" >&2
  echo "installed: $(rustup toolchain list | tr '\n' ' ')" >&2
  exit 1
fi
echo "MSRV $msrv: $version"
cargo "+$toolchain" check --workspace --all-targets --locked
