//! blackbox's native evidence core (`producers.native._core`).
//!
//! Every function here has a pure-Python reference in `producers/` that it is proven
//! byte-identical against (tests/producers/native); the loader (`producers/native/__init__.py`)
//! falls back to the reference, with a warning, when this module cannot load.
use pyo3::prelude::*;

mod avro;
mod avro_decode;
mod avro_schema;
mod canonical;
mod content;
mod context;
mod index_view;
mod manifest;
mod merkle;
mod pii;
mod sign;

/// The version of the core's behaviour; the loader refuses a module built from other sources.
const ABI: u32 = 8;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ABI", ABI)?;
    avro::register(m)?;
    avro_decode::register(m)?;
    canonical::register(m)?;
    content::register(m)?;
    context::register(m)?;
    index_view::register(m)?;
    manifest::register(m)?;
    merkle::register(m)?;
    pii::register(m)?;
    sign::register(m)?;
    Ok(())
}
