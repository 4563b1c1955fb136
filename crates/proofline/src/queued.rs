//! The queue entry: one event in one cache line.
//!
//! A prover thread writes the entry and the worker, on another core, reads it: every cache
//! line of an entry crosses between the cores once. An [`proofline_core::Event`] is 104
//! bytes (two lines) and holds the job id as an `Arc<str>`, whose reference count the prover
//! raised and the worker then lowered: a third line bouncing between the cores for every
//! event, since a job's spans share one `Arc`. An entry is 64 bytes with the job id copied
//! in, which the worker reads in place; only what few events carry (a long job id, a proof
//! kind, both durations) goes behind a box.

use std::sync::Arc;

use proofline_core::{EventKind, EventRef, TimelineEvent};

/// Job ids up to this many bytes are copied into the entry.
const INLINE: usize = 29;

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
    partition: u32,
    worker: u32,
    gpu: u32,
    kind: EventKind,
    flags: u8,
    job_len: u8,
    job: [u8; INLINE],
}

/// What does not fit in an entry.
#[derive(Debug, Default)]
struct Ext {
    job: Option<Arc<str>>,
    proof_kind: Option<Arc<str>>,
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
            partition,
            worker,
            gpu,
            kind: ev.kind,
            flags,
            job_len,
            job,
        }
    }

    /// Whether a GPU_QUEUE follows the event.
    pub fn then_queue(&self) -> bool {
        self.flags & THEN_QUEUE != 0
    }

    /// How many TIMELINE events the entry stands for.
    pub fn events(&self) -> u64 {
        1 + u64::from(self.then_queue())
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
            prop_oneof!["[a-z0-9-]{1,29}", "[a-z0-9-]{30,60}", "[é ]{1,20}"],
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
        }
    }
}
