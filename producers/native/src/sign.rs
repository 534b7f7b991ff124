//! ed25519 signing off the GIL: the agent's thread runs while the recorder's worker signs.
//!
//! Reference: `Signer.sign` in `producers/evidence/keys.py` (`cryptography`'s ed25519). Ed25519
//! signatures are deterministic (RFC 8032 §5.1.6), so both give the same 64 bytes for the same seed
//! and message; the Python side checks that on a probe message before it uses this key at all.
use ed25519_dalek::{Signer as _, SigningKey as DalekKey};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// One ed25519 private key (the 32-byte RFC 8032 seed); zeroed when dropped.
#[pyclass(frozen)]
pub struct SigningKey {
    key: DalekKey,
}

#[pymethods]
impl SigningKey {
    #[new]
    #[pyo3(signature = (seed, /))]
    fn new(seed: &[u8]) -> PyResult<Self> {
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| PyValueError::new_err("an ed25519 seed is 32 bytes"))?;
        Ok(SigningKey {
            key: DalekKey::from_bytes(&seed),
        })
    }

    /// The raw 32-byte public key.
    fn public_raw<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.key.verifying_key().as_bytes())
    }

    /// The 64-byte signature of `data`, computed with the GIL released (the bytes are copied first,
    /// so nothing the agent's threads do can change what is signed).
    #[pyo3(signature = (data, /))]
    fn sign<'py>(&self, py: Python<'py>, data: &[u8]) -> Bound<'py, PyBytes> {
        let message = data.to_vec();
        let signature = py.detach(|| self.key.sign(&message).to_bytes());
        PyBytes::new(py, &signature)
    }

    fn __repr__(&self) -> &'static str {
        "SigningKey(<ed25519>)" // never the key
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SigningKey>()?;
    Ok(())
}
