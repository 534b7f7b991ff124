//! Verify's content check (check 4) in one call: every present content part hashes to its field.
//!
//! Reference: `_check_content` in `producers/evidence/verify.py` (over `PART_FIELDS` of
//! `producers/evidence/parts.py`). This is only the success path: when every present part matches
//! it returns what the reference returns (the absent parts, as (slot, list index), and the checked
//! count); on any failure — a mismatch, a missing or odd hash field, content of the wrong kind —
//! and on anything it cannot prove equal (a subclass of dict or list, a non-`str` key where a
//! lookup happens, a value the canonical walk declines) it returns None, and the reference runs
//! and raises its own error, with its own message.
use std::ptr::addr_of_mut;

use pyo3::ffi;
use pyo3::prelude::*;
use sha2::{Digest, Sha256};

use pyo3::types::PyString;

use crate::canonical::{utf8, Declined, Writer};

/// One content field: (section, list key or None, content key, hash key, is text).
struct Slot {
    section: Vec<u8>,
    list_key: Option<Vec<u8>>,
    content: Vec<u8>,
    hash: Vec<u8>,
    hash_name: Py<PyString>,
    text: bool,
}

const PREFIX: &[u8] = b"sha256:";

/// Sealing hashes every part of a capture at once, on the recorder's worker: from this many bytes
/// (a few microseconds of hashing) the agent's thread gets the GIL meanwhile. Lower than a single
/// hash's threshold (`canonical::DETACH_BYTES`): here the worker, not the agent, waits to get it back.
const FILL_DETACH_BYTES: usize = 4096;

/// Absent parts as (slot, list index), and how many parts were checked.
type Checked = (Vec<(usize, Option<isize>)>, usize);

#[pyclass(frozen)]
pub struct PartChecker {
    slots: Vec<Slot>,
}

unsafe fn exact(obj: *mut ffi::PyObject, ty: *mut ffi::PyTypeObject) -> bool {
    ffi::Py_TYPE(obj) == ty
}

/// `dict.get(key)` of an exact dict whose keys are all exact `str` (else declined), by scanning:
/// no key's `__eq__` can run. Null when absent.
unsafe fn get(obj: *mut ffi::PyObject, key: &[u8]) -> Result<*mut ffi::PyObject, Declined> {
    let mut found = std::ptr::null_mut();
    let mut position: ffi::Py_ssize_t = 0;
    let mut name: *mut ffi::PyObject = std::ptr::null_mut();
    let mut item: *mut ffi::PyObject = std::ptr::null_mut();
    while ffi::PyDict_Next(obj, &mut position, &mut name, &mut item) != 0 {
        if !exact(name, addr_of_mut!(ffi::PyUnicode_Type)) {
            return Err(Declined);
        }
        if utf8(name)? == key {
            found = item;
        }
    }
    Ok(found)
}

/// A dict value to look into: Some for an exact dict, None for anything that is not a dict (the
/// reference skips it), declined for a dict subclass.
unsafe fn as_dict(obj: *mut ffi::PyObject) -> Result<Option<*mut ffi::PyObject>, Declined> {
    if obj.is_null() {
        Ok(None)
    } else if exact(obj, addr_of_mut!(ffi::PyDict_Type)) {
        Ok(Some(obj))
    } else if ffi::PyDict_Check(obj) != 0 {
        Err(Declined)
    } else {
        Ok(None)
    }
}

impl PartChecker {
    /// Whether the holder's present content hashes to its recorded hash; Ok(None): absent with a
    /// hash; Err: a failure or declined (the reference decides).
    unsafe fn holder(
        &self,
        slot: &Slot,
        holder: *mut ffi::PyObject,
    ) -> Result<Option<bool>, Declined> {
        let content = get(holder, &slot.content)?;
        let recorded = get(holder, &slot.hash)?;
        let none = ffi::Py_None();
        let recorded_present = !recorded.is_null() && recorded != none;
        if content.is_null() || content == none {
            return Ok(if recorded_present { None } else { Some(false) });
        }
        if !recorded_present || !exact(recorded, addr_of_mut!(ffi::PyUnicode_Type)) {
            return Err(Declined);
        }
        let computed = if slot.text {
            if !exact(content, addr_of_mut!(ffi::PyUnicode_Type)) {
                return Err(Declined);
            }
            Sha256::digest(utf8(content)?)
        } else {
            let mut writer = Writer {
                out: Vec::with_capacity(1024),
                omit_nulls: false,
            };
            writer.value(content, 0)?;
            Sha256::digest(&writer.out)
        };
        // never with the GIL released: the walk holds borrowed references
        let recorded = utf8(recorded)?;
        if recorded.strip_prefix(PREFIX) != Some(hex::encode(computed).as_bytes()) {
            return Err(Declined);
        }
        Ok(Some(true))
    }

    /// Visits every holder of every slot in check order: `visit(slot index, slot, list index,
    /// holder)`. Sections and records that are not dicts are skipped, as the reference skips them.
    unsafe fn each_holder(
        &self,
        capture: *mut ffi::PyObject,
        mut visit: impl FnMut(usize, &Slot, Option<isize>, *mut ffi::PyObject) -> Result<(), Declined>,
    ) -> Result<(), Declined> {
        let Some(capture) = as_dict(capture)? else {
            return Err(Declined);
        };
        for (index, slot) in self.slots.iter().enumerate() {
            let Some(section) = as_dict(get(capture, &slot.section)?)? else {
                continue;
            };
            match &slot.list_key {
                None => visit(index, slot, None, section)?,
                Some(list_key) => {
                    let records = get(section, list_key)?;
                    if records.is_null() {
                        continue;
                    }
                    if !exact(records, addr_of_mut!(ffi::PyList_Type)) {
                        if ffi::PyList_Check(records) != 0 {
                            return Err(Declined);
                        }
                        continue;
                    }
                    for at in 0..ffi::PyList_Size(records) {
                        if let Some(record) = as_dict(ffi::PyList_GetItem(records, at))? {
                            visit(index, slot, Some(at), record)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    unsafe fn walk(&self, capture: *mut ffi::PyObject) -> Result<Checked, Declined> {
        let mut absent = Vec::new();
        let mut checked = 0;
        self.each_holder(capture, |index, slot, at, holder| {
            match self.holder(slot, holder)? {
                None => absent.push((index, at)),
                Some(true) => checked += 1,
                Some(false) => {}
            }
            Ok(())
        })?;
        Ok((absent, checked))
    }

    /// Sealing's part loop (`seal` in `producers/evidence/seal.py`): every present part's hash,
    /// computed, checked against a supplied one, and written into its holder; an absent part's
    /// supplied hash must be well formed. Nothing is written unless every slot passes; the hashing
    /// itself runs with the GIL released (the texts are kept alive by owned references, the JSON
    /// parts are printed into buffers first).
    unsafe fn fill_parts(
        &self,
        py: Python<'_>,
        capture: *mut ffi::PyObject,
    ) -> Result<usize, Declined> {
        let mut found: Vec<Found> = Vec::new();
        self.each_holder(capture, |_, slot, _, holder| {
            let content = get(holder, &slot.content)?;
            let supplied = get(holder, &slot.hash)?;
            let none = ffi::Py_None();
            let supplied = if supplied.is_null() || supplied == none {
                None
            } else if exact(supplied, addr_of_mut!(ffi::PyUnicode_Type)) {
                Some(utf8(supplied)?)
            } else {
                return Err(Declined); // the reference names it
            };
            if content.is_null() || content == none {
                return match supplied {
                    Some(hash) if !is_hash(hash) => Err(Declined),
                    _ => Ok(()),
                };
            }
            let bytes = if slot.text {
                if !exact(content, addr_of_mut!(ffi::PyUnicode_Type)) {
                    return Err(Declined);
                }
                let text = utf8(content)?;
                // SAFETY: a str is immutable and its UTF-8 form lives as long as it does; the
                // owned reference keeps it alive while the GIL is released.
                Bytes::Text {
                    _owner: Py::from_borrowed_ptr(py, content),
                    data: text.as_ptr(),
                    len: text.len(),
                }
            } else {
                let mut writer = Writer {
                    out: Vec::with_capacity(1024),
                    omit_nulls: false,
                };
                writer.value(content, 0)?;
                Bytes::Json(writer.out)
            };
            found.push(Found {
                holder: Py::from_borrowed_ptr(py, holder),
                key: slot.hash_name.clone_ref(py),
                supplied: supplied.map(<[u8]>::to_vec),
                bytes,
            });
            Ok(())
        })?;
        let total: usize = found.iter().map(|f| f.bytes.len()).sum();
        let shared = SendFound(&found);
        let digests = if total >= FILL_DETACH_BYTES {
            py.detach(move || shared.digests())
        } else {
            shared.digests()
        };
        let mut hashes = Vec::with_capacity(found.len());
        for (part, digest) in found.iter().zip(&digests) {
            let mut text = Vec::with_capacity(PREFIX.len() + 64);
            text.extend_from_slice(PREFIX);
            text.extend_from_slice(hex::encode(digest).as_bytes());
            if part
                .supplied
                .as_deref()
                .is_some_and(|s| s != text.as_slice())
            {
                return Err(Declined); // disagrees: the reference raises, naming the field
            }
            hashes.push(text);
        }
        for (part, text) in found.iter().zip(hashes) {
            // SAFETY: ASCII, so valid UTF-8
            let value = PyString::new(py, std::str::from_utf8_unchecked(&text));
            if ffi::PyDict_SetItem(part.holder.as_ptr(), part.key.as_ptr(), value.as_ptr()) != 0 {
                ffi::PyErr_Clear();
                return Err(Declined);
            }
        }
        Ok(found.len())
    }
}

/// A part's bytes to hash: a text's UTF-8 (owned reference, pointer, length) or printed JSON.
enum Bytes {
    Text {
        _owner: Py<PyAny>,
        data: *const u8,
        len: usize,
    },
    Json(Vec<u8>),
}

impl Bytes {
    fn len(&self) -> usize {
        match self {
            Bytes::Text { len, .. } => *len,
            Bytes::Json(data) => data.len(),
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            // SAFETY: see `fill_parts`: the owned reference keeps the immutable buffer alive
            Bytes::Text { data, len, .. } => unsafe { std::slice::from_raw_parts(*data, *len) },
            Bytes::Json(data) => data,
        }
    }
}

struct Found {
    holder: Py<PyAny>,
    key: Py<PyString>,
    supplied: Option<Vec<u8>>,
    bytes: Bytes,
}

/// The parts, read (never changed, no reference count touched) while the GIL is released.
struct SendFound<'a>(&'a [Found]);
// SAFETY: only `Bytes::as_slice` runs on the other side: immutable buffers kept alive by `found`.
unsafe impl Send for SendFound<'_> {}

impl SendFound<'_> {
    fn digests(self) -> Vec<[u8; 32]> {
        self.0
            .iter()
            .map(|f| Sha256::digest(f.bytes.as_slice()).into())
            .collect()
    }
}

fn is_hash(value: &[u8]) -> bool {
    value.len() == PREFIX.len() + 64
        && value.starts_with(PREFIX)
        && value[PREFIX.len()..]
            .iter()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[pymethods]
impl PartChecker {
    /// `slots`: [(section, list key or None, content key, hash key, is text)], in check order.
    #[new]
    #[pyo3(signature = (slots, /))]
    fn new(py: Python<'_>, slots: Vec<(String, Option<String>, String, String, bool)>) -> Self {
        let slots = slots
            .into_iter()
            .map(|(section, list_key, content, hash, text)| Slot {
                section: section.into_bytes(),
                list_key: list_key.map(String::into_bytes),
                content: content.into_bytes(),
                hash_name: PyString::new(py, &hash).unbind(),
                hash: hash.into_bytes(),
                text,
            })
            .collect();
        PartChecker { slots }
    }

    /// `(absent parts as (slot, list index), checked count)` when every present part matches,
    /// else None (a failure, or declined: the reference decides and names it).
    #[pyo3(signature = (capture, /))]
    fn check(&self, capture: &Bound<'_, PyAny>) -> Option<Checked> {
        // SAFETY: the GIL is held and no Python code runs during the walk (exact built-in types
        // only), so borrowed references from the containers stay valid while they are used.
        unsafe { self.walk(capture.as_ptr()) }.ok()
    }

    /// Fill every present part's hash into `capture` (sealing; see `fill_parts`) and return how many,
    /// or None with nothing written: a failure or declined, the reference decides and names it.
    #[pyo3(signature = (capture, /))]
    fn fill(&self, py: Python<'_>, capture: &Bound<'_, PyAny>) -> Option<usize> {
        // SAFETY: as for `check`; the GIL is released only to hash buffers `fill_parts` owns or keeps alive.
        unsafe { self.fill_parts(py, capture.as_ptr()) }.ok()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PartChecker>()?;
    Ok(())
}
