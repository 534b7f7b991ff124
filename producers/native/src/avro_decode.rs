//! A capture's Avro binary body, read straight into its JSON form (the reader beside `avro.rs`).
//!
//! Reference: `schemas/codec.py` (`Codec.decode`: `fastavro.schemaless_reader` with the writer
//! schema, then `_capture_from_avro`). The schema is compiled once by `avro_schema.rs` (shared with
//! the writer), and read only when the message was written with it (no schema resolution:
//! older writers go to the codec). Records become dicts in field order, as fastavro builds them.
//!
//! The walk *declines* (returns None) on anything it does not read exactly as the reference does
//! — truncated or trailing bytes, a bad varint, union index or boolean byte, invalid UTF-8 — and
//! the codec then raises its own error. JSON-text fields are parsed here as `json.loads` parses
//! them (same grammar, duplicate keys last-wins in first position, floats correctly rounded like
//! `float()`, ints by the `PyLong_FromString` json calls); it declines on what it cannot mirror
//! cheaply: `NaN`/`Infinity` literals, floats that overflow to infinity, lone surrogates, nesting
//! deeper than `MAX_DEPTH`, and any text `json.loads` rejects. Other converted fields call the reference's own Python function.
use std::ffi::CString;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString};

use crate::avro_schema::{Convert, Kind, Node, Record, Schema};

/// Deeper JSON values go to the reference (its limit is Python's recursion limit).
const MAX_DEPTH: usize = 128;

/// The input was not read: the reference decides (and raises its own error if it is bad).
struct Declined;

type Read<'py> = Result<Bound<'py, PyAny>, Declined>;

/// A reader for one schema: `AvroReader(schema, json_fields, converters)`.
///
/// `json_fields`: the `(record, field)` pairs held as JSON text (parsed here); `converters`: other
/// `(record, field)` conversions applied after reading, as Python functions. Raises ValueError
/// for a schema it does not handle.
#[pyclass(frozen, module = "producers.native._core")]
pub struct AvroReader {
    records: Vec<Record>,
    root: usize,
}

struct Decoder<'a, 'py> {
    reader: &'a AvroReader,
    py: Python<'py>,
    data: &'a [u8],
    at: usize,
}

impl<'a, 'py> Decoder<'a, 'py> {
    fn long(&mut self) -> Result<i64, Declined> {
        let mut n: u64 = 0;
        let mut shift = 0;
        loop {
            let byte = *self.data.get(self.at).ok_or(Declined)?;
            self.at += 1;
            if shift == 63 && byte > 1 {
                return Err(Declined); // beyond 64 bits
            }
            n |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return Err(Declined);
            }
        }
        Ok((n >> 1) as i64 ^ -((n & 1) as i64))
    }

    fn take(&mut self, len: i64) -> Result<&'a [u8], Declined> {
        let len = usize::try_from(len).map_err(|_| Declined)?;
        let end = self.at.checked_add(len).ok_or(Declined)?;
        let slice = self.data.get(self.at..end).ok_or(Declined)?;
        self.at = end;
        Ok(slice)
    }

    fn text(&mut self) -> Result<&'a str, Declined> {
        let len = self.long()?;
        std::str::from_utf8(self.take(len)?).map_err(|_| Declined)
    }

    fn value(&mut self, node: &Node) -> Read<'py> {
        let py = self.py;
        match node {
            Node::Primitive(kind) => match kind {
                Kind::Null => Ok(py.None().into_bound(py)),
                Kind::Boolean => {
                    let byte = *self.data.get(self.at).ok_or(Declined)?;
                    self.at += 1;
                    if byte > 1 {
                        return Err(Declined);
                    }
                    Ok(PyBool::new(py, byte == 1).to_owned().into_any())
                }
                // fastavro reads an int exactly as a long (the same zig-zag varint)
                Kind::Int | Kind::Long => {
                    let n = self.long()?;
                    Ok(n.into_pyobject(py).map_err(|_| Declined)?.into_any())
                }
                Kind::Double => {
                    let bytes: [u8; 8] = self.take(8)?.try_into().map_err(|_| Declined)?;
                    Ok(PyFloat::new(py, f64::from_le_bytes(bytes)).into_any())
                }
                Kind::String => Ok(PyString::new(py, self.text()?).into_any()),
                Kind::Bytes => {
                    let len = self.long()?;
                    Ok(PyBytes::new(py, self.take(len)?).into_any())
                }
                Kind::Array | Kind::Record => Err(Declined), // union tags, never a primitive node
            },
            Node::Array(items) => {
                let list = PyList::empty(py);
                loop {
                    let mut count = self.long()?;
                    if count == 0 {
                        break;
                    }
                    if count < 0 {
                        count = count.checked_neg().ok_or(Declined)?;
                        self.long()?; // the block's size in bytes
                    }
                    for _ in 0..count {
                        list.append(self.value(items)?).map_err(|_| Declined)?;
                    }
                }
                Ok(list.into_any())
            }
            Node::Record(index) => self.record(*index),
            Node::Union(branches) => {
                let index = usize::try_from(self.long()?).map_err(|_| Declined)?;
                self.value(&branches.get(index).ok_or(Declined)?.1)
            }
        }
    }

    fn record(&mut self, index: usize) -> Read<'py> {
        let py = self.py;
        let reader = self.reader;
        let dict = PyDict::new(py);
        for field in &reader.records[index].fields {
            let value = match &field.convert {
                Convert::None => self.value(&field.node)?,
                Convert::JsonText => self.json_field(&field.node)?,
                Convert::Call(function) => {
                    let read = self.value(&field.node)?;
                    function.bind(py).call1((read,)).map_err(|_| Declined)?
                }
            };
            dict.set_item(field.name.bind(py), value)
                .map_err(|_| Declined)?;
        }
        Ok(dict.into_any())
    }

    /// A JSON-text field: null stays None, text becomes `json.loads(text)`.
    fn json_field(&mut self, node: &Node) -> Read<'py> {
        let branch = match node {
            Node::Union(branches) => {
                let index = usize::try_from(self.long()?).map_err(|_| Declined)?;
                &branches.get(index).ok_or(Declined)?.1
            }
            other => other,
        };
        match branch {
            Node::Primitive(Kind::Null) => Ok(self.py.None().into_bound(self.py)),
            Node::Primitive(Kind::String) => {
                let text = self.text()?;
                Json {
                    py: self.py,
                    text: text.as_bytes(),
                    at: 0,
                }
                .document()
            }
            _ => Err(Declined),
        }
    }
}

/// `json.loads` over one UTF-8 text (see the module doc for what it declines).
struct Json<'a, 'py> {
    py: Python<'py>,
    text: &'a [u8],
    at: usize,
}

impl<'py> Json<'_, 'py> {
    fn document(&mut self) -> Read<'py> {
        self.space();
        let value = self.value(0)?;
        self.space();
        if self.at != self.text.len() {
            return Err(Declined); // "Extra data"
        }
        Ok(value)
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Declined> {
        if self.text[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(())
        } else {
            Err(Declined)
        }
    }

    fn value(&mut self, depth: usize) -> Read<'py> {
        let py = self.py;
        match self.peek().ok_or(Declined)? {
            b'"' => Ok(PyString::new(py, &self.string()?).into_any()),
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b't' => self
                .literal(b"true")
                .map(|()| PyBool::new(py, true).to_owned().into_any()),
            b'f' => self
                .literal(b"false")
                .map(|()| PyBool::new(py, false).to_owned().into_any()),
            b'n' => self.literal(b"null").map(|()| py.None().into_bound(py)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(Declined), // NaN, Infinity and anything json.loads rejects
        }
    }

    fn object(&mut self, depth: usize) -> Read<'py> {
        if depth >= MAX_DEPTH {
            return Err(Declined);
        }
        self.at += 1;
        let dict = PyDict::new(self.py);
        self.space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(dict.into_any());
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(Declined);
            }
            let key = PyString::new(self.py, &self.string()?);
            self.space();
            if self.peek() != Some(b':') {
                return Err(Declined);
            }
            self.at += 1;
            self.space();
            let value = self.value(depth + 1)?;
            // a repeated key keeps its first position and takes the last value, as in json.loads
            dict.set_item(key, value).map_err(|_| Declined)?;
            self.space();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.space();
                }
                Some(b'}') => {
                    self.at += 1;
                    return Ok(dict.into_any());
                }
                _ => return Err(Declined),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Read<'py> {
        if depth >= MAX_DEPTH {
            return Err(Declined);
        }
        self.at += 1;
        let list = PyList::empty(self.py);
        self.space();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(list.into_any());
        }
        loop {
            list.append(self.value(depth + 1)?).map_err(|_| Declined)?;
            self.space();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.space();
                }
                Some(b']') => {
                    self.at += 1;
                    return Ok(list.into_any());
                }
                _ => return Err(Declined),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        self.at - start
    }

    /// json's number grammar: `-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?`, an int without the last two.
    fn number(&mut self) -> Read<'py> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(Declined), // "-Infinity" or not a number
        }
        let mut float = false;
        if self.peek() == Some(b'.') && matches!(self.text.get(self.at + 1), Some(b'0'..=b'9')) {
            self.at += 1;
            self.digits();
            float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            let back = self.at;
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            if self.digits() == 0 {
                self.at = back; // json backs off; what follows is then an error
            } else {
                float = true;
            }
        }
        let text = std::str::from_utf8(&self.text[start..self.at]).map_err(|_| Declined)?;
        if float {
            let f: f64 = text.parse().map_err(|_| Declined)?;
            if !f.is_finite() {
                return Err(Declined); // Python gives inf here; rare, leave it to the reference
            }
            Ok(PyFloat::new(self.py, f).into_any())
        } else {
            if let Ok(n) = text.parse::<i64>() {
                return Ok(n.into_pyobject(self.py).map_err(|_| Declined)?.into_any());
            }
            // Beyond i64: the function json itself calls (refusing past the int/str digit limit).
            let digits = CString::new(text).map_err(|_| Declined)?;
            // SAFETY: a NUL-terminated ASCII string, the GIL held; a NULL result is an error set.
            unsafe {
                let long = ffi::PyLong_FromString(digits.as_ptr(), std::ptr::null_mut(), 10);
                Bound::from_owned_ptr_or_err(self.py, long).map_err(|_| Declined)
            }
        }
    }

    /// A JSON string's value (the cursor on its opening quote).
    fn string(&mut self) -> Result<String, Declined> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let start = self.at;
            while let Some(&byte) = self.text.get(self.at) {
                if byte == b'"' || byte == b'\\' || byte < 0x20 {
                    break;
                }
                self.at += 1;
            }
            // the text is valid UTF-8 and the stop bytes are ASCII: the run is whole characters
            out.push_str(std::str::from_utf8(&self.text[start..self.at]).map_err(|_| Declined)?);
            match self.peek() {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.at += 1;
                    let escape = self.peek().ok_or(Declined)?;
                    self.at += 1;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let unit = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&unit) {
                                // a high surrogate must pair with a low one (else json keeps a
                                // lone surrogate, which a Rust string cannot hold: decline)
                                if !self.text[self.at..].starts_with(b"\\u") {
                                    return Err(Declined);
                                }
                                self.at += 2;
                                let low = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&low) {
                                    return Err(Declined);
                                }
                                0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00)
                            } else {
                                unit
                            };
                            out.push(char::from_u32(code).ok_or(Declined)?);
                        }
                        _ => return Err(Declined),
                    }
                }
                _ => return Err(Declined), // a control character (strict) or the end
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, Declined> {
        let digits = self.text.get(self.at..self.at + 4).ok_or(Declined)?;
        let mut unit = 0;
        for &digit in digits {
            let value = (digit as char).to_digit(16).ok_or(Declined)?;
            unit = unit * 16 + value;
        }
        self.at += 4;
        Ok(unit)
    }
}

#[pymethods]
impl AvroReader {
    #[new]
    fn new(
        schema: &Bound<'_, PyDict>,
        json_fields: Vec<(String, String)>,
        converters: &Bound<'_, PyDict>,
    ) -> PyResult<Self> {
        let Schema { records, root } = Schema::compile(schema, &json_fields, converters, "reader")?;
        Ok(Self { records, root })
    }

    /// The value of the Avro body `data[offset:]`, or None: declined, the reference decides.
    fn decode<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        offset: usize,
    ) -> Option<Bound<'py, PyAny>> {
        let mut decoder = Decoder {
            reader: self,
            py,
            data,
            at: offset,
        };
        if offset > data.len() {
            return None;
        }
        let value = decoder.record(self.root).ok()?;
        (decoder.at == data.len()).then_some(value)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AvroReader>()?;
    Ok(())
}
