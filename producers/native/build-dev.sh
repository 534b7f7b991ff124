#!/usr/bin/env bash
# Rebuild the native core in place for development (pip install -e . does this too, slower):
# cargo builds the cdylib and it is copied where Python imports it, under the same name
# maturin's editable install gives it (_core.abi3.so), so neither build shadows the other.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cargo build --release --quiet --manifest-path "$here/Cargo.toml"
rm -f "$here"/_core.cpython-*.so
cp "$here/target/release/lib_core.so" "$here/_core.abi3.so.tmp"
mv "$here/_core.abi3.so.tmp" "$here/_core.abi3.so"
