//! RFC 6962 §2.1 Merkle tree hash over raw leaf data (reference: `producers/evidence/merkle.py`).
//!
//! MTH({}) = SHA-256(); leaf = SHA-256(0x00 || d); node = SHA-256(0x01 || left || right), built
//! bottom-up with an odd last node carried up unchanged — the same left-balanced tree.
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sha2::{Digest, Sha256};

use crate::canonical::DETACH_BYTES;

pub(crate) fn root(leaves: &[&[u8]]) -> [u8; 32] {
    if leaves.is_empty() {
        return Sha256::digest(b"").into();
    }
    let mut level: Vec<[u8; 32]> = leaves
        .iter()
        .map(|leaf| {
            Sha256::new()
                .chain_update([0u8])
                .chain_update(leaf)
                .finalize()
                .into()
        })
        .collect();
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        for pair in level.chunks(2) {
            match pair {
                [left, right] => next.push(
                    Sha256::new()
                        .chain_update([1u8])
                        .chain_update(left)
                        .chain_update(right)
                        .finalize()
                        .into(),
                ),
                [odd] => next.push(*odd),
                _ => unreachable!("chunks(2) yields one or two"),
            }
        }
        level = next;
    }
    level[0]
}

/// The 32-byte RFC 6962 root of `leaves` (a sequence of `bytes`; anything else is a TypeError).
#[pyfunction]
fn merkle_root<'py>(py: Python<'py>, leaves: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let mut held: Vec<Bound<'py, PyBytes>> = Vec::new();
    for item in leaves.try_iter()? {
        let item = item?;
        let leaf = item.cast_into::<PyBytes>().map_err(|err| {
            PyTypeError::new_err(format!("a Merkle leaf must be bytes, got {}", err))
        })?;
        held.push(leaf);
    }
    let slices: Vec<&[u8]> = held.iter().map(|leaf| leaf.as_bytes()).collect();
    let total: usize = slices.iter().map(|leaf| leaf.len()).sum();
    // bytes are immutable and `held` keeps them alive, so hashing them without the GIL is safe.
    let digest = if total >= DETACH_BYTES {
        py.detach(|| root(&slices))
    } else {
        root(&slices)
    };
    Ok(PyBytes::new(py, &digest))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(merkle_root, m)?)?;
    Ok(())
}
