//! The layer inside a subscriber, driven the way cuzk drives its spans.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use proofline::{EventKind, TimelineLayer};
use proofline_core::EngineConfig;
use proofline_core::reader::LineFeeder;
use proofline_core::sink::NoUpdates;
use proofline_core::{Engine, parse_line};
use tracing::{Instrument as _, info_span};
use tracing_subscriber::prelude::*;

mod common;
use common::SharedBuf;

fn engine_cfg() -> EngineConfig {
    EngineConfig {
        reorder_window_ms: 1000,
        completion_grace_ms: 1000,
        ..EngineConfig::default()
    }
}

/// A small cuzk: synthesis threads, one GPU queue, two GPUs with two workers each, a lock
/// per GPU around `gpu_prove`.
fn run_cuzk_shaped(
    dispatch: &tracing::Dispatch,
    jobs: usize,
    partitions: u32,
    synth_threads: usize,
) {
    let (gpu_tx, gpu_rx) = mpsc::channel::<(String, u32)>();
    let gpu_rx = Arc::new(Mutex::new(gpu_rx));
    let work: Vec<(String, u32)> = (0..jobs)
        .flat_map(|j| (0..partitions).map(move |p| (format!("porep-1000-{j}"), p)))
        .collect();
    let work = Arc::new(Mutex::new(work.into_iter()));
    let mut synth = Vec::new();
    for _ in 0..synth_threads {
        let work = work.clone();
        let gpu_tx = gpu_tx.clone();
        let d = dispatch.clone();
        synth.push(thread::spawn(move || {
            let _d = tracing::dispatcher::set_default(&d);
            loop {
                let next = work.lock().unwrap().next();
                let Some((job, p)) = next else { break };
                let span = info_span!("synthesize_partition", job_id = %job, partition = p);
                span.in_scope(|| thread::sleep(Duration::from_millis(3)));
                drop(span);
                gpu_tx.send((job, p)).unwrap();
            }
        }));
    }
    drop(gpu_tx);
    let locks: Vec<Arc<Mutex<()>>> = (0..2).map(|_| Arc::new(Mutex::new(()))).collect();
    let mut gpu = Vec::new();
    for worker_id in 0..4u32 {
        let rx = gpu_rx.clone();
        let lock = locks[(worker_id / 2) as usize].clone();
        let d = dispatch.clone();
        gpu.push(thread::spawn(move || {
            let _d = tracing::dispatcher::set_default(&d);
            loop {
                let next = rx.lock().unwrap().recv();
                let Ok((job, p)) = next else { break };
                let worker = info_span!("gpu_worker", worker_id = worker_id, gpu = worker_id / 2, job_id = %job,
                    proof_kind = %"porep-c2", partition = ?Some(p));
                worker.in_scope(|| {
                    let _held = lock.lock().unwrap();
                    let prove = info_span!("gpu_prove", circuit_id = "porep-32g", partition = ?Some(p));
                    prove.in_scope(|| thread::sleep(Duration::from_millis(2)));
                });
            }
        }));
    }
    for t in synth.into_iter().chain(gpu) {
        t.join().unwrap();
    }
}

#[test]
fn one_engine_two_doors_live_report_equals_analyze_of_the_written_log() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .engine_config(engine_cfg())
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    run_cuzk_shaped(&dispatch, 6, 10, 8);
    let live = guard.shutdown(Duration::from_secs(10)).unwrap();
    let stats = guard.stats();
    assert_eq!(stats.dropped, 0);

    let text = buf.text();
    let mut per_kind = [0u64; 6];
    for line in text.lines() {
        let ev = parse_line(line)
            .unwrap_or_else(|e| panic!("{line}: {e}"))
            .expect("only TIMELINE lines");
        per_kind[ev.kind.index()] += 1;
        if matches!(
            ev.kind,
            EventKind::GpuStart | EventKind::GpuEnd | EventKind::GpuPickup
        ) {
            assert_eq!(ev.gpu, Some(ev.worker.unwrap() / 2), "{line}");
        }
    }
    assert_eq!(
        per_kind, [60; 6],
        "every partition yields its six events: {stats:?}"
    );
    assert_eq!(stats.written, 360);

    let mut engine = Engine::new(engine_cfg());
    let mut feeder = LineFeeder::new();
    feeder
        .feed_all(&mut text.as_bytes(), &mut engine, &mut NoUpdates, |_| {})
        .unwrap();
    engine.finish(&mut NoUpdates);
    let offline = engine.report();
    assert_eq!(live.summary.jobs_complete, 6);
    assert_eq!(live.gpus.len(), 2);
    assert_eq!(live.gpus, offline.gpus);
    assert_eq!(live.summary, offline.summary);
    assert_eq!(live.transitions, offline.transitions);
    assert_eq!(live.jobs, offline.jobs);
    assert_eq!(live.stages, offline.stages);
    assert_eq!(live.verdict, offline.verdict);
}

#[test]
fn n_spans_in_n_sets_of_events_out() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .timeline_to_writer(buf.clone())
        .build();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..1000u32 {
            info_span!("synthesize_partition", job_id = "porep-1-1", partition = i).in_scope(|| {});
        }
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    assert_eq!(text.lines().count(), 3000);
    for (kind, n) in [
        ("SYNTH_START", 1000),
        ("SYNTH_END", 1000),
        ("GPU_QUEUE", 1000),
    ] {
        assert_eq!(
            text.lines()
                .filter(|l| l.split(',').nth(2) == Some(kind))
                .count(),
            n,
            "{kind}"
        );
    }
    assert_eq!(guard.stats().received, 3000);
}

/// A writer that blocks until released: the worker is stuck, the queue fills.
struct Blocking(Arc<AtomicBool>, SharedBuf);

impl Write for Blocking {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        while !self.0.load(Ordering::Acquire) {
            thread::sleep(Duration::from_millis(1));
        }
        self.1.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_full_queue_drops_and_counts_and_never_blocks_the_prover() {
    let release = Arc::new(AtomicBool::new(false));
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .channel_capacity(4)
        .timeline_to_writer(Blocking(release.clone(), buf.clone()))
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let (done_tx, done_rx) = mpsc::channel();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let d = dispatch.clone();
            let done = done_tx.clone();
            thread::spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for i in 0..2500u32 {
                        info_span!("synthesize_partition", job_id = %format!("porep-1-{t}"), partition = i)
                            .in_scope(|| {});
                    }
                });
                done.send(()).unwrap();
            })
        })
        .collect();
    // the writer is blocked: if the layer waited for the queue, this would time out
    for _ in 0..4 {
        done_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("prover threads blocked by telemetry");
    }
    for t in threads {
        t.join().unwrap();
    }
    release.store(true, Ordering::Release);
    guard.shutdown(Duration::from_secs(30)).unwrap();
    let s = guard.stats();
    let emitted = 4 * 2500 * 3;
    assert!(s.dropped > 0, "{s:?}");
    assert_eq!(s.received + s.dropped, emitted);
    assert_eq!(s.written, s.received, "everything accepted was written");
    assert_eq!(
        buf.text().lines().count() as u64 + s.dropped,
        emitted,
        "the drop count is what is missing"
    );
}

#[test]
fn spans_entered_on_many_threads_closed_elsewhere_never_entered_or_panicking() {
    let buf = SharedBuf::default();
    // a prover whose GPU work has a span of its own (cuzk's has none on its default path)
    let (layer, mut guard) = TimelineLayer::builder()
        .map(
            "gpu_prove",
            EventKind::GpuStart,
            proofline::Edge::FirstEnter,
        )
        .map("gpu_prove", EventKind::GpuEnd, proofline::Edge::Close)
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        // entered many times, on several threads (as an async span is): one SYNTH_START
        let span = info_span!(
            "synthesize_partition",
            job_id = "porep-7-1",
            partition = 0u32
        );
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let s = span.clone();
                let d = dispatch.clone();
                thread::spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        s.in_scope(|| thread::sleep(Duration::from_millis(5)))
                    })
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        // ... and closed on another thread
        let d = dispatch.clone();
        thread::spawn(move || tracing::dispatcher::with_default(&d, || drop(span)))
            .join()
            .unwrap();

        // created and never entered: it never ran, so nothing is emitted
        drop(info_span!(
            "synthesize_partition",
            job_id = "porep-7-1",
            partition = 1u32
        ));

        // closed while its thread panics: the start is emitted, the end is not
        let d = dispatch.clone();
        let r = thread::spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                let _e = info_span!(
                    "gpu_prove",
                    job_id = "porep-7-1",
                    worker = 3u32,
                    partition = 0u32
                )
                .entered();
                panic!("GPU worker panics");
            })
        })
        .join();
        assert!(r.is_err());

        // an async span entered at each poll
        let fut = async {
            for _ in 0..3 {
                std::future::ready(()).await;
            }
        }
        .instrument(info_span!(
            "synthesize_partition",
            job_id = "porep-7-2",
            partition = 0u32
        ));
        futures_lite_block_on(fut);

        // the layer keeps working after the panic
        info_span!(
            "synthesize_partition",
            job_id = "porep-7-3",
            partition = 0u32
        )
        .in_scope(|| {});
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    let lines: Vec<&str> = text.lines().collect();
    let count = |job: &str, kind: &str| {
        lines
            .iter()
            .filter(|l| l.contains(&format!(",{kind},{job},")))
            .count()
    };
    assert_eq!(count("porep-7-1", "SYNTH_START"), 1, "{text}");
    assert_eq!(count("porep-7-1", "SYNTH_END"), 1);
    assert!(
        !text.contains("porep-7-1,partition=1"),
        "a never-entered span emits nothing"
    );
    assert_eq!(count("porep-7-1", "GPU_START"), 1);
    assert_eq!(
        count("porep-7-1", "GPU_END"),
        0,
        "no end for a span closed by a panic"
    );
    assert_eq!(guard.stats().aborted, 1);
    assert_eq!(count("porep-7-2", "SYNTH_START"), 1);
    assert_eq!(count("porep-7-2", "SYNTH_END"), 1);
    assert_eq!(count("porep-7-3", "SYNTH_END"), 1);
    let end = lines
        .iter()
        .find(|l| l.contains(",SYNTH_END,porep-7-1,"))
        .unwrap();
    let ms: u64 = end.rsplit("synth_ms=").next().unwrap().parse().unwrap();
    assert!(ms >= 5, "synth_ms covers first enter to close: {end}");
}

/// A minimal executor for a future that never waits.
fn futures_lite_block_on<F: std::future::Future>(fut: F) -> F::Output {
    use std::task::{Context, Poll, Waker};
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

#[test]
fn timeline_events_and_ancestor_fields() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .gpu_queue_on_synth_end(false)
        .timeline_to_writer(buf.clone())
        .build();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        // cuzk's timeline_event() changed from eprintln! to tracing::info!
        tracing::info!(target: "timeline", event = "GPU_QUEUE", job_id = %"porep-9-1", detail = "partition=4");
        tracing::info!(target: "timeline", event = "SYNTH_END", job_id = "winpost-9-ab", synth_ms = 895u64);
        tracing::info!(target: "timeline", event = "GPU_QUEUE", job_id = "winpost-9-ab", detail = "monolithic");
        // not the timeline target: ignored
        tracing::info!(event = "GPU_QUEUE", job_id = "porep-9-1", partition = 5u32);
        // job id and worker from the ancestor gpu_worker span, as in cuzk's sync path
        let w = info_span!("gpu_worker", worker_id = 3u64, gpu = 1i32, job_id = %"porep-9-1", partition = ?Some(4u32));
        w.in_scope(|| {
            // a timeline event inside the span takes the job id and partition from it
            tracing::info!(target: "timeline", event = "GPU_QUEUE");
            info_span!("gpu_prove", circuit_id = "c", partition = ?Some(4u32)).in_scope(|| {})
        });
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split(',').collect();
            f[1] = "T"; // offsets vary
            f.join(",")
        })
        .collect();
    assert_eq!(
        lines,
        vec![
            "TIMELINE,T,GPU_QUEUE,porep-9-1,partition=4",
            "TIMELINE,T,SYNTH_END,winpost-9-ab,synth_ms=895",
            "TIMELINE,T,GPU_QUEUE,winpost-9-ab,monolithic",
            "TIMELINE,T,GPU_PICKUP,porep-9-1,worker=3,partition=4,gpu=1",
            "TIMELINE,T,GPU_QUEUE,porep-9-1,partition=4",
            "TIMELINE,T,GPU_START,porep-9-1,worker=3,partition=4,gpu=1",
            &lines[6],
        ]
    );
    assert!(
        lines[6].starts_with("TIMELINE,T,GPU_END,porep-9-1,worker=3,partition=4,gpu_ms="),
        "{}",
        lines[6]
    );
    assert!(lines[6].ends_with(",gpu=1"));
}

#[test]
fn custom_span_names_and_edges() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .clear_mappings()
        .map(
            "build_circuit",
            EventKind::SynthStart,
            proofline::Edge::Created,
        )
        .map("build_circuit", EventKind::SynthEnd, proofline::Edge::Close)
        .timeline_to_writer(buf.clone())
        .build();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        info_span!("build_circuit", job_id = "snap-1-1", partition = 15u32).in_scope(|| {});
        info_span!(
            "synthesize_partition",
            job_id = "snap-1-1",
            partition = 14u32
        )
        .in_scope(|| {});
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.contains(",SYNTH_START,snap-1-1,partition=15\n"));
    assert!(
        !text.contains("partition=14"),
        "default mappings were cleared"
    );
}

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
}

/// A long span's start is written while it runs (the worker takes it from the span table);
/// a span that ends at once sends its start and end together, still in order.
#[test]
fn a_start_is_written_while_its_span_runs_and_a_short_span_keeps_its_order() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .map(
            "gpu_prove",
            EventKind::GpuStart,
            proofline::Edge::FirstEnter,
        )
        .map("gpu_prove", EventKind::GpuEnd, proofline::Edge::Close)
        .poll_interval(Duration::from_millis(5))
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        let span = info_span!("synthesize_partition", job_id = "porep-1-7", partition = 3);
        let _running = span.enter();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !buf.text().contains(",SYNTH_START,porep-1-7,partition=3\n") {
            assert!(
                std::time::Instant::now() < deadline,
                "SYNTH_START not written while the span runs: {:?}",
                buf.text()
            );
            thread::sleep(Duration::from_millis(2));
        }
        assert!(!buf.text().contains("SYNTH_END"), "{}", buf.text());
    });
    tracing::dispatcher::with_default(&dispatch, || {
        info_span!("gpu_prove", job_id = "porep-1-8", partition = 0, worker = 1).in_scope(|| {});
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    let kinds: Vec<(EventKind, &str)> = text
        .lines()
        .map(|l| {
            let ev = parse_line(l).unwrap().unwrap();
            (ev.kind, ev.job_id)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (EventKind::SynthStart, "porep-1-7"),
            (EventKind::SynthEnd, "porep-1-7"),
            (EventKind::GpuQueue, "porep-1-7"),
            (EventKind::GpuStart, "porep-1-8"),
            (EventKind::GpuEnd, "porep-1-8"),
        ],
        "{text}"
    );
    assert!(
        text.contains(",GPU_START,porep-1-8,worker=1,partition=0\n"),
        "{text}"
    );
    let s = guard.stats();
    assert_eq!((s.received, s.written, s.dropped), (5, 5, 0));
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

/// A synthesis span that records an error, or has an ERROR event inside it, failed: no
/// SYNTH_END and no GPU_QUEUE (cuzk prints neither), counted.
#[test]
fn a_synthesis_span_that_records_an_error_emits_no_end() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        let s = info_span!(
            "synthesize_partition",
            job_id = "porep-9-1",
            partition = 0u32,
            error = tracing::field::Empty
        );
        s.in_scope(|| {});
        s.record("error", "out of memory");
        drop(s);
        info_span!(
            "synthesize_partition",
            job_id = "porep-9-1",
            partition = 1u32
        )
        .in_scope(|| tracing::error!("constraint system unsatisfied"));
        info_span!(
            "synthesize_partition",
            job_id = "porep-9-1",
            partition = 2u32
        )
        .in_scope(|| tracing::warn!("slow"));
    });
    guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    let kinds: Vec<(EventKind, Option<u32>)> = text
        .lines()
        .map(|l| {
            let ev = parse_line(l).unwrap().unwrap();
            (ev.kind, ev.partition)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (EventKind::SynthStart, Some(0)),
            (EventKind::SynthStart, Some(1)),
            (EventKind::SynthStart, Some(2)),
            (EventKind::SynthEnd, Some(2)),
            (EventKind::GpuQueue, Some(2)),
        ],
        "{text}"
    );
    assert_eq!(guard.stats().failed, 2);
}

/// TIMELINE lines logged through `tracing` keep the prover's own offsets, and the engine's
/// clock follows them even when the layer started long before the prover's epoch.
#[test]
fn logged_timeline_lines_keep_their_offsets_and_the_clock_follows_them() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .cuzk_timeline_events()
        .tick(Duration::from_millis(20))
        .engine_config(engine_cfg())
        .timeline_to_writer(buf.clone())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    // the prover's epoch comes 1.5 s after the layer's: its offsets are 1.5 s behind
    thread::sleep(Duration::from_millis(1500));
    let epoch = std::time::Instant::now();
    let mut sent = Vec::new();
    tracing::dispatcher::with_default(&dispatch, || {
        for (event, detail) in [
            ("SYNTH_START", "kind=winning-post"),
            ("SYNTH_END", "synth_ms=40"),
            ("GPU_QUEUE", "monolithic"),
            ("GPU_PICKUP", "worker=0"),
            ("GPU_START", "worker=0"),
            ("GPU_END", "worker=0,gpu_ms=40"),
        ] {
            thread::sleep(Duration::from_millis(40));
            let ms = epoch.elapsed().as_millis();
            let line = format!("TIMELINE,{ms},{event},winpost-1-ab,{detail}");
            // what cuzk's timeline_event() becomes: its eprintln! turned into a log event
            tracing::info!(target: "timeline", "TIMELINE,{},{},{},{}", ms, event, "winpost-1-ab", detail);
            sent.push(line);
        }
        tracing::info!(target: "timeline", "TIMELINE,oops,GPU_END,x,worker=0");
    });
    let report = guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    assert_eq!(text.lines().collect::<Vec<_>>(), sent, "{text}");
    assert_eq!(
        report.events.late, 0,
        "the engine's clock ran in the prover's time"
    );
    assert_eq!(report.summary.jobs_complete, 1);
    assert_eq!(guard.stats().malformed, 1);
}
