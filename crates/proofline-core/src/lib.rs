#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod codec;
pub mod compare;
pub mod dist;
pub mod engine;
pub mod event;
pub mod ids;
pub mod nouns;
pub mod reader;
pub mod report;
pub mod sink;
pub mod text;
pub mod timing;
pub mod whatif;

pub use codec::{ParseError, parse_line, write_line};
pub use engine::{Engine, EngineConfig};
pub use event::{Carries, Event, EventKind, EventRef, TimelineEvent};
pub use nouns::Nouns;
pub use report::Report;
pub use sink::{Driver, Fanout, LiveState, RunInfo, Update, UpdateSink};
