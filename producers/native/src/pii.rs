//! The built-in personal-data scan of `producers/privacy/detectors.py`, every string of a capture in
//! one call and off the GIL.
//!
//! Each detector is a line-by-line port of its Python reference and returns exactly its spans, in
//! `str` (code point) indices: e-mail addresses, IBANs, card numbers, IP addresses, and the phone
//! number *candidates* that pass the cheap filters (libphonenumber confirms them in Python). Python's
//! `str.isalnum`/`isdigit` follow its own Unicode tables, so wherever a decision depends on a
//! non-ASCII character the string is declined and Python's detectors decide it.
use std::sync::LazyLock;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use regex::{bytes, Regex};

/// Kind codes (and bit positions of the `kinds` mask), as `producers/privacy/native_scan.py` numbers them.
const EMAIL: u8 = 0;
const IBAN: u8 = 1;
const CARD: u8 = 2;
const IP: u8 = 3;
const PHONE_CANDIDATE: u8 = 4;

/// Containers nested deeper are declined: the Python walk then behaves as it always did.
const MAX_DEPTH: usize = 200;
/// Every match of the digit-bearing patterns (phone, card, IBAN, IPv4) holds a digit and is at most
/// this many bytes long (an IBAN: 4 + 30 x 2), so it lies within this reach of a digit.
const REACH: usize = 64;
/// Below this many bytes a scan takes less than handing the GIL over and back would.
const DETACH_BYTES: usize = 4096;

/// The string depends on a character only Python's Unicode tables classify.
struct Declined;

type Span = (usize, usize, u8);

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a built-in pattern compiles")
}

fn bytes_regex(pattern: &str) -> bytes::Regex {
    bytes::Regex::new(pattern).expect("a built-in pattern compiles")
}

static ADDRESS: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"\A[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}\z",
    )
});
static PHONE: LazyLock<bytes::Regex> =
    LazyLock::new(|| bytes_regex(r"[+(0-9][0-9 \t\x{a0}().+-]{5,24}[0-9]"));
static DATE: LazyLock<bytes::Regex> = LazyLock::new(|| {
    bytes_regex(r"\A(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{2}[./-][0-9]{2}[./-][0-9]{4})\z")
});
static CARD_CANDIDATE: LazyLock<bytes::Regex> =
    LazyLock::new(|| bytes_regex(r"[0-9][0-9 -]{11,22}[0-9]"));
static IBAN_CANDIDATE: LazyLock<bytes::Regex> =
    LazyLock::new(|| bytes_regex(r"[A-Z][A-Z][0-9][0-9](?: ?[A-Z0-9]){11,30}"));
static V4: LazyLock<bytes::Regex> =
    LazyLock::new(|| bytes_regex(r"[0-9][0-9]?[0-9]?\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}"));
static DIGIT: LazyLock<bytes::Regex> = LazyLock::new(|| bytes_regex(r"[0-9]"));

/// The byte ranges within [`REACH`] of a digit, merged: every match of a digit-bearing pattern lies in
/// one of them, with all it could have matched instead, so `find_iter` over each range finds exactly
/// the matches `find_iter` over the whole text finds (and skips prose at memchr speed).
fn digit_windows(t: &[u8]) -> Vec<(usize, usize)> {
    let mut windows: Vec<(usize, usize)> = Vec::new();
    let mut from = 0;
    while let Some(first) = DIGIT.find_at(t, from).map(|m| m.start()) {
        // grow the window while another digit lies within reach of the last one found
        let mut last = first;
        let mut end = (last + 1 + REACH).min(t.len());
        while let Some(offset) = t[last + 1..end].iter().rposition(u8::is_ascii_digit) {
            last += 1 + offset;
            end = (last + 1 + REACH).min(t.len());
        }
        let start = first.saturating_sub(REACH);
        match windows.last_mut() {
            Some(previous) if start <= previous.1 => previous.1 = end,
            _ => windows.push((start, end)),
        }
        from = end;
    }
    windows
}

/// `pattern.find_iter(text)` as `(start, end, matched bytes)`, searched only within `windows`.
fn find_in<'t>(
    pattern: &'t bytes::Regex,
    t: &'t [u8],
    windows: &'t [(usize, usize)],
) -> impl Iterator<Item = (usize, usize, &'t [u8])> + 't {
    windows.iter().flat_map(move |&(from, to)| {
        pattern.find_iter(&t[from..to]).map(move |m| {
            (
                from + m.start(),
                from + m.end(),
                &t[from + m.start()..from + m.end()],
            )
        })
    })
}

/// Python's `_word_at`: `text[index]` is a word character (`isalnum()` or `_`).
fn word_at(t: &[u8], index: usize) -> Result<bool, Declined> {
    match t.get(index) {
        None => Ok(false),
        Some(&b) if b >= 0x80 => Err(Declined),
        Some(&b) => Ok(b.is_ascii_alphanumeric() || b == b'_'),
    }
}

/// Python's `_word_before`: `text[index - 1]` is a word character.
fn word_before(t: &[u8], index: usize) -> Result<bool, Declined> {
    if index == 0 {
        return Ok(false);
    }
    word_at(t, index - 1)
}

/// `text.find(needle, from)` for an ASCII needle; `from` always follows an ASCII character here.
fn find_from(s: &str, needle: char, from: usize) -> Result<Option<usize>, Declined> {
    match s.get(from..) {
        Some(rest) => Ok(rest.find(needle).map(|at| at + from)),
        None if from >= s.len() => Ok(None),
        None => Err(Declined),
    }
}

fn emails(s: &str, out: &mut Vec<Span>) -> Result<(), Declined> {
    const fn local(b: u8) -> bool {
        b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-')
    }
    const fn domain(b: u8) -> bool {
        b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')
    }
    let t = s.as_bytes();
    let size = t.len();
    let mut next = find_from(s, '@', 0)?;
    while let Some(at) = next {
        let mut start = at;
        while start > 0 && local(t[start - 1]) && at - start < 64 {
            start -= 1;
        }
        let mut end = at + 1;
        while end < size && domain(t[end]) && end - at < 255 {
            end += 1;
        }
        while end > at + 1 && matches!(t[end - 1], b'.' | b'-') {
            end -= 1;
        }
        if ADDRESS.is_match(&s[start..end]) && !word_at(t, end)? {
            out.push((start, end, EMAIL));
        }
        next = find_from(s, '@', end.max(at + 1))?;
    }
    Ok(())
}

fn phone_candidates(
    t: &[u8],
    windows: &[(usize, usize)],
    out: &mut Vec<Span>,
) -> Result<(), Declined> {
    for (start, end, raw) in find_in(&PHONE, t, windows) {
        if start > 0 {
            let before = t[start - 1];
            if before >= 0x80 {
                return Err(Declined);
            }
            if before.is_ascii_alphanumeric() || before == b'_' || before == b'+' {
                continue;
            }
        }
        if word_at(t, end)? {
            continue;
        }
        let digits = raw.iter().filter(|b| b.is_ascii_digit()).count();
        if !(7..=15).contains(&digits) || DATE.is_match(raw) {
            continue;
        }
        out.push((start, end, PHONE_CANDIDATE));
    }
    Ok(())
}

fn luhn_valid(digits: &[u8]) -> bool {
    let mut total = 0u32;
    for (position, &b) in digits.iter().rev().enumerate() {
        let mut value = u32::from(b - b'0');
        if position % 2 == 1 {
            value *= 2;
            if value > 9 {
                value -= 9;
            }
        }
        total += value;
    }
    total.is_multiple_of(10)
}

fn cards(t: &[u8], windows: &[(usize, usize)], out: &mut Vec<Span>) {
    let edge = |b: u8| b.is_ascii_digit() || b == b'-';
    for (start, end, raw) in find_in(&CARD_CANDIDATE, t, windows) {
        if (start > 0 && edge(t[start - 1])) || (end < t.len() && edge(t[end])) {
            continue;
        }
        // one separator between digit groups, as cards are written
        if raw
            .windows(2)
            .any(|pair| matches!(pair, b"  " | b"--" | b" -" | b"- "))
        {
            continue;
        }
        let digits: Vec<u8> = raw.iter().copied().filter(u8::is_ascii_digit).collect();
        if (13..=19).contains(&digits.len()) && luhn_valid(&digits) {
            out.push((start, end, CARD));
        }
    }
}

/// Python's `iban_valid` of `raw` with its spaces removed (ISO 13616 mod 97).
fn iban_valid(raw: &[u8]) -> bool {
    let compact: Vec<u8> = raw.iter().copied().filter(|&b| b != b' ').collect();
    if !(15..=34).contains(&compact.len())
        || !compact[..2].iter().all(u8::is_ascii_alphabetic)
        || !compact[2..4].iter().all(u8::is_ascii_digit)
    {
        return false;
    }
    let mut remainder = 0u32;
    for &b in compact[4..].iter().chain(&compact[..4]) {
        remainder = match b {
            b'0'..=b'9' => (remainder * 10 + u32::from(b - b'0')) % 97,
            b'A'..=b'Z' => (remainder * 100 + u32::from(b - b'A') + 10) % 97,
            b'a'..=b'z' => (remainder * 100 + u32::from(b - b'a') + 10) % 97,
            _ => return false,
        };
    }
    remainder == 1
}

fn ibans(t: &[u8], windows: &[(usize, usize)], out: &mut Vec<Span>) -> Result<(), Declined> {
    for (start, _, raw) in find_in(&IBAN_CANDIDATE, t, windows) {
        if word_before(t, start)? {
            continue;
        }
        let mut end = raw.len();
        while end >= 15 {
            if iban_valid(&raw[..end]) {
                out.push((start, start + end, IBAN));
                break;
            }
            // drop a trailing group (a word that followed it)
            end = match raw[..end].iter().rposition(|&b| b == b' ') {
                Some(cut) if cut >= 15 => cut,
                _ => end - 1,
            };
        }
    }
    Ok(())
}

/// `ipaddress.IPv4Address(text)` parses (four decimal octets, no leading zeros, each <= 255).
fn ipv4_parses(text: &[u8]) -> bool {
    let mut octets = 0;
    for octet in text.split(|&b| b == b'.') {
        octets += 1;
        if octet.is_empty()
            || !octet.iter().all(u8::is_ascii_digit)
            || octet.len() > 3
            || (octet.len() > 1 && octet[0] == b'0')
            || octet
                .iter()
                .fold(0u32, |n, &b| n * 10 + u32::from(b - b'0'))
                > 255
        {
            return false;
        }
    }
    octets == 4
}

/// `ipaddress.IPv6Address(text)` parses: the steps of `_BaseV6._ip_int_from_string`, in order.
fn ipv6_parses(text: &[u8]) -> bool {
    const HEXTETS: usize = 8;
    if text.is_empty() {
        return false;
    }
    // None: a hextet converted from an IPv4 suffix, valid by construction
    let mut parts: Vec<Option<&[u8]>> = text.split(|&b| b == b':').map(Some).collect();
    if parts.len() < 3 {
        return false;
    }
    if let Some(Some(last)) = parts.last() {
        if last.contains(&b'.') {
            if !ipv4_parses(last) {
                return false;
            }
            parts.pop();
            parts.extend([None, None]);
        }
    }
    if parts.len() > HEXTETS + 1 {
        return false;
    }
    let empty = |part: &Option<&[u8]>| matches!(part, Some(p) if p.is_empty());
    let mut skip = None;
    for (i, part) in parts.iter().enumerate().take(parts.len() - 1).skip(1) {
        if empty(part) {
            if skip.is_some() {
                return false;
            }
            skip = Some(i);
        }
    }
    let (hi, lo) = match skip {
        Some(index) => {
            let mut hi = index;
            let mut lo = parts.len() - index - 1;
            if empty(&parts[0]) {
                hi -= 1;
                if hi != 0 {
                    return false;
                }
            }
            if empty(&parts[parts.len() - 1]) {
                lo -= 1;
                if lo != 0 {
                    return false;
                }
            }
            if HEXTETS < hi + lo + 1 {
                return false;
            }
            (hi, lo)
        }
        None => {
            if parts.len() != HEXTETS || empty(&parts[0]) || empty(&parts[parts.len() - 1]) {
                return false;
            }
            (parts.len(), 0)
        }
    };
    let hextet = |part: &Option<&[u8]>| match part {
        None => true,
        // int("", 16) fails too
        Some(p) => !p.is_empty() && p.len() <= 4 && p.iter().all(u8::is_ascii_hexdigit),
    };
    parts[..hi].iter().all(hextet) && parts[parts.len() - lo..].iter().all(hextet)
}

fn ips(s: &str, windows: &[(usize, usize)], out: &mut Vec<Span>) -> Result<(), Declined> {
    let t = s.as_bytes();
    let size = t.len();
    if s.contains('.') {
        for (start, end, raw) in find_in(&V4, t, windows) {
            if start > 0 && t[start - 1] == b'.' {
                continue;
            }
            if word_before(t, start)? || word_at(t, end)? {
                continue;
            }
            if end + 1 < size && t[end] == b'.' {
                let after = t[end + 1];
                if after >= 0x80 {
                    return Err(Declined); // str.isdigit() knows digits beyond ASCII
                }
                if after.is_ascii_digit() {
                    continue;
                }
            }
            if ipv4_parses(raw) {
                out.push((start, end, IP));
            }
        }
    }
    let first = s.find(':');
    if first.is_some_and(|at| s[at + 1..].contains(':')) {
        ipv6(s, first, out)?;
    }
    Ok(())
}

/// Runs of hex digits, colons and dots around each colon; the IPv6 parser decides.
fn ipv6(s: &str, first: Option<usize>, out: &mut Vec<Span>) -> Result<(), Declined> {
    let in_address = |b: u8| b.is_ascii_hexdigit() || b == b':' || b == b'.';
    let t = s.as_bytes();
    let size = t.len();
    let mut next = first;
    while let Some(colon) = next {
        let after = colon + 1 < size && in_address(t[colon + 1]);
        let before = colon > 0 && in_address(t[colon - 1]);
        if !after && !before {
            next = find_from(s, ':', colon + 1)?; // "key": value, 12:30 h - nothing an address needs
            continue;
        }
        let mut start = colon;
        while start > 0 && in_address(t[start - 1]) && colon - start < 40 {
            start -= 1;
        }
        let mut end = colon;
        while end < size && in_address(t[end]) && end - start < 46 {
            end += 1;
        }
        while end > colon && t[end - 1] == b'.' {
            end -= 1;
        }
        let candidate = &t[start..end];
        if candidate.iter().filter(|&&b| b == b':').count() >= 2
            && !word_before(t, start)?
            && !word_at(t, end)?
            && (end >= size || t[end] != b':')
            && ipv6_parses(candidate)
        {
            out.push((start, end, IP));
        }
        next = find_from(s, ':', end.max(colon + 1))?;
    }
    Ok(())
}

/// Every span the built-in detectors selected by `kinds` find in `s`, in `str` indices.
fn scan(s: &str, kinds: u32) -> Result<Vec<Span>, Declined> {
    let mut spans = Vec::new();
    let wants = |kind: u8| kinds & (1 << kind) != 0;
    let t = s.as_bytes();
    let windows = if kinds & !(1 << EMAIL) != 0 {
        digit_windows(t)
    } else {
        Vec::new()
    };
    if wants(EMAIL) {
        emails(s, &mut spans)?;
    }
    if wants(IBAN) {
        ibans(t, &windows, &mut spans)?;
    }
    if wants(CARD) {
        cards(t, &windows, &mut spans);
    }
    if wants(IP) {
        ips(s, &windows, &mut spans)?;
    }
    if wants(PHONE_CANDIDATE) {
        phone_candidates(t, &windows, &mut spans)?;
    }
    if !spans.is_empty() && !s.is_ascii() {
        to_code_points(s, &mut spans);
    }
    Ok(spans)
}

/// UTF-8 byte offsets to code point offsets, in one pass over the text.
fn to_code_points(s: &str, spans: &mut [Span]) {
    let mut offsets: Vec<usize> = spans
        .iter()
        .flat_map(|&(start, end, _)| [start, end])
        .collect();
    offsets.sort_unstable();
    offsets.dedup();
    let mut indices = Vec::with_capacity(offsets.len());
    let (mut byte, mut chars) = (0, 0);
    for &offset in &offsets {
        // code points = bytes that do not continue a UTF-8 sequence
        chars += s.as_bytes()[byte..offset]
            .iter()
            .filter(|&&b| b & 0xC0 != 0x80)
            .count();
        byte = offset;
        indices.push(chars);
    }
    let index = |offset: usize| indices[offsets.binary_search(&offset).expect("collected above")];
    for span in spans.iter_mut() {
        *span = (index(span.0), index(span.1), span.2);
    }
}

type Found<'py> = (usize, usize, Bound<'py, PyString>);

/// Python's `_redact_json` walk: exact `str` is scanned, exact `list` items and exact `dict` values
/// are walked in order (keys are not), anything else is skipped. False: too deep, declined.
fn collect<'py>(
    value: &Bound<'py, PyAny>,
    index: usize,
    ordinal: &mut usize,
    depth: usize,
    out: &mut Vec<Found<'py>>,
) -> bool {
    if let Ok(text) = value.cast_exact::<PyString>() {
        out.push((index, *ordinal, text.clone()));
        *ordinal += 1;
        return true;
    }
    if let Ok(list) = value.cast_exact::<PyList>() {
        return depth < MAX_DEPTH
            && list
                .iter()
                .all(|item| collect(&item, index, ordinal, depth + 1, out));
    }
    if let Ok(dict) = value.cast_exact::<PyDict>() {
        return depth < MAX_DEPTH
            && dict
                .iter()
                .all(|(_, item)| collect(&item, index, ordinal, depth + 1, out));
    }
    true
}

/// The built-in detectors' spans in every string of `values` (each a `str`, or a JSON value walked as
/// `producers/privacy/redact.py` walks it), the GIL released while scanning.
///
/// Returns `(value index, ordinal of the string in its value's walk, the string, spans)` for each
/// string with something in it, spans as `(start, end, kind code)` with kind codes 0 EMAIL, 1 IBAN,
/// 2 CARD, 3 IP, 4 phone candidate (`kinds` is the mask of the codes wanted). `spans` is None when the
/// string is declined (its Python detectors decide); the result is None when a value nests too deep.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn pii_scan<'py>(
    py: Python<'py>,
    values: Vec<Bound<'py, PyAny>>,
    kinds: u32,
) -> PyResult<Option<Vec<(usize, usize, Bound<'py, PyString>, Option<Vec<Span>>)>>> {
    let mut strings: Vec<Found<'py>> = Vec::new();
    for (index, value) in values.iter().enumerate() {
        if !collect(value, index, &mut 0, 0, &mut strings) {
            return Ok(None);
        }
    }
    // The strings are kept alive (and so their UTF-8) by `strings` while the GIL is released.
    // A lone surrogate has no UTF-8: that string is declined.
    let texts: Vec<Option<&str>> = strings
        .iter()
        .map(|(_, _, text)| text.to_str().ok())
        .collect();
    let run = || -> Vec<Result<Vec<Span>, Declined>> {
        texts
            .iter()
            .map(|text| text.map_or(Err(Declined), |text| scan(text, kinds)))
            .collect()
    };
    let size: usize = texts.iter().map(|text| text.map_or(0, str::len)).sum();
    let results = if size >= DETACH_BYTES {
        py.detach(run)
    } else {
        run()
    };
    let mut found = Vec::new();
    for ((index, ordinal, text), result) in strings.into_iter().zip(results) {
        match result {
            Ok(spans) if spans.is_empty() => {}
            Ok(spans) => found.push((index, ordinal, text, Some(spans))),
            Err(Declined) => found.push((index, ordinal, text, None)),
        }
    }
    Ok(Some(found))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pii_scan, m)?)?;
    Ok(())
}
