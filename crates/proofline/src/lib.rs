#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod builder;
mod clock;
mod fields;
mod guard;
mod handoff;
mod layer;
mod queued;
mod worker;

use std::time::Duration;

pub use builder::Builder;
pub use fields::FieldNames;
pub use guard::{ShutdownError, TimelineGuard};
pub use layer::{Edge, SpanRule, StatsSnapshot, TimelineLayer, cuzk_whole_proof_spans};
pub use proofline_core::{self as core, EventKind, Report};

/// Entries each prover thread's queue to the worker holds before it drops (an entry is one
/// event, or a span's start and end together; 64 bytes each, allocated at a thread's first
/// event).
pub const DEFAULT_CHANNEL_CAPACITY: usize = 4_096;
/// How long dropping the guard waits for the worker to deliver what is queued.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// The live engine's reorder window: the layer's events are nearly in order.
pub const DEFAULT_LIVE_REORDER_WINDOW_MS: u64 = 1_000;
/// Rows of jobs and transitions the live engine keeps for the report it gives at shutdown
/// (the first ones; its aggregates count every job): a prover that runs for months keeps
/// no more than this per finished sector, so the layer's memory is flat over its life.
pub const DEFAULT_LIVE_MAX_ROWS: usize = 1_000;
/// How long the layer waits before saying that nothing reached it, or that GPU time is not
/// observed ([`Builder::silence_warning_after`]).
pub const DEFAULT_SILENCE_WARNING: Duration = Duration::from_secs(10);
/// The prover instance's name when [`Builder::instance`] is not called.
pub const DEFAULT_INSTANCE: &str = "cuzk";
/// The target of `tracing` events read as TIMELINE events (cuzk's `timeline_event()`).
pub const DEFAULT_EVENT_TARGET: &str = "timeline";

/// How long the worker sleeps when the queue is empty: how long a TIMELINE line waits at
/// most while the worker keeps up with the prover.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(5);
