//! RFC 8785 (JCS) canonical JSON of Python values, and the `sha256:<hex>` part hashes.
//!
//! Reference: `producers/evidence/canonical.py` (the `rfc8785` package's bytes). The walk takes
//! only what it can print exactly as the reference does — `dict` with `str` keys, `list`, `tuple`,
//! `str` without lone surrogates, `int` within ±(2**53 − 1), finite `float`, `bool`, `None`, exact
//! types only, nested at most `MAX_DEPTH` deep — and *declines* (returns None) on anything else, so
//! the reference runs and raises its own error (with the path it names). Never a different error,
//! never different bytes.
//!
//! Numbers: ECMAScript `Number.prototype.toString` (RFC 8785 §3.2.2.3) is what `ryu-js` prints;
//! `-0.0` prints `0`, integral floats print as integers, as the reference does.
//! Keys are sorted by UTF-16 code units (RFC 8785 §3.2.3).
use std::cmp::Ordering;
use std::os::raw::c_int;
use std::ptr::addr_of_mut;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sha2::{Digest, Sha256};

/// Deeper values go to the reference. The reference's own limit is Python's recursion limit (its
/// fast path spends two frames per level: ~490 levels from an empty stack), so any value up to
/// this depth is one the reference also prints, wherever it is called from.
const MAX_DEPTH: usize = 128;

/// Hash buffers at least this long with the GIL released (the agent's thread runs meanwhile); for
/// shorter ones the release and re-acquisition cost more than they free.
pub(crate) const DETACH_BYTES: usize = 32 * 1024;

const HASH_PREFIX: &str = "sha256:";
const SAFE_INT: i64 = (1 << 53) - 1;

/// The value has no canonical form this walk can prove equal to the reference's.
pub(crate) struct Declined;

type Walk = Result<(), Declined>;

pub(crate) struct Writer {
    pub(crate) out: Vec<u8>,
    pub(crate) omit_nulls: bool,
}

impl Writer {
    /// SAFETY (every `unsafe` below): the GIL is held for the whole walk and no Python code runs
    /// during it (exact built-in types only: no `__hash__`, `__eq__` or `__str__` is called), so
    /// borrowed references from the containers stay valid while they are used.
    pub(crate) fn value(&mut self, obj: *mut ffi::PyObject, depth: usize) -> Walk {
        unsafe {
            let ty = ffi::Py_TYPE(obj);
            if ty == addr_of_mut!(ffi::PyUnicode_Type) {
                self.string(obj)
            } else if ty == addr_of_mut!(ffi::PyDict_Type) {
                self.dict(obj, depth)
            } else if ty == addr_of_mut!(ffi::PyList_Type) {
                self.sequence(obj, depth, ffi::PyList_Size, ffi::PyList_GetItem)
            } else if ty == addr_of_mut!(ffi::PyLong_Type) {
                self.int(obj)
            } else if ty == addr_of_mut!(ffi::PyFloat_Type) {
                self.float(ffi::PyFloat_AsDouble(obj))
            } else if obj == ffi::Py_None() {
                self.out.extend_from_slice(b"null");
                Ok(())
            } else if ty == addr_of_mut!(ffi::PyBool_Type) {
                let text: &[u8] = if obj == ffi::Py_True() {
                    b"true"
                } else {
                    b"false"
                };
                self.out.extend_from_slice(text);
                Ok(())
            } else if ty == addr_of_mut!(ffi::PyTuple_Type) {
                self.sequence(obj, depth, ffi::PyTuple_Size, ffi::PyTuple_GetItem)
            } else {
                Err(Declined)
            }
        }
    }

    unsafe fn string(&mut self, obj: *mut ffi::PyObject) -> Walk {
        let text = utf8(obj)?;
        write_string(&mut self.out, text);
        Ok(())
    }

    unsafe fn int(&mut self, obj: *mut ffi::PyObject) -> Walk {
        let mut overflow: c_int = 0;
        let n = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
        if n == -1 && !ffi::PyErr_Occurred().is_null() {
            ffi::PyErr_Clear(); // not expected for an exact int; the reference decides
            return Err(Declined);
        }
        if overflow != 0 || !(-SAFE_INT..=SAFE_INT).contains(&n) {
            return Err(Declined); // the reference refuses it, naming the member
        }
        write_int(&mut self.out, n);
        Ok(())
    }

    fn float(&mut self, f: f64) -> Walk {
        if !f.is_finite() {
            return Err(Declined);
        }
        if f == 0.0 {
            self.out.push(b'0'); // -0.0 too
        } else {
            let mut buffer = ryu_js::Buffer::new();
            self.out
                .extend_from_slice(buffer.format_finite(f).as_bytes());
        }
        Ok(())
    }

    unsafe fn sequence(
        &mut self,
        obj: *mut ffi::PyObject,
        depth: usize,
        size: unsafe extern "C" fn(*mut ffi::PyObject) -> ffi::Py_ssize_t,
        item: unsafe extern "C" fn(*mut ffi::PyObject, ffi::Py_ssize_t) -> *mut ffi::PyObject,
    ) -> Walk {
        if depth >= MAX_DEPTH {
            return Err(Declined);
        }
        self.out.push(b'[');
        for index in 0..size(obj) {
            if index > 0 {
                self.out.push(b',');
            }
            self.value(item(obj, index), depth + 1)?;
        }
        self.out.push(b']');
        Ok(())
    }

    unsafe fn dict(&mut self, obj: *mut ffi::PyObject, depth: usize) -> Walk {
        if depth >= MAX_DEPTH {
            return Err(Declined);
        }
        let mut members: Vec<(&[u8], *mut ffi::PyObject)> =
            Vec::with_capacity(ffi::PyDict_Size(obj) as usize);
        let mut astral = false;
        let mut position: ffi::Py_ssize_t = 0;
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut item: *mut ffi::PyObject = std::ptr::null_mut();
        while ffi::PyDict_Next(obj, &mut position, &mut key, &mut item) != 0 {
            if self.omit_nulls && item == ffi::Py_None() {
                continue; // before looking at the key: the reference drops the member, whatever its key
            }
            if ffi::Py_TYPE(key) != addr_of_mut!(ffi::PyUnicode_Type) {
                return Err(Declined);
            }
            let text = utf8(key)?;
            // A 4-byte UTF-8 sequence (lead byte >= 0xF0) is a character beyond U+FFFF.
            astral = astral || text.iter().any(|&byte| byte >= 0xF0);
            members.push((text, item));
        }
        if astral {
            members.sort_unstable_by(|a, b| utf16_order(a.0, b.0));
        } else {
            // Without astral characters, UTF-8 byte order is code point order, which is UTF-16 order.
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
        }
        self.out.push(b'{');
        for (index, (text, item)) in members.iter().enumerate() {
            if index > 0 {
                self.out.push(b',');
            }
            write_string(&mut self.out, text);
            self.out.push(b':');
            self.value(*item, depth + 1)?;
        }
        self.out.push(b'}');
        Ok(())
    }
}

/// The UTF-8 bytes of an exact `str` (valid as long as the str lives); a lone surrogate declines.
pub(crate) unsafe fn utf8<'a>(obj: *mut ffi::PyObject) -> Result<&'a [u8], Declined> {
    let mut size: ffi::Py_ssize_t = 0;
    let data = ffi::PyUnicode_AsUTF8AndSize(obj, &mut size);
    if data.is_null() {
        ffi::PyErr_Clear(); // the reference raises its own error for it
        return Err(Declined);
    }
    Ok(std::slice::from_raw_parts(data as *const u8, size as usize))
}

pub(crate) fn utf16_order(a: &[u8], b: &[u8]) -> Ordering {
    // Both come from PyUnicode_AsUTF8AndSize, so they are valid UTF-8.
    let a = std::str::from_utf8(a).unwrap_or_default();
    let b = std::str::from_utf8(b).unwrap_or_default();
    a.encode_utf16().cmp(b.encode_utf16())
}

/// RFC 8785 §3.2.2.2: escape `"`, `\` and U+0000–U+001F (short forms where JSON has them, else
/// lowercase `\u00xx`); every other character as its UTF-8 bytes.
pub(crate) fn write_string(out: &mut Vec<u8>, text: &[u8]) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    write_escaped(out, text);
    out.push(b'"');
}

/// The inside of [`write_string`]'s literal: `text` escaped, without the quotes.
pub(crate) fn write_escaped(out: &mut Vec<u8>, text: &[u8]) {
    let mut start = 0;
    let mut index = 0;
    while index < text.len() {
        // eight bytes at a time through runs that need no escape (most text)
        while let Some(word) = text.get(index..index + 8) {
            let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
            if may_need_escape(word) {
                break;
            }
            index += 8;
        }
        let Some(&byte) = text.get(index) else {
            break;
        };
        index += 1;
        if byte >= 0x20 && byte != b'"' && byte != b'\\' {
            continue;
        }
        out.extend_from_slice(&text[start..index - 1]);
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x0a => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            0x0d => out.extend_from_slice(b"\\r"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(byte >> 4) as usize]);
                out.push(HEX[(byte & 0xf) as usize]);
            }
        }
        start = index;
    }
    out.extend_from_slice(&text[start..]);
}

/// Whether any of the eight bytes of `word` is below 0x20, `"` or `\`: the has-less-than and
/// has-zero-byte word tricks, exact for "any" (a borrow only starts at a byte that matches).
#[inline]
fn may_need_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = (word ^ (ONES * 0x22)).wrapping_sub(ONES) & !(word ^ (ONES * 0x22));
    let backslash = (word ^ (ONES * 0x5c)).wrapping_sub(ONES) & !(word ^ (ONES * 0x5c));
    (below | quote | backslash) & HIGH != 0
}

pub(crate) fn write_int(out: &mut Vec<u8>, n: i64) {
    let mut digits = [0u8; 20];
    let mut rest = n.unsigned_abs();
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
}

/// The canonical bytes of `value`, or None when the reference must handle it.
pub(crate) fn canonical(value: &Bound<'_, PyAny>, omit_nulls: bool) -> Option<Vec<u8>> {
    let mut writer = Writer {
        out: Vec::with_capacity(256),
        omit_nulls,
    };
    writer.value(value.as_ptr(), 0).ok()?;
    Some(writer.out)
}

/// `sha256:<hex>` of `data`, with the GIL released for large buffers.
pub(crate) fn hash_text(py: Python<'_>, data: &[u8]) -> String {
    let digest = if data.len() >= DETACH_BYTES {
        py.detach(|| Sha256::digest(data))
    } else {
        Sha256::digest(data)
    };
    let mut text = String::with_capacity(HASH_PREFIX.len() + 64);
    text.push_str(HASH_PREFIX);
    text.push_str(&hex::encode(digest));
    text
}

/// RFC 8785 bytes of `value` (`omit_null_members`: drop object members whose value is None, at
/// every depth), or None: declined, the reference decides.
#[pyfunction]
#[pyo3(signature = (value, /, *, omit_null_members = false))]
fn canonical_json<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
    omit_null_members: bool,
) -> Option<Bound<'py, PyBytes>> {
    canonical(value, omit_null_members).map(|data| PyBytes::new(py, &data))
}

/// `sha256:<hex>` of the RFC 8785 bytes of `value`, or None (declined).
#[pyfunction]
fn json_hash(py: Python<'_>, value: &Bound<'_, PyAny>) -> Option<String> {
    canonical(value, false).map(|data| hash_text(py, &data))
}

/// `sha256:<hex>` of the UTF-8 bytes of an exact `str`, or None (a subclass, a lone surrogate).
#[pyfunction]
fn text_hash(py: Python<'_>, text: &Bound<'_, PyAny>) -> Option<String> {
    if !text.is_exact_instance_of::<pyo3::types::PyString>() {
        return None;
    }
    // SAFETY: an exact str, alive for this call (the Bound holds it); the GIL is held.
    let data = unsafe { utf8(text.as_ptr()) }.ok()?;
    Some(hash_text(py, data))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(canonical_json, m)?)?;
    m.add_function(wrap_pyfunction!(json_hash, m)?)?;
    m.add_function(wrap_pyfunction!(text_hash, m)?)?;
    Ok(())
}
