#!/usr/bin/env bash
# Rebuild the native core in place for development (pip install -e . does this too, slower):
# cargo builds the cdylib and it is copied where Python imports it (producers/native/_core.*.so).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cargo build --release --quiet --manifest-path "$here/Cargo.toml"
suffix="$(python -c 'import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])')"
cp "$here/target/release/lib_core.so" "$here/_core$suffix"
