//! The signed manifest's bytes and the working-set leaves of a capture, in one call.
//!
//! Reference: `producers/evidence/payload.py` (`python_signing_payload`): the payload is RFC 8785
//! of `manifest_view(capture)` with null members omitted (`producers/evidence/manifest.py`), the
//! leaves are `working_set_leaves` (`producers/evidence/merkle.py`). Nothing is copied: the
//! manifest's rules (drop content keys, drop v2 defaults, strip `signatureBytes`) are applied while
//! printing, and each value is printed by the canonical walk (`canonical.rs`). The tables (which
//! keys are content, which defaults) come from Python when the writer is built, so they have one
//! source. Anything the walk cannot prove equal — a subclass of dict or list, a non-`str` key
//! anywhere the manifest's rules look, a position beyond i64 — declines (None) and the reference
//! runs, raising its own errors.
use std::os::raw::c_int;
use std::ptr::addr_of_mut;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use crate::canonical::{utf16_order, utf8, write_string, Declined, Writer};
use crate::merkle;

/// A member the manifest drops while it holds this value (`_is_default`: same exact type, equal).
pub(crate) enum Default {
    Str(Vec<u8>),
    EmptyList,
}

/// One dict the manifest strips: its name at the top level, the keys it drops, its record lists
/// (key → the keys each record drops) and its defaults.
pub(crate) struct Strip {
    pub(crate) name: Vec<u8>,
    pub(crate) drop: Vec<Vec<u8>>,
    pub(crate) lists: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
    pub(crate) defaults: Vec<(Vec<u8>, Default)>,
}

/// What a manifest member prints.
enum Item<'w> {
    Raw(*mut ffi::PyObject),
    Stripped(&'w Strip, *mut ffi::PyObject),
    Records(&'w [Vec<u8>], *mut ffi::PyObject),
    Text(&'w str),
}

type Members<'a, T> = Vec<(&'a [u8], T)>;
/// (payload, leaves in position order or None, root when filled)
type Built = (Vec<u8>, Option<Vec<Vec<u8>>>, Option<String>);
type PyBuilt<'py> = (
    Bound<'py, PyBytes>,
    Option<Vec<Bound<'py, PyBytes>>>,
    Option<String>,
);

/// Builds `(payload, leaves, root)` for a capture; see the module doc.
#[pyclass(frozen)]
pub struct ManifestWriter {
    top_defaults: Vec<(Vec<u8>, Default)>,
    strips: Vec<Strip>,
    memory: Vec<u8>,
    entries: Vec<u8>,
    position: Vec<u8>,
    root_key: Vec<u8>,
    /// the leaf keys, in RFC 8785 order
    leaf_keys: Vec<Vec<u8>>,
}

pub(crate) fn text(value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    Ok(value.cast::<PyString>()?.to_str()?.as_bytes().to_vec())
}

pub(crate) fn texts(value: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    value.try_iter()?.map(|item| text(&item?)).collect()
}

pub(crate) fn defaults(value: &Bound<'_, PyAny>) -> PyResult<Vec<(Vec<u8>, Default)>> {
    let mut out = Vec::new();
    for (key, item) in value.cast::<PyDict>()?.iter() {
        let default = if item.is_exact_instance_of::<PyString>() {
            Default::Str(text(&item)?)
        } else if item.is_exact_instance_of::<PyList>() && item.len()? == 0 {
            Default::EmptyList
        } else {
            return Err(PyValueError::new_err(format!(
                "a manifest default must be a str or [], got {item}"
            )));
        };
        out.push((text(&key)?, default));
    }
    Ok(out)
}

/// `manifest_rules()`'s strips: [(name, dropped keys, {list key: dropped record keys}, {key: default})].
pub(crate) fn strip_rules(strips: &Bound<'_, PyAny>) -> PyResult<Vec<Strip>> {
    let mut parsed = Vec::new();
    for strip in strips.try_iter()? {
        let (name, drop, lists, section_defaults): (
            Bound<'_, PyAny>,
            Bound<'_, PyAny>,
            Bound<'_, PyAny>,
            Bound<'_, PyAny>,
        ) = strip?.extract()?;
        let mut record_lists = Vec::new();
        for (key, record_drop) in lists.cast::<PyDict>()?.iter() {
            record_lists.push((text(&key)?, texts(&record_drop)?));
        }
        parsed.push(Strip {
            name: text(&name)?,
            drop: texts(&drop)?,
            lists: record_lists,
            defaults: defaults(&section_defaults)?,
        });
    }
    Ok(parsed)
}

pub(crate) unsafe fn exact(obj: *mut ffi::PyObject, ty: *mut ffi::PyTypeObject) -> bool {
    ffi::Py_TYPE(obj) == ty
}

pub(crate) unsafe fn is_dict(obj: *mut ffi::PyObject) -> bool {
    exact(obj, addr_of_mut!(ffi::PyDict_Type))
}

pub(crate) unsafe fn is_list(obj: *mut ffi::PyObject) -> bool {
    exact(obj, addr_of_mut!(ffi::PyList_Type))
}

/// The members of an exact dict; a key that is not an exact `str` (or has a lone surrogate) declines.
unsafe fn members<'a>(
    obj: *mut ffi::PyObject,
) -> Result<Members<'a, *mut ffi::PyObject>, Declined> {
    let mut out = Vec::with_capacity(ffi::PyDict_Size(obj) as usize);
    let mut position: ffi::Py_ssize_t = 0;
    let mut key: *mut ffi::PyObject = std::ptr::null_mut();
    let mut item: *mut ffi::PyObject = std::ptr::null_mut();
    while ffi::PyDict_Next(obj, &mut position, &mut key, &mut item) != 0 {
        if !exact(key, addr_of_mut!(ffi::PyUnicode_Type)) {
            return Err(Declined);
        }
        out.push((utf8(key)?, item));
    }
    Ok(out)
}

fn find(members: &Members<'_, *mut ffi::PyObject>, key: &[u8]) -> Option<*mut ffi::PyObject> {
    members
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(_, item)| *item)
}

pub(crate) fn contains(keys: &[Vec<u8>], key: &[u8]) -> bool {
    keys.iter().any(|name| name == key)
}

pub(crate) unsafe fn is_default(
    defaults: &[(Vec<u8>, Default)],
    key: &[u8],
    item: *mut ffi::PyObject,
) -> bool {
    let Some((_, default)) = defaults.iter().find(|(name, _)| name == key) else {
        return false;
    };
    match default {
        Default::Str(expected) => {
            exact(item, addr_of_mut!(ffi::PyUnicode_Type))
                && utf8(item).is_ok_and(|text| text == expected.as_slice())
        }
        Default::EmptyList => is_list(item) && ffi::PyList_Size(item) == 0,
    }
}

/// RFC 8785 member order (UTF-16 code units; UTF-8 byte order when no key is beyond U+FFFF).
fn sort<T>(members: &mut Members<'_, T>) {
    if members
        .iter()
        .any(|(key, _)| key.iter().any(|&byte| byte >= 0xF0))
    {
        members.sort_unstable_by(|a, b| utf16_order(a.0, b.0));
    } else {
        members.sort_unstable_by(|a, b| a.0.cmp(b.0));
    }
}

fn write_members<'a, T>(
    writer: &mut Writer,
    mut members: Members<'a, T>,
    mut each: impl FnMut(&mut Writer, T) -> Result<(), Declined>,
) -> Result<(), Declined> {
    sort(&mut members);
    writer.out.push(b'{');
    for (index, (key, item)) in members.into_iter().enumerate() {
        if index > 0 {
            writer.out.push(b',');
        }
        write_string(&mut writer.out, key);
        writer.out.push(b':');
        each(writer, item)?;
    }
    writer.out.push(b'}');
    Ok(())
}

impl ManifestWriter {
    /// Leaves in `contextPosition` order, or None when the entries have no valid order (the
    /// reference's `position_order` raises there); Err: declined.
    unsafe fn leaves(
        &self,
        entries: &[*mut ffi::PyObject],
    ) -> Result<Option<Vec<Vec<u8>>>, Declined> {
        let mut keyed: Vec<(i64, usize, Members<'_, *mut ffi::PyObject>)> =
            Vec::with_capacity(entries.len());
        let mut ordered = true;
        for (index, &entry) in entries.iter().enumerate() {
            if !is_dict(entry) {
                if ffi::PyDict_Check(entry) != 0 {
                    return Err(Declined); // a dict subclass: the reference decides
                }
                ordered = false; // not an object (or a Mapping the walk declines below)
                continue;
            }
            let fields = members(entry)?;
            match find(&fields, &self.position) {
                Some(position) if exact(position, addr_of_mut!(ffi::PyLong_Type)) => {
                    let mut overflow: c_int = 0;
                    let n = ffi::PyLong_AsLongLongAndOverflow(position, &mut overflow);
                    if overflow != 0 || (n == -1 && !ffi::PyErr_Occurred().is_null()) {
                        ffi::PyErr_Clear();
                        return Err(Declined);
                    }
                    keyed.push((n, index, fields));
                }
                _ => ordered = false,
            }
        }
        if !ordered {
            return Ok(None);
        }
        keyed.sort_unstable_by_key(|(position, index, _)| (*position, *index));
        if keyed.windows(2).any(|pair| pair[0].0 == pair[1].0) {
            return Ok(None);
        }
        let mut leaves = Vec::with_capacity(keyed.len());
        for (_, _, fields) in keyed {
            let mut writer = Writer {
                out: Vec::with_capacity(256),
                omit_nulls: true,
            };
            writer.out.push(b'{');
            let mut first = true;
            for key in &self.leaf_keys {
                let Some(item) = find(&fields, key) else {
                    continue;
                };
                if item == ffi::Py_None() {
                    continue;
                }
                if !first {
                    writer.out.push(b',');
                }
                first = false;
                write_string(&mut writer.out, key);
                writer.out.push(b':');
                writer.value(item, 1)?;
            }
            writer.out.push(b'}');
            leaves.push(writer.out);
        }
        Ok(Some(leaves))
    }

    /// A stripped dict (a section, the signature, or a record when `strip` has only `drop`).
    unsafe fn stripped(
        &self,
        writer: &mut Writer,
        strip: &Strip,
        obj: *mut ffi::PyObject,
        depth: usize,
        root: Option<&str>,
    ) -> Result<(), Declined> {
        let mut kept: Members<'_, Item<'_>> = Vec::new();
        for (key, item) in members(obj)? {
            if item == ffi::Py_None()
                || contains(&strip.drop, key)
                || is_default(&strip.defaults, key, item)
                || (root.is_some() && key == self.root_key.as_slice())
            {
                continue;
            }
            let records = strip.lists.iter().find(|(name, _)| name == key);
            kept.push((
                key,
                match records {
                    Some((_, drop)) if is_list(item) => Item::Records(drop, item),
                    Some(_) if ffi::PyList_Check(item) != 0 => return Err(Declined),
                    _ => Item::Raw(item),
                },
            ));
        }
        if let Some(root) = root {
            kept.push((self.root_key.as_slice(), Item::Text(root)));
        }
        write_members(writer, kept, |writer, item| {
            self.item(writer, item, depth + 1)
        })
    }

    unsafe fn item(
        &self,
        writer: &mut Writer,
        item: Item<'_>,
        depth: usize,
    ) -> Result<(), Declined> {
        match item {
            Item::Raw(obj) => writer.value(obj, depth),
            Item::Stripped(strip, obj) => self.stripped(writer, strip, obj, depth, None),
            Item::Text(text) => {
                write_string(&mut writer.out, text.as_bytes());
                Ok(())
            }
            Item::Records(drop, list) => {
                writer.out.push(b'[');
                for index in 0..ffi::PyList_Size(list) {
                    if index > 0 {
                        writer.out.push(b',');
                    }
                    let record = ffi::PyList_GetItem(list, index);
                    if is_dict(record) {
                        let mut kept: Members<'_, *mut ffi::PyObject> = Vec::new();
                        for (key, value) in members(record)? {
                            if value != ffi::Py_None() && !contains(drop, key) {
                                kept.push((key, value));
                            }
                        }
                        write_members(writer, kept, |writer, value| {
                            writer.value(value, depth + 2)
                        })?;
                    } else if ffi::PyDict_Check(record) != 0 {
                        return Err(Declined);
                    } else {
                        writer.value(record, depth + 1)?;
                    }
                }
                writer.out.push(b']');
                Ok(())
            }
        }
    }

    unsafe fn build(
        &self,
        capture: *mut ffi::PyObject,
        fill_root: bool,
    ) -> Result<Built, Declined> {
        if !is_dict(capture) {
            return Err(Declined);
        }
        let top = members(capture)?;
        let memory = find(&top, &self.memory).filter(|&memory| memory != ffi::Py_None());
        let mut entries: Vec<*mut ffi::PyObject> = Vec::new();
        if let Some(memory) = memory {
            if is_dict(memory) {
                if let Some(list) = find(&members(memory)?, &self.entries) {
                    if is_list(list) {
                        entries = (0..ffi::PyList_Size(list))
                            .map(|i| ffi::PyList_GetItem(list, i))
                            .collect();
                    } else if ffi::PyList_Check(list) != 0 {
                        return Err(Declined);
                    }
                }
            } else if ffi::PyDict_Check(memory) != 0 {
                return Err(Declined);
            }
        }
        let leaves = self.leaves(&entries)?;
        let root = match (&leaves, memory) {
            (Some(leaves), Some(memory)) if fill_root && is_dict(memory) => {
                let slices: Vec<&[u8]> = leaves.iter().map(Vec::as_slice).collect();
                Some(format!("sha256:{}", hex::encode(merkle::root(&slices))))
            }
            _ => None,
        };
        let mut kept: Members<'_, Item<'_>> = Vec::with_capacity(top.len());
        for (key, item) in top {
            if item == ffi::Py_None() || is_default(&self.top_defaults, key, item) {
                continue;
            }
            let strip = self.strips.iter().find(|strip| strip.name == key);
            kept.push((
                key,
                match strip {
                    Some(strip) if is_dict(item) => Item::Stripped(strip, item),
                    Some(_) if ffi::PyDict_Check(item) != 0 => return Err(Declined),
                    _ => Item::Raw(item),
                },
            ));
        }
        let mut writer = Writer {
            out: Vec::with_capacity(8 * 1024),
            omit_nulls: true,
        };
        let root_text = root.as_deref();
        write_members(&mut writer, kept, |writer, item| match item {
            Item::Stripped(strip, obj) if root_text.is_some() && strip.name == self.memory => {
                self.stripped(writer, strip, obj, 1, root_text)
            }
            item => self.item(writer, item, 1),
        })?;
        Ok((writer.out, leaves, root))
    }
}

#[pymethods]
impl ManifestWriter {
    /// `top_defaults`: {key: default}; `strips`: [(name, dropped keys, {list key: dropped record
    /// keys}, {key: default})]; `leaf_keys`; `memory`: the names of memoryState,
    /// workingSetEntries, contextPosition and contextSetHash.
    #[new]
    #[pyo3(signature = (top_defaults, strips, leaf_keys, memory, /))]
    fn new(
        top_defaults: &Bound<'_, PyAny>,
        strips: &Bound<'_, PyAny>,
        leaf_keys: &Bound<'_, PyAny>,
        memory: (String, String, String, String),
    ) -> PyResult<Self> {
        let parsed = strip_rules(strips)?;
        let mut leaf_keys = texts(leaf_keys)?;
        leaf_keys.sort_unstable_by(|a, b| utf16_order(a, b));
        Ok(ManifestWriter {
            top_defaults: defaults(top_defaults)?,
            strips: parsed,
            memory: memory.0.into_bytes(),
            entries: memory.1.into_bytes(),
            position: memory.2.into_bytes(),
            root_key: memory.3.into_bytes(),
            leaf_keys,
        })
    }

    /// `(payload, leaves, root)` of `capture`, or None (declined: the reference decides).
    /// `leaves` is None when the entries have no valid order; `root` (`sha256:<hex>`) is set only
    /// with `fill_root` and a dict `memoryState`, and then is the payload's `contextSetHash`.
    #[pyo3(signature = (capture, fill_root, /))]
    fn payload<'py>(
        &self,
        py: Python<'py>,
        capture: &Bound<'py, PyAny>,
        fill_root: bool,
    ) -> Option<PyBuilt<'py>> {
        // SAFETY: the GIL is held for the whole walk and no Python code runs during it (exact
        // built-in types only), so borrowed references from the containers stay valid.
        let (payload, leaves, root) = unsafe { self.build(capture.as_ptr(), fill_root) }.ok()?;
        let leaves =
            leaves.map(|leaves| leaves.iter().map(|leaf| PyBytes::new(py, leaf)).collect());
        Some((PyBytes::new(py, &payload), leaves, root))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ManifestWriter>()?;
    Ok(())
}
