//! One `/metrics` render with 8 GPUs and every series populated.
//! Run: `cargo bench -p proofline-prometheus --bench render`.

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use proofline_core::report::{
    Boundary, IdleGap, JobRecord, JobStatus, PartitionRecord, TransitionRecord,
};
use proofline_core::sink::{GpuLive, LiveState, TelemetryCounts, Update, UpdateSink};
use proofline_prometheus::{Metrics, PrometheusSink};

fn populated() -> Arc<Metrics> {
    let m = Metrics::new();
    let mut sink = PrometheusSink::new(m.clone());
    sink.start_run(&proofline_core::RunInfo::new("bench", 0));
    let kinds = ["porep-c2", "snap-update", "window-post", "winning-post"];
    let mut t = 0u64;
    for i in 0..2000u64 {
        let gpu = (i % 8) as u32;
        let kind: Arc<str> = Arc::from(kinds[(i % 4) as usize]);
        let job: Arc<str> = Arc::from(format!("porep-1000-{i}").as_str());
        t += 3700;
        sink.update(Update::GpuBusy {
            gpu,
            busy: true,
            t_ms: t,
        });
        sink.update(Update::GpuBusy {
            gpu,
            busy: false,
            t_ms: t + 3500,
        });
        sink.update(Update::Partition(Arc::new(PartitionRecord {
            job_id: job.clone(),
            run: 0,
            proof_kind: Some(kind.clone()),
            partition: Some((i % 10) as u32),
            worker: Some(gpu * 2),
            gpu: Some(gpu),
            synth_start_ms: Some(t - 30_000),
            synth_end_ms: Some(t - 100),
            queue_start_ms: Some(t - 100),
            pickup_ms: Some(t),
            gpu_start_ms: Some(t),
            gpu_end_ms: Some(t + 3500),
            synthesis_ms: Some(29_900),
            queue_ms: Some(100),
            lock_wait_ms: Some(0),
            gpu_ms: Some(3500),
            synth_reported_ms: Some(29_900),
            gpu_reported_ms: Some(3400),
            kernel_ms: None,
        })));
        sink.update(Update::IdleGap(Arc::new(IdleGap {
            gpu,
            start_ms: t + 3500,
            end_ms: t + 3700,
            boundary: if i % 3 == 0 {
                Boundary::CrossSector
            } else {
                Boundary::IntraSector
            },
            with_queue_ms: 0,
            next_job: job.clone(),
            next_attempt: 0,
            run: 0,
        })));
        sink.update(Update::Transition(Arc::new(TransitionRecord {
            gpu,
            from_job: job.clone(),
            from_attempt: 0,
            to_job: job.clone(),
            run: 0,
            to_attempt: 0,
            from_last_gpu_end_ms: t,
            to_first_gpu_start_ms: t + 50,
            gap_ms: 50,
            overlap_ms: 0,
            handoff_ms: Some(20),
            synthesis_lead_ms: Some(-1500 + (i as i64 % 3000)),
        })));
        sink.update(Update::Job(Arc::new(JobRecord {
            job_id: job,
            run: 0,
            attempt: 0,
            proof_kind: Some(kind),
            status: if i % 50 == 0 {
                JobStatus::Evicted
            } else {
                JobStatus::Complete
            },
            partitions_expected: Some(10),
            partitions_done: 10,
            first_synth_start_ms: Some(t - 60_000),
            first_synth_end_ms: Some(t - 30_000),
            first_gpu_start_ms: Some(t - 29_000),
            last_gpu_end_ms: Some(t + 3500),
            wall_ms: Some(63_500),
            synthesis_total_ms: 300_000,
            gpu_total_ms: 37_000,
            synth_reported_total_ms: 300_000,
            gpu_reported_total_ms: 36_000,
            first_synth_to_first_gpu_ms: Some(31_000),
            cold_start_ms: (i % 100 == 0).then_some(29_200),
            unobserved_gpu: false,
        })));
    }
    let mut live = LiveState::default();
    live.now_ms = t;
    live.queue_depth = 7;
    live.synthesizing = 10;
    live.picked_up = 1;
    live.on_gpu = 16;
    live.jobs_in_flight = 3;
    live.seconds_per_proof = Some(37.4);
    live.floors = Some((37.46, 29.9));
    live.gpus = (0..8)
        .map(|gpu| {
            let mut g = GpuLive::default();
            g.gpu = gpu;
            g.busy_ratio = 0.97;
            g.busy_ms = t;
            g.stuck_intervals = 1;
            g
        })
        .collect();
    live.last_event_age_ms = Some(2_000);
    live.oldest_job_age_ms = Some(90_000);
    live.runs = 2;
    sink.tick(&live, &{
        let mut c = TelemetryCounts::default();
        c.events_dropped = 5;
        c.malformed_lines = 2;
        c
    });
    m
}

fn bench(c: &mut Criterion) {
    let m = populated();
    let om = m.render_openmetrics();
    eprintln!(
        "render: {} series lines, {} bytes OpenMetrics, {} bytes classic",
        om.lines().filter(|l| !l.starts_with('#')).count(),
        om.len(),
        m.render_classic().len()
    );
    c.bench_function("render/openmetrics_8_gpus", |b| {
        b.iter(|| m.render_openmetrics())
    });
    c.bench_function("render/classic_8_gpus", |b| b.iter(|| m.render_classic()));
}

criterion_group!(benches, bench);
criterion_main!(benches);
