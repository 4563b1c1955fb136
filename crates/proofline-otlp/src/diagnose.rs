//! Why exports failed: each failure of the transport ([`SendError`], typed: a status code, a
//! gRPC code, a network error) classified once, by [`classify`], into a [`FailureKind`]
//! with the words an operator reads; a network error is classified by what a probe of the
//! collector's address finds. [`Failures`] keeps each kind once, with its counts.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::endpoint::{Endpoint, Found, Probe};
use crate::lock;

/// How often a failing collector is probed at most.
const PROBE_EVERY: Duration = Duration::from_secs(5);
/// A probe's budget: connect, and with TLS the handshake and its answer.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What went wrong with one export, as the transport saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendError {
    /// The collector answered an HTTP status that is not a success.
    Http {
        /// The status code.
        status: u16,
    },
    /// The collector answered a gRPC status that is not OK.
    #[cfg_attr(not(feature = "grpc"), allow(dead_code))]
    Grpc {
        /// The gRPC status code (0..=16).
        code: i32,
        /// Its message.
        message: String,
    },
    /// No answer came: the connection failed, broke, or the export's time ran out. The
    /// words are the transport's own; a probe says more.
    Network(String),
    /// The export's time ran out waiting for the answer.
    TimedOut(String),
    /// The request could not be made (encoding, a header value).
    Request(String),
}

/// One kind of export failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The collector answered this HTTP status.
    Http(u16),
    /// The collector answered this gRPC status code.
    Grpc(i32),
    /// The collector took the request but rejected some of its spans (OTLP partial success).
    Rejected,
    /// No answer; a probe of the address found this.
    Network(Found),
    /// The collector takes connections but closed this one before it answered.
    Closed,
    /// The request could not be made.
    Request,
}

/// The names of gRPC's status codes, by code.
const GRPC_CODES: [&str; 17] = [
    "Ok",
    "Cancelled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];

/// The name of a gRPC status code.
pub(crate) fn grpc_code_name(code: i32) -> &'static str {
    usize::try_from(code)
        .ok()
        .and_then(|c| GRPC_CODES.get(c))
        .copied()
        .unwrap_or("Unknown")
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailureKind::Http(code) => write!(f, "HTTP {code}"),
            FailureKind::Grpc(code) => write!(f, "gRPC {}", grpc_code_name(*code)),
            FailureKind::Rejected => f.write_str("spans rejected"),
            FailureKind::Network(found) => f.write_str(found.as_str()),
            FailureKind::Closed => f.write_str("connection closed before the answer"),
            FailureKind::Request => f.write_str("request error"),
        }
    }
}

/// One kind of export failure, with its counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportFailure {
    /// What kind.
    pub kind: FailureKind,
    /// Traces that failed so (for [`FailureKind::Rejected`]: that had spans rejected).
    pub traces: u64,
    /// Their spans (for [`FailureKind::Rejected`]: the rejected ones).
    pub spans: u64,
    /// The first failure of the kind, in words.
    pub first: String,
}

const CREDENTIALS: &str =
    ": it did not accept the request's credentials (the headers of OTEL_EXPORTER_OTLP_HEADERS)";

/// The kind of a failure and its words. `probe` is asked only for a network error.
pub(crate) fn classify(err: &SendError, probe: impl FnOnce() -> Probe) -> (FailureKind, String) {
    match err {
        SendError::Http { status } => {
            let hint = if matches!(status, 401 | 403) {
                CREDENTIALS
            } else {
                ""
            };
            (
                FailureKind::Http(*status),
                format!("the collector answered HTTP {status}{hint}"),
            )
        }
        SendError::Grpc { code, message } => {
            // Unauthenticated, PermissionDenied
            let hint = if matches!(code, 16 | 7) {
                CREDENTIALS
            } else {
                ""
            };
            (
                FailureKind::Grpc(*code),
                format!(
                    "the collector answered gRPC status {}{hint}: {message}",
                    grpc_code_name(*code)
                ),
            )
        }
        SendError::TimedOut(said) => {
            let p = probe();
            // a collector that takes connections: what the transport itself saw says more
            let words = if p.found == Found::NoAnswer {
                format!("{} (the exporter saw: {said})", p.words)
            } else {
                p.words
            };
            (FailureKind::Network(p.found), words)
        }
        SendError::Network(said) => {
            let p = probe();
            // a collector that takes connections and closed this one (mid-answer, an HTTP/2
            // reset): not a time-out
            if p.found == Found::NoAnswer {
                let words = p.words.replace(
                    "but did not answer the export in time",
                    "but closed the connection before answering",
                );
                return (
                    FailureKind::Closed,
                    format!("{words} (the exporter saw: {said})"),
                );
            }
            (FailureKind::Network(p.found), p.words)
        }
        SendError::Request(words) => (FailureKind::Request, words.clone()),
    }
}

/// Export failures by kind.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    kinds: Mutex<Vec<ExportFailure>>,
    /// The last probe and when: a failing collector is probed every few seconds at most.
    probed: Mutex<Option<(Instant, Probe)>>,
}

impl Failures {
    /// A trace of `spans` spans failed so.
    pub(crate) fn record(&self, err: &SendError, spans: u64, endpoint: &Endpoint) {
        let (kind, first) = classify(err, || {
            let mut probed = lock(&self.probed);
            match &*probed {
                Some((at, p)) if at.elapsed() < PROBE_EVERY => p.clone(),
                _ => {
                    let p = endpoint.probe(PROBE_TIMEOUT);
                    *probed = Some((Instant::now(), p.clone()));
                    p
                }
            }
        });
        self.add(kind, first, spans);
    }

    /// The collector rejected `rejected` spans of a trace, saying `message`.
    pub(crate) fn rejected(&self, rejected: u64, message: &str) {
        let words = if message.is_empty() {
            format!("the collector rejected {rejected} spans (OTLP partial success)")
        } else {
            format!("the collector rejected {rejected} spans (OTLP partial success): {message}")
        };
        self.add(FailureKind::Rejected, words, rejected);
    }

    fn add(&self, kind: FailureKind, first: String, spans: u64) {
        let mut kinds = lock(&self.kinds);
        match kinds.iter_mut().find(|k| k.kind == kind) {
            Some(k) => {
                k.traces += 1;
                k.spans += spans;
            }
            None => kinds.push(ExportFailure {
                kind,
                traces: 1,
                spans,
                first,
            }),
        }
    }

    /// Each kind once, in the order they first happened.
    pub(crate) fn list(&self) -> Vec<ExportFailure> {
        lock(&self.kinds).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never() -> Probe {
        panic!("no probe for a failure the collector answered")
    }

    #[test]
    fn each_failure_is_classified_by_its_type() {
        let (k, w) = classify(&SendError::Http { status: 500 }, never);
        assert_eq!(
            (k, k.to_string()),
            (FailureKind::Http(500), "HTTP 500".into())
        );
        assert_eq!(w, "the collector answered HTTP 500");
        let (k, w) = classify(&SendError::Http { status: 401 }, never);
        assert_eq!(k, FailureKind::Http(401));
        assert!(w.contains("HTTP 401: it did not accept the request's credentials"));
        let (k, w) = classify(
            &SendError::Grpc {
                code: 16,
                message: "no key".into(),
            },
            never,
        );
        assert_eq!(k.to_string(), "gRPC Unauthenticated");
        assert!(w.contains("Unauthenticated: it did not accept") && w.ends_with("no key"));
        assert_eq!(
            classify(
                &SendError::Grpc {
                    code: 14,
                    message: String::new()
                },
                never
            )
            .0
            .to_string(),
            "gRPC Unavailable"
        );
        // a network error is what the probe finds
        let (k, w) = classify(&SendError::Network("error sending request".into()), || {
            Probe::new(Found::Refused, "connection refused by 127.0.0.1:9".into())
        });
        assert_eq!(k, FailureKind::Network(Found::Refused));
        assert_eq!(k.to_string(), "connection refused");
        assert_eq!(w, "connection refused by 127.0.0.1:9");
        // a collector that takes the connection: the transport's words come with the probe's
        let probe = || {
            Probe::new(
                Found::NoAnswer,
                "the collector at x accepts connections but did not answer the export in time"
                    .into(),
            )
        };
        let (k, w) = classify(&SendError::TimedOut("operation timed out".into()), probe);
        assert_eq!(k, FailureKind::Network(Found::NoAnswer));
        assert!(
            w.contains("did not answer the export in time (the exporter saw: operation timed out)"),
            "{w}"
        );
        // closed, not timed out: said so
        let (k, w) = classify(
            &SendError::Network("connection closed before message completed".into()),
            probe,
        );
        assert_eq!(k, FailureKind::Closed);
        assert!(
            w.contains("closed the connection before answering") && !w.contains("in time"),
            "{w}"
        );
        assert_eq!(
            classify(&SendError::Request("bad header".into()), never).0,
            FailureKind::Request
        );
        assert_eq!(grpc_code_name(99), "Unknown");
    }

    #[test]
    fn failures_are_kept_once_per_kind_with_their_counts() {
        let f = Failures::default();
        f.add(FailureKind::Http(500), "first".into(), 10);
        f.add(FailureKind::Http(503), "other".into(), 1);
        f.add(FailureKind::Http(500), "second".into(), 5);
        f.rejected(40, "bad spans");
        let l = f.list();
        assert_eq!(l.len(), 3);
        assert_eq!(
            (l[0].traces, l[0].spans, l[0].first.as_str()),
            (2, 15, "first")
        );
        assert_eq!(l[2].kind, FailureKind::Rejected);
        assert!(l[2].first.contains("rejected 40 spans") && l[2].first.ends_with("bad spans"));
    }
}
