//! cuzk's `CUZK_TIMING:` lines: what its GPU proving call (supraseal-c2's
//! `generate_groth16_proofs_start_c`) prints on stderr, beside the TIMELINE lines.
//!
//! A line is `CUZK_TIMING:` (anywhere in the line, after a log prefix or not) followed by
//! `key=value` pairs in milliseconds: per call `pre_lock_cpu_ms mutex_wait_ms` (the GPU mutex
//! taken), `mutex_held_ms total_start_fn_ms` (about to release it), `prep_msm_ms`,
//! `b_g2_msm_ms num_circuits`, `split_vectors_ms setup_to_split_ms`, `async_dealloc_ms`; per GPU
//! thread of the call `gpu_tid=T` with `ntt_msm_h_ms`, `barrier_wait_ms`, `batch_add_ms`, or
//! `tail_msm_ms gpu_total_ms`. Lines without a pair (`set pool release threshold ...`,
//! `d_a_cache allocated ...`) are notes, counted. An unknown key is kept, not an error. The
//! lines carry no job id and no GPU ordinal (`gpu_tid` is a thread index within one call).
//!
//! **Kernel time** of a GPU thread is `ntt_msm_h_ms + batch_add_ms + tail_msm_ms`: its work
//! from its start to the end of its tail MSMs, less `barrier_wait_ms`, its wait on the CPU's
//! `prep_msm` (`gpu_total_ms` includes that wait). It is host wall-clock around the GPU
//! work (launches and copies included), so it bounds the kernels' own time from above.

use std::fmt;

/// Bad pairs listed per line, at most (a line of garbage costs no more).
const MAX_BAD_PAIRS: usize = 4;

/// What marks a timing line.
pub const TIMING_MARKER: &str = "CUZK_TIMING:";

/// What marks the H polynomial's breakdown, per GPU call (supraseal's `groth16_ntt_h.cu`):
/// `CUZK_NTT_H: d_b_alloc=1ms ntt_kernels=120ms coset_intt_sync=3ms msm_init=2ms
/// msm_invoke=410ms msm_dtor=0ms total=536ms`: milliseconds with an `ms` suffix.
pub const NTT_H_MARKER: &str = "CUZK_NTT_H:";

/// How the start-up line of proofline's own layer begins (written when the layer was told how
/// many GPU workers share a device, in the form of cuzk's `initializing GPU workers` line).
/// Read wherever it falls, not only before a run's first TIMELINE line: a file the layer
/// appends to holds one per process.
pub const LAYER_STARTUP: &str = "proofline: initializing GPU workers";

/// One `CUZK_NTT_H:` line: its keys and milliseconds in the order printed (any key kept:
/// the line's stages are the prover's to name), and the pairs that were no number of
/// milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NttH {
    /// `(key, ms)`, as printed.
    pub stages: Vec<(String, u64)>,
    /// Pairs whose value is no number of milliseconds (at most a few).
    pub bad: Vec<String>,
}

/// The keys cuzk prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimingKey {
    /// CPU time from the call's entry to taking the GPU mutex.
    PreLockCpu,
    /// Time blocked waiting for the GPU mutex.
    MutexWait,
    /// GPU thread: NTT and the H MSM (from the thread's start).
    NttMsmH,
    /// GPU thread: waiting for the CPU's `prep_msm` to finish.
    BarrierWait,
    /// GPU thread: batch additions.
    BatchAdd,
    /// GPU thread: the tail MSMs.
    TailMsm,
    /// GPU thread: its start to the end of its tail MSMs (barrier wait included).
    GpuTotal,
    /// The GPU mutex held: from taking it to just before releasing it.
    MutexHeld,
    /// The call's entry to just before releasing the mutex.
    TotalStartFn,
    /// CPU: MSM preprocessing (the GPU threads wait on it at the barrier).
    PrepMsm,
    /// CPU: the b_g2 MSM (alongside the GPU's batch additions and tail MSMs).
    BG2Msm,
    /// Circuits in the call (a count, not a time).
    NumCircuits,
    /// Allocating the split vectors.
    SplitVectors,
    /// The call's entry to the end of that allocation.
    SetupToSplit,
    /// Freeing the call's buffers, after it.
    AsyncDealloc,
}

impl TimingKey {
    /// Every key, in this order (the index of [`Timing::values`]).
    pub const ALL: [TimingKey; 15] = [
        TimingKey::PreLockCpu,
        TimingKey::MutexWait,
        TimingKey::NttMsmH,
        TimingKey::BarrierWait,
        TimingKey::BatchAdd,
        TimingKey::TailMsm,
        TimingKey::GpuTotal,
        TimingKey::MutexHeld,
        TimingKey::TotalStartFn,
        TimingKey::PrepMsm,
        TimingKey::BG2Msm,
        TimingKey::NumCircuits,
        TimingKey::SplitVectors,
        TimingKey::SetupToSplit,
        TimingKey::AsyncDealloc,
    ];

    /// The key as cuzk prints it.
    pub const fn name(self) -> &'static str {
        match self {
            TimingKey::PreLockCpu => "pre_lock_cpu_ms",
            TimingKey::MutexWait => "mutex_wait_ms",
            TimingKey::NttMsmH => "ntt_msm_h_ms",
            TimingKey::BarrierWait => "barrier_wait_ms",
            TimingKey::BatchAdd => "batch_add_ms",
            TimingKey::TailMsm => "tail_msm_ms",
            TimingKey::GpuTotal => "gpu_total_ms",
            TimingKey::MutexHeld => "mutex_held_ms",
            TimingKey::TotalStartFn => "total_start_fn_ms",
            TimingKey::PrepMsm => "prep_msm_ms",
            TimingKey::BG2Msm => "b_g2_msm_ms",
            TimingKey::NumCircuits => "num_circuits",
            TimingKey::SplitVectors => "split_vectors_ms",
            TimingKey::SetupToSplit => "setup_to_split_ms",
            TimingKey::AsyncDealloc => "async_dealloc_ms",
        }
    }

    /// Whether the key is part of a GPU thread's kernel time ([`Timing::kernel_ms`]).
    pub const fn is_kernel(self) -> bool {
        matches!(
            self,
            TimingKey::NttMsmH | TimingKey::BatchAdd | TimingKey::TailMsm
        )
    }

    /// The key of a name cuzk prints.
    pub fn from_name(name: &str) -> Option<TimingKey> {
        Self::from_bytes(name.as_bytes())
    }

    /// [`TimingKey::from_name`] of the name's bytes: the one slot of [`KEY_SLOTS`] its
    /// words hash to, and a comparison with the name there. (A `match` on the names, which
    /// the compiler turns into length and byte tests, took about 65 instructions a line of
    /// cuzk's log, branching on each key's length; this takes about 20, with one branch the
    /// usual line takes the same way.)
    #[inline(always)]
    fn from_bytes(name: &[u8]) -> Option<TimingKey> {
        let n = name.len();
        if !(SHORTEST_KEY..=LONGEST_KEY).contains(&n) {
            return None;
        }
        let (first, last) = key_words(name);
        let slot = &KEY_SLOTS[key_slot(first, last, n)];
        // (a name of 17 bytes has one byte, its ninth, in neither word)
        let same = usize::from(slot.len) == n
            && slot.first == first
            && slot.last == last
            && (n <= 16 || name[8] == slot.ninth);
        same.then(|| TimingKey::ALL[usize::from(slot.key)])
    }
}

/// The shortest name [`TimingKey::from_name`] knows (`tail_msm_ms`).
const SHORTEST_KEY: usize = 11;

/// The first and the last 8 bytes of a name of 8 bytes or more, each read as a
/// little-endian word (two loads at run time: a loop of bytes was a tenth of a timing
/// line's instructions), for [`KEY_SLOTS`] at compile time and [`TimingKey::from_bytes`].
#[inline(always)]
const fn key_words(name: &[u8]) -> (u64, u64) {
    match (name.first_chunk::<8>(), name.last_chunk::<8>()) {
        (Some(first), Some(last)) => (u64::from_le_bytes(*first), u64::from_le_bytes(*last)),
        _ => (0, 0),
    }
}

/// The slot of [`KEY_SLOTS`] of a name's words and length: a multiplicative hash whose
/// multiplier was searched for so that the 15 names fall in 16 slots, each alone (the table
/// below is built at compile time, and the build fails if two fall together).
#[inline(always)]
const fn key_slot(first: u64, last: u64, len: usize) -> usize {
    const MULTIPLIER: u64 = 0xfda7_dcc3_da7a_0fb3;
    ((first ^ last.rotate_left(17) ^ len as u64).wrapping_mul(MULTIPLIER) >> 60) as usize
}

/// A slot of [`KEY_SLOTS`]: the name that hashes to it, as its words, length and ninth
/// byte, and its key's index in [`TimingKey::ALL`] (`len` 0: an empty slot).
#[derive(Clone, Copy)]
struct KeySlot {
    first: u64,
    last: u64,
    len: u8,
    ninth: u8,
    key: u8,
}

/// Every key's name in the slot its words hash to.
static KEY_SLOTS: [KeySlot; 16] = {
    let empty = KeySlot {
        first: 0,
        last: 0,
        len: 0,
        ninth: 0,
        key: 0,
    };
    let mut slots = [empty; 16];
    let mut k = 0;
    while k < TimingKey::ALL.len() {
        let name = TimingKey::ALL[k].name().as_bytes();
        let n = name.len();
        assert!(n >= SHORTEST_KEY && n <= LONGEST_KEY);
        let (first, last) = key_words(name);
        let slot = key_slot(first, last, n);
        assert!(slots[slot].len == 0, "two names hash to one slot");
        slots[slot] = KeySlot {
            first,
            last,
            len: n as u8,
            ninth: name[8],
            key: k as u8,
        };
        k += 1;
    }
    slots
};

/// The longest name [`TimingKey::from_name`] knows (`total_start_fn_ms`).
const LONGEST_KEY: usize = 17;

/// Values a timing line holds inline (cuzk prints at most three keys on a line).
const INLINE_VALUES: usize = 4;

/// The most one value of a `CUZK_TIMING:` line may be, in ms: an hour. One GPU call of cuzk
/// takes seconds (a whole proof's, minutes); a line with a value past this is corrupt (or
/// made up), and it would set the GPU floor and the kernel fill by itself
/// (`mutex_held_ms=37423742`, ten hours, read as a GPU floor of hours per proof). The engine
/// ignores such a line whole, and counts and names it.
pub const MAX_TIMING_MS: u64 = 3_600_000;

/// One timing line's values.
///
/// Compact (56 bytes, from 144 and 296 before): a log shaped like cuzk's has more timing
/// lines than TIMELINE lines, each parsed on the reader's thread and moved to the engine's,
/// so its size was a visible share of `analyze`'s time (BENCHMARKS.md). The first few values
/// are held inline, in the order they were set; what few lines have (more keys, keys this
/// version does not know, pairs that are no number) is behind one box.
#[derive(Debug, Clone, Default)]
pub struct Timing {
    /// The first values set, `len` of them, each of the [`TimingKey::ALL`] index in `keys`.
    vals: [u64; INLINE_VALUES],
    keys: [u8; INLINE_VALUES],
    len: u8,
    /// The keys the line has, a bit per [`TimingKey::ALL`] index.
    present: u16,
    /// A value over [`MAX_TIMING_MS`] was set (in the struct's padding: the engine then
    /// looks for it, and no other line pays for the look).
    over_max: bool,
    /// The GPU thread (`gpu_tid=`), for the per-thread lines.
    pub gpu_tid: Option<u32>,
    extra: Option<Box<TimingExtra>>,
}

/// Two timings are equal when they hold the same values (whatever order they were set in).
impl PartialEq for Timing {
    fn eq(&self, o: &Self) -> bool {
        self.values() == o.values()
            && self.gpu_tid == o.gpu_tid
            && self.unknown() == o.unknown()
            && self.bad() == o.bad()
    }
}

impl Eq for Timing {}

/// What few timing lines have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TimingExtra {
    /// Values past the inline ones, by [`TimingKey::ALL`] index.
    more: Vec<(u8, u64)>,
    unknown: Vec<(String, u64)>,
    bad: Vec<String>,
}

impl Timing {
    /// A line of these values (by [`TimingKey::ALL`] index) and GPU thread.
    pub fn from_values(values: [Option<u64>; 15], gpu_tid: Option<u32>) -> Self {
        let mut t = Timing {
            gpu_tid,
            ..Timing::default()
        };
        for (k, v) in TimingKey::ALL.into_iter().zip(values) {
            if let Some(v) = v {
                t.set(k, v);
            }
        }
        t
    }

    /// The values by [`TimingKey::ALL`] index.
    pub fn values(&self) -> [Option<u64>; 15] {
        std::array::from_fn(|i| self.at(i as u8))
    }

    /// The value at [`TimingKey::ALL`] index `i`, if the line has it.
    #[inline]
    fn at(&self, i: u8) -> Option<u64> {
        if self.present & (1 << i) == 0 {
            return None;
        }
        let inline = &self.keys[..usize::from(self.len)];
        match inline.iter().position(|&k| k == i) {
            Some(at) => Some(self.vals[at]),
            None => self
                .extra
                .as_deref()
                .and_then(|e| e.more.iter().find(|(k, _)| *k == i))
                .map(|&(_, v)| v),
        }
    }

    /// Empties the timing for another line, as [`Timing::default`] would, without writing
    /// its values over (a timing per line, zeroed and dropped, cost a block's reader 19
    /// instructions of a timing line's ~600 on cuzk's log).
    #[inline(always)]
    pub(crate) fn reset(&mut self) {
        (self.len, self.present, self.over_max, self.gpu_tid) = (0, 0, false, None);
        if self.extra.is_some() {
            self.extra = None;
        }
    }

    /// [`Timing::iter`] as calls of `f`, in the same order: a loop over the inline values
    /// and one over the rest, where the iterator's chain asked at each step which half it
    /// was in (adding up a timing line by `iter` took a fifth of its instructions on cuzk's
    /// log).
    #[inline(always)]
    pub(crate) fn for_each(&self, mut f: impl FnMut(TimingKey, u64)) {
        let n = usize::from(self.len).min(INLINE_VALUES);
        for i in 0..n {
            f(TimingKey::ALL[usize::from(self.keys[i])], self.vals[i]);
        }
        if let Some(e) = self.extra.as_deref() {
            for &(k, v) in &e.more {
                f(TimingKey::ALL[usize::from(k)], v);
            }
        }
    }

    /// The line's keys and values, in the order they were set.
    pub fn iter(&self) -> impl Iterator<Item = (TimingKey, u64)> + '_ {
        let inline = self.keys[..usize::from(self.len)]
            .iter()
            .copied()
            .zip(self.vals);
        let more = self.extra.as_deref().map_or(&[][..], |e| &e.more[..]);
        inline
            .chain(more.iter().copied())
            .map(|(k, v)| (TimingKey::ALL[usize::from(k)], v))
    }

    /// The value of `key`, if the line has it.
    #[inline]
    pub fn get(&self, key: TimingKey) -> Option<u64> {
        self.at(key as u8)
    }

    /// Sets `key`. (Inlined into the parsers, where a call per pair was a tenth of a
    /// timing line's instructions.)
    #[inline(always)]
    pub fn set(&mut self, key: TimingKey, v: u64) {
        let i = key as u8;
        if self.present & (1 << i) != 0 {
            // set again: the value where it is
            let inline = &self.keys[..usize::from(self.len)];
            self.over_max |= v > MAX_TIMING_MS;
            if let Some(at) = inline.iter().position(|&k| k == i) {
                self.vals[at] = v;
            } else if let Some(m) = self.extra().more.iter_mut().find(|(k, _)| *k == i) {
                m.1 = v;
            }
            return;
        }
        self.present |= 1 << i;
        self.over_max |= v > MAX_TIMING_MS;
        let len = usize::from(self.len);
        if len < INLINE_VALUES {
            self.keys[len] = i;
            self.vals[len] = v;
            self.len += 1;
        } else {
            self.extra().more.push((i, v));
        }
    }

    /// Whether the line holds nothing but known keys with values of at most
    /// [`MAX_TIMING_MS`], the first few of them (the lines of cuzk's usual form).
    #[inline]
    pub(crate) fn is_plain(&self) -> bool {
        self.extra.is_none() && !self.over_max
    }

    /// Keys this version does not know, with their values.
    pub fn unknown(&self) -> &[(String, u64)] {
        self.extra.as_deref().map_or(&[], |e| &e.unknown)
    }

    /// Pairs whose value is no whole number (`key=value` as printed): the line's other keys
    /// are kept, and the line counts as partial.
    pub fn bad(&self) -> &[String] {
        self.extra.as_deref().map_or(&[], |e| &e.bad)
    }

    fn extra(&mut self) -> &mut TimingExtra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// The first value over [`MAX_TIMING_MS`], with its key.
    #[inline]
    pub fn over_max(&self) -> Option<(TimingKey, u64)> {
        if !self.over_max {
            return None;
        }
        self.iter().find(|&(_, v)| v > MAX_TIMING_MS)
    }

    /// Whether a pair of the line could not be read (its other keys were kept).
    pub fn is_partial(&self) -> bool {
        !self.bad().is_empty()
    }

    /// What is wrong with a partial line, in words: a value that is no whole number, or one
    /// of digits too large to read (past 2^64 - 1 ms, where it was called no whole number).
    pub fn bad_pairs(&self) -> String {
        let digits = |p: &str| {
            p.split_once('=')
                .map(|(_, v)| v.trim_end_matches('…'))
                .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        };
        let said = |too_large: bool, why: &str| {
            let pairs: Vec<String> = self
                .bad()
                .iter()
                .filter(|p| digits(p) == too_large)
                .map(|p| format!("`{p}`"))
                .collect();
            (!pairs.is_empty()).then(|| format!("{}: {why}", pairs.join(", ")))
        };
        let whys: Vec<String> = [
            said(false, "not a whole number of milliseconds"),
            said(true, "a number too large to read (over 2^64 - 1 ms)"),
        ]
        .into_iter()
        .flatten()
        .collect();
        format!(
            "CUZK_TIMING: {}; the line's other keys are kept",
            whys.join("; ")
        )
    }

    /// The kernel time this line holds (see the module docs): its `ntt_msm_h_ms`,
    /// `batch_add_ms` and `tail_msm_ms`, whichever it has.
    pub fn kernel_ms(&self) -> Option<u64> {
        self.iter()
            .filter(|(k, _)| k.is_kernel())
            .map(|(_, v)| v)
            .reduce(u64::saturating_add)
    }
}

impl fmt::Display for Timing {
    /// The line as cuzk prints it (keys in cuzk's order within a line).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(TIMING_MARKER)?;
        if let Some(t) = self.gpu_tid {
            write!(f, " gpu_tid={t}")?;
        }
        for k in TimingKey::ALL {
            if let Some(v) = self.get(k) {
                write!(f, " {}={v}", k.name())?;
            }
        }
        for (k, v) in self.unknown() {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

/// What a `CUZK_TIMING:` line is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)] // inline: a box per line was a tenth of analyze's time
pub enum TimingLine {
    /// A timing.
    Timing(Timing),
    /// A `CUZK_NTT_H:` line.
    NttH(NttH),
    /// One of cuzk's start-up lines that map GPU workers to GPUs.
    WorkerMap(WorkerMap),
    /// A line that is no timing (`set pool release threshold ...`, `d_a_cache allocated ...`).
    Note,
}

/// Parses a line: `None` when it is no `CUZK_TIMING:` line, else what it is. A pair whose
/// value is not a number of milliseconds does not lose the line: the other pairs are kept and
/// the bad ones listed ([`Timing::bad`]); the line is an error only when no pair is good.
pub fn parse_timing(line: &str) -> Option<Result<TimingLine, String>> {
    // one search for both markers, by their first byte (lines are short: a substring
    // searcher's set-up per line cost more than its search)
    let bytes = line.as_bytes();
    let mut starts = memchr::memchr_iter(b'C', bytes);
    let at = loop {
        // (the usual line, the marker first, needs no search at all)
        let at = if bytes.starts_with(TIMING_MARKER.as_bytes()) {
            0
        } else {
            starts.next()?
        };
        let tail = &bytes[at..];
        if tail.starts_with(TIMING_MARKER.as_bytes()) {
            break at;
        }
        if tail.starts_with(NTT_H_MARKER.as_bytes()) {
            return Some(parse_ntt_h(line[at + NTT_H_MARKER.len()..].trim()));
        }
    };
    timing_pairs::<false>(trim(&line[at + TIMING_MARKER.len()..]))
}

/// [`parse_timing`] of a line that starts with [`TIMING_MARKER`] and has no `T` after it,
/// which so holds no TIMELINE marker either (`TIMELINE,` has one, the marker's own `T` does
/// not start it): a reader may take such a line as a timing line without looking for a
/// TIMELINE event in it. `None` for any other line. (cuzk's timing lines are most of its
/// log; the look for a TIMELINE marker in each was a tenth of the reader's time.)
#[inline]
pub fn parse_plain_timing(line: &str) -> Option<Result<TimingLine, String>> {
    let rest = line.strip_prefix(TIMING_MARKER)?;
    if let Some(t) = cuzk_pairs(rest) {
        return Some(Ok(TimingLine::Timing(t)));
    }
    timing_pairs::<true>(trim(rest))
}

/// A timing line's pairs (after the marker) in the one form cuzk prints: each after a
/// space or more (the first may have none), one of cuzk's keys or `gpu_tid` (whatever comes
/// before the `=` is compared with those names, and no byte of it needs a look of its own),
/// `=`, 1 to 19 digits; at least one pair, nothing else but trailing spaces and the line's
/// end (`\n` or `\r\n`). `None` for anything else, which [`timing_pairs`] then reads (the
/// same [`Timing`] for a line of this form, as a property test checks). One pass, each value
/// read as its bytes go by, where the general reader looks at each byte for every kind of
/// whitespace, a `T` and an `=`, then reads the value again (cuzk's timing lines are most of
/// its log).
#[inline]
fn cuzk_pairs(rest: &str) -> Option<Timing> {
    let mut t = Timing::default();
    let end = cuzk_pairs_in(rest.as_bytes(), 0, &mut t)?;
    // (one `\n` may end it)
    (end + 1 >= rest.len()).then_some(t)
}

/// [`cuzk_pairs`] of the line starting at `from` in `b` (after its marker), read into `t`:
/// a block's reader reads its lines so, each up to the newline this finds, and takes the
/// values from `t` where they were written (returned by value and moved on, a timing just
/// written stalled on the narrower stores that wrote it, at each move: a tenth of the
/// reader's time on cuzk's log). Returns the index of the line's `\n` (of the `\n` of
/// `\r\n`), or `b.len()` where `b` ended first; `None`, with `t` holding some of the pairs,
/// when the line is not of cuzk's form.
#[inline(always)]
pub(crate) fn cuzk_pairs_in(b: &[u8], from: usize, t: &mut Timing) -> Option<usize> {
    let n = b.len();
    let mut i = from;
    let mut pairs = false;
    let end = loop {
        let spaces = i;
        while i < n && b[i] == b' ' {
            i += 1;
        }
        match b.get(i) {
            None => break n,
            Some(b'\n') => break i,
            Some(b'\r') if i + 1 == n => break n,
            Some(b'\r') if b[i + 1] == b'\n' => break i + 1,
            _ => {}
        }
        // a pair after another needs a space before it (so does a value followed by
        // anything but a space or the line's end)
        if i == spaces && i > from {
            return None;
        }
        let k = i;
        // (a key is one of a few names, none longer than LONGEST_KEY: the look for its `=`
        // stops past that, not at the next line's)
        let eq = crate::codec::find_byte::<b'='>(&b[..n.min(k + LONGEST_KEY + 1)], k)?;
        let key = &b[k..eq];
        // (more than 19 digits are `str::parse`'s to decide)
        let v;
        (v, i) = crate::codec::digits(b, eq + 1)?;
        if key == b"gpu_tid" {
            t.gpu_tid = Some(u32::try_from(v).unwrap_or(u32::MAX));
        } else {
            t.set(TimingKey::from_bytes(key)?, v);
        }
        pairs = true;
    };
    pairs.then_some(end)
}

/// The pairs of a `CUZK_TIMING:` line (after the marker, trimmed); with `NO_T`, `None` when a
/// `T` is seen.
#[inline]
fn timing_pairs<const NO_T: bool>(rest: &str) -> Option<Result<TimingLine, String>> {
    let mut t = Timing::default();
    let mut pairs = 0;
    // One pass over the bytes for the tokens (split at ASCII whitespace) and each one's first
    // `=`: a search call per token (`memchr`, `split_once`) cost more than these few bytes.
    let b = rest.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let mut eq = None;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            if NO_T && b[i] == b'T' {
                return None;
            }
            if b[i] == b'=' && eq.is_none() {
                eq = Some(i);
            }
            i += 1;
        }
        let Some(eq) = eq else {
            continue;
        };
        // ASCII whitespace and `=` are char boundaries
        let (token, key, value) = (&rest[start..i], &rest[start..eq], &rest[eq + 1..i]);
        pairs += usize::from(t.take_pair(token, key, fast_u64(value), value));
    }
    Some(t.into_line(pairs))
}

impl Timing {
    /// Takes one `key=value` pair of a line (`fast`: the value when its plain digits were
    /// read already): a value that is no number is a bad pair, kept by name. Returns
    /// whether the pair was good.
    fn take_pair(&mut self, token: &str, key: &str, fast: Option<u64>, value: &str) -> bool {
        let Some(v) = fast.or_else(|| value.parse::<u64>().ok()) else {
            if self.bad().len() < MAX_BAD_PAIRS {
                self.extra().bad.push(crate::codec::written(token));
            }
            return false;
        };
        if key == "gpu_tid" {
            self.gpu_tid = Some(u32::try_from(v).unwrap_or(u32::MAX));
        } else if let Some(k) = TimingKey::from_name(key) {
            self.set(k, v);
        } else {
            self.extra().unknown.push((key.to_owned(), v));
        }
        true
    }

    /// What a line of these pairs (`pairs` of them good) is: a timing, an error when every
    /// pair was bad, else a note.
    fn into_line(self, pairs: usize) -> Result<TimingLine, String> {
        if pairs > 0 {
            Ok(TimingLine::Timing(self))
        } else if !self.bad().is_empty() {
            Err(self
                .bad_pairs()
                .replace("; the line's other keys are kept", ""))
        } else {
            Ok(TimingLine::Note)
        }
    }
}

/// `s.trim()`, with no look at its chars when both ends are plain ASCII (the usual line).
#[inline]
fn trim(s: &str) -> &str {
    let t = s.trim_ascii();
    // an end that is not ASCII may be Unicode whitespace, and a vertical tab is whitespace
    // to `trim` but not to `trim_ascii`: `trim` decides
    let odd = |c: &u8| !c.is_ascii() || *c == 0x0b;
    match (t.as_bytes().first(), t.as_bytes().last()) {
        (Some(a), Some(z)) if odd(a) || odd(z) => t.trim(),
        _ => t,
    }
}

/// A value of 1 to 19 ASCII digits (what cuzk prints), without `str::parse`'s generality;
/// `None` for anything else, which `parse` then decides (a `+`, 20 digits that fit).
#[inline]
fn fast_u64(s: &str) -> Option<u64> {
    crate::codec::digits(s.as_bytes(), 0).and_then(|(v, end)| (end == s.len()).then_some(v))
}

/// The pairs of a `CUZK_NTT_H:` line (after the marker).
fn parse_ntt_h(rest: &str) -> Result<TimingLine, String> {
    let mut n = NttH::default();
    for token in rest.split_ascii_whitespace() {
        let Some((key, value)) = token.split_once('=') else {
            continue;
        };
        match value.strip_suffix("ms").unwrap_or(value).parse::<u64>() {
            Ok(ms) if n.stages.len() < MAX_NTT_H_STAGES => n.stages.push((key.to_owned(), ms)),
            Ok(_) => {}
            Err(_) if n.bad.len() < MAX_BAD_PAIRS => n.bad.push(crate::codec::written(token)),
            Err(_) => {}
        }
    }
    if n.stages.is_empty() && !n.bad.is_empty() {
        return Err(format!(
            "CUZK_NTT_H: no value is a number of milliseconds: {}",
            n.bad.join(" ")
        ));
    }
    Ok(TimingLine::NttH(n))
}

/// What cuzk's start-up lines (its `tracing` lines, on stdout) say of its GPU workers:
/// `initializing GPU workers num_gpus=2 gpu_workers_per_device=2 total_workers=4 gpus=[0, 1]`
/// and, per worker, `pipeline GPU worker started worker_id=3 gpu=1 sub_id=1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerMap {
    /// GPU workers per device.
    PerDevice(u32),
    /// A worker and its GPU.
    Worker {
        /// `worker_id=`, as TIMELINE's `worker=`.
        worker: u32,
        /// `gpu=`, the device ordinal.
        gpu: u32,
    },
}

/// Parses one of cuzk's start-up lines (`None` for any other line). ANSI colours, which
/// `tracing`'s formatter adds on a terminal, are passed over.
pub fn parse_worker_map(line: &str) -> Option<WorkerMap> {
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new("GPU worker"));
    FINDER.find(line.as_bytes())?;
    let plain;
    let line = if line.contains('\x1b') {
        plain = strip_ansi(line);
        plain.as_str()
    } else {
        line
    };
    let field = |name: &str| {
        line.split_ascii_whitespace()
            .filter_map(|t| t.split_once('='))
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.trim_end_matches(',').parse::<u32>().ok())
    };
    if line.contains("initializing GPU workers") {
        return field("gpu_workers_per_device").map(WorkerMap::PerDevice);
    }
    if line.contains("pipeline GPU worker started") {
        return Some(WorkerMap::Worker {
            worker: field("worker_id")?,
            gpu: field("gpu")?,
        });
    }
    None
}

/// `s` without its ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Stages of one `CUZK_NTT_H:` line kept at most (cuzk prints seven).
const MAX_NTT_H_STAGES: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    /// No key is longer than the look for a key's `=` in cuzk's form goes.
    #[test]
    fn every_key_fits_the_form_s_look() {
        for k in TimingKey::ALL {
            assert!(k.name().len() <= LONGEST_KEY, "{}", k.name());
            assert_eq!(TimingKey::from_name(k.name()), Some(k));
        }
        assert!(TimingKey::ALL.iter().any(|k| k.name().len() == LONGEST_KEY));
    }

    #[test]
    fn cuzk_start_up_lines_map_workers_to_gpus() {
        let init = "2026-12-01T03:00:00.1Z  INFO cuzk_core::engine: initializing GPU workers \
                    num_gpus=2 gpu_workers_per_device=3 total_workers=6 gpus=[0, 1]";
        assert_eq!(parse_worker_map(init), Some(WorkerMap::PerDevice(3)));
        let started = "\x1b[2m2026-12-01T03:00:00.2Z\x1b[0m \x1b[32m INFO\x1b[0m \
                       \x1b[2mcuzk_core::engine\x1b[0m\x1b[2m:\x1b[0m pipeline GPU worker started \
                       \x1b[3mworker_id\x1b[0m\x1b[2m=\x1b[0m4 \x1b[3mgpu\x1b[0m\x1b[2m=\x1b[0m1 \
                       \x1b[3msub_id\x1b[0m\x1b[2m=\x1b[0m1";
        assert_eq!(
            parse_worker_map(started),
            Some(WorkerMap::Worker { worker: 4, gpu: 1 })
        );
        for other in [
            "pipeline GPU worker received shutdown signal worker_id=3",
            "initializing GPU workers num_workers=2 gpus=[0, 1]",
            "TIMELINE,1,GPU_START,j,worker=0",
        ] {
            assert_eq!(parse_worker_map(other), None, "{other}");
        }
    }

    #[test]
    fn ntt_h_lines_are_read_with_their_ms_suffix_and_any_key() {
        let line = "2026-12-01T03:00:00Z cuzk[7]: CUZK_NTT_H: d_b_alloc=1ms ntt_kernels=120ms \
                    coset_intt_sync=3ms msm_init=2ms msm_invoke=410ms msm_dtor=0ms total=536ms new=7";
        let Some(Ok(TimingLine::NttH(n))) = parse_timing(line) else {
            panic!("{:?}", parse_timing(line));
        };
        assert_eq!(n.stages.len(), 8);
        assert_eq!(n.stages[1], ("ntt_kernels".to_owned(), 120));
        assert_eq!(n.stages[7], ("new".to_owned(), 7));
        let Some(Ok(TimingLine::NttH(n))) = parse_timing("CUZK_NTT_H: total=5ms msm_init=x") else {
            panic!()
        };
        assert_eq!((n.stages.len(), n.bad.len()), (1, 1));
        assert!(parse_timing("CUZK_NTT_H: total=lots").unwrap().is_err());
        // another CUZK_ word before the marker is passed over
        let t = timing("CUZK_SOMETHING then CUZK_TIMING: prep_msm_ms=5");
        assert_eq!(t.get(TimingKey::PrepMsm), Some(5));
        assert_eq!(parse_timing("CUZK_OTHER: x=1"), None);
    }

    #[test]
    fn a_timing_line_stays_compact() {
        // each is moved from the reader's thread to the engine's (BENCHMARKS.md)
        assert!(
            std::mem::size_of::<Timing>() <= 56,
            "{}",
            std::mem::size_of::<Timing>()
        );
    }

    /// Any number of keys, set in any order and set again, read back as set; equal
    /// whatever the order they were set in.
    #[test]
    fn values_past_the_inline_ones_and_set_again_read_back() {
        let mut all = Timing::default();
        for (i, k) in TimingKey::ALL.into_iter().enumerate().rev() {
            all.set(k, i as u64);
        }
        all.set(TimingKey::AsyncDealloc, 99); // inline (set first)
        all.set(TimingKey::PreLockCpu, 98); // in the box (set last)
        for (i, k) in TimingKey::ALL.into_iter().enumerate() {
            let want = match k {
                TimingKey::AsyncDealloc => 99,
                TimingKey::PreLockCpu => 98,
                _ => i as u64,
            };
            assert_eq!(all.get(k), Some(want), "{k:?}");
        }
        let mut values = all.values();
        assert!(values.iter().all(Option::is_some));
        // every key once, in the order set
        let keys: Vec<TimingKey> = all.iter().map(|(k, _)| k).collect();
        let mut want = TimingKey::ALL.to_vec();
        want.reverse();
        assert_eq!(keys, want);
        assert!(all.iter().all(|(k, v)| all.get(k) == Some(v)));
        values[3] = None;
        let some = Timing::from_values(values, Some(2));
        assert_eq!(some.get(TimingKey::BarrierWait), None);
        assert_eq!(some.values(), values);
        let mut reversed = Timing {
            gpu_tid: Some(2),
            ..Timing::default()
        };
        for (k, v) in TimingKey::ALL.into_iter().zip(values).rev() {
            if let Some(v) = v {
                reversed.set(k, v);
            }
        }
        assert_eq!(reversed, some);
        reversed.set(TimingKey::TailMsm, 1);
        assert_ne!(reversed, some);
        // values that are no plain digits are still decided by `parse`
        let t = timing(
            "CUZK_TIMING: prep_msm_ms=+7 tail_msm_ms=18446744073709551615 mutex_wait_ms=18446744073709551616",
        );
        assert_eq!(t.get(TimingKey::PrepMsm), Some(7));
        assert_eq!(t.get(TimingKey::TailMsm), Some(u64::MAX));
        assert_eq!(t.get(TimingKey::MutexWait), None);
        assert!(t.is_partial());
    }

    fn timing(line: &str) -> Timing {
        match parse_timing(line) {
            Some(Ok(TimingLine::Timing(t))) => t,
            other => panic!("{line}: {other:?}"),
        }
    }

    /// Each name is its key, and a name one byte off is none (in every place, the ninth
    /// of a 17-byte name included, which the hash's words leave out), nor is one a byte
    /// short or long, nor another key's name with this one's length.
    #[test]
    fn every_key_is_found_by_its_name_and_no_near_miss_is() {
        for k in TimingKey::ALL {
            let name = k.name();
            assert_eq!(TimingKey::from_name(name), Some(k));
            for (i, &was) in name.as_bytes().iter().enumerate() {
                for b in [b'_', b'x', b'M', 0].into_iter().filter(|&b| b != was) {
                    let mut off = name.as_bytes().to_vec();
                    off[i] = b;
                    assert_eq!(TimingKey::from_bytes(&off), None, "{off:?}");
                }
            }
            assert_eq!(TimingKey::from_name(&name[1..]), None);
            assert_eq!(TimingKey::from_name(&name[..name.len() - 1]), None);
            assert_eq!(TimingKey::from_name(&format!("{name}s")), None);
            assert_eq!(TimingKey::from_name(&format!("x{name}")), None);
        }
        for name in [
            "",
            "tail_msm",
            "gpu_tid",
            "total_start_fn_msx",
            "mutex_wait_ms ",
        ] {
            assert_eq!(TimingKey::from_name(name), None, "{name}");
        }
    }

    #[test]
    fn every_line_cuzk_prints_is_read() {
        let t = timing("CUZK_TIMING: pre_lock_cpu_ms=12 mutex_wait_ms=3400");
        assert_eq!(t.get(TimingKey::PreLockCpu), Some(12));
        assert_eq!(t.get(TimingKey::MutexWait), Some(3400));
        let t = timing("CUZK_TIMING: gpu_tid=0 tail_msm_ms=410 gpu_total_ms=3300");
        assert_eq!(t.gpu_tid, Some(0));
        assert_eq!(t.get(TimingKey::GpuTotal), Some(3300));
        assert_eq!(t.kernel_ms(), Some(410));
        let t = timing("CUZK_TIMING: gpu_tid=1 ntt_msm_h_ms=690");
        assert_eq!((t.gpu_tid, t.kernel_ms()), (Some(1), Some(690)));
        let t = timing("CUZK_TIMING: b_g2_msm_ms=484 num_circuits=1");
        assert_eq!(t.get(TimingKey::BG2Msm), Some(484));
        assert_eq!(t.get(TimingKey::NumCircuits), Some(1));
        assert_eq!(t.kernel_ms(), None);
        for line in [
            "CUZK_TIMING: mutex_held_ms=3500 total_start_fn_ms=5000",
            "CUZK_TIMING: prep_msm_ms=1909",
            "CUZK_TIMING: split_vectors_ms=3 setup_to_split_ms=40",
            "CUZK_TIMING: async_dealloc_ms=7",
            "CUZK_TIMING: gpu_tid=0 barrier_wait_ms=1200",
            "CUZK_TIMING: gpu_tid=0 batch_add_ms=300",
        ] {
            // written back as read
            assert_eq!(timing(line).to_string(), line);
        }
    }

    #[test]
    fn prefixes_notes_unknown_keys_and_bad_values() {
        // a log prefix before the marker
        let t = timing("2026-11-30T01:02:03Z cuzk-daemon[12]: CUZK_TIMING: prep_msm_ms=1909\n");
        assert_eq!(t.get(TimingKey::PrepMsm), Some(1909));
        for note in [
            "CUZK_TIMING: set pool release threshold to MAX on gpu 0",
            "CUZK_TIMING: d_a_cache allocated 1536 MiB on gpu 1",
        ] {
            assert_eq!(parse_timing(note), Some(Ok(TimingLine::Note)));
        }
        let t = timing("CUZK_TIMING: prep_msm_ms=5 new_stage_ms=9");
        assert_eq!(t.unknown(), [("new_stage_ms".to_owned(), 9)]);
        let err = parse_timing("CUZK_TIMING: mutex_held_ms=lots")
            .unwrap()
            .unwrap_err();
        assert!(err.contains("mutex_held_ms=lots"), "{err}");
        // one bad value: the good keys are kept, the line is partial
        let t = timing("CUZK_TIMING: gpu_tid=0 tail_msm_ms=4x1 gpu_total_ms=3300");
        assert_eq!(t.get(TimingKey::GpuTotal), Some(3300));
        assert_eq!(t.get(TimingKey::TailMsm), None);
        assert!(t.is_partial() && t.bad_pairs().contains("`tail_msm_ms=4x1`"));
        // a value of digits past u64 is too large, not "no whole number"
        let t =
            timing("CUZK_TIMING: gpu_tid=0 tail_msm_ms=4x1 mutex_held_ms=99999999999999999999999");
        assert_eq!(
            t.bad_pairs(),
            "CUZK_TIMING: `tail_msm_ms=4x1`: not a whole number of milliseconds; \
             `mutex_held_ms=99999999999999999999999`: a number too large to read (over 2^64 - 1 ms); \
             the line's other keys are kept"
        );
        assert_eq!(parse_timing("TIMELINE,1,GPU_END,j,worker=0"), None);
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    /// The parser as it was before its fast paths (a substring search for the markers,
    /// `trim`, `split_ascii_whitespace`, `split_once`, `str::parse`): the reference the fast
    /// one must agree with on any line.
    fn reference(line: &str) -> Option<Result<TimingLine, String>> {
        let mut from = 0;
        let at = loop {
            let at = from + memchr::memmem::find(&line.as_bytes()[from..], b"CUZK_")?;
            let tail = &line.as_bytes()[at..];
            if tail.starts_with(TIMING_MARKER.as_bytes()) {
                break at;
            }
            if tail.starts_with(NTT_H_MARKER.as_bytes()) {
                return Some(parse_ntt_h(line[at + NTT_H_MARKER.len()..].trim()));
            }
            from = at + 1;
        };
        let mut t = Timing::default();
        let mut pairs = 0;
        for token in line[at + TIMING_MARKER.len()..]
            .trim()
            .split_ascii_whitespace()
        {
            let Some((key, value)) = token.split_once('=') else {
                continue;
            };
            // (the pair itself is taken as the parser takes it: what is compared is the
            // finding of the marker, the tokens and the numbers)
            pairs += usize::from(t.take_pair(token, key, None, value));
        }
        Some(t.into_line(pairs))
    }

    /// Pieces a line is made of: markers, cuzk's keys, numbers of any length and sign,
    /// ASCII and Unicode whitespace, stray `=` and letters.
    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("CUZK_TIMING:".to_owned()),
            Just("CUZK_NTT_H:".to_owned()),
            Just("CUZK_".to_owned()),
            Just("C".to_owned()),
            proptest::sample::select(TimingKey::ALL.map(TimingKey::name).to_vec())
                .prop_map(|k| format!("{k}=")),
            Just("gpu_tid=".to_owned()),
            "[0-9]{1,22}",
            Just("+".to_owned()),
            Just("=".to_owned()),
            Just("ms".to_owned()),
            "[ \t\r\n\u{b}\u{c}]{1,3}",
            Just("\u{3000}".to_owned()),
            Just("\u{85}".to_owned()),
            "[a-z_é]{1,6}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn the_fast_timing_parser_agrees_with_the_reference(
            pieces in proptest::collection::vec(piece(), 0..14)
        ) {
            let line = pieces.concat();
            prop_assert_eq!(parse_timing(&line), reference(&line), "{:?}", line);
        }

        /// Lines in cuzk's own form (and near it: an unknown key, a 20-digit value, a tab,
        /// a `T`): the one-pass reader of that form gives what the reference gives, and it
        /// is the one that reads every line of the form.
        #[test]
        fn cuzk_form_is_read_in_one_pass_as_the_reference_reads_it(
            pairs in proptest::collection::vec(
                (
                    0..3usize,
                    prop_oneof![
                        6 => proptest::sample::select(TimingKey::ALL.map(TimingKey::name).to_vec()),
                        1 => Just("gpu_tid"),
                        1 => Just("new_stage_ms"),
                    ],
                    prop_oneof![4 => "[0-9]{1,19}", 1 => "[0-9]{20,21}"],
                ),
                0..5,
            ),
            tail in prop_oneof![
                4 => Just(""),
                1 => Just(" "),
                2 => Just("\n"),
                1 => Just("\r\n"),
                1 => Just(" \n"),
                1 => Just("\t"),
                1 => Just(" T"),
                1 => Just("\n\n"),
            ],
        ) {
            let mut line = TIMING_MARKER.to_owned();
            for (i, (spaces, key, value)) in pairs.iter().enumerate() {
                // a pair after the first needs its space
                let spaces = if i == 0 { *spaces } else { (*spaces).max(1) };
                line += &format!("{}{key}={value}", " ".repeat(spaces));
            }
            line += tail;
            let plain = parse_plain_timing(&line);
            if !tail.contains('T') {
                prop_assert_eq!(&plain, &reference(&line), "{:?}", line);
            }
            let cuzk_form = !pairs.is_empty()
                && !tail.contains(['\t', 'T'])
                && tail != "\n\n"
                && pairs.iter().all(|(_, k, v)| *k != "new_stage_ms" && v.len() <= 19);
            prop_assert_eq!(
                cuzk_pairs(&line[TIMING_MARKER.len()..]).is_some(),
                cuzk_form,
                "{:?}",
                line
            );
        }

        /// A line the reader takes as a timing line without looking for a TIMELINE event
        /// in it is one: the TIMELINE parser finds none, and the timing is the same. Every
        /// line that starts with the marker and has no `T` after it is so taken.
        #[test]
        fn a_plain_timing_line_holds_no_timeline_event(
            pieces in proptest::collection::vec(
                prop_oneof![
                    4 => piece(),
                    1 => Just("TIMELINE,".to_owned()),
                    1 => Just("T".to_owned()),
                    1 => Just(" TIMELINE,1,GPU_END,j,worker=0".to_owned()),
                ],
                0..14,
            ),
            marker_first in any::<bool>(),
        ) {
            let mut line = pieces.concat();
            if marker_first {
                line.insert_str(0, TIMING_MARKER);
            }
            let plain = parse_plain_timing(&line);
            let no_t_after = line
                .strip_prefix(TIMING_MARKER)
                .is_some_and(|rest| !rest.contains('T'));
            prop_assert_eq!(plain.is_some(), no_t_after, "{:?}", line);
            if plain.is_some() {
                prop_assert_eq!(crate::codec::parse_line(&line).ok(), Some(None), "{:?}", line);
                prop_assert_eq!(&plain, &parse_timing(&line), "{:?}", line);
            }
        }
    }
}
