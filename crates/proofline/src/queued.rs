//! The queue entry: one event in one cache line.
//!
//! A prover thread writes the entry and the worker, on another core, reads it: every cache
//! line of an entry crosses between the cores once. An [`proofline_core::Event`] is 104
//! bytes (two lines) and holds the job id as an `Arc<str>`, whose reference count the prover
//! raised and the worker then lowered: a third line bouncing between the cores for every
//! event, since a job's spans share one `Arc`. An entry is 64 bytes with the job id copied
//! in, which the worker reads in place; only what few events carry (a long job id, a proof
//! kind, both durations) goes behind a box. A span that closes before the worker has taken
//! its first-enter event from the span table sends both in one entry (`start`).

use std::sync::Arc;

use proofline_core::{EventKind, EventRef, TimelineEvent};

/// Job ids up to this many bytes are copied into the entry.
const INLINE: usize = 24;

const PARTITION: u8 = 1;
const WORKER: u8 = 1 << 1;
const GPU: u8 = 1 << 2;
const MS: u8 = 1 << 3;
const MONOLITHIC: u8 = 1 << 4;
const THEN_QUEUE: u8 = 1 << 5;

/// One event on the layer's queue, and whether a GPU_QUEUE at the same instant follows it
/// (one entry instead of two for the common SYNTH_END + GPU_QUEUE pair).
#[derive(Debug)]
pub(crate) struct Queued {
    offset_ms: u64,
    ext: Option<Box<Ext>>,
    /// The event's own duration (`synth_ms` of a SYNTH_END, `gpu_ms` of a GPU_END).
    ms: u32,
    /// How many milliseconds before the event its start event was (see `start`).
    start_delta: u32,
    partition: u32,
    worker: u32,
    gpu: u32,
    kind: EventKind,
    flags: u8,
    /// The kind of the start event carried along (its index + 1), 0 for none.
    start: u8,
    job_len: u8,
    job: [u8; INLINE],
}

/// What does not fit in an entry.
#[derive(Debug, Default)]
struct Ext {
    job: Option<Arc<str>>,
    proof_kind: Option<Arc<str>>,
    start_proof_kind: Option<Arc<str>>,
    synth_ms: Option<u64>,
    gpu_ms: Option<u64>,
}

impl Queued {
    /// The entry for `ev`.
    pub fn new(ev: &EventRef<'_>, then_queue: bool) -> Self {
        let mut flags = if then_queue { THEN_QUEUE } else { 0 };
        let mut opt = |bit: u8, v: Option<u32>| {
            if v.is_some() {
                flags |= bit;
            }
            v.unwrap_or(0)
        };
        let partition = opt(PARTITION, ev.partition);
        let worker = opt(WORKER, ev.worker);
        let gpu = opt(GPU, ev.gpu);
        if ev.monolithic {
            flags |= MONOLITHIC;
        }
        // the duration the event's kind carries fits inline; anything else goes in `ext`
        let own = match ev.kind {
            EventKind::SynthEnd => (ev.synth_ms, ev.gpu_ms),
            EventKind::GpuEnd => (ev.gpu_ms, ev.synth_ms),
            _ => (None, ev.synth_ms.or(ev.gpu_ms)),
        };
        let mut ms = 0;
        let mut ext = Ext::default();
        let mut needs_ext = false;
        match own {
            (Some(v), None) if u32::try_from(v).is_ok() => {
                ms = v as u32;
                flags |= MS;
            }
            (None, None) => {}
            _ => {
                (ext.synth_ms, ext.gpu_ms) = (ev.synth_ms, ev.gpu_ms);
                needs_ext = true;
            }
        }
        if let Some(k) = ev.proof_kind {
            ext.proof_kind = Some(Arc::from(k));
            needs_ext = true;
        }
        let mut job = [0u8; INLINE];
        let id = ev.job_id.as_bytes();
        let job_len = if id.len() <= INLINE {
            job[..id.len()].copy_from_slice(id);
            id.len() as u8
        } else {
            ext.job = Some(Arc::from(ev.job_id));
            needs_ext = true;
            0
        };
        Queued {
            offset_ms: ev.offset_ms,
            ext: needs_ext.then(|| Box::new(ext)),
            ms,
            start_delta: 0,
            partition,
            worker,
            gpu,
            kind: ev.kind,
            flags,
            start: 0,
            job_len,
            job,
        }
    }

    /// One entry for a span's start and end events, when the start can ride along (same
    /// job, partition and worker, as a span's edges have); `None` when it cannot.
    pub fn pair(start: &EventRef<'_>, end: &EventRef<'_>, then_queue: bool) -> Option<Self> {
        let delta = end
            .offset_ms
            .checked_sub(start.offset_ms)
            .and_then(|d| u32::try_from(d).ok());
        // what `start_event` rebuilds from the end event must be the start event
        let gpu = start.kind.is_gpu();
        let rides = start.job_id == end.job_id
            && start.partition == end.partition
            && start.worker == if gpu { end.worker } else { None }
            && start.gpu == if gpu { end.gpu } else { None }
            && start.synth_ms.is_none()
            && start.gpu_ms.is_none()
            && !start.monolithic;
        let (true, Some(delta)) = (rides, delta) else {
            return None;
        };
        let mut q = Queued::new(end, then_queue);
        q.start = start.kind.index() as u8 + 1;
        q.start_delta = delta;
        if let Some(k) = start.proof_kind {
            q.ext.get_or_insert_with(Box::default).start_proof_kind = Some(Arc::from(k));
        }
        debug_assert_eq!(q.start_event().as_ref(), Some(start));
        Some(q)
    }

    /// The start event carried along, if any: it comes before [`Queued::event`].
    pub fn start_event(&self) -> Option<EventRef<'_>> {
        let kind = *EventKind::ALL.get(usize::from(self.start.checked_sub(1)?))?;
        let end = self.event();
        let mut ev = TimelineEvent::new(
            end.offset_ms - u64::from(self.start_delta),
            kind,
            end.job_id,
        );
        ev.partition = end.partition;
        if kind.is_gpu() {
            ev.worker = end.worker;
            ev.gpu = end.gpu;
        }
        ev.proof_kind = self
            .ext
            .as_deref()
            .and_then(|e| e.start_proof_kind.as_deref());
        Some(ev)
    }

    /// Whether a GPU_QUEUE follows the event.
    pub fn then_queue(&self) -> bool {
        self.flags & THEN_QUEUE != 0
    }

    /// How many TIMELINE events the entry stands for.
    pub fn events(&self) -> u64 {
        1 + u64::from(self.then_queue()) + u64::from(self.start != 0)
    }

    /// The event, its strings borrowed from the entry.
    pub fn event(&self) -> EventRef<'_> {
        let ext = self.ext.as_deref();
        let job = match ext.and_then(|e| e.job.as_deref()) {
            Some(long) => long,
            // copied from a `&str` whole, so always UTF-8
            None => std::str::from_utf8(&self.job[..usize::from(self.job_len)]).unwrap_or(""),
        };
        let opt = |bit: u8, v: u32| (self.flags & bit != 0).then_some(v);
        let mut ev = TimelineEvent::new(self.offset_ms, self.kind, job);
        ev.partition = opt(PARTITION, self.partition);
        ev.worker = opt(WORKER, self.worker);
        ev.gpu = opt(GPU, self.gpu);
        ev.monolithic = self.flags & MONOLITHIC != 0;
        let ms = opt(MS, self.ms).map(u64::from);
        match self.kind {
            EventKind::SynthEnd => ev.synth_ms = ms,
            EventKind::GpuEnd => ev.gpu_ms = ms,
            _ => {}
        }
        if let Some(e) = ext {
            ev.proof_kind = e.proof_kind.as_deref();
            if e.synth_ms.is_some() || e.gpu_ms.is_some() {
                (ev.synth_ms, ev.gpu_ms) = (e.synth_ms, e.gpu_ms);
            }
        }
        ev
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_entry_is_one_cache_line() {
        assert!(std::mem::size_of::<Queued>() <= 64);
    }

    fn event() -> impl Strategy<Value = (proofline_core::Event, bool)> {
        (
            any::<u64>(),
            0usize..6,
            prop_oneof!["[a-z0-9-]{1,24}", "[a-z0-9-]{25,60}", "[é ]{1,20}"],
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u32>()),
            proptest::option::of(prop_oneof![0u64..100_000, any::<u64>()]),
            proptest::option::of(prop_oneof![0u64..100_000, any::<u64>()]),
            proptest::option::of("[a-z-]{1,12}"),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(
                |(off, k, job, partition, worker, gpu, s, g, kind, mono, then_queue)| {
                    let mut ev = TimelineEvent::new(off, EventKind::ALL[k], Arc::from(job));
                    ev.partition = partition;
                    ev.worker = worker;
                    ev.gpu = gpu;
                    ev.synth_ms = s;
                    ev.gpu_ms = g;
                    ev.proof_kind = kind.map(Arc::from);
                    ev.monolithic = mono;
                    (ev, then_queue)
                },
            )
    }

    proptest! {
        /// Whatever goes in comes out: the entry loses nothing of any event.
        #[test]
        fn an_entry_gives_its_event_back((ev, then_queue) in event()) {
            let q = Queued::new(&ev.as_event_ref(), then_queue);
            prop_assert_eq!(q.event(), ev.as_event_ref());
            prop_assert_eq!(q.then_queue(), then_queue);
            prop_assert_eq!(q.events(), 1 + u64::from(then_queue));
            prop_assert!(q.start_event().is_none());
        }

        /// A start and an end travel in one entry when the start can be rebuilt from the
        /// end exactly, and in two otherwise: either way both come back as they went in.
        #[test]
        fn a_pair_gives_both_events_back(
            (end, then_queue) in event(),
            (other, _) in event(),
            back in prop_oneof![0u64..100_000, any::<u64>()],
            k in 0usize..6,
            same in any::<bool>(),
        ) {
            // a span's start: the end's job, partition and worker, earlier
            let mut start = if same { end.clone() } else { other };
            start.kind = EventKind::ALL[k];
            start.offset_ms = end.offset_ms.saturating_sub(back);
            start.synth_ms = None;
            start.gpu_ms = None;
            start.monolithic = false;
            if !start.kind.is_gpu() {
                start.worker = None;
                start.gpu = None;
            }
            let (s, e) = (start.as_event_ref(), end.as_event_ref());
            match Queued::pair(&s, &e, then_queue) {
                Some(q) => {
                    prop_assert_eq!(q.start_event(), Some(s));
                    prop_assert_eq!(q.event(), e);
                    prop_assert_eq!(q.events(), 2 + u64::from(then_queue));
                }
                None => {
                    prop_assert!(!same || back > u64::from(u32::MAX) || back > end.offset_ms);
                }
            }
        }
    }
}
