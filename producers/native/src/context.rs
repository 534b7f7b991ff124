//! The rendered chat context on the agent's thread, in one pass.
//!
//! Reference: `reference_render_chat_context` in `producers/context.py` (each part as
//! `json.dumps(part, ensure_ascii=False)` without its quotes, between fixed literal pieces; span
//! offsets in UTF-8 bytes). That escaping — `"`, `\`, the short forms `\b \t \n \f \r`, other
//! characters below U+0020 as lowercase `\u00xx`, everything else as its UTF-8 bytes — is exactly
//! RFC 8785's string escaping, so `canonical::write_escaped` prints it. Any text that is not an
//! exact `str`, or holds a lone surrogate, is declined (None) and the Python renderer decides.
//!
//! The GIL stays held: this runs on the agent's own thread, and releasing it there would let the
//! recorder's worker take it for a whole turn while the agent waits to get it back.
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::canonical::{utf8, write_escaped};

/// The spans (start, end): system prompt, each memory entry, the memory block, user.
type Spans = Vec<(usize, usize)>;

/// The UTF-8 bytes of an exact `str` (None: not one, or a lone surrogate). The `Bound` the caller
/// holds keeps the str, and so its immutable UTF-8 form, alive while the bytes are used.
fn text<'a>(value: &'a Bound<'_, PyAny>) -> Option<&'a [u8]> {
    if !value.is_exact_instance_of::<PyString>() {
        return None;
    }
    // SAFETY: an exact str, alive for 'a, the GIL held.
    unsafe { utf8(value.as_ptr()) }.ok()
}

struct Parts<'a> {
    pieces: [&'a [u8]; 5],
    prompt: &'a [u8],
    memory: Vec<&'a [u8]>,
    user: &'a [u8],
}

impl Parts<'_> {
    fn render(self) -> (Vec<u8>, Spans) {
        let [head, middle, separator, user_head, tail] = self.pieces;
        let size: usize = self
            .memory
            .iter()
            .map(|t| t.len() + separator.len())
            .sum::<usize>()
            + self.prompt.len()
            + self.user.len()
            + head.len()
            + middle.len()
            + user_head.len()
            + tail.len();
        let mut out: Vec<u8> = Vec::with_capacity(size + size / 16 + 16);
        let mut spans = Vec::with_capacity(self.memory.len() + 3);
        let part = |out: &mut Vec<u8>, text: &[u8]| {
            let start = out.len();
            write_escaped(out, text);
            (start, out.len())
        };
        out.extend_from_slice(head);
        spans.push(part(&mut out, self.prompt));
        out.extend_from_slice(middle);
        let block = out.len();
        for (index, entry) in self.memory.iter().enumerate() {
            if index > 0 {
                out.extend_from_slice(separator);
            }
            spans.push(part(&mut out, entry));
        }
        spans.push((block, out.len()));
        out.extend_from_slice(user_head);
        spans.push(part(&mut out, self.user));
        out.extend_from_slice(tail);
        (out, spans)
    }
}

/// `[head, middle, separator, user, tail]` literal pieces (already as they appear in the text),
/// the system prompt, the memory entries' contents in context order and the user message: the
/// rendered text and its spans, or None (declined: the reference renders it).
#[pyfunction]
#[pyo3(signature = (pieces, system_prompt, memory, user_message, /))]
fn render_chat<'py>(
    py: Python<'py>,
    pieces: [String; 5],
    system_prompt: &Bound<'py, PyAny>,
    memory: &Bound<'py, PyAny>,
    user_message: &Bound<'py, PyAny>,
) -> Option<(Bound<'py, PyString>, Spans)> {
    let memory = memory.cast_exact::<PyList>().ok()?;
    let items: Vec<Bound<'py, PyAny>> = memory.iter().collect();
    let mut entries = Vec::with_capacity(items.len());
    for entry in &items {
        entries.push(text(entry)?);
    }
    let parts = Parts {
        pieces: [
            pieces[0].as_bytes(),
            pieces[1].as_bytes(),
            pieces[2].as_bytes(),
            pieces[3].as_bytes(),
            pieces[4].as_bytes(),
        ],
        prompt: text(system_prompt)?,
        memory: entries,
        user: text(user_message)?,
    };
    let (rendered, spans) = parts.render();
    // SAFETY: valid UTF-8 (UTF-8 input, ASCII escapes, the pieces are Rust strings); the GIL held.
    let object = unsafe {
        ffi::PyUnicode_FromStringAndSize(
            rendered.as_ptr().cast(),
            rendered.len() as ffi::Py_ssize_t,
        )
    };
    // SAFETY: a new reference, or null with an error set (then cleared: the reference decides)
    let Some(object) = (unsafe { Bound::from_owned_ptr_or_opt(py, object) }) else {
        // SAFETY: the GIL is held
        unsafe { ffi::PyErr_Clear() };
        return None;
    };
    Some((object.cast_into::<PyString>().ok()?, spans))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(render_chat, m)?)?;
    Ok(())
}
