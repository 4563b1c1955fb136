//! Reading the fields proofline cares about off spans and `timeline` events.

use std::fmt::{self, Write as _};
use std::sync::Arc;

use tracing::field::{Field, Visit};

/// Names of the span fields proofline reads (on the span, then on its ancestors):
/// `FieldNames::default()` (cuzk's), then the roles that differ, e.g.
/// `FieldNames::default().job_id(["batch_id"]).partition(["segment"])`. Each setter takes
/// every name that fills its role (the first found on a span wins).
///
/// One name may be given for several roles: a prover with one worker per GPU that calls
/// both `device` fills the worker and the GPU from it (`.worker(["device"]).gpu(["device"])`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldNames {
    pub(crate) job_id: Vec<String>,
    pub(crate) partition: Vec<String>,
    pub(crate) worker: Vec<String>,
    pub(crate) gpu: Vec<String>,
    pub(crate) proof_kind: Vec<String>,
}

/// The names, owned.
fn names<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Vec<String> {
    names.into_iter().map(Into::into).collect()
}

impl Default for FieldNames {
    fn default() -> Self {
        let v = |names: &[&str]| names.iter().map(|s| (*s).to_owned()).collect();
        FieldNames {
            job_id: v(&["job_id"]),
            partition: v(&["partition"]),
            worker: v(&["worker", "worker_id"]),
            gpu: v(&["gpu"]),
            proof_kind: v(&["proof_kind", "kind"]),
        }
    }
}

/// Which of the fields a field name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    JobId,
    Partition,
    Worker,
    Gpu,
    ProofKind,
}

impl Slot {
    const ALL: [Slot; 5] = [
        Slot::JobId,
        Slot::Partition,
        Slot::Worker,
        Slot::Gpu,
        Slot::ProofKind,
    ];
}

/// The roles one field name fills (usually one, none for a field proofline does not read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Slots(u8);

impl Slots {
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Calls `f` with each role, by its bit: a field has one or none, usually, and a walk
    /// through the five roles cost ~30 instructions a field (~170 of cuzk's `gpu_worker`
    /// span's).
    #[inline]
    pub fn each(self, mut f: impl FnMut(Slot)) {
        let mut bits = self.0;
        while bits != 0 {
            f(Slot::ALL[bits.trailing_zeros() as usize]);
            bits &= bits - 1;
        }
    }
}

impl From<Slot> for Slots {
    fn from(s: Slot) -> Self {
        Slots(1 << s as u8)
    }
}

impl FieldNames {
    /// The job (request) id. Default `job_id`.
    pub fn job_id<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        self.job_id = names(fields);
        self
    }

    /// The partition index. Default `partition` (cuzk records it with `?`: `Some(3)`).
    pub fn partition<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        self.partition = names(fields);
        self
    }

    /// The global GPU worker index. Default `worker`, `worker_id`.
    pub fn worker<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        self.worker = names(fields);
        self
    }

    /// The GPU device index. Default `gpu`.
    pub fn gpu<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        self.gpu = names(fields);
        self
    }

    /// The proof kind. Default `proof_kind`, `kind`.
    pub fn proof_kind<S: Into<String>>(mut self, fields: impl IntoIterator<Item = S>) -> Self {
        self.proof_kind = names(fields);
        self
    }

    /// The roles a field of this name fills.
    pub(crate) fn slots(&self, name: &str) -> Slots {
        let of = |slot: Slot| match slot {
            Slot::JobId => &self.job_id,
            Slot::Partition => &self.partition,
            Slot::Worker => &self.worker,
            Slot::Gpu => &self.gpu,
            Slot::ProofKind => &self.proof_kind,
        };
        Slots(Slot::ALL.into_iter().fold(0, |bits, slot| {
            if of(slot).iter().any(|n| n == name) {
                bits | 1 << slot as u8
            } else {
                bits
            }
        }))
    }
}

/// How many bytes of a [`Name`] a queue entry holds.
pub(crate) const HEAD: usize = 24;

/// A job id or proof kind as the layer keeps it: interned (a job's spans share one), its
/// text, and its first [`HEAD`] bytes zero-padded, which a queue entry copies whole. (The
/// entry used to copy the id's bytes at their own length: `perf annotate` showed the entry's
/// next copy stalled on those narrow stores.)
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Name {
    /// [`padded`] of the text.
    head: Option<([u8; HEAD], u8)>,
    text: Box<str>,
}

/// `text`'s bytes zero-padded to [`HEAD`], and their length, when it fits.
pub(crate) fn padded(text: &str) -> Option<([u8; HEAD], u8)> {
    let bytes = text.as_bytes();
    let len = u8::try_from(bytes.len())
        .ok()
        .filter(|&n| usize::from(n) <= HEAD)?;
    let mut head = [0; HEAD];
    head[..bytes.len()].copy_from_slice(bytes);
    Some((head, len))
}

impl Name {
    pub fn new(text: &str) -> Self {
        Name {
            head: padded(text),
            text: text.into(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The text's bytes, zero-padded, and their length, when the text fits.
    #[inline]
    pub fn head(&self) -> Option<(&[u8; HEAD], u8)> {
        self.head.as_ref().map(|(head, n)| (head, *n))
    }
}

/// The fields found on one span.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SpanFields {
    pub job_id: Option<Arc<Name>>,
    pub partition: Option<u32>,
    pub worker: Option<u32>,
    pub gpu: Option<u32>,
    pub proof_kind: Option<Arc<Name>>,
    /// The request of the job id the span belongs to (see `layer::requests`): `Some(1)`
    /// inside the first request span of the id, `None` outside any.
    pub request: Option<u32>,
}

impl SpanFields {
    pub fn job_id(&self) -> Option<&str> {
        self.job_id.as_deref().map(Name::as_str)
    }

    pub fn proof_kind(&self) -> Option<&str> {
        self.proof_kind.as_deref().map(Name::as_str)
    }
}

impl SpanFields {
    /// Fills what is missing here from `other` (an ancestor).
    pub fn inherit(&mut self, other: &SpanFields) {
        if self.job_id.is_none() {
            self.job_id.clone_from(&other.job_id);
        }
        self.partition = self.partition.or(other.partition);
        self.worker = self.worker.or(other.worker);
        self.gpu = self.gpu.or(other.gpu);
        if self.proof_kind.is_none() {
            self.proof_kind.clone_from(&other.proof_kind);
        }
        // a request is the job id's: a span of another job inside it is not of it
        if self.request.is_none() && other.request.is_some() && self.job_id == other.job_id {
            self.request = other.request;
        }
    }

    /// The `request=` its events carry: a second (or later) request of the id in flight.
    #[inline]
    pub fn printed_request(&self) -> Option<u32> {
        self.request.filter(|&n| n > 1)
    }

    pub fn complete(&self) -> bool {
        self.job_id.is_some()
            && self.partition.is_some()
            && self.worker.is_some()
            && self.gpu.is_some()
    }
}

/// The most a thread's format buffer keeps between fields (a longer value is formatted
/// there too, and the buffer is then let go).
const FORMATTED_KEPT: usize = 1024;

thread_local! {
    /// Where this thread formats a field's Debug or Display form to read it, kept from one
    /// field to the next. (A zeroed stack buffer checked for UTF-8 after each use cost
    /// ~40 ns a field: a third of what cuzk's `gpu_worker` span cost the layer, with its
    /// three `%` and `?` fields.)
    static FORMATTED: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Calls `f` with `args` formatted, in this thread's buffer, or in a string of its own when
/// the buffer is in use (a value whose own formatting logs) or gone (the thread is ending).
/// `None`, without calling `f`, when a value's formatting fails.
pub(crate) fn with_formatted<R>(args: fmt::Arguments<'_>, f: impl FnOnce(&str) -> R) -> Option<R> {
    let mut f = Some(f);
    let pooled = FORMATTED.try_with(|cell| {
        let mut buf = cell.try_borrow_mut().ok()?;
        buf.clear();
        let r = match buf.write_fmt(args) {
            Ok(()) => f.take().map(|f| f(&buf)),
            Err(_) => None,
        };
        if buf.capacity() > FORMATTED_KEPT {
            *buf = String::new();
        }
        Some(r)
    });
    match pooled {
        Ok(Some(r)) => r,
        _ => {
            let f = f.take()?;
            let mut own = String::new();
            own.write_fmt(args).ok()?;
            Some(f(&own))
        }
    }
}

/// The longest span field value kept on the stack (a job id, a proof kind, an index; a UUID
/// is 36 bytes, 38 in a string's Debug quotes); a longer one goes on in a `Vec` of its own.
const INLINE: usize = 64;

/// A formatted value, written on the stack while it fits: no thread-local buffer to find and
/// borrow. (cuzk's `gpu_worker` span formats three fields, each a few bytes long.) A value
/// that outgrows it is moved to `spilled` and written on there: formatted once, whatever
/// its length, so that a value whose formatting has effects (logs, counts, or can be
/// formatted only once) is read as the old thread-buffer path read it.
struct Inline {
    buf: [u8; INLINE],
    len: usize,
    spilled: Option<Vec<u8>>,
}

impl fmt::Write for Inline {
    #[inline]
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // (once spilled, `len` is past `buf`: every write goes to `spill`)
        let end = self.len + s.len();
        match self.buf.get_mut(self.len..end) {
            Some(to) => {
                to.copy_from_slice(s.as_bytes());
                self.len = end;
            }
            None => self.spill(s),
        }
        Ok(())
    }
}

impl Inline {
    /// Writes `s` on the heap: the value is moved there first, the first time.
    #[cold]
    #[inline(never)]
    fn spill(&mut self, s: &str) {
        match &mut self.spilled {
            Some(v) => v.extend_from_slice(s.as_bytes()),
            None => {
                let mut v = Vec::with_capacity(2 * (self.len + s.len()));
                v.extend_from_slice(&self.buf[..self.len]);
                v.extend_from_slice(s.as_bytes());
                self.spilled = Some(v);
                self.len = INLINE + 1;
            }
        }
    }
}

/// [`with_formatted`] for a value that is usually short, a span field's, read as bytes:
/// formatted on the stack, or, once it outgrows that, in a `Vec` of its own. (Bytes, not
/// `&str`: checking a few bytes for UTF-8 cost more than the thread's buffer saved; they came
/// from whole `&str`s, and a name is made a `str` again only when it is new.) `None` when
/// the value's formatting fails.
pub(crate) fn with_short_formatted<R>(
    args: fmt::Arguments<'_>,
    f: impl FnOnce(&[u8]) -> R,
) -> Option<R> {
    let mut inline = Inline {
        buf: [0; INLINE],
        len: 0,
        spilled: None,
    };
    inline.write_fmt(args).ok()?;
    Some(match &inline.spilled {
        Some(v) => f(v),
        None => f(&inline.buf[..inline.len]),
    })
}

/// Parses `3`, `Some(3)`; `None` and anything else give `None`.
pub(crate) fn parse_index(s: &str) -> Option<u32> {
    parse_index_bytes(s.as_bytes())
}

/// [`parse_index`] of a value's bytes.
fn parse_index_bytes(s: &[u8]) -> Option<u32> {
    let s = s
        .strip_prefix(b"Some(")
        .and_then(|s| s.strip_suffix(b")"))
        .unwrap_or(s);
    // (the usual value, a few digits, read without `trim` and `parse`)
    if (1..=9).contains(&s.len()) && s.iter().all(u8::is_ascii_digit) {
        return Some(s.iter().fold(0, |n, &d| n * 10 + u32::from(d - b'0')));
    }
    std::str::from_utf8(s).ok()?.trim().parse().ok()
}

/// Strips a Debug-formatted string's quotes (`"abc"` -> `abc`), and `Some("abc")`.
fn unquote(s: &[u8]) -> &[u8] {
    let s = s
        .strip_prefix(b"Some(")
        .and_then(|s| s.strip_suffix(b")"))
        .unwrap_or(s);
    s.strip_prefix(b"\"")
        .and_then(|s| s.strip_suffix(b"\""))
        .unwrap_or(s)
}

const INTERN_SLOTS: usize = 16;

thread_local! {
    /// The job ids (and proof kinds) this thread saw last: a job's ten partitions and their
    /// three spans each share one allocation instead of making thirty.
    static RECENT: std::cell::RefCell<(usize, [Option<Arc<Name>>; INTERN_SLOTS])> =
        const { std::cell::RefCell::new((0, [const { None }; INTERN_SLOTS])) };
}

/// A [`Name`] for `s`, shared with recent identical strings of this thread.
pub(crate) fn intern(s: &str) -> Arc<Name> {
    intern_bytes(s.as_bytes())
}

/// [`intern`] of a value's bytes: made a `str` only when they are new to this thread (bytes
/// that are not UTF-8, which a value's formatting does not write, are read lossily).
fn intern_bytes(s: &[u8]) -> Arc<Name> {
    let new = || Arc::new(Name::new(&String::from_utf8_lossy(s)));
    RECENT
        .try_with(|cell| {
            let mut guard = cell.borrow_mut();
            let (next, slots) = &mut *guard;
            if let Some(hit) = slots.iter().flatten().find(|a| a.as_str().as_bytes() == s) {
                return hit.clone();
            }
            let a = new();
            slots[*next] = Some(a.clone());
            *next = (*next + 1) % INTERN_SLOTS;
            a
        })
        .unwrap_or_else(|_| new())
}

/// Visits a span's fields into [`SpanFields`].
pub(crate) struct FieldVisitor<'a> {
    pub names: &'a FieldNames,
    /// The roles of each field of the callsite, by field index, when worked out beforehand.
    pub slots: Option<&'a [Slots]>,
    pub out: &'a mut SpanFields,
}

impl FieldVisitor<'_> {
    fn slots(&self, field: &Field) -> Slots {
        match self.slots {
            Some(slots) => slots.get(field.index()).copied().unwrap_or_default(),
            None => self.names.slots(field.name()),
        }
    }

    fn set_str(&mut self, slot: Slot, s: &[u8]) {
        match slot {
            Slot::JobId => {
                if !s.is_empty() && s != b"None" {
                    self.out.job_id = Some(intern_bytes(s));
                }
            }
            Slot::ProofKind => {
                if !s.is_empty() && s != b"None" {
                    self.out.proof_kind = Some(intern_bytes(s));
                }
            }
            // an empty or unreadable value (`None`) leaves the field as it was: on a new
            // span, unset (and so inherited); on a later `record`, unchanged
            Slot::Partition => self.out.partition = parse_index_bytes(s).or(self.out.partition),
            Slot::Worker => self.out.worker = parse_index_bytes(s).or(self.out.worker),
            Slot::Gpu => self.out.gpu = parse_index_bytes(s).or(self.out.gpu),
        }
    }

    fn set_num(&mut self, slot: Slot, v: u64) {
        let v32 = u32::try_from(v).ok();
        match slot {
            Slot::Partition => self.out.partition = v32.or(self.out.partition),
            Slot::Worker => self.out.worker = v32.or(self.out.worker),
            Slot::Gpu => self.out.gpu = v32.or(self.out.gpu),
            Slot::JobId | Slot::ProofKind => {
                with_short_formatted(format_args!("{v}"), |s| self.set_str(slot, s));
            }
        }
    }
}

impl Visit for FieldVisitor<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.slots(field).each(|slot| self.set_num(slot, value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(v) = u64::try_from(value) {
            self.slots(field).each(|slot| self.set_num(slot, v));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.slots(field)
            .each(|slot| self.set_str(slot, value.as_bytes()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let slots = self.slots(field);
        if slots.is_empty() {
            return;
        }
        with_short_formatted(format_args!("{value:?}"), |s| {
            let s = unquote(s);
            slots.each(|slot| self.set_str(slot, s));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_from_debug_forms() {
        assert_eq!(parse_index("3"), Some(3));
        assert_eq!(parse_index("Some(12)"), Some(12));
        assert_eq!(parse_index("None"), None);
        assert_eq!(parse_index("x"), None);
        // the digits alone, and what `parse` takes besides
        assert_eq!(parse_index("123456789"), Some(123_456_789));
        assert_eq!(parse_index("4294967295"), Some(u32::MAX));
        assert_eq!(parse_index("4294967296"), None);
        assert_eq!(parse_index(" 7 "), Some(7));
        assert_eq!(parse_index("+7"), Some(7));
        assert_eq!(parse_index("Some(0)"), Some(0));
        assert_eq!(parse_index("-1"), None);
        assert_eq!(parse_index(""), None);
        assert_eq!(unquote(b"\"porep-1-2\""), b"porep-1-2");
        assert_eq!(unquote(b"Some(\"a\")"), b"a");
    }

    /// A value is read as formatted: inside another value's formatting (a Debug impl that
    /// logs) it gets a string of its own and the outer one is left whole; a long value is
    /// read whole, and the buffer let go after it; a value whose formatting fails is no
    /// value (and no panic).
    #[test]
    fn a_value_is_read_as_formatted_nested_long_or_failing() {
        struct Logs;
        impl fmt::Debug for Logs {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                // formats a field of its own while the outer value is being formatted
                let inner = with_formatted(format_args!("{:?}", Some(7)), str::to_owned);
                write!(f, "outer[{}]", inner.unwrap_or_default())
            }
        }
        let got = with_formatted(format_args!("{:?}", Logs), |s| {
            // and a field read while the outer's text is in hand
            let again = with_formatted(format_args!("{}", "porep-1"), str::to_owned);
            (s.to_owned(), again)
        });
        assert_eq!(
            got,
            Some(("outer[Some(7)]".to_owned(), Some("porep-1".to_owned())))
        );
        let long = "x".repeat(FORMATTED_KEPT * 3);
        assert_eq!(
            with_formatted(format_args!("{long}"), str::len),
            Some(long.len())
        );
        let kept = FORMATTED.with(|b| b.borrow().capacity());
        assert!(kept <= FORMATTED_KEPT, "{kept}");
        struct Fails;
        impl fmt::Debug for Fails {
            fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
                Err(fmt::Error)
            }
        }
        assert_eq!(with_formatted(format_args!("{:?}", Fails), str::len), None);
        assert_eq!(
            with_formatted(format_args!("{:?}", "job-1"), |s| unquote(s.as_bytes())
                .to_owned()),
            Some(b"job-1".to_vec())
        );
    }

    /// A span field's value is read whole on the stack, or, longer than the stack's room,
    /// whole from a `Vec` it goes on in, formatted once; inside another value's formatting
    /// too; a value whose formatting fails is no value.
    #[test]
    fn a_short_value_is_read_whole_at_any_length() {
        let read = |args: fmt::Arguments<'_>| with_short_formatted(args, <[u8]>::to_vec);
        assert_eq!(
            read(format_args!("{:?}", Some(7))),
            Some(b"Some(7)".to_vec())
        );
        for n in [INLINE - 1, INLINE, INLINE + 1, 3 * INLINE] {
            let long = "y".repeat(n);
            assert_eq!(
                read(format_args!("{long}")),
                Some(long.clone().into_bytes()),
                "{n}"
            );
            // written in pieces, the last one over the edge
            assert_eq!(
                read(format_args!("{long:?}")),
                Some(format!("\"{long}\"").into_bytes()),
                "{n}"
            );
        }
        struct Logs;
        impl fmt::Display for Logs {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let inner = with_short_formatted(format_args!("{:?}", Some(7)), <[u8]>::to_vec);
                write!(f, "outer[{}]", String::from_utf8(inner.unwrap()).unwrap())
            }
        }
        assert_eq!(
            read(format_args!("{Logs}")),
            Some(b"outer[Some(7)]".to_vec())
        );
        struct Fails;
        impl fmt::Debug for Fails {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("half")?;
                Err(fmt::Error)
            }
        }
        assert_eq!(read(format_args!("{Fails:?}")), None);
        // formatted once, whatever its length (a value's formatting may log, count, or be
        // possible only once), its pieces after the edge kept, and whether or not the value
        // passes on what the writer returns
        struct Counted<'a> {
            pieces: &'a [&'a str],
            calls: &'a std::cell::Cell<u32>,
        }
        impl fmt::Display for Counted<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.calls.set(self.calls.get() + 1);
                for p in self.pieces {
                    let _ = f.write_str(p);
                }
                Ok(())
            }
        }
        let long = "p".repeat(INLINE + 6);
        for pieces in [
            &["short"][..],
            &[&long, "-tail"],
            &["ab", &long, "-", "tail"],
        ] {
            let calls = std::cell::Cell::new(0);
            let v = Counted {
                pieces,
                calls: &calls,
            };
            assert_eq!(
                read(format_args!("{v}")),
                Some(pieces.concat().into_bytes())
            );
            assert_eq!(calls.get(), 1, "{pieces:?}");
        }
        // and a field of the visitor, read as bytes: a name, an index, `None`
        let names = FieldNames::default();
        let mut out = SpanFields::default();
        let mut v = FieldVisitor {
            names: &names,
            slots: None,
            out: &mut out,
        };
        struct Site;
        impl tracing::callsite::Callsite for Site {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &tracing::Metadata<'_> {
                unreachable!("only its identity is used")
            }
        }
        static SITE: Site = Site;
        let set = tracing::field::FieldSet::new(
            &["job_id", "partition", "proof_kind"],
            tracing::callsite::Identifier(&SITE),
        );
        let field = |name| set.field(name).unwrap();
        v.record_debug(&field("job_id"), &tracing::field::display("porep-1-2"));
        v.record_debug(&field("partition"), &Some(12_u32));
        v.record_debug(&field("proof_kind"), &None::<&str>);
        assert_eq!(out.job_id(), Some("porep-1-2"));
        assert_eq!(out.partition, Some(12));
        assert_eq!(out.proof_kind, None);
    }

    /// A field's roles are visited each once, in their order, however many it fills.
    #[test]
    fn each_role_of_a_field_is_visited() {
        let roles = |s: Slots| {
            let mut seen = Vec::new();
            s.each(|slot| seen.push(slot));
            seen
        };
        assert_eq!(roles(Slots::default()), []);
        assert_eq!(roles(Slot::Gpu.into()), [Slot::Gpu]);
        let names = FieldNames::default().worker(["device"]).gpu(["device"]);
        assert_eq!(roles(names.slots("device")), [Slot::Worker, Slot::Gpu]);
        let all = FieldNames::default()
            .job_id(["x"])
            .partition(["x"])
            .worker(["x"])
            .gpu(["x"])
            .proof_kind(["x"]);
        assert_eq!(roles(all.slots("x")), Slot::ALL);
    }

    #[test]
    fn a_name_pads_its_head_when_it_fits() {
        let short = Name::new("porep-1");
        let (head, len) = short.head().expect("fits");
        assert_eq!(&head[..7], b"porep-1");
        assert!(head[7..].iter().all(|&b| b == 0));
        assert_eq!(len, 7);
        let exact = "x".repeat(HEAD);
        assert_eq!(Name::new(&exact).head().map(|(_, n)| n), Some(HEAD as u8));
        let long = Name::new(&"é".repeat(HEAD));
        assert_eq!(long.head(), None);
        assert_eq!(long.as_str(), "é".repeat(HEAD));
    }
}
