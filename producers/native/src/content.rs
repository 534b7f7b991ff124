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

use crate::canonical::{utf8, Declined, Writer};

/// One content field: (section, list key or None, content key, hash key, is text).
struct Slot {
    section: Vec<u8>,
    list_key: Option<Vec<u8>>,
    content: Vec<u8>,
    hash: Vec<u8>,
    text: bool,
}

const PREFIX: &[u8] = b"sha256:";

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

    unsafe fn walk(&self, capture: *mut ffi::PyObject) -> Result<Checked, Declined> {
        let Some(capture) = as_dict(capture)? else {
            return Err(Declined);
        };
        let mut absent = Vec::new();
        let mut checked = 0;
        for (index, slot) in self.slots.iter().enumerate() {
            let Some(section) = as_dict(get(capture, &slot.section)?)? else {
                continue;
            };
            let mut tally = |at: Option<isize>, outcome: Option<bool>| match outcome {
                None => absent.push((index, at)),
                Some(true) => checked += 1,
                Some(false) => {}
            };
            match &slot.list_key {
                None => tally(None, self.holder(slot, section)?),
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
                            tally(Some(at), self.holder(slot, record)?);
                        }
                    }
                }
            }
        }
        Ok((absent, checked))
    }
}

#[pymethods]
impl PartChecker {
    /// `slots`: [(section, list key or None, content key, hash key, is text)], in check order.
    #[new]
    #[pyo3(signature = (slots, /))]
    fn new(slots: Vec<(String, Option<String>, String, String, bool)>) -> Self {
        let slots = slots
            .into_iter()
            .map(|(section, list_key, content, hash, text)| Slot {
                section: section.into_bytes(),
                list_key: list_key.map(String::into_bytes),
                content: content.into_bytes(),
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
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PartChecker>()?;
    Ok(())
}
