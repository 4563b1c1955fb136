//! A prover's engineer adds proofline: the kind comes from the prover's spans, partition
//! counts per id prefix, and the builder's settings compose.

use std::sync::mpsc;
use std::time::Duration;

use proofline::TimelineLayer;
use proofline_core::EngineConfig;
use proofline_core::report::JobStatus;
use proofline_core::sink::{Update, UpdateSink};
use proofline_tests::SharedBuf;
use tracing::info_span;
use tracing_subscriber::prelude::*;

/// One partition of `job`, shaped as cuzk's: synthesis, then a gpu_worker span with the kind.
fn partition(job: &str, p: u32, kind: &str) {
    info_span!(parent: None, "synthesize_partition", job_id = job, partition = p as usize)
        .in_scope(|| {});
    info_span!("gpu_worker", worker_id = 0u32, gpu = 0u32, job_id = %job, proof_kind = %kind,
        batch_size = 1u64, partition = ?Some(p as usize))
    .in_scope(|| {});
}

#[test]
fn the_kind_recorded_on_a_span_names_the_job_everywhere_but_in_cuzks_lines() {
    let buf = SharedBuf::default();
    let (layer, mut guard) = TimelineLayer::builder()
        .partitions_for("job-", 2)
        .timeline_to_writer(buf.clone())
        .build();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        partition("job-7", 0, "porep-c2");
        partition("job-7", 1, "porep-c2");
    });
    let r = guard.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(r.summary.jobs_complete, 1, "2 partitions for job- ids");
    assert_eq!(r.jobs[0].proof_kind.as_deref(), Some("porep-c2"));
    assert_eq!(r.summary.complete_by_kind, [("porep-c2".to_owned(), 1)]);
    let text = buf.text();
    assert_eq!(text.lines().count(), 12, "{text}");
    assert!(
        !text.contains("kind="),
        "cuzk prints no kind on these: {text}"
    );
}

#[test]
fn a_prefix_rule_wins_over_the_ids_form_and_the_fallback_over_nothing() {
    let cfg = EngineConfig::default()
        .partitions_for("porep-", 3)
        .partitions_for("porep-9", 2)
        .expected_partitions(Some(4));
    assert_eq!(cfg.expected_partitions_of("porep-1000-1", false), Some(3));
    assert_eq!(
        cfg.expected_partitions_of("porep-9-1", false),
        Some(2),
        "longest prefix"
    );
    assert_eq!(
        cfg.expected_partitions_of("snap-1-1", false),
        Some(16),
        "the id's form"
    );
    assert_eq!(
        cfg.expected_partitions_of("porep-9-1", true),
        Some(2),
        "a prefix rule first"
    );
    assert_eq!(
        cfg.expected_partitions_of("snap-1-1", true),
        Some(1),
        "a whole proof"
    );
    assert_eq!(
        cfg.expected_partitions_of("x-1", false),
        Some(4),
        "the fallback"
    );
    assert_eq!(
        EngineConfig::default().expected_partitions_of("x-1", false),
        None
    );
}

/// Sends each job record on a channel.
struct Jobs(mpsc::Sender<(String, JobStatus)>);

impl UpdateSink for Jobs {
    fn update(&mut self, u: Update) {
        if let Update::Job(j) = u {
            let _ = self.0.send((j.job_id.to_string(), j.status));
        }
    }
}

#[test]
fn setters_compose_and_the_grace_follows_the_reorder_window() {
    let (tx, rx) = mpsc::channel();
    // engine_config after the setters does not undo them, and its 5 s offline grace does not
    // hold a job of unknown size back: the grace is the 200 ms reorder window
    let (layer, mut guard) = TimelineLayer::builder()
        .gpu_workers_per_device(4)
        .reorder_window(Duration::from_millis(200))
        .tick(Duration::from_millis(20))
        .engine_config(EngineConfig::default())
        .no_timeline()
        .sink(Jobs(tx))
        .build();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        partition("x-1", 0, "porep-c2");
        partition("x-1", 1, "porep-c2");
    });
    let (job, status) = rx
        .recv_timeout(Duration::from_secs(3))
        .expect("the job completes within the reorder window and its grace, not 5 s");
    assert_eq!((job.as_str(), status), ("x-1", JobStatus::Complete));
    let r = guard.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(r.gpu_workers_per_device, 4);
}

/// The layer's clock keeps wall speed while the prover is quiet: the GPU idle gauge of a
/// stopped sector grows with wall time (it trails by the reorder window at most).
#[test]
fn the_layers_idle_gauge_keeps_wall_speed_while_the_prover_is_quiet() {
    let metrics = proofline_prometheus::Metrics::new();
    let (layer, mut guard) = TimelineLayer::builder()
        .tick(Duration::from_millis(50))
        .no_timeline()
        .sink(proofline_prometheus::PrometheusSink::new(metrics.clone()))
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    // one partition of a 10-partition sector, then nothing: the GPU idles, the sector in flight
    tracing::dispatcher::with_default(&dispatch, || partition("porep-1-1", 0, "porep-c2"));
    let idle = || -> f64 {
        metrics
            .render_classic()
            .lines()
            .find_map(|l| l.strip_prefix("proofline_gpu_idle_seconds{gpu=\"0\"} "))
            .map_or(0.0, |v| v.parse().unwrap())
    };
    std::thread::sleep(Duration::from_millis(2500));
    let first = idle();
    std::thread::sleep(Duration::from_secs(3));
    let later = idle();
    assert!(
        first >= 1.0,
        "idle {first} s after 2.5 s (the window is 1 s)"
    );
    assert!(
        (later - first - 3.0).abs() <= 0.3,
        "over 3 s of wall time the idle gauge moved {} s",
        later - first
    );
    // the GPU intervals come from cuzk's gpu_worker span, and /metrics says so
    let text = metrics.render_classic();
    assert!(
        text.contains(
            "proofline_gpu_interval_source{source=\"spans: GPU_START at first enter of `gpu_worker`"
        ),
        "{text}"
    );
    drop(guard.shutdown(Duration::from_secs(5)));
}

/// A prover that forwards cuzk's `CUZK_TIMING:` values through `tracing` (its line as the
/// message, or its keys as fields, on the `timeline` target) gets the kernel figures from the
/// layer, as `analyze` gets them from the log.
#[test]
fn cuzk_timing_forwarded_through_tracing_reaches_the_report() {
    let (layer, mut guard) = TimelineLayer::builder()
        // 64 entries: a text ring of 4 KiB
        .channel_capacity(64)
        .cuzk_timeline_events()
        .partitions_for("job-", 1)
        .no_timeline()
        .build();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        // cuzk's own TIMELINE lines, logged through tracing, around one GPU call
        for line in [
            "TIMELINE,0,SYNTH_START,job-1,partition=0",
            "TIMELINE,100,SYNTH_END,job-1,partition=0,synth_ms=100",
            "TIMELINE,100,GPU_QUEUE,job-1,partition=0",
            "TIMELINE,100,GPU_PICKUP,job-1,worker=0,partition=0",
            "TIMELINE,100,GPU_START,job-1,worker=0,partition=0",
        ] {
            tracing::info!(target: "timeline", "{line}");
        }
        // the call's timing: as its line, and as fields
        tracing::info!(target: "timeline", "CUZK_TIMING: pre_lock_cpu_ms=5 mutex_wait_ms=0");
        tracing::info!(target: "timeline", gpu_tid = 0u64, ntt_msm_h_ms = 300u64);
        tracing::info!(target: "timeline", gpu_tid = 0u64, barrier_wait_ms = 400u64);
        tracing::info!(target: "timeline", "CUZK_TIMING: prep_msm_ms=500");
        tracing::info!(target: "timeline", "CUZK_TIMING: gpu_tid=0 batch_add_ms=100");
        tracing::info!(target: "timeline", "CUZK_TIMING: gpu_tid=0 tail_msm_ms=200 gpu_total_ms=1000");
        tracing::info!(target: "timeline", mutex_held_ms = 1000u64, total_start_fn_ms = 1005u64);
        tracing::info!(target: "timeline", "CUZK_TIMING: b_g2_msm_ms=90 num_circuits=1");
        // a line longer than the thread's text ring (4 KiB for this queue): boxed, read alike
        let long: String = (0..400).map(|i| format!(" spare_{i}_ms=0")).collect();
        assert!(long.len() > 4096);
        tracing::info!(target: "timeline", "CUZK_TIMING: gpu_tid=0{long}");
        tracing::info!(target: "timeline", "TIMELINE,1200,GPU_END,job-1,worker=0,partition=0,gpu_ms=1100");
        // a line it cannot read (parsed on the layer's worker): counted, nothing else lost
        tracing::info!(target: "timeline", "CUZK_TIMING: gpu_tid=zero");
    });
    let stats = guard.stats();
    let r = guard.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(guard.stats().malformed, 1, "{stats:?}");
    assert_eq!(r.summary.jobs_complete, 1);
    let k = r
        .kernel
        .expect("no kernel section from the forwarded timings");
    assert_eq!(k.timing_lines, 9);
    assert_eq!(k.kernel_ms, 600, "ntt 300 + batch 100 + tail 200");
    assert_eq!(k.calls, 1);
    assert_eq!(k.lock_held_ms, 1000);
    assert_eq!(k.lock_held_not_kernel_ms, 400);
    assert_eq!(k.kernel_per_call.p50_ms, Some(600));
    assert!(k.attributed, "{}", k.attribution);
    // 600 ms of kernels in an 1100 ms interval
    let util = k.kernel_utilisation.unwrap();
    assert!((util - 600.0 / 1100.0).abs() < 1e-9, "{util}");
}
