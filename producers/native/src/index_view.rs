//! The index's copy of a signed manifest (`decisions.manifest_json`), as JSON text, in one call.
//!
//! Reference: `consumers/privacy/manifest.py` (`reference_index_manifest_json`): the text is
//! `json.dumps(view, ensure_ascii=False, separators=(",", ":"))` of `manifest_view(capture)`
//! (`producers/evidence/manifest.py`: content keys and v2 defaults dropped, `signatureBytes`
//! stripped, null members KEPT, insertion order KEPT), with some members of sections replaced
//! (origin ids by their keyed hashes) and some top-level members set (the full signature, the
//! sealed ids). Nothing is copied: the rules are applied while printing. The tables come from
//! `manifest_rules()` when the writer is built, so they have one source.
//!
//! Printing follows CPython's `json` encoder: strings escape `"`, `\`, `\b \f \n \r \t` and the
//! other controls as lowercase `\u00xx`, everything else as itself; floats print as `float.__repr__`
//! (shortest round trip, exponent below 1e-4 or from 1e16 on) and NaN/±inf as `NaN`/`Infinity`.
//! Anything the walk cannot prove equal — a subclass of a built-in, a non-`str` key, an int beyond
//! i64, a lone surrogate, nesting deeper than `MAX_DEPTH` — declines (None) and the reference runs,
//! raising its own errors.
use std::os::raw::c_int;
use std::ptr::addr_of_mut;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::avro;
use crate::canonical::{utf8, write_string, Declined};
use crate::manifest::{
    contains, defaults, exact, is_default, is_dict, is_list, strip_rules, text, Default, Strip,
};

type Walk = Result<(), Declined>;

/// Deeper values go to the reference (whose own limit is the recursion limit, far above this).
const MAX_DEPTH: usize = 128;

/// What `write_dict` drops: a `Strip`'s keys and defaults, or a record's keys.
#[derive(Clone, Copy)]
struct Rules<'a> {
    drop: &'a [Vec<u8>],
    defaults: &'a [(Vec<u8>, Default)],
    lists: &'a [(Vec<u8>, Vec<Vec<u8>>)],
}

impl Strip {
    fn rules(&self) -> Rules<'_> {
        Rules {
            drop: &self.drop,
            defaults: &self.defaults,
            lists: &self.lists,
        }
    }
}

/// Members of one section replaced by text: (section, [(key, new text)]).
type Replace = Vec<(Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>)>;

/// Writes the index view's JSON text; see the module doc.
#[pyclass(frozen)]
pub struct IndexViewWriter {
    top_defaults: Vec<(Vec<u8>, Default)>,
    strips: Vec<Strip>,
}

unsafe fn is_str(obj: *mut ffi::PyObject) -> bool {
    exact(obj, addr_of_mut!(ffi::PyUnicode_Type))
}

/// The members of an exact dict in insertion order; a key that is not an exact `str` declines.
unsafe fn members<'a>(
    obj: *mut ffi::PyObject,
) -> Result<Vec<(&'a [u8], *mut ffi::PyObject)>, Declined> {
    let mut out = Vec::with_capacity(ffi::PyDict_Size(obj) as usize);
    let mut position: ffi::Py_ssize_t = 0;
    let mut key: *mut ffi::PyObject = std::ptr::null_mut();
    let mut item: *mut ffi::PyObject = std::ptr::null_mut();
    while ffi::PyDict_Next(obj, &mut position, &mut key, &mut item) != 0 {
        if !is_str(key) {
            return Err(Declined);
        }
        out.push((utf8(key)?, item));
    }
    Ok(out)
}

/// `float.__repr__` as `json` prints it: NaN and the infinities as `NaN`/`Infinity` (the view is
/// printed with `allow_nan` on); every finite double as the Avro writer's JSON text prints it.
fn write_float(out: &mut Vec<u8>, f: f64) {
    if f.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if f.is_infinite() {
        out.extend_from_slice(if f > 0.0 { b"Infinity" } else { b"-Infinity" });
    } else {
        let _ = avro::write_float(out, f); // finite: always written
    }
}

/// Any value, as `json.dumps` prints it (exact built-in types only).
unsafe fn write_value(out: &mut Vec<u8>, obj: *mut ffi::PyObject, depth: usize) -> Walk {
    let ty = ffi::Py_TYPE(obj);
    if ty == addr_of_mut!(ffi::PyUnicode_Type) {
        write_string(out, utf8(obj)?);
    } else if ty == addr_of_mut!(ffi::PyDict_Type) {
        write_dict(out, obj, None, None, depth)?;
    } else if ty == addr_of_mut!(ffi::PyList_Type) || ty == addr_of_mut!(ffi::PyTuple_Type) {
        if depth >= MAX_DEPTH {
            return Err(Declined);
        }
        let list = ty == addr_of_mut!(ffi::PyList_Type);
        let size = if list {
            ffi::PyList_Size(obj)
        } else {
            ffi::PyTuple_Size(obj)
        };
        out.push(b'[');
        for index in 0..size {
            if index > 0 {
                out.push(b',');
            }
            let item = if list {
                ffi::PyList_GetItem(obj, index)
            } else {
                ffi::PyTuple_GetItem(obj, index)
            };
            write_value(out, item, depth + 1)?;
        }
        out.push(b']');
    } else if ty == addr_of_mut!(ffi::PyLong_Type) {
        let mut overflow: c_int = 0;
        let n = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
        if overflow != 0 || (n == -1 && !ffi::PyErr_Occurred().is_null()) {
            ffi::PyErr_Clear();
            return Err(Declined);
        }
        out.extend_from_slice(n.to_string().as_bytes());
    } else if ty == addr_of_mut!(ffi::PyFloat_Type) {
        write_float(out, ffi::PyFloat_AsDouble(obj));
    } else if obj == ffi::Py_None() {
        out.extend_from_slice(b"null");
    } else if obj == ffi::Py_True() {
        out.extend_from_slice(b"true");
    } else if obj == ffi::Py_False() {
        out.extend_from_slice(b"false");
    } else {
        return Err(Declined);
    }
    Ok(())
}

/// An exact dict in insertion order, stripped by `strip` (its dropped keys, defaults and record
/// lists) and with `replace`d members printed as their new text.
unsafe fn write_dict(
    out: &mut Vec<u8>,
    obj: *mut ffi::PyObject,
    strip: Option<Rules<'_>>,
    replace: Option<&[(Vec<u8>, Vec<u8>)]>,
    depth: usize,
) -> Walk {
    if depth >= MAX_DEPTH {
        return Err(Declined);
    }
    out.push(b'{');
    let mut first = true;
    for (key, item) in members(obj)? {
        if let Some(strip) = strip {
            if contains(strip.drop, key) || is_default(strip.defaults, key, item) {
                continue;
            }
        }
        if !first {
            out.push(b',');
        }
        first = false;
        write_string(out, key);
        out.push(b':');
        if let Some((_, new)) = replace.and_then(|r| r.iter().find(|(name, _)| name == key)) {
            write_string(out, new);
            continue;
        }
        let records = strip.and_then(|s| s.lists.iter().find(|(name, _)| name == key));
        match records {
            Some((_, drop)) if is_list(item) => write_records(out, drop, item, depth + 1)?,
            Some(_) if ffi::PyList_Check(item) != 0 => return Err(Declined),
            _ => write_value(out, item, depth + 1)?,
        }
    }
    out.push(b'}');
    Ok(())
}

/// A record list: each exact-dict record without its `drop` keys; other items as they are.
unsafe fn write_records(
    out: &mut Vec<u8>,
    drop: &[Vec<u8>],
    list: *mut ffi::PyObject,
    depth: usize,
) -> Walk {
    if depth >= MAX_DEPTH {
        return Err(Declined);
    }
    out.push(b'[');
    for index in 0..ffi::PyList_Size(list) {
        if index > 0 {
            out.push(b',');
        }
        let record = ffi::PyList_GetItem(list, index);
        if is_dict(record) {
            let only = Rules {
                drop,
                defaults: &[],
                lists: &[],
            };
            write_dict(out, record, Some(only), None, depth + 1)?;
        } else if ffi::PyDict_Check(record) != 0 {
            return Err(Declined);
        } else {
            write_value(out, record, depth + 1)?;
        }
    }
    out.push(b']');
    Ok(())
}

impl IndexViewWriter {
    unsafe fn build(
        &self,
        capture: *mut ffi::PyObject,
        replace: &Replace,
        tail: &[(Vec<u8>, *mut ffi::PyObject)],
    ) -> Result<Vec<u8>, Declined> {
        if !is_dict(capture) {
            return Err(Declined);
        }
        let mut out = Vec::with_capacity(8 * 1024);
        let mut used = vec![false; tail.len()];
        out.push(b'{');
        let mut first = true;
        for (key, item) in members(capture)? {
            if is_default(&self.top_defaults, key, item) {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            write_string(&mut out, key);
            out.push(b':');
            if let Some(at) = tail.iter().position(|(name, _)| name == key) {
                used[at] = true;
                write_value(&mut out, tail[at].1, 1)?;
                continue;
            }
            let strip = self
                .strips
                .iter()
                .find(|strip| strip.name == key)
                .map(Strip::rules);
            let fields = replace
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, fields)| fields.as_slice());
            if is_dict(item) {
                write_dict(&mut out, item, strip, fields, 1)?;
            } else if ffi::PyDict_Check(item) != 0 {
                return Err(Declined); // a dict subclass: the reference decides
            } else {
                write_value(&mut out, item, 1)?;
            }
        }
        for ((key, item), used) in tail.iter().zip(used) {
            if !used {
                if !first {
                    out.push(b',');
                }
                first = false;
                write_string(&mut out, key);
                out.push(b':');
                write_value(&mut out, *item, 1)?;
            }
        }
        out.push(b'}');
        Ok(out)
    }
}

#[pymethods]
impl IndexViewWriter {
    /// `top_defaults`: {key: default}; `strips`: [(name, dropped keys, {list key: dropped record
    /// keys}, {key: default})] — `manifest_rules()`.
    #[new]
    #[pyo3(signature = (top_defaults, strips, /))]
    fn new(top_defaults: &Bound<'_, PyAny>, strips: &Bound<'_, PyAny>) -> PyResult<Self> {
        let parsed = strip_rules(strips)?;
        Ok(IndexViewWriter {
            top_defaults: defaults(top_defaults)?,
            strips: parsed,
        })
    }

    /// The JSON text of `manifest_view(capture)` with `replace` ({section: {key: text}}: members
    /// of a dict section printed as that text) and `tail` ([(key, value)]: top-level members set
    /// in this order — in place when the view has the key, else appended), or None (declined).
    #[pyo3(signature = (capture, replace, tail, /))]
    fn json<'py>(
        &self,
        py: Python<'py>,
        capture: &Bound<'py, PyAny>,
        replace: &Bound<'py, PyDict>,
        tail: Vec<(String, Bound<'py, PyAny>)>,
    ) -> PyResult<Option<Bound<'py, PyString>>> {
        let mut fields: Replace = Vec::new();
        for (section, members) in replace.iter() {
            let mut pairs = Vec::new();
            for (key, value) in members.cast::<PyDict>()?.iter() {
                pairs.push((text(&key)?, text(&value)?));
            }
            fields.push((text(&section)?, pairs));
        }
        let tail: Vec<(Vec<u8>, *mut ffi::PyObject)> = tail
            .iter()
            .map(|(key, value)| (key.as_bytes().to_vec(), value.as_ptr()))
            .collect();
        // SAFETY: the GIL is held for the whole walk and no Python code runs during it (exact
        // built-in types only), so borrowed references from the containers stay valid.
        let Ok(out) = (unsafe { self.build(capture.as_ptr(), &fields, &tail) }) else {
            return Ok(None);
        };
        // every piece written is valid UTF-8 (str contents, ASCII punctuation and numbers)
        let text = std::str::from_utf8(&out).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Some(PyString::new(py, text)))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<IndexViewWriter>()?;
    Ok(())
}
