//! Parse + engine throughput on a generated log of at least 100 MB (issue: >= 300 MB/s on
//! one core), and the same with reading+parsing on a second thread (what `proofline analyze`
//! does). Run: `cargo bench -p proofline-tests --bench analyze`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use proofline_core::reader::LineFeeder;
use proofline_core::sink::NoUpdates;
use proofline_core::{Engine, EngineConfig, parse_line};
use proofline_sim::{SimConfig, instant};

/// A ~100 MB log: 30 000 jobs of mixed kinds on two GPUs, lines a few ms out of order.
fn big_log() -> Vec<u8> {
    let mut cfg = SimConfig::mixed(30_000);
    cfg.gpus = 2;
    cfg.synth_workers = 20;
    cfg.shuffle_ms = 5;
    let mut out = Vec::with_capacity(110 << 20);
    instant::write_log(&cfg, &mut out).expect("memory");
    assert!(out.len() >= 100 << 20, "log is only {} bytes", out.len());
    out
}

fn bench(c: &mut Criterion) {
    let log = big_log();
    let mut g = c.benchmark_group("analyze");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(log.len() as u64));
    g.bench_function("parse_only", |b| {
        b.iter(|| {
            let mut n = 0u64;
            for line in log.split(|&c| c == b'\n') {
                if let Ok(Some(ev)) = parse_line(std::str::from_utf8(line).unwrap_or("")) {
                    n += ev.offset_ms & 1;
                }
            }
            n
        })
    });
    g.bench_function("parse_and_engine", |b| {
        b.iter(|| {
            let mut engine = Engine::new(EngineConfig::default());
            let mut feeder = LineFeeder::new();
            feeder
                .feed_all(&mut log.as_slice(), &mut engine, &mut NoUpdates, |_| {})
                .expect("memory");
            engine.finish(&mut NoUpdates);
            engine.report().summary.jobs_complete
        })
    });
    g.bench_function("parse_and_engine_two_threads", |b| {
        b.iter(|| {
            let mut engine = Engine::new(EngineConfig::default());
            let mut feeder = LineFeeder::new();
            feeder
                .feed_all_parallel(log.as_slice(), &mut engine, &mut NoUpdates)
                .expect("memory");
            engine.finish(&mut NoUpdates);
            engine.report().summary.jobs_complete
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
