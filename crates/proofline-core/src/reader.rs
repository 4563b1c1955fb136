//! Reading TIMELINE logs: lines in, events into an [`Engine`], bad lines counted by number.

use std::io::{self, BufRead};

use crate::codec::{MARKER, parse_line};
use crate::engine::Engine;
use crate::report::{LineError, LineStats, UpdateSink};

/// How many malformed lines are kept with their error (all are counted).
pub const MAX_LINE_EXAMPLES: usize = 20;

/// Feeds log lines to an engine, counting lines and keeping the first malformed ones.
///
/// Ordinary log lines are skipped. A malformed TIMELINE line is counted, its number and error
/// kept (the first [`MAX_LINE_EXAMPLES`]), and the rest of the input is still used. A last
/// line without a newline is not used (a cut can turn `partition=12` into `partition=1`): it
/// is reported as `truncated_last_line`.
#[derive(Debug, Default)]
pub struct LineFeeder {
    /// What was seen so far.
    pub stats: LineStats,
}

impl LineFeeder {
    /// A new feeder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one complete line (with or without its `\n`). Returns the error of a malformed
    /// TIMELINE line (it is also counted, and kept if among the first few).
    pub fn feed_line(
        &mut self,
        line: &[u8],
        engine: &mut Engine,
        sink: &mut impl UpdateSink,
    ) -> Option<LineError> {
        self.stats.lines += 1;
        let Ok(text) = std::str::from_utf8(line) else {
            if contains(line, MARKER.as_bytes()) {
                self.stats.timeline_lines += 1;
                return Some(self.malformed("the line is not valid UTF-8".to_owned()));
            }
            return None;
        };
        match parse_line(text) {
            Ok(None) => None,
            Ok(Some(ev)) => {
                self.stats.timeline_lines += 1;
                engine.ingest(&ev, sink);
                None
            }
            Err(e) => {
                self.stats.timeline_lines += 1;
                Some(self.malformed(e.to_string()))
            }
        }
    }

    fn malformed(&mut self, error: String) -> LineError {
        self.stats.malformed += 1;
        let e = LineError {
            line: self.stats.lines,
            error,
        };
        if self.stats.malformed_examples.len() < MAX_LINE_EXAMPLES {
            self.stats.malformed_examples.push(e.clone());
        }
        e
    }

    /// Notes an unterminated last line, which is not used.
    pub fn feed_cut_line(&mut self, line: &[u8]) {
        self.stats.lines += 1;
        if contains(line, MARKER.as_bytes()) {
            self.stats.truncated_last_line = true;
        }
    }

    /// Reads `input` to its end, feeding every complete line. `on_bytes` is told how many
    /// bytes each line took (for progress bars).
    pub fn feed_all(
        &mut self,
        input: &mut impl BufRead,
        engine: &mut Engine,
        sink: &mut impl UpdateSink,
        mut on_bytes: impl FnMut(usize),
    ) -> io::Result<()> {
        let mut buf = Vec::with_capacity(256);
        loop {
            buf.clear();
            let n = input.read_until(b'\n', &mut buf)?;
            if n == 0 {
                return Ok(());
            }
            on_bytes(n);
            if buf.last() == Some(&b'\n') {
                self.feed_line(&buf, engine, sink);
            } else {
                self.feed_cut_line(&buf);
            }
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineConfig;
    use crate::report::NoUpdates;

    #[test]
    fn bad_lines_are_numbered_and_the_rest_is_used() {
        let log = "boot\n\
TIMELINE,0,SYNTH_START,winpost-1-a,kind=winning-post\n\
TIMELINE,x,SYNTH_END,winpost-1-a,synth_ms=1\n\
CUZK_TIMING: msm=3us\n\
TIMELINE,10,SYNTH_END,winpost-1-a,synth_ms=10\n\
TIMELINE,10,GPU_QUEUE,winpost-1-a,monolithic\n\
TIMELINE,11,GPU_START,winpost-1-a,worker=0\n\
TIMELINE,12,GPU_WHAT,winpost-1-a,worker=0\n\
TIMELINE,20,GPU_END,winpost-1-a,worker=0,gpu_ms=9\n\
TIMELINE,30,GPU_START,winpost-1-b,wor";
        let mut engine = Engine::new(EngineConfig::default());
        let mut feeder = LineFeeder::new();
        feeder
            .feed_all(&mut log.as_bytes(), &mut engine, &mut NoUpdates, |_| {})
            .unwrap();
        engine.finish(&mut NoUpdates);
        let s = &feeder.stats;
        assert_eq!((s.lines, s.timeline_lines, s.malformed), (10, 7, 2));
        assert_eq!(s.malformed_examples[0].line, 3);
        assert!(s.malformed_examples[0].error.contains("offset `x`"));
        assert_eq!(s.malformed_examples[1].line, 8);
        assert!(s.malformed_examples[1].error.contains("GPU_WHAT"));
        assert!(s.truncated_last_line);
        let r = engine.report();
        assert_eq!(r.summary.jobs_complete, 1);
        assert_eq!(r.summary.jobs_seen, 1, "the cut line must not start a job");
        assert_eq!(r.gpus[0].busy_ms, 9);
    }
}
