//! The guard: shutdown twice, events after it, the sinks flushed and shut down within the
//! deadline, and `wake`.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use proofline::TimelineLayer;
use tracing::info_span;
use tracing_subscriber::prelude::*;

mod common;

#[test]
fn shutdown_twice_and_after_shutdown_events_are_counted_as_dropped() {
    let (layer, mut guard) = TimelineLayer::builder().no_timeline().build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        info_span!(
            "synthesize_partition",
            job_id = "porep-1-1",
            partition = 0u32
        )
        .in_scope(|| {});
    });
    let first = guard.shutdown(Duration::from_secs(5)).unwrap();
    let second = guard.shutdown(Duration::from_secs(5)).unwrap();
    assert_eq!(first, second);
    assert_eq!(first.events.events, 3);
    tracing::dispatcher::with_default(&dispatch, || {
        info_span!(
            "synthesize_partition",
            job_id = "porep-1-1",
            partition = 1u32
        )
        .in_scope(|| {});
    });
    assert_eq!(guard.stats().dropped, 3);
    // a CUZK_TIMING line logged after it is lost telemetry too, counted apart from the
    // events (and with them on /metrics)
    assert_eq!(guard.stats().timing_lines_dropped, 0);
    tracing::dispatcher::with_default(&dispatch, || {
        tracing::info!(target: "timeline", "CUZK_TIMING: gpu_tid=0 mutex_held_ms=900");
    });
    let s = guard.stats();
    assert_eq!((s.dropped, s.timing_lines_dropped), (3, 1));
}

/// `wake` has the worker take in what is queued at once, not at its next poll.
#[test]
fn wake_delivers_what_is_queued_without_waiting_for_the_poll() {
    let (layer, mut guard) = TimelineLayer::builder()
        .no_timeline()
        .poll_interval(Duration::from_secs(120))
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let span = |p: u32| {
        tracing::dispatcher::with_default(&dispatch, || {
            info_span!("synthesize_partition", job_id = "porep-1-9", partition = p).in_scope(|| {});
        });
    };
    let taken_within = |n: u64, limit: Duration| {
        let deadline = std::time::Instant::now() + limit;
        while guard.stats().received < n {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(1));
        }
        true
    };
    // the first span may meet the worker's first pass; after this the worker is parked
    span(0);
    guard.wake();
    assert!(
        taken_within(3, Duration::from_secs(10)),
        "{:?}",
        guard.stats()
    );
    // (a wake that came before the worker's first park makes that park return at once:
    // give that extra pass time to end before the next span)
    thread::sleep(Duration::from_millis(200));
    span(1);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(
        guard.stats().received,
        3,
        "the worker polled early: the test proves nothing"
    );
    guard.wake();
    assert!(
        taken_within(6, Duration::from_secs(10)),
        "{:?}",
        guard.stats()
    );
    guard.shutdown(Duration::from_secs(10)).unwrap();
}

/// A sink that remembers its lifecycle calls and fails its shutdown.
struct Lifecycle {
    calls: Arc<Mutex<Vec<String>>>,
    fail: bool,
}

impl proofline_core::sink::UpdateSink for Lifecycle {
    fn update(&mut self, u: proofline_core::sink::Update) {
        if let proofline_core::sink::Update::Job(j) = u {
            self.calls.lock().unwrap().push(format!("job {}", j.job_id));
        }
    }
    fn flush(&mut self) {
        self.calls.lock().unwrap().push("flush".into());
    }
    fn shutdown(
        &mut self,
        deadline: std::time::Instant,
    ) -> Result<(), proofline_core::sink::SinkError> {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        self.calls.lock().unwrap().push(format!(
            "shutdown, deadline {}",
            if left > Duration::from_secs(3) && left <= Duration::from_secs(7) {
                "the guard's"
            } else {
                "another"
            }
        ));
        if self.fail {
            return Err(proofline_core::sink::SinkError {
                sink: "test".into(),
                message: "3 traces not delivered".into(),
            });
        }
        Ok(())
    }
}

#[test]
fn the_guard_flushes_and_shuts_down_every_sink_within_its_deadline() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let (layer, mut guard) = TimelineLayer::builder()
        .no_timeline()
        .sink(Lifecycle {
            calls: calls.clone(),
            fail: false,
        })
        .sink(Lifecycle {
            calls: calls.clone(),
            fail: true,
        })
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        tracing::info!(target: "timeline", event = "SYNTH_START", job_id = "w-1", kind = "winning-post");
        tracing::info!(target: "timeline", event = "GPU_END", job_id = "w-1", worker = 0u32, gpu_ms = 5u64);
    });
    let err = guard
        .shutdown(Duration::from_secs(7))
        .expect_err("the second sink fails its shutdown");
    assert!(
        matches!(&err, proofline::ShutdownError::Sink { error, report }
            if error.sink == "test" && report.summary.jobs_complete == 1),
        "{err}"
    );
    let calls = calls.lock().unwrap().clone();
    // each sink saw the job, then a flush, then its shutdown with the guard's deadline
    assert_eq!(
        calls,
        [
            "job w-1",
            "job w-1",
            "flush",
            "flush",
            "shutdown, deadline the guard's",
            "shutdown, deadline the guard's"
        ]
    );
    // later calls keep the first result
    assert!(guard.shutdown(Duration::from_secs(1)).is_err());
}
