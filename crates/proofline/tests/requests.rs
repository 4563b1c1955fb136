//! Two requests of one job id in flight at once (a client's retry that did not cancel the
//! first, as Curio does after its proof timeout): where the prover opens a span for each
//! request, the layer tells them apart, and each is a job of its own with its own figures
//! and trace; the log it writes tells them apart too.

use std::sync::{Arc, Barrier, mpsc};
use std::thread;
use std::time::Duration;

use proofline::core::ids::trace_id;
use proofline::core::report::{JobRecord, JobStatus};
use proofline::core::sink::NoUpdates;
use proofline::core::{Engine, codec};
use tracing::info_span;
use tracing_subscriber::prelude::*;

mod common;
use common::*;

const PARTS: u32 = 4;
const JOB: &str = "batch-00017";

fn builder() -> proofline::Builder {
    batch_prover_layer(PARTS).silence_warning_after(Duration::from_secs(3600))
}

/// One request of `JOB`: a `request` span carrying the id, its partitions' witness spans
/// inside it on this thread, and their GPU work on the GPU thread, inside the request span
/// (`gpu_inside`) or outside any (a GPU queue that carries no span, as cuzk's does).
fn request(
    d: &tracing::Dispatch,
    gpu: &mpsc::Sender<(tracing::Span, u32)>,
    gpu_inside: bool,
    synth_ms: u64,
    started: Option<&Barrier>,
) {
    let _d = tracing::dispatcher::set_default(d);
    let req = info_span!("request", job_id = %JOB);
    let _in = req.enter();
    for p in 0..PARTS {
        info_span!("witness", partition = p).in_scope(|| {
            if let (0, Some(b)) = (p, started) {
                b.wait();
            }
            thread::sleep(Duration::from_millis(synth_ms));
        });
        let parent = if gpu_inside {
            req.clone()
        } else {
            tracing::Span::none()
        };
        gpu.send((parent, p)).unwrap();
    }
    // the request waits for its proof (its span stays open while the GPU works)
    thread::sleep(Duration::from_millis(60));
}

/// Runs two requests of one id, the second starting while the first synthesizes, and
/// returns the report and the TIMELINE text.
fn two_requests(gpu_inside: bool) -> (proofline::Report, String) {
    // the retry synthesizes faster: its partitions reach the GPU before the first's
    let buf = SharedBuf::default();
    let (layer, mut guard) = builder().timeline_to_writer(buf.clone()).build();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let (gpu_tx, gpu_rx) = mpsc::channel::<(tracing::Span, u32)>();
    let gpu = {
        let d = d.clone();
        thread::spawn(move || {
            let _d = tracing::dispatcher::set_default(&d);
            for (parent, p) in gpu_rx {
                let s = if parent.is_none() {
                    info_span!(parent: None, "prove_segment", job_id = %JOB, partition = p,
                        worker = 0u32, gpu = 0u32)
                } else {
                    info_span!(parent: &parent, "prove_segment", partition = p,
                        worker = 0u32, gpu = 0u32)
                };
                s.in_scope(|| thread::sleep(Duration::from_millis(4)));
            }
        })
    };
    let started = Arc::new(Barrier::new(2));
    let first = {
        let (d, tx, b) = (d.clone(), gpu_tx.clone(), started.clone());
        thread::spawn(move || request(&d, &tx, gpu_inside, 60, Some(&b)))
    };
    // the retry comes while the first request's first partition synthesizes
    started.wait();
    thread::sleep(Duration::from_millis(5));
    let second = {
        let (d, tx) = (d.clone(), gpu_tx.clone());
        thread::spawn(move || request(&d, &tx, gpu_inside, 10, None))
    };
    first.join().unwrap();
    second.join().unwrap();
    drop(gpu_tx);
    gpu.join().unwrap();
    drop(d);
    let report = guard.shutdown(Duration::from_secs(10)).unwrap();
    (report, buf.text())
}

/// The two requests' jobs, first attempt first.
fn jobs(report: &proofline::Report) -> Vec<&JobRecord> {
    let mut jobs: Vec<&JobRecord> = report.jobs.iter().filter(|j| &*j.job_id == JOB).collect();
    jobs.sort_by_key(|j| j.attempt);
    jobs
}

fn assert_two_whole_jobs(report: &proofline::Report, what: &str) {
    let jobs = jobs(report);
    assert_eq!(jobs.len(), 2, "{what}: {:#?}", report.jobs);
    for j in &jobs {
        assert_eq!(j.status, JobStatus::Complete, "{what}: {j:#?}");
        assert_eq!(j.partitions_done, PARTS, "{what}: {j:#?}");
        // its GPU work is its own: none before its synthesis
        assert!(
            j.first_gpu_start_ms >= j.first_synth_end_ms,
            "{what}: {j:#?}"
        );
    }
    assert_eq!((jobs[0].attempt, jobs[1].attempt), (0, 1), "{what}");
    // the second started while the first ran
    assert!(
        jobs[1].first_synth_start_ms < jobs[0].last_gpu_end_ms,
        "{what}: {jobs:#?}"
    );
    let e = &report.events;
    assert_eq!(e.concurrent_requests, 1, "{what}: {e:#?}");
    assert_eq!(
        (e.conflicts, e.duplicates, e.overlapping_attempts),
        (0, 0, 0),
        "{what}: nothing merged, nothing lost: {e:#?}"
    );
    // each its own trace
    let run = &report.jobs[0].run;
    assert_ne!(
        trace_id("k", *run, JOB, jobs[0].attempt),
        trace_id("k", *run, JOB, jobs[1].attempt)
    );
}

/// What `analyze` makes of the lines the layer wrote.
fn analyzed(text: &str) -> proofline::Report {
    let mut engine = Engine::new(engine_cfg().partitions_for("batch-", PARTS));
    for line in text.lines() {
        if let Some(ev) = codec::parse_line(line).unwrap() {
            engine.ingest(&ev, &mut NoUpdates);
        }
    }
    engine.finish(&mut NoUpdates);
    engine.report()
}

#[test]
fn two_requests_of_one_id_in_flight_are_two_jobs_each_with_its_own_trace() {
    let (report, text) = two_requests(true);
    assert_two_whole_jobs(&report, "the layer");
    // the first request's lines are cuzk's own; the second's say which request they are
    let (plain, marked): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|l| !l.contains("request="));
    assert_eq!(plain.len(), (PARTS * 5) as usize, "{text}");
    assert_eq!(marked.len(), (PARTS * 5) as usize, "{text}");
    assert!(marked.iter().all(|l| l.ends_with(",request=2")), "{text}");
    // the log alone gives the same two jobs
    assert_two_whole_jobs(&analyzed(&text), "analyze of the log");
}

#[test]
fn gpu_work_outside_the_request_spans_goes_to_the_request_that_waits_for_it() {
    // the GPU queue carries no span: its events name no request, and each goes to the
    // oldest request in flight that waits for it on that partition (the retry's, which
    // reach the GPU first, are not taken for the first request's)
    let (report, text) = two_requests(false);
    assert_two_whole_jobs(&report, "the layer");
    let marked = text.lines().filter(|l| l.contains("request=2")).count();
    assert_eq!(
        marked,
        (PARTS * 3) as usize,
        "SYNTH_START, SYNTH_END, GPU_QUEUE: {text}"
    );
    assert_two_whole_jobs(&analyzed(&text), "analyze of the log");
}

#[test]
fn one_request_at_a_time_writes_no_request_number() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = builder().timeline_to_writer(buf.clone()).build();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let (gpu_tx, gpu_rx) = mpsc::channel::<(tracing::Span, u32)>();
    // the same id twice, one after the other: a retry after the first ended
    for _ in 0..2 {
        request(&d, &gpu_tx, true, 2, None);
        while let Ok((parent, p)) = gpu_rx.try_recv() {
            let _d = tracing::dispatcher::set_default(&d);
            info_span!(parent: &parent, "prove_segment", partition = p, worker = 0u32, gpu = 0u32)
                .in_scope(|| thread::sleep(Duration::from_millis(1)));
        }
    }
    drop(d);
    let report = guard.shutdown(Duration::from_secs(10)).unwrap();
    let text = buf.text();
    assert!(!text.contains("request="), "{text}");
    assert_eq!(report.events.concurrent_requests, 0);
    assert_eq!(
        jobs(&report).len(),
        2,
        "a retry after the end is an attempt too"
    );
}

/// A line of a request whose job has ended, sent again or late while the first request
/// still runs, is a duplicate or a conflict: never a new job.
#[test]
fn a_late_line_of_an_ended_request_is_no_new_request() {
    let mut lines: Vec<String> = Vec::new();
    // request 1 (no number) starts and runs long
    lines.push(format!("TIMELINE,0,SYNTH_START,{JOB},partition=0"));
    // request 2: all four partitions, start to end
    for p in 0..PARTS {
        let t = 10 + u64::from(p) * 10;
        for l in [
            format!("TIMELINE,{t},SYNTH_START,{JOB},partition={p},request=2"),
            format!(
                "TIMELINE,{},SYNTH_END,{JOB},partition={p},synth_ms=5,request=2",
                t + 5
            ),
            format!(
                "TIMELINE,{},GPU_START,{JOB},worker=0,partition={p},request=2",
                t + 5
            ),
            format!(
                "TIMELINE,{},GPU_END,{JOB},worker=0,partition={p},gpu_ms=4,request=2",
                t + 9
            ),
        ] {
            lines.push(l);
        }
    }
    // request 1 goes on well after request 2 ended; a line of request 2 comes again, and a
    // late one it never had
    lines.push(format!(
        "TIMELINE,5000,SYNTH_END,{JOB},partition=0,synth_ms=5000"
    ));
    lines.push(format!(
        "TIMELINE,5001,GPU_END,{JOB},worker=0,partition=3,gpu_ms=4,request=2"
    ));
    lines.push(format!(
        "TIMELINE,5002,SYNTH_START,{JOB},partition=1,request=2"
    ));
    let text = lines.join("\n");
    // the late lines must come after request 2's job ended (its grace past): the window and
    // the grace are 1 s, the last line of it at 49 ms
    let r = analyzed(&text);
    assert_eq!(r.summary.jobs_seen, 2, "no third job: {:#?}", r.jobs);
    assert_eq!(r.summary.jobs_complete, 1, "request 2's");
    assert_eq!(r.events.concurrent_requests, 1, "{:#?}", r.events);
    assert_eq!(
        r.events.conflicts + r.events.duplicates,
        2,
        "{:#?}",
        r.events
    );
}

/// Two requests of one job id in flight, their spans made on one thread (an async prover's
/// executor): the engine makes the second a job of its own, and each learns the request's
/// proof kind (a thread's entries leave out a kind they carried last for the same job id,
/// which must not count for the other request's job).
#[test]
fn two_requests_on_one_thread_each_learn_the_kind() {
    let (layer, mut guard) = builder()
        .poll_interval(Duration::from_secs(120))
        .no_timeline()
        .build();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        let r1 = info_span!("request", job_id = %JOB, proof_kind = %"snap-prove");
        r1.in_scope(|| info_span!("witness", partition = 0u32).in_scope(|| {}));
        let r2 = info_span!("request", job_id = %JOB, proof_kind = %"snap-prove");
        r2.in_scope(|| info_span!("witness", partition = 0u32).in_scope(|| {}));
        r2.in_scope(|| info_span!("witness", partition = 1u32).in_scope(|| {}));
        r1.in_scope(|| info_span!("witness", partition = 1u32).in_scope(|| {}));
        drop((r1, r2));
    });
    let report = guard.shutdown(Duration::from_secs(10)).unwrap();
    let all: Vec<_> = (report.jobs.iter().chain(&report.incomplete))
        .map(|j| (j.attempt, j.proof_kind.clone()))
        .collect();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(
        all.iter().all(|j| j.1.as_deref() == Some("snap-prove")),
        "{all:?}"
    );
}
