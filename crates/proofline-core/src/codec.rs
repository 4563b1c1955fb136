//! The TIMELINE line codec, byte-compatible with cuzk.
//!
//! ```text
//! TIMELINE,<offset_ms>,<EVENT>,<job_id>,<detail>
//! ```
//!
//! [`parse_line`] accepts every variant real cuzk logs contain (`CHAN_SEND`,
//! `snap_partition=`, the bare `monolithic`, a log prefix before `TIMELINE`, CRLF, unknown
//! keys) and rejects the rest with a [`ParseError`] saying what is wrong. [`write_line`]
//! writes exactly what cuzk writes: for every line cuzk prints, `write_line(parse_line(l))`
//! gives `l` back byte for byte. Variants are normalised (`CHAN_SEND` becomes `GPU_QUEUE`,
//! `snap_partition=` becomes `partition=`, unknown keys are not written back).

use std::fmt::{self, Write as _};

use crate::event::{EventKind, EventRef, TimelineEvent};

/// The marker that starts the TIMELINE part of a line.
pub const MARKER: &str = "TIMELINE,";

/// The largest offset a line may carry: 2^52 ms, some 142,000 years of uptime. Larger ones
/// are malformed, so that no time arithmetic downstream can overflow.
pub const MAX_OFFSET_MS: u64 = 1 << 52;

/// What is wrong with a TIMELINE line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// Fewer than the five comma-separated fields.
    #[error(
        "expected `TIMELINE,<offset_ms>,<EVENT>,<job_id>,<detail>`, found only {found} of the 5 fields"
    )]
    MissingFields {
        /// How many fields there were.
        found: usize,
    },
    /// The offset is not an unsigned integer of milliseconds up to [`MAX_OFFSET_MS`] (as
    /// written, its first 80 characters).
    #[error("offset `{0}` is not an unsigned integer of milliseconds up to 2^52 (142,000 years)")]
    BadOffset(String),
    /// The event name is not one of the six (or `CHAN_SEND`) (as written, its first 80
    /// characters).
    #[error(
        "unknown event `{0}`: expected SYNTH_START, SYNTH_END, GPU_QUEUE (or CHAN_SEND), GPU_PICKUP, GPU_START or GPU_END"
    )]
    UnknownEvent(String),
    /// The job id is empty.
    #[error("the job id is empty")]
    EmptyJobId,
    /// A numeric detail field has a value that is not an unsigned integer.
    #[error("field `{key}`: `{value}` is not an unsigned integer")]
    BadNumber {
        /// The key as written (its first 80 characters).
        key: String,
        /// The value as written (its first 80 characters).
        value: String,
    },
    /// A detail key appears twice with different values.
    #[error("field `{0}` appears twice")]
    DuplicateKey(String),
    /// A GPU event (GPU_PICKUP, GPU_START, GPU_END) without `worker=` (or proofline's
    /// `gpu=`): cuzk always prints the worker, and without it there is no GPU to place the
    /// event on.
    #[error("{0} without `worker=`: no GPU to place it on (cuzk always prints the worker)")]
    NoWorker(EventKind),
}

/// A field of a malformed line as a [`ParseError`] quotes it: its first 80 characters, and
/// `…` where it had more (a 1.5 MB offset made a 1.5 MB error, repeated in the report and
/// on stderr).
pub(crate) fn written(field: &str) -> String {
    const SHOWN: usize = 80;
    match field.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &field[..cut]),
        None => field.to_owned(),
    }
}

/// Finds the TIMELINE part of a line; `None` when the line carries no TIMELINE event.
///
/// The marker must open the line or follow a separator (space, tab, `]`, `:`, `|`, `>`, or a
/// NUL byte: the hole a `copytruncate` rotation leaves before the next line a writer
/// appends), so that a prose mention of "TIMELINE," deep in a log message is not mistaken
/// for an event.
pub fn find_timeline(line: &str) -> Option<&str> {
    if line.starts_with(MARKER) {
        return Some(line);
    }
    // Each `T` is looked at (the marker cannot overlap itself): lines are short, and a
    // substring searcher's set-up per line cost more than its search (a tenth of the reader's
    // time on cuzk's timing lines, which are looked through here first).
    let b = line.as_bytes();
    memchr::memchr_iter(b'T', b)
        .find(|&at| {
            at > 0
                && b[at..].starts_with(MARKER.as_bytes())
                && matches!(b[at - 1], b' ' | b'\t' | b']' | b':' | b'|' | b'>' | b'\0')
        })
        .map(|at| &line[at..])
}

/// Parses one log line.
///
/// Returns `Ok(None)` for a line that holds no TIMELINE event (ordinary log lines,
/// `CUZK_TIMING:` lines), `Ok(Some(event))` for a TIMELINE line, and an error naming what is
/// wrong for a malformed one. A trailing `\n` or `\r\n` is ignored.
#[inline]
pub fn parse_line(line: &str) -> Result<Option<EventRef<'_>>, ParseError> {
    if let Some(ev) = parse_canonical(line) {
        return Ok(Some(ev));
    }
    parse_general(line)
}

/// The general parser: every variant, and the error of a malformed line. [`parse_line`] of a
/// line the fast path has turned down already.
pub(crate) fn parse_general(line: &str) -> Result<Option<EventRef<'_>>, ParseError> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    match find_timeline(line) {
        None => Ok(None),
        Some(tl) => parse_timeline(&tl[MARKER.len()..]).map(Some),
    }
}

/// The fast path for the lines cuzk and proofline write: `TIMELINE,` at the start of the line,
/// the known event names and keys, each key once, numbers that fit. Anything else (a log
/// prefix, `CHAN_SEND`, unknown keys, repeated keys, overflow, any error) returns `None`
/// and goes to [`parse_general`], so that the fast path never decides a case differently
/// (a property test checks the two agree). One pass: each numeric field is parsed while it
/// is scanned for its end.
#[inline]
fn parse_canonical(line: &str) -> Option<EventRef<'_>> {
    // (a `\n` inside the line, which a line of a log does not hold, is left to the general
    // parser)
    canonical_at(line, 0)
        .filter(|&(_, end)| end + 1 >= line.len())
        .map(|(ev, _)| ev)
}

/// [`parse_canonical`] of the line that starts at `text[from..]`, in a block of lines: the
/// event, and where its line's `\n` is. `None` for a line the fast path does not take, and
/// for a last line with no `\n` (a cut line). The line's end is found by parsing it: a
/// block's TIMELINE lines are not searched for their newline first (that search was a
/// tenth of the reader's instructions on a log of TIMELINE lines).
#[inline]
pub(crate) fn parse_canonical_in(text: &str, from: usize) -> Option<(EventRef<'_>, usize)> {
    canonical_at(text, from).filter(|&(_, end)| end < text.len())
}

/// The fast path from `text[from..]` to the end of its line: the `\n` (or `\r\n`) that ends
/// it, or the end of `text`. Returns the event and the index of that `\n` (`text.len()`
/// where `text` ended first).
#[inline(always)]
fn canonical_at(text: &str, from: usize) -> Option<(EventRef<'_>, usize)> {
    let b = text.as_bytes();
    if !b.get(from..)?.starts_with(MARKER.as_bytes()) {
        return None;
    }
    // the end of the line when the item that ends at `i` is its last: its `\n`, past a `\r`
    let line_end = |i: usize| match b.get(i) {
        None => Some(i),
        Some(b'\n') => Some(i),
        Some(b'\r') if matches!(b.get(i + 1), None | Some(b'\n')) => Some(i + 1),
        Some(_) => None,
    };
    let mut i = from + MARKER.len();
    let (offset_ms, after) = digits(b, i)?;
    if offset_ms > MAX_OFFSET_MS || b.get(after) != Some(&b',') {
        return None;
    }
    i = after + 1;
    let (kind, name_len) = canonical_name(&b[i..])?;
    i += name_len;
    let job_end = find_either::<b',', b'\n'>(b, i)?;
    if job_end == i || b[job_end] != b',' {
        return None;
    }
    // Every index used to slice `text` is at an ASCII byte or its end: a char boundary.
    let job_id = &text[i..job_end];
    i = job_end + 1;
    let mut ev = TimelineEvent::new(offset_ms, kind, job_id);
    let mut seen = 0u8;
    let mut once = |bit: u8| {
        let repeat = seen & bit != 0;
        seen |= bit;
        (!repeat).then_some(())
    };
    // (an event with no items: its job's comma ends the line)
    if let Some(end) = line_end(i) {
        return (!needs_worker(&ev)).then_some((ev, end));
    }
    loop {
        let item = &b[i..];
        if item.starts_with(b"partition=") {
            once(1)?;
            let (v, at) = digits(b, i + 10)?;
            ev.partition = Some(u32::try_from(v).ok()?);
            i = at;
        } else if item.starts_with(b"worker=") {
            once(2)?;
            let (v, at) = digits(b, i + 7)?;
            ev.worker = Some(u32::try_from(v).ok()?);
            i = at;
        } else if item.starts_with(b"gpu=") {
            once(4)?;
            let (v, at) = digits(b, i + 4)?;
            ev.gpu = Some(u32::try_from(v).ok()?);
            i = at;
        } else if item.starts_with(b"synth_ms=") {
            once(8)?;
            let (v, at) = digits(b, i + 9)?;
            ev.synth_ms = Some(v);
            i = at;
        } else if item.starts_with(b"gpu_ms=") {
            once(16)?;
            let (v, at) = digits(b, i + 7)?;
            ev.gpu_ms = Some(v);
            i = at;
        } else if item.starts_with(b"kind=") {
            once(32)?;
            let from = i + 5;
            let mut to = find_either::<b',', b'\n'>(b, from).unwrap_or(b.len());
            // a last item's `\r` before its `\n` is not part of it
            if b[from..to].ends_with(b"\r") && b.get(to) != Some(&b',') {
                to -= 1;
            }
            ev.proof_kind = Some(&text[from..to]);
            i = to;
        } else if item.starts_with(b"monolithic") {
            once(64)?;
            ev.monolithic = true;
            i += 10;
        } else if item.starts_with(b"request=") {
            once(128)?;
            let (v, at) = digits(b, i + 8)?;
            ev.request = Some(u32::try_from(v).ok()?);
            i = at;
        } else {
            return None;
        }
        if let Some(end) = line_end(i) {
            // a GPU event with no worker is malformed: the general parser says so
            return (!needs_worker(&ev)).then_some((ev, end));
        }
        // (a trailing comma, an empty item, goes to the general parser)
        if b[i] != b',' || line_end(i + 1).is_some() {
            return None;
        }
        i += 1;
    }
}

/// A GPU event that names no worker (nor GPU).
fn needs_worker(ev: &EventRef<'_>) -> bool {
    ev.kind.is_gpu() && ev.worker.is_none() && ev.gpu.is_none()
}

/// The first `B` in `b` from `from`, eight bytes at a time: for the short spans of a line
/// (a timing line's key, 7 to 17 bytes: a byte at a time cost a third of reading the line;
/// a job id, where `memchr`'s setup cost more than the search). [`find_either`] of one byte
/// (its second test is the first again, which the compiler folds).
#[inline]
pub(crate) fn find_byte<const B: u8>(b: &[u8], from: usize) -> Option<usize> {
    find_either::<B, B>(b, from)
}

/// The first `A` or `B` in `b` from `from`, eight bytes at a time.
#[inline]
pub(crate) fn find_either<const A: u8, const B: u8>(b: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // a zero byte of `x` is flagged; the lowest flagged byte is always a true zero
    let flags = |x: u64| x.wrapping_sub(ONES) & !x & (ONES << 7);
    let mut i = from;
    while let Some(chunk) = b.get(i..i + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // the lowest byte flagged in either is a true one of that one
        let found = flags(w ^ (ONES * u64::from(A))) | flags(w ^ (ONES * u64::from(B)));
        if found != 0 {
            return Some(i + (found.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b.get(i..)?
        .iter()
        .position(|&c| c == A || c == B)
        .map(|at| i + at)
}

/// Parses the digits at `b[from..]` up to the next non-digit: 1 to 19 of them (so no
/// overflow check is needed); returns the value and where the digits end.
#[inline]
pub(crate) fn digits(b: &[u8], from: usize) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    let mut i = from;
    // (the count is checked once at the end: past 19 digits the value wraps, unused)
    while let Some(&c) = b.get(i) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        i += 1;
    }
    (i > from && i - from <= 19).then_some((v, i))
}

/// Matches an event name and its comma at the start of `b`; returns the kind and the length
/// taken. `CHAN_SEND` is left to the general parser.
#[inline]
fn canonical_name(b: &[u8]) -> Option<(EventKind, usize)> {
    const NAMES: [(&[u8], EventKind); 6] = [
        (b"GPU_START,", EventKind::GpuStart),
        (b"GPU_END,", EventKind::GpuEnd),
        (b"SYNTH_START,", EventKind::SynthStart),
        (b"SYNTH_END,", EventKind::SynthEnd),
        (b"GPU_QUEUE,", EventKind::GpuQueue),
        (b"GPU_PICKUP,", EventKind::GpuPickup),
    ];
    NAMES
        .iter()
        .find(|(name, _)| b.starts_with(name))
        .map(|&(name, kind)| (kind, name.len()))
}

/// Splits at the first comma (a byte loop: faster than the generic pattern search on the
/// short fields of a TIMELINE line).
#[inline]
fn next_field(s: &str) -> (&str, Option<&str>) {
    match s.bytes().position(|b| b == b',') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    }
}

fn parse_timeline(rest: &str) -> Result<EventRef<'_>, ParseError> {
    let (offset, rest) = next_field(rest);
    let Some(rest) = rest else {
        return Err(ParseError::MissingFields { found: 2 });
    };
    let (name, rest) = next_field(rest);
    let Some(rest) = rest else {
        return Err(ParseError::MissingFields { found: 3 });
    };
    // cuzk always prints the detail field; old whole-proof CHAN_SEND lines end in a bare `,`.
    let (job_id, detail) = next_field(rest);
    let Some(detail) = detail else {
        return Err(ParseError::MissingFields { found: 4 });
    };
    let offset_ms = parse_u64(offset)
        .filter(|&v| v <= MAX_OFFSET_MS)
        .ok_or_else(|| ParseError::BadOffset(written(offset)))?;
    let kind = EventKind::from_name(name).ok_or_else(|| ParseError::UnknownEvent(written(name)))?;
    if job_id.is_empty() {
        return Err(ParseError::EmptyJobId);
    }
    let mut ev = TimelineEvent::new(offset_ms, kind, job_id);
    parse_detail(detail, &mut ev)?;
    if needs_worker(&ev) {
        return Err(ParseError::NoWorker(ev.kind));
    }
    Ok(ev)
}

/// Parses ASCII digits without sign or whitespace (`str::parse` accepts a leading `+`).
fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for b in s.bytes() {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

fn set_num<T: Copy + PartialEq + TryFrom<u64>>(
    slot: &mut Option<T>,
    key: &str,
    value: &str,
) -> Result<(), ParseError> {
    let bad = || ParseError::BadNumber {
        key: written(key),
        value: written(value),
    };
    let v = parse_u64(value).ok_or_else(bad)?;
    let v = T::try_from(v).map_err(|_| bad())?;
    match *slot {
        Some(old) if old != v => Err(ParseError::DuplicateKey(written(key))),
        _ => {
            *slot = Some(v);
            Ok(())
        }
    }
}

fn parse_detail<'a>(detail: &'a str, ev: &mut EventRef<'a>) -> Result<(), ParseError> {
    let mut rest = detail;
    loop {
        let (item, next) = next_field(rest);
        match item.bytes().position(|b| b == b'=') {
            None => {
                if item == "monolithic" {
                    ev.monolithic = true;
                }
                // other bare words are unknown extras: accepted, not used
            }
            Some(eq) => {
                let (key, value) = (&item[..eq], &item[eq + 1..]);
                match key {
                    "partition" | "snap_partition" => set_num(&mut ev.partition, key, value)?,
                    "worker" | "worker_id" => set_num(&mut ev.worker, key, value)?,
                    "gpu" => set_num(&mut ev.gpu, key, value)?,
                    "request" => set_num(&mut ev.request, key, value)?,
                    "synth_ms" => set_num(&mut ev.synth_ms, key, value)?,
                    "gpu_ms" => set_num(&mut ev.gpu_ms, key, value)?,
                    "kind" => match ev.proof_kind {
                        Some(old) if old != value => {
                            return Err(ParseError::DuplicateKey(written(key)));
                        }
                        _ => ev.proof_kind = Some(value),
                    },
                    _ => {} // unknown keys are accepted and ignored
                }
            }
        }
        match next {
            Some(n) => rest = n,
            None => return Ok(()),
        }
    }
}

/// Writes the detail field in cuzk's order: `worker`, `partition`, `kind`, `synth_ms`,
/// `gpu_ms`, `monolithic`, then proofline's own `gpu` and `request`.
pub fn write_detail<S: AsRef<str>>(
    out: &mut impl fmt::Write,
    ev: &TimelineEvent<S>,
) -> fmt::Result {
    let mut sep = "";
    let mut item = |out: &mut dyn fmt::Write, args: fmt::Arguments<'_>| -> fmt::Result {
        out.write_str(sep)?;
        sep = ",";
        out.write_fmt(args)
    };
    if let Some(w) = ev.worker {
        item(out, format_args!("worker={w}"))?;
    }
    if let Some(p) = ev.partition {
        item(out, format_args!("partition={p}"))?;
    }
    if let Some(k) = &ev.proof_kind {
        item(out, format_args!("kind={}", k.as_ref()))?;
    }
    if let Some(ms) = ev.synth_ms {
        item(out, format_args!("synth_ms={ms}"))?;
    }
    if let Some(ms) = ev.gpu_ms {
        item(out, format_args!("gpu_ms={ms}"))?;
    }
    if ev.monolithic {
        item(out, format_args!("monolithic"))?;
    }
    if let Some(g) = ev.gpu {
        item(out, format_args!("gpu={g}"))?;
    }
    if let Some(r) = ev.request {
        item(out, format_args!("request={r}"))?;
    }
    Ok(())
}

/// Appends the TIMELINE line for `ev` to `out`, without a newline.
pub fn write_line<S: AsRef<str>>(out: &mut String, ev: &TimelineEvent<S>) {
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "TIMELINE,{},{},{},",
        ev.offset_ms,
        ev.kind,
        ev.job_id.as_ref()
    );
    let _ = write_detail(out, ev);
}

impl<S: AsRef<str>> fmt::Display for TimelineEvent<S> {
    /// The TIMELINE line, without a newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TIMELINE,{},{},{},",
            self.offset_ms,
            self.kind,
            self.job_id.as_ref()
        )?;
        write_detail(f, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Up to 19 digits are read; more are refused, however many (the value wraps past 19
    /// and must not be used).
    #[test]
    fn digits_take_1_to_19() {
        assert_eq!(digits(b"x", 0), None);
        assert_eq!(digits(b"7,", 0), Some((7, 1)));
        let nines = b"9999999999999999999";
        assert_eq!(digits(nines, 0), Some((9_999_999_999_999_999_999, 19)));
        assert_eq!(digits(b"00000000000000000001", 0), None, "20 digits");
        for n in 20..70 {
            assert_eq!(digits(&vec![b'9'; n], 0), None, "{n} digits");
            assert_eq!(digits(&vec![b'0'; n], 0), None, "{n} zeros");
        }
    }

    /// Lines exactly as cuzk prints them (engine.rs `timeline_event` call sites).
    const CUZK_LINES: &[&str] = &[
        "TIMELINE,183211,SYNTH_START,porep-1000-42,partition=3",
        "TIMELINE,214877,SYNTH_END,porep-1000-42,partition=3,synth_ms=31402",
        "TIMELINE,214877,GPU_QUEUE,porep-1000-42,partition=3",
        "TIMELINE,215010,GPU_PICKUP,porep-1000-42,worker=1,partition=3",
        "TIMELINE,215010,GPU_START,porep-1000-42,worker=1,partition=3",
        "TIMELINE,219950,GPU_END,porep-1000-42,worker=1,partition=3,gpu_ms=4940",
        "TIMELINE,5,SYNTH_START,winpost-1000-ab12,kind=winning-post",
        "TIMELINE,900,SYNTH_END,winpost-1000-ab12,synth_ms=895",
        "TIMELINE,900,GPU_QUEUE,winpost-1000-ab12,monolithic",
        "TIMELINE,901,GPU_PICKUP,winpost-1000-ab12,worker=0",
        "TIMELINE,901,GPU_START,winpost-1000-ab12,worker=0",
        "TIMELINE,1500,GPU_END,winpost-1000-ab12,worker=0,gpu_ms=599",
        "TIMELINE,7,SYNTH_START,wdpost-1000-2-[12 34 56],kind=window-post",
        "TIMELINE,0,SYNTH_START,3f2b8c1e-9d7a-4c55-8e0b-1a2b3c4d5e6f,partition=0",
        "TIMELINE,219950,GPU_END,porep-1000-42,worker=1,partition=3,gpu_ms=4940,gpu=0",
    ];

    #[test]
    fn cuzk_lines_round_trip_byte_for_byte() {
        for line in CUZK_LINES {
            let ev = parse_line(line).unwrap().unwrap();
            let mut out = String::new();
            write_line(&mut out, &ev);
            assert_eq!(&out, line);
            assert_eq!(&ev.to_string(), line);
            assert_eq!(&ev.to_owned_event().to_string(), line);
        }
    }

    #[test]
    fn what_cuzk_writes_takes_the_fast_path() {
        for line in CUZK_LINES {
            assert_eq!(
                parse_canonical(line).as_ref(),
                parse_general(line).unwrap().as_ref(),
                "{line}"
            );
            assert!(parse_canonical(line).is_some(), "{line}");
        }
        for odd in [
            "TIMELINE,10,CHAN_SEND,j,partition=4",
            "TIMELINE,10,GPU_END,j,worker=1,mystery=7",
            "TIMELINE,10,GPU_END,j,worker=1,worker=1",
            "TIMELINE,99999999999999999999,GPU_END,j,worker=1",
            "TIMELINE,10,GPU_END,j,partition=4294967296",
            "TIMELINE,10,GPU_END,j,partition=1,",
            "x TIMELINE,10,GPU_END,j,worker=1",
        ] {
            assert!(parse_canonical(odd).is_none(), "{odd}");
        }
    }

    #[test]
    fn fields_are_read() {
        let ev = parse_line(CUZK_LINES[5]).unwrap().unwrap();
        assert_eq!(ev.offset_ms, 219_950);
        assert_eq!(ev.kind, EventKind::GpuEnd);
        assert_eq!(ev.job_id, "porep-1000-42");
        assert_eq!(ev.worker, Some(1));
        assert_eq!(ev.partition, Some(3));
        assert_eq!(ev.gpu_ms, Some(4940));
        let ev = parse_line(CUZK_LINES[12]).unwrap().unwrap();
        assert_eq!(ev.job_id, "wdpost-1000-2-[12 34 56]");
        assert_eq!(ev.proof_kind, Some("window-post"));
    }

    /// (input, expected normalised line); the variants real logs contain.
    #[test]
    fn variants_are_accepted() {
        let table: &[(&str, &str)] = &[
            (
                "TIMELINE,10,CHAN_SEND,porep-1-2,partition=4",
                "TIMELINE,10,GPU_QUEUE,porep-1-2,partition=4",
            ),
            (
                "TIMELINE,10,CHAN_SEND,wdpost-1-2,",
                "TIMELINE,10,GPU_QUEUE,wdpost-1-2,",
            ),
            (
                "TIMELINE,10,SYNTH_START,snap-1-2,snap_partition=15",
                "TIMELINE,10,SYNTH_START,snap-1-2,partition=15",
            ),
            (
                "TIMELINE,10,GPU_START,j,worker=1,partition=2\r\n",
                "TIMELINE,10,GPU_START,j,worker=1,partition=2",
            ),
            (
                "TIMELINE,10,GPU_START,j,worker=1,partition=2\n",
                "TIMELINE,10,GPU_START,j,worker=1,partition=2",
            ),
            (
                "2026-01-02T03:04:05Z INFO cuzk: TIMELINE,10,GPU_START,j,worker=1",
                "TIMELINE,10,GPU_START,j,worker=1",
            ),
            (
                "[stderr] TIMELINE,10,GPU_START,j,worker=1",
                "TIMELINE,10,GPU_START,j,worker=1",
            ),
            (
                "TIMELINE,10,GPU_END,j,worker=1,gpu_ms=5,mystery=7,flag",
                "TIMELINE,10,GPU_END,j,worker=1,gpu_ms=5",
            ),
            (
                "TIMELINE,10,GPU_END,j,partition=2,worker=1,gpu_ms=5",
                "TIMELINE,10,GPU_END,j,worker=1,partition=2,gpu_ms=5",
            ),
            (
                "TIMELINE,10,GPU_PICKUP,j,worker_id=3",
                "TIMELINE,10,GPU_PICKUP,j,worker=3",
            ),
        ];
        for (input, want) in table {
            let ev = parse_line(input)
                .unwrap_or_else(|e| panic!("{input}: {e}"))
                .unwrap();
            assert_eq!(&ev.to_string(), want, "{input}");
        }
    }

    #[test]
    fn non_timeline_lines_are_skipped() {
        for line in [
            "",
            "CUZK_TIMING: ntt=1234us",
            "2026-01-02 INFO partition synthesis complete",
            "XTIMELINE,1,GPU_START,j,worker=1",
            "key=TIMELINE,1,GPU_START,j,worker=1",
            "TIMELINE",
        ] {
            assert_eq!(parse_line(line), Ok(None), "{line}");
        }
    }

    #[test]
    fn malformed_lines_say_what_is_wrong() {
        let table: &[(&str, &str)] = &[
            (
                "TIMELINE,12a,GPU_START,j,worker=1",
                "offset `12a` is not an unsigned integer",
            ),
            ("TIMELINE,-5,GPU_START,j,worker=1", "offset `-5`"),
            ("TIMELINE,+5,GPU_START,j,worker=1", "offset `+5`"),
            (
                "TIMELINE,5,GPU_BEGIN,j,worker=1",
                "unknown event `GPU_BEGIN`",
            ),
            ("TIMELINE,5,GPU_START", "found only 3 of the 5 fields"),
            ("TIMELINE,5", "found only 2 of the 5 fields"),
            (
                "INFO cuzk: TIMELINE,5,GPU_START,j",
                "found only 4 of the 5 fields",
            ),
            ("TIMELINE,5,GPU_START,j", "found only 4 of the 5 fields"),
            ("TIMELINE,5,GPU_START,,worker=1", "job id is empty"),
            (
                "TIMELINE,5,GPU_START,j,worker=x",
                "field `worker`: `x` is not an unsigned integer",
            ),
            (
                "TIMELINE,5,GPU_START,j,partition=99999999999",
                "field `partition`",
            ),
            (
                "TIMELINE,5,GPU_START,j,partition=1,partition=2",
                "field `partition` appears twice",
            ),
            ("TIMELINE,5,GPU_END,j,gpu_ms=", "field `gpu_ms`: `` is not"),
        ];
        // a field of any length is quoted by its first 80 characters
        let long = "9".repeat(1 << 20);
        let err = parse_line(&format!("TIMELINE,{long}x,GPU_START,j,worker=1"))
            .expect_err("a long offset")
            .to_string();
        assert!(
            err.starts_with(&format!("offset `{}…`", &long[..80])),
            "{err:.200}"
        );
        assert!(err.len() < 200, "{} bytes", err.len());
        // (cut at a character, never inside one; 80 characters are shown whole)
        let value = |v: &str| {
            parse_line(&format!("TIMELINE,5,GPU_START,j,worker={v}"))
                .expect_err(v)
                .to_string()
        };
        let x79 = "x".repeat(79);
        assert!(value(&format!("{x79}é")).contains(&format!("`{x79}é` is not")));
        assert!(value(&format!("{x79}éé")).contains(&format!("`{x79}é…` is not")));
        for (input, want) in table {
            let err = parse_line(input).expect_err(input).to_string();
            assert!(err.contains(want), "{input}: got `{err}`, want `{want}`");
        }
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use crate::event::Event;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn event() -> impl Strategy<Value = Event> {
        (
            0..=MAX_OFFSET_MS,
            0usize..6,
            "[a-z0-9][a-z0-9 \\[\\]-]{0,40}",
            proptest::option::of(0u32..100),
            proptest::option::of(0u32..64),
            proptest::option::of(0u32..8),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of("[a-z][a-z-]{0,15}"),
            any::<bool>(),
            proptest::option::of(1u32..5),
        )
            .prop_map(
                |(off, k, job, partition, worker, gpu, s, g, kind, mono, request)| Event {
                    offset_ms: off,
                    kind: EventKind::ALL[k],
                    job_id: Arc::from(job.as_str()),
                    partition,
                    worker,
                    gpu,
                    synth_ms: s,
                    gpu_ms: g,
                    proof_kind: kind.map(|k| Arc::from(k.as_str())),
                    monolithic: mono,
                    request,
                },
            )
            // a GPU event names its worker (or GPU), or it is malformed (tested below)
            .prop_map(|mut ev| {
                if ev.kind.is_gpu() && ev.worker.is_none() && ev.gpu.is_none() {
                    ev.worker = Some(0);
                }
                ev
            })
    }

    #[test]
    fn offsets_past_2_pow_52_are_malformed_so_no_arithmetic_overflows() {
        for off in [
            "18446744073709551000",
            "18446744073709351616",
            "4503599627370497",
        ] {
            let line = format!("TIMELINE,{off},GPU_END,j,worker=1,partition=0");
            assert_eq!(
                parse_line(&line).unwrap_err(),
                ParseError::BadOffset(off.to_owned()),
                "{line}"
            );
        }
        let line = format!("TIMELINE,{MAX_OFFSET_MS},GPU_END,j,worker=1,partition=0");
        assert_eq!(parse_line(&line).unwrap().unwrap().offset_ms, MAX_OFFSET_MS);
        // and the engine takes the largest offset without overflowing
        let mut engine = crate::Engine::default();
        let ev = parse_line(&line).unwrap().unwrap();
        engine.ingest(&ev, &mut crate::sink::NoUpdates);
        engine.advance(MAX_OFFSET_MS, &mut crate::sink::NoUpdates);
        engine.finish(&mut crate::sink::NoUpdates);
        assert_eq!(engine.report().summary.jobs_seen, 1);
    }

    #[test]
    fn a_gpu_line_without_a_worker_is_malformed_and_a_nul_hole_is_skipped() {
        for line in [
            "TIMELINE,5,GPU_PICKUP,porep-1-1,partition=3",
            "TIMELINE,5,GPU_START,porep-1-1,partition=3",
            "TIMELINE,5,GPU_END,winpost-1-a,gpu_ms=4",
            "[INFO] TIMELINE,5,GPU_END,winpost-1-a,",
        ] {
            let err = parse_line(line).unwrap_err();
            assert!(
                matches!(err, ParseError::NoWorker(k) if k.is_gpu()),
                "{line}: {err}"
            );
            assert!(err.to_string().contains("without `worker=`"), "{err}");
        }
        // after a copytruncate hole of NUL bytes, the line is still read
        let ev = parse_line("\0\0\0TIMELINE,5,SYNTH_START,j,partition=1")
            .unwrap()
            .unwrap();
        assert_eq!((ev.offset_ms, ev.partition), (5, Some(1)));
        // proofline's own writer may name the GPU instead
        assert!(
            parse_line("TIMELINE,5,GPU_START,j,gpu=1")
                .unwrap()
                .is_some()
        );
        assert!(
            parse_line("TIMELINE,5,SYNTH_START,j,partition=1")
                .unwrap()
                .is_some()
        );
    }

    /// `find_timeline` as it was, with a substring searcher: the reference.
    fn find_timeline_reference(line: &str) -> Option<&str> {
        if line.starts_with(MARKER) {
            return Some(line);
        }
        let mut from = 0;
        while let Some(pos) = memchr::memmem::find(&line.as_bytes()[from..], MARKER.as_bytes()) {
            let at = from + pos;
            if at > 0
                && matches!(
                    line.as_bytes()[at - 1],
                    b' ' | b'\t' | b']' | b':' | b'|' | b'>' | b'\0'
                )
            {
                return Some(&line[at..]);
            }
            from = at + MARKER.len();
        }
        None
    }

    /// The fast path as it was when each line was first found by its newline (before it
    /// parsed a block's line up to the newline it finds): the new one must take the same
    /// lines, and read them the same, or the speed-up is lost where the results still agree.
    fn parse_canonical_reference(line: &str) -> Option<EventRef<'_>> {
        let mut b = line.as_bytes();
        if let [rest @ .., b'\n'] = b {
            b = rest;
        }
        if let [rest @ .., b'\r'] = b {
            b = rest;
        }
        if !b.starts_with(MARKER.as_bytes()) {
            return None;
        }
        let mut i = MARKER.len();
        let (offset_ms, after) = digits(b, i)?;
        if offset_ms > MAX_OFFSET_MS || b.get(after) != Some(&b',') {
            return None;
        }
        i = after + 1;
        let (kind, name_len) = canonical_name(&b[i..])?;
        i += name_len;
        let job_len = find_byte::<b','>(b, i)? - i;
        if job_len == 0 {
            return None;
        }
        // Every index used to slice `line` is at an ASCII byte or its end: a char boundary.
        let job_id = &line[i..i + job_len];
        i += job_len + 1;
        let mut ev = TimelineEvent::new(offset_ms, kind, job_id);
        let mut seen = 0u8;
        let mut once = |bit: u8| {
            let repeat = seen & bit != 0;
            seen |= bit;
            (!repeat).then_some(())
        };
        while i < b.len() {
            let item = &b[i..];
            if item.starts_with(b"partition=") {
                once(1)?;
                let (v, at) = digits(b, i + 10)?;
                ev.partition = Some(u32::try_from(v).ok()?);
                i = at;
            } else if item.starts_with(b"worker=") {
                once(2)?;
                let (v, at) = digits(b, i + 7)?;
                ev.worker = Some(u32::try_from(v).ok()?);
                i = at;
            } else if item.starts_with(b"gpu=") {
                once(4)?;
                let (v, at) = digits(b, i + 4)?;
                ev.gpu = Some(u32::try_from(v).ok()?);
                i = at;
            } else if item.starts_with(b"synth_ms=") {
                once(8)?;
                let (v, at) = digits(b, i + 9)?;
                ev.synth_ms = Some(v);
                i = at;
            } else if item.starts_with(b"gpu_ms=") {
                once(16)?;
                let (v, at) = digits(b, i + 7)?;
                ev.gpu_ms = Some(v);
                i = at;
            } else if item.starts_with(b"kind=") {
                once(32)?;
                let from = i + 5;
                let len = memchr::memchr(b',', &b[from..]).unwrap_or(b.len() - from);
                ev.proof_kind = Some(&line[from..from + len]);
                i = from + len;
            } else if item.starts_with(b"monolithic") {
                once(64)?;
                ev.monolithic = true;
                i += 10;
            } else if item.starts_with(b"request=") {
                once(128)?;
                let (v, at) = digits(b, i + 8)?;
                ev.request = Some(u32::try_from(v).ok()?);
                i = at;
            } else {
                return None;
            }
            match b.get(i) {
                None => break,
                // (a trailing comma, an empty item, goes to the general parser)
                Some(b',') if i + 1 < b.len() => i += 1,
                Some(_) => return None,
            }
        }
        // a GPU event with no worker is malformed: the general parser says so
        (!needs_worker(&ev)).then_some(ev)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// Markers, near-markers and separators in any order: found where the substring
        /// search found them.
        #[test]
        fn the_marker_is_found_where_a_substring_search_finds_it(
            pieces in proptest::collection::vec(
                prop_oneof![
                    Just("TIMELINE,"), Just("TIMELINE"), Just("T"), Just("TIMELIN"),
                    Just("TT"), Just(" "), Just("\t"), Just("]"), Just(":"), Just("|"),
                    Just(">"), Just("\0"), Just("x"), Just("é"), Just(","),
                ],
                0..16,
            )
        ) {
            let line = pieces.concat();
            prop_assert_eq!(find_timeline(&line), find_timeline_reference(&line), "{:?}", line);
        }
    }

    proptest! {
        /// The word-at-a-time search finds the first byte as a byte-at-a-time one does,
        /// wherever it lies against the words, and none past the end.
        #[test]
        fn find_byte_finds_the_first(
            b in proptest::collection::vec(prop_oneof![Just(b','), Just(0xac), any::<u8>()], 0..40),
            from in 0usize..42,
        ) {
            let want = b.get(from..).and_then(|r| r.iter().position(|&c| c == b',')).map(|at| from + at);
            prop_assert_eq!(find_byte::<b','>(&b, from), want);
        }

        #[test]
        fn format_then_parse_gives_the_event_back(ev in event()) {
            let mut line = String::new();
            write_line(&mut line, &ev);
            let parsed = parse_line(&line).unwrap().unwrap().to_owned_event();
            prop_assert_eq!(&parsed, &ev);
            // and the line it writes is the line it read
            let mut again = String::new();
            write_line(&mut again, &parsed);
            prop_assert_eq!(again, line);
        }

        /// Lines built from the pieces real and broken logs contain: where the fast path
        /// takes a line, it must read it exactly as the general parser does.
        #[test]
        fn the_fast_path_agrees_with_the_general_parser(
            offset in prop_oneof!["[0-9]{1,3}", "[0-9]{18,21}", "[0-9+a-]{0,3}"],
            name in prop_oneof![
                Just("SYNTH_START"), Just("SYNTH_END"), Just("GPU_QUEUE"), Just("CHAN_SEND"),
                Just("GPU_PICKUP"), Just("GPU_START"), Just("GPU_END"), Just("GPU_STAR"), Just(""),
            ],
            job in "[a-z0-9=-]{0,6}",
            items in proptest::collection::vec(
                (
                    prop_oneof![
                        Just("partition="), Just("snap_partition="), Just("worker="),
                        Just("worker_id="), Just("gpu="), Just("gpu_ms="), Just("synth_ms="),
                        Just("kind="), Just("monolithic"), Just("request="), Just("mystery="),
                        Just(""),
                    ],
                    prop_oneof![
                        "[0-9]{1,2}", "[0-9]{10,21}", "[a-z0-9=]{0,3}", "[a-z\r]{0,3}",
                        Just(String::new()),
                    ],
                ),
                0..5,
            ),
            tail in prop_oneof![
                Just(""), Just(","), Just("\n"), Just("\r\n"), Just("\r"), Just(",\n"),
                Just("\r\r\n"), Just(",\r\n"),
            ],
        ) {
            let detail: Vec<String> = items.iter().map(|(k, v)| format!("{k}{v}")).collect();
            let line = format!("TIMELINE,{offset},{name},{job},{}{tail}", detail.join(","));
            prop_assert_eq!(parse_canonical(&line), parse_canonical_reference(&line), "{:?}", line);
            if let Some(fast) = parse_canonical(&line) {
                prop_assert_eq!(Ok(Some(fast)), parse_general(&line), "{:?}", line);
            }
            // and in a block, followed by another line: the same, up to its newline
            let block = format!("{line}TIMELINE,1,GPU_END,j,worker=1\n");
            let in_block = parse_canonical_in(&block, 0);
            if tail.ends_with('\n') {
                let end = line.len() - 1;
                prop_assert_eq!(in_block, parse_canonical(&line).map(|ev| (ev, end)), "{:?}", line);
            } else {
                // the line runs on into the next: its end is not where the block's next
                // line starts
                prop_assert!(in_block.is_none_or(|(_, end)| end == block.len() - 1), "{:?}", line);
            }
        }

        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,80}") {
            let _ = parse_line(&s);
            let _ = parse_line(&format!("TIMELINE,{s}"));
        }
    }
}
