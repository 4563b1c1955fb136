//! The event model: one TIMELINE line is one [`TimelineEvent`].

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The six TIMELINE events a partition (or a whole-proof job) goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventKind {
    /// Synthesis begins on a CPU worker.
    SynthStart,
    /// Synthesis is done (`synth_ms` holds the prover's own measure).
    SynthEnd,
    /// The synthesized partition enters the GPU queue (older builds: `CHAN_SEND`).
    GpuQueue,
    /// A GPU worker takes the partition off the queue.
    GpuPickup,
    /// GPU work begins.
    GpuStart,
    /// GPU work is done (`gpu_ms` holds the prover's own measure).
    GpuEnd,
}

/// What an event of a kind carries besides its time, job id and partition, as cuzk prints
/// it ([`EventKind::carries`]): the one rule the layer's queue entries, the events it builds
/// and the GPU_QUEUE it adds after a SYNTH_END all read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carries {
    /// `worker=` and `gpu=` (GPU events).
    pub worker_gpu: bool,
    /// `kind=` in the printed line, when the job is whole-proof (no partition): SYNTH_START.
    /// (Every event carries the span's proof kind to the engine, which names the job by it.)
    pub proof_kind_if_whole: bool,
    /// The span's duration: `synth_ms=` on SYNTH_END, `gpu_ms=` on GPU_END.
    pub duration: bool,
    /// The bare word `monolithic`, when the job is whole-proof: GPU_QUEUE.
    pub monolithic_if_whole: bool,
}

impl EventKind {
    /// Every kind, in pipeline order.
    pub const ALL: [EventKind; 6] = [
        EventKind::SynthStart,
        EventKind::SynthEnd,
        EventKind::GpuQueue,
        EventKind::GpuPickup,
        EventKind::GpuStart,
        EventKind::GpuEnd,
    ];

    /// The name cuzk prints.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::SynthStart => "SYNTH_START",
            EventKind::SynthEnd => "SYNTH_END",
            EventKind::GpuQueue => "GPU_QUEUE",
            EventKind::GpuPickup => "GPU_PICKUP",
            EventKind::GpuStart => "GPU_START",
            EventKind::GpuEnd => "GPU_END",
        }
    }

    /// Parses an event name, accepting the legacy `CHAN_SEND` for [`EventKind::GpuQueue`].
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "SYNTH_START" => EventKind::SynthStart,
            "SYNTH_END" => EventKind::SynthEnd,
            "GPU_QUEUE" | "CHAN_SEND" => EventKind::GpuQueue,
            "GPU_PICKUP" => EventKind::GpuPickup,
            "GPU_START" => EventKind::GpuStart,
            "GPU_END" => EventKind::GpuEnd,
            _ => return None,
        })
    }

    /// What an event of this kind carries, as cuzk prints it.
    #[inline(always)]
    pub const fn carries(self) -> Carries {
        Carries {
            worker_gpu: self.is_gpu(),
            proof_kind_if_whole: matches!(self, EventKind::SynthStart),
            duration: matches!(self, EventKind::SynthEnd | EventKind::GpuEnd),
            monolithic_if_whole: matches!(self, EventKind::GpuQueue),
        }
    }

    /// Whether it is a GPU edge (GPU_PICKUP, GPU_START, GPU_END), whose lines name the
    /// worker.
    pub const fn is_gpu(self) -> bool {
        matches!(
            self,
            EventKind::GpuPickup | EventKind::GpuStart | EventKind::GpuEnd
        )
    }

    /// Position in [`EventKind::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One TIMELINE event.
///
/// `S` is the string type of the job id and proof kind: `&str` when borrowed from a parsed
/// line ([`EventRef`]), `Arc<str>` when owned ([`Event`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TimelineEvent<S> {
    /// Milliseconds since the prover's engine started (monotonic clock).
    pub offset_ms: u64,
    /// Which edge of the pipeline this is.
    pub kind: EventKind,
    /// The request id (`porep-<miner>-<sector>`, a UUID, ...).
    pub job_id: S,
    /// Partition index; `None` for whole-proof jobs.
    pub partition: Option<u32>,
    /// Global GPU worker index.
    pub worker: Option<u32>,
    /// GPU device index, when the writer knows it (proofline's own writer adds `gpu=`).
    pub gpu: Option<u32>,
    /// Synthesis time as the prover measured it (SYNTH_END).
    pub synth_ms: Option<u64>,
    /// GPU time as the prover measured it (GPU_END).
    pub gpu_ms: Option<u64>,
    /// Proof kind (`porep-c2`, `snap-update`, `window-post`, `winning-post`).
    pub proof_kind: Option<S>,
    /// The bare `monolithic` word of whole-proof GPU_QUEUE lines.
    pub monolithic: bool,
    /// `request=`: which request of the job id the event belongs to, when the writer knows
    /// (proofline's layer, for a prover whose request span carries the job id): two requests
    /// of one id in flight at once (a client's retry that did not cancel the first) are two
    /// jobs, not one. Numbers start at 1; `None` (and 0) for the lines of a writer that
    /// cannot tell, cuzk's own among them.
    pub request: Option<u32>,
}

/// An event's kind and numbers, the absent ones as bits: the form the reader's thread hands
/// an event to the engine's in, and the engine buffers it in (40 bytes, where the `Option`s of
/// a [`TimelineEvent`] take 72; an event is copied several times between its line and its
/// processing, and building and reading back the `Option`s was 4.5 % of the engine's
/// instructions).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Nums {
    synth_ms: u64,
    gpu_ms: u64,
    partition: u32,
    worker: u32,
    gpu: u32,
    request: u32,
    /// Which TIMELINE event.
    pub kind: EventKind,
    /// Which of the optional fields are present ([`Nums::PARTITION`], ...).
    has: u8,
}

impl Nums {
    const PARTITION: u8 = 1;
    const WORKER: u8 = 2;
    const GPU: u8 = 4;
    const SYNTH_MS: u8 = 8;
    const GPU_MS: u8 = 16;
    const PROOF_KIND: u8 = 32;
    const REQUEST: u8 = 64;
    const MONOLITHIC: u8 = 128;

    /// An event's numbers (and whether it has a proof kind, and `monolithic`).
    #[inline(always)]
    pub fn of<S>(ev: &TimelineEvent<S>) -> Nums {
        let bit = |present: bool, b: u8| if present { b } else { 0 };
        Nums {
            synth_ms: ev.synth_ms.unwrap_or(0),
            gpu_ms: ev.gpu_ms.unwrap_or(0),
            partition: ev.partition.unwrap_or(0),
            worker: ev.worker.unwrap_or(0),
            gpu: ev.gpu.unwrap_or(0),
            request: ev.request.unwrap_or(0),
            kind: ev.kind,
            has: bit(ev.partition.is_some(), Self::PARTITION)
                | bit(ev.worker.is_some(), Self::WORKER)
                | bit(ev.gpu.is_some(), Self::GPU)
                | bit(ev.synth_ms.is_some(), Self::SYNTH_MS)
                | bit(ev.gpu_ms.is_some(), Self::GPU_MS)
                | bit(ev.proof_kind.is_some(), Self::PROOF_KIND)
                | bit(ev.request.is_some(), Self::REQUEST)
                | bit(ev.monolithic, Self::MONOLITHIC),
        }
    }

    /// Whether the partition, worker or GPU index is at or over its limit (one test on the
    /// usual path: an absent index is held as 0).
    #[inline(always)]
    pub fn index_over(&self, partition: u32, worker: u32, gpu: u32) -> bool {
        (self.partition >= partition) | (self.worker >= worker) | (self.gpu >= gpu)
    }

    #[inline(always)]
    fn opt<T>(&self, bit: u8, v: T) -> Option<T> {
        (self.has & bit != 0).then_some(v)
    }

    /// `partition=`.
    #[inline(always)]
    pub fn partition(&self) -> Option<u32> {
        self.opt(Self::PARTITION, self.partition)
    }

    /// `worker=`.
    #[inline(always)]
    pub fn worker(&self) -> Option<u32> {
        self.opt(Self::WORKER, self.worker)
    }

    /// `gpu=`.
    #[inline(always)]
    pub fn gpu(&self) -> Option<u32> {
        self.opt(Self::GPU, self.gpu)
    }

    /// `synth_ms=`.
    #[inline(always)]
    pub fn synth_ms(&self) -> Option<u64> {
        self.opt(Self::SYNTH_MS, self.synth_ms)
    }

    /// `gpu_ms=`.
    #[inline(always)]
    pub fn gpu_ms(&self) -> Option<u64> {
        self.opt(Self::GPU_MS, self.gpu_ms)
    }

    /// `request=` as written (0 included).
    #[inline(always)]
    pub fn request(&self) -> Option<u32> {
        self.opt(Self::REQUEST, self.request)
    }

    /// Whether the event has a `kind=`.
    #[inline(always)]
    pub fn has_proof_kind(&self) -> bool {
        self.has & Self::PROOF_KIND != 0
    }

    /// The bare `monolithic` word.
    #[cfg(test)]
    pub fn monolithic(&self) -> bool {
        self.has & Self::MONOLITHIC != 0
    }

    /// The event, with its strings (`proof_kind` used if it has one).
    #[cfg(test)]
    pub fn event<S>(&self, offset_ms: u64, job_id: S, proof_kind: S) -> TimelineEvent<S> {
        TimelineEvent {
            offset_ms,
            kind: self.kind,
            job_id,
            partition: self.partition(),
            worker: self.worker(),
            gpu: self.gpu(),
            synth_ms: self.synth_ms(),
            gpu_ms: self.gpu_ms(),
            proof_kind: self.has_proof_kind().then_some(proof_kind),
            monolithic: self.monolithic(),
            request: self.request(),
        }
    }
}

/// An event that owns its strings.
pub type Event = TimelineEvent<Arc<str>>;
/// An event borrowing its strings from a parsed line.
pub type EventRef<'a> = TimelineEvent<&'a str>;

impl<S> TimelineEvent<S> {
    /// A bare event with no detail fields.
    pub fn new(offset_ms: u64, kind: EventKind, job_id: S) -> Self {
        TimelineEvent {
            offset_ms,
            kind,
            job_id,
            partition: None,
            worker: None,
            gpu: None,
            synth_ms: None,
            gpu_ms: None,
            proof_kind: None,
            monolithic: false,
            request: None,
        }
    }

    /// The same event with its strings mapped by `f`.
    pub fn map_str<T>(self, mut f: impl FnMut(S) -> T) -> TimelineEvent<T> {
        TimelineEvent {
            offset_ms: self.offset_ms,
            kind: self.kind,
            job_id: f(self.job_id),
            partition: self.partition,
            worker: self.worker,
            gpu: self.gpu,
            synth_ms: self.synth_ms,
            gpu_ms: self.gpu_ms,
            proof_kind: self.proof_kind.map(f),
            monolithic: self.monolithic,
            request: self.request,
        }
    }
}

impl<S: AsRef<str>> TimelineEvent<S> {
    /// Borrows the strings.
    pub fn as_event_ref(&self) -> EventRef<'_> {
        TimelineEvent {
            offset_ms: self.offset_ms,
            kind: self.kind,
            job_id: self.job_id.as_ref(),
            partition: self.partition,
            worker: self.worker,
            gpu: self.gpu,
            synth_ms: self.synth_ms,
            gpu_ms: self.gpu_ms,
            proof_kind: self.proof_kind.as_ref().map(AsRef::as_ref),
            monolithic: self.monolithic,
            request: self.request,
        }
    }

    /// Copies the strings into an owned event.
    pub fn to_owned_event(&self) -> Event {
        TimelineEvent {
            offset_ms: self.offset_ms,
            kind: self.kind,
            job_id: Arc::from(self.job_id.as_ref()),
            partition: self.partition,
            worker: self.worker,
            gpu: self.gpu,
            synth_ms: self.synth_ms,
            gpu_ms: self.gpu_ms,
            proof_kind: self.proof_kind.as_ref().map(|k| Arc::from(k.as_ref())),
            monolithic: self.monolithic,
            request: self.request,
        }
    }
}

/// The proof kind a job id implies, from Curio's id conventions.
pub fn kind_from_job_id(job_id: &str) -> Option<&'static str> {
    if job_id.starts_with("porep-") {
        Some("porep-c2")
    } else if job_id.starts_with("snap-") {
        Some("snap-update")
    } else if job_id.starts_with("wdpost-") {
        Some("window-post")
    } else if job_id.starts_with("winpost-") {
        Some("winning-post")
    } else {
        None
    }
}

/// The number of partitions a job id implies (docs/definitions.md, "Expected partitions per job"):
/// 10 for `porep-*`, 16 for `snap-*`, 1 for the whole-proof PoSt ids; `None` when unknown.
pub fn expected_partitions_from_job_id(job_id: &str) -> Option<u32> {
    if job_id.starts_with("porep-") {
        Some(10)
    } else if job_id.starts_with("snap-") {
        Some(16)
    } else if job_id.starts_with("wdpost-") || job_id.starts_with("winpost-") {
        Some(1)
    } else {
        None
    }
}
