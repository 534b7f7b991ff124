//! The Avro binary body of a capture, written straight from its JSON form.
//!
//! Reference: `schemas/codec.py` (`Codec.encode`: the writer `schemas/_compiled_writer.py` compiles
//! from the latest schema, itself proven byte-identical to `fastavro.schemaless_writer`). The
//! schema is compiled once by `avro_schema.rs`, shared with the reader.
//!
//! The walk takes only what it writes exactly as the reference does — records as exact `dict`s
//! with `str` keys, arrays as exact `list`/`tuple`, exact `str`/`int`/`float`/`bool`/`bytes`/`None`,
//! union branches chosen by the reference's predicates, ints in range — and *declines* (returns
//! None) on anything else, so the reference runs and raises its own error (naming the field).
//!
//! Converted fields: a JSON-text field's value becomes the text of `json.dumps(value,
//! ensure_ascii=False, separators=(",", ":"), allow_nan=False)` (keys in their order, floats as
//! Python's `repr`), or the text `pin_json_text` pinned for that very object; any other converter
//! is the reference's own Python function, called here.
use std::os::raw::c_int;
use std::ptr::addr_of_mut;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::avro_schema::{Convert, Kind, Node, Record, Schema};
use crate::canonical::{utf8, write_int, write_string, Declined};

/// Deeper JSON values go to the reference (its limit is Python's recursion limit).
const MAX_DEPTH: usize = 128;
const EXACT: i64 = 1 << 53; // an int written as a double must survive the conversion

type Walk = Result<(), Declined>;

/// Avro's zig-zag varint of a long.
fn write_long(out: &mut Vec<u8>, value: i64) {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    while n > 0x7f {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// An exact int's value, or None when it does not fit an i64 (or is not an exact int).
fn exact_int(value: &Bound<'_, PyAny>) -> Option<i64> {
    if !value.is_exact_instance_of::<PyInt>() {
        return None;
    }
    let mut overflow: c_int = 0;
    // SAFETY: an exact int, alive (the Bound holds it), the GIL held.
    let n = unsafe { ffi::PyLong_AsLongLongAndOverflow(value.as_ptr(), &mut overflow) };
    if overflow != 0 || (n == -1 && PyErr::take(value.py()).is_some()) {
        return None;
    }
    Some(n)
}

fn accepts(kind: Kind, value: &Bound<'_, PyAny>) -> bool {
    match kind {
        Kind::Null => value.is_none(),
        Kind::Boolean => value.is_exact_instance_of::<PyBool>(),
        Kind::Int => exact_int(value).is_some_and(|n| i32::try_from(n).is_ok()),
        Kind::Long => exact_int(value).is_some(),
        Kind::Double => {
            value.is_exact_instance_of::<PyFloat>()
                || exact_int(value).is_some_and(|n| (-EXACT..=EXACT).contains(&n))
        }
        Kind::String => value.is_exact_instance_of::<PyString>(),
        Kind::Bytes => value.is_exact_instance_of::<PyBytes>(),
        Kind::Array => {
            value.is_exact_instance_of::<PyList>() || value.is_exact_instance_of::<PyTuple>()
        }
        Kind::Record => value.is_exact_instance_of::<PyDict>(),
    }
}

/// A writer for one schema: `AvroWriter(schema, json_fields, converters, pinned)`.
///
/// `json_fields`: the `(record, field)` pairs written as JSON text; `converters`: other
/// `(record, field)` conversions, as Python functions; `pinned`: the codec's `id -> (value, text)`
/// map of pinned JSON text. Raises ValueError for a schema it does not handle.
#[pyclass(frozen, module = "producers.native._core")]
pub struct AvroWriter {
    records: Vec<Record>,
    root: usize,
    pinned: Py<PyDict>,
}

struct Encoder<'a, 'py> {
    writer: &'a AvroWriter,
    py: Python<'py>,
    out: Vec<u8>,
    scratch: Vec<u8>,
}

impl<'py> Encoder<'_, 'py> {
    fn value(&mut self, node: &Node, value: &Bound<'py, PyAny>) -> Walk {
        match node {
            Node::Primitive(kind) => self.primitive(*kind, value),
            Node::Array(items) => self.array(items, value),
            Node::Record(index) => self.record(*index, value),
            Node::Union(branches) => {
                let (index, (kind, branch)) = branches
                    .iter()
                    .enumerate()
                    .find(|(_, (kind, _))| accepts(*kind, value))
                    .ok_or(Declined)?;
                write_long(&mut self.out, index as i64);
                match kind {
                    Kind::Null => Ok(()),
                    _ => self.value(branch, value),
                }
            }
        }
    }

    fn primitive(&mut self, kind: Kind, value: &Bound<'py, PyAny>) -> Walk {
        match kind {
            Kind::Null if value.is_none() => Ok(()),
            Kind::Boolean if value.is_exact_instance_of::<PyBool>() => {
                self.out
                    .push(u8::from(value.is_truthy().map_err(|_| Declined)?));
                Ok(())
            }
            Kind::Int | Kind::Long => {
                let n = exact_int(value).ok_or(Declined)?;
                if kind == Kind::Int && i32::try_from(n).is_err() {
                    return Err(Declined);
                }
                write_long(&mut self.out, n);
                Ok(())
            }
            Kind::Double if accepts(Kind::Double, value) => {
                let f = if let Some(n) = exact_int(value) {
                    n as f64 // within ±2**53: exact
                } else {
                    // SAFETY: an exact float, alive, the GIL held.
                    unsafe { ffi::PyFloat_AsDouble(value.as_ptr()) }
                };
                self.out.extend_from_slice(&f.to_le_bytes());
                Ok(())
            }
            Kind::String if value.is_exact_instance_of::<PyString>() => {
                // SAFETY: an exact str, alive (the Bound holds it), the GIL held.
                let text = unsafe { utf8(value.as_ptr()) }?;
                write_long(&mut self.out, text.len() as i64);
                self.out.extend_from_slice(text);
                Ok(())
            }
            Kind::Bytes if value.is_exact_instance_of::<PyBytes>() => {
                let data = value.cast::<PyBytes>().map_err(|_| Declined)?.as_bytes();
                write_long(&mut self.out, data.len() as i64);
                self.out.extend_from_slice(data);
                Ok(())
            }
            _ => Err(Declined),
        }
    }

    fn array(&mut self, items: &Node, value: &Bound<'py, PyAny>) -> Walk {
        if let Ok(list) = value.cast_exact::<PyList>() {
            if !list.is_empty() {
                write_long(&mut self.out, list.len() as i64);
                // by index, owning each item: a converter may run Python code meanwhile
                for index in 0..list.len() {
                    let item = list.get_item(index).map_err(|_| Declined)?;
                    self.value(items, &item)?;
                }
            }
        } else if let Ok(tuple) = value.cast_exact::<PyTuple>() {
            if !tuple.is_empty() {
                write_long(&mut self.out, tuple.len() as i64);
                for item in tuple.iter() {
                    self.value(items, &item)?;
                }
            }
        } else {
            return Err(Declined);
        }
        self.out.push(0);
        Ok(())
    }

    fn record(&mut self, index: usize, value: &Bound<'py, PyAny>) -> Walk {
        let record = &self.writer.records[index];
        let dict = value.cast_exact::<PyDict>().map_err(|_| Declined)?;
        if dict.len() > record.fields.len() {
            return Err(Declined); // an unknown key: the reference names it
        }
        // Each key matched to its field before anything is written; no Python code runs here.
        let mut values: Vec<Option<Bound<'py, PyAny>>> = vec![None; record.fields.len()];
        for (key, item) in dict.iter() {
            if !key.is_exact_instance_of::<PyString>() {
                return Err(Declined);
            }
            let at = match record
                .fields
                .iter()
                .position(|f| f.name.as_ptr() == key.as_ptr())
            {
                Some(at) => at,
                None => {
                    // SAFETY: an exact str, alive (the Bound holds it), the GIL held.
                    let text = unsafe { utf8(key.as_ptr()) }?;
                    record
                        .fields
                        .iter()
                        .position(|f| f.bytes == text)
                        .ok_or(Declined)?
                }
            };
            values[at] = Some(item);
        }
        for (field, found) in record.fields.iter().zip(values) {
            let value = match (found, &field.default) {
                (Some(value), _) => value,
                (None, Some(default)) => default.bind(self.py).clone(),
                (None, None) => return Err(Declined), // the reference's KeyError names it
            };
            match &field.convert {
                Convert::None => self.value(&field.node, &value)?,
                Convert::JsonText => self.json_field(&field.node, &value)?,
                Convert::Call(function) => {
                    let converted = function
                        .bind(self.py)
                        .call1((value,))
                        .map_err(|_| Declined)?;
                    self.value(&field.node, &converted)?;
                }
            }
        }
        Ok(())
    }

    /// A JSON-valued field: None stays None, a pinned object its pinned text, else its JSON text.
    fn json_field(&mut self, node: &Node, value: &Bound<'py, PyAny>) -> Walk {
        if value.is_none() {
            return self.value(node, value);
        }
        let address = value.as_ptr() as usize;
        let pinned = self.writer.pinned.bind(self.py);
        if let Some(entry) = pinned.get_item(address).map_err(|_| Declined)? {
            let entry = entry.cast_exact::<PyTuple>().map_err(|_| Declined)?;
            if entry.len() == 2 && entry.get_item(0).map_err(|_| Declined)?.is(value) {
                let text = entry.get_item(1).map_err(|_| Declined)?;
                return self.value(node, &text);
            }
        }
        // The text is written as the union's string branch, as the reference's str would be.
        let index = match node {
            Node::Union(branches) => branches.iter().position(|(kind, _)| *kind == Kind::String),
            Node::Primitive(Kind::String) => None,
            _ => return Err(Declined),
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let walked = JsonText { out: &mut scratch }.value(value.as_ptr(), 0);
        if walked.is_ok() {
            if let Some(index) = index {
                write_long(&mut self.out, index as i64);
            }
            write_long(&mut self.out, scratch.len() as i64);
            self.out.extend_from_slice(&scratch);
        }
        self.scratch = scratch;
        walked
    }
}

/// `json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)` as UTF-8.
struct JsonText<'a> {
    out: &'a mut Vec<u8>,
}

impl JsonText<'_> {
    /// SAFETY (every `unsafe` below): the GIL is held for the whole walk and no Python code runs
    /// during it (exact built-in types only), so borrowed references stay valid while used.
    fn value(&mut self, obj: *mut ffi::PyObject, depth: usize) -> Walk {
        unsafe {
            let ty = ffi::Py_TYPE(obj);
            if ty == addr_of_mut!(ffi::PyUnicode_Type) {
                write_string(self.out, utf8(obj)?);
                Ok(())
            } else if ty == addr_of_mut!(ffi::PyDict_Type) {
                self.dict(obj, depth)
            } else if ty == addr_of_mut!(ffi::PyList_Type) {
                self.sequence(obj, depth, ffi::PyList_Size, ffi::PyList_GetItem)
            } else if ty == addr_of_mut!(ffi::PyLong_Type) {
                let mut overflow: c_int = 0;
                let n = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
                if n == -1 && !ffi::PyErr_Occurred().is_null() {
                    ffi::PyErr_Clear();
                    return Err(Declined);
                }
                if overflow == 0 {
                    write_int(self.out, n);
                    return Ok(());
                }
                // Beyond i64: int's own repr, as json's (refused past the int/str digit limit).
                let text = ffi::PyObject_Str(obj);
                if text.is_null() {
                    ffi::PyErr_Clear();
                    return Err(Declined);
                }
                let written = utf8(text).map(|digits| self.out.extend_from_slice(digits));
                ffi::Py_DECREF(text);
                written
            } else if ty == addr_of_mut!(ffi::PyFloat_Type) {
                write_float(self.out, ffi::PyFloat_AsDouble(obj))
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
        self.out.push(b'{');
        let mut position: ffi::Py_ssize_t = 0;
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut item: *mut ffi::PyObject = std::ptr::null_mut();
        let mut first = true;
        while ffi::PyDict_Next(obj, &mut position, &mut key, &mut item) != 0 {
            if ffi::Py_TYPE(key) != addr_of_mut!(ffi::PyUnicode_Type) {
                return Err(Declined); // json turns int/float/bool/None keys into text: the reference
            }
            if !first {
                self.out.push(b',');
            }
            first = false;
            write_string(self.out, utf8(key)?);
            self.out.push(b':');
            self.value(item, depth + 1)?;
        }
        self.out.push(b'}');
        Ok(())
    }
}

/// Python's `repr` of a finite float: the shortest round-trip digits (as ryu finds them), fixed
/// notation when the decimal point falls within -4 < point <= 16, else `d.ddde±XX`.
pub(crate) fn write_float(out: &mut Vec<u8>, f: f64) -> Walk {
    if !f.is_finite() {
        return Err(Declined); // allow_nan=False: the reference raises
    }
    if f.is_sign_negative() {
        out.push(b'-');
    }
    if f == 0.0 {
        out.extend_from_slice(b"0.0");
        return Ok(());
    }
    let mut buffer = ryu_js::Buffer::new();
    let text = buffer.format_finite(f.abs()).as_bytes();
    // ECMAScript form: digits with an optional '.', then an optional e±N.
    let (mantissa, exponent) = match text.iter().position(|&b| b == b'e') {
        Some(at) => {
            let exponent = std::str::from_utf8(&text[at + 1..])
                .ok()
                .and_then(|e| e.parse::<i32>().ok())
                .ok_or(Declined)?;
            (&text[..at], exponent)
        }
        None => (text, 0),
    };
    let mut digits: Vec<u8> = Vec::with_capacity(20);
    let mut point: i32 = 0; // digits before the '.'
    let mut seen_point = false;
    for &byte in mantissa {
        if byte == b'.' {
            seen_point = true;
        } else {
            digits.push(byte);
            if !seen_point {
                point += 1;
            }
        }
    }
    // strip leading zeros (0.00123) and trailing zeros (1200)
    let leading = digits.iter().take_while(|&&d| d == b'0').count();
    digits.drain(..leading);
    point -= leading as i32;
    while digits.last() == Some(&b'0') {
        digits.pop();
    }
    if digits.is_empty() {
        return Err(Declined);
    }
    let point = point + exponent; // value = 0.DIGITS × 10^point
    let count = digits.len() as i32;
    if -4 < point && point <= 16 {
        if point <= 0 {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-point) as usize));
            out.extend_from_slice(&digits);
        } else if point >= count {
            out.extend_from_slice(&digits);
            out.extend(std::iter::repeat_n(b'0', (point - count) as usize));
            out.extend_from_slice(b".0");
        } else {
            out.extend_from_slice(&digits[..point as usize]);
            out.push(b'.');
            out.extend_from_slice(&digits[point as usize..]);
        }
    } else {
        out.push(digits[0]);
        if count > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        let exponent = point - 1;
        out.push(b'e');
        out.push(if exponent < 0 { b'-' } else { b'+' });
        let magnitude = exponent.unsigned_abs();
        if magnitude < 10 {
            out.push(b'0');
        }
        write_int(out, i64::from(magnitude));
    }
    Ok(())
}

#[pymethods]
impl AvroWriter {
    #[new]
    fn new(
        schema: &Bound<'_, PyDict>,
        json_fields: Vec<(String, String)>,
        converters: &Bound<'_, PyDict>,
        pinned: &Bound<'_, PyDict>,
    ) -> PyResult<Self> {
        let Schema { records, root } = Schema::compile(schema, &json_fields, converters, "writer")?;
        Ok(Self {
            records,
            root,
            pinned: pinned.clone().unbind(),
        })
    }

    /// `header` followed by the Avro body of `value`, or None: declined, the reference decides.
    fn encode<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'py, PyAny>,
        header: &[u8],
    ) -> Option<Bound<'py, PyBytes>> {
        let mut encoder = Encoder {
            writer: self,
            py,
            out: Vec::with_capacity(4096),
            scratch: Vec::new(),
        };
        encoder.out.extend_from_slice(header);
        encoder.record(self.root, value).ok()?;
        Some(PyBytes::new(py, &encoder.out))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AvroWriter>()?;
    Ok(())
}
