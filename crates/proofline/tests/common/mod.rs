//! Set-up shared by the layer's tests: a writer to read TIMELINE lines back, the engine
//! settings of the live report, a small cuzk-shaped prover, a one-future executor.
#![allow(dead_code)] // each test file uses a part

use std::io::Write;
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use proofline_core::EngineConfig;
use tracing::info_span;

/// A writer for TIMELINE lines that the test can read back.
#[derive(Clone, Default)]
pub struct SharedBuf(pub Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedBuf {
    /// What was written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// Waits (10 s at most, else panics with what was written) until `what` was written.
    pub fn wait_for(&self, what: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !self.text().contains(what) {
            assert!(
                std::time::Instant::now() < deadline,
                "{what:?} not written: {:?}",
                self.text()
            );
            thread::sleep(Duration::from_millis(2));
        }
    }
}

/// A TIMELINE line with its offset as `T` (offsets vary from run to run).
pub fn offset_blanked(line: &str) -> String {
    let mut f: Vec<&str> = line.split(',').collect();
    if f.len() > 1 {
        f[1] = "T";
    }
    f.join(",")
}

/// The layer for a prover of another shape than cuzk's: `witness` spans are its synthesis,
/// `prove_segment` spans its GPU work, jobs `batch-*` of `parts` partitions.
pub fn batch_prover_layer(parts: u32) -> proofline::Builder {
    use proofline::{Edge, EventKind};
    proofline::TimelineLayer::builder()
        .clear_mappings()
        .map("witness", EventKind::SynthStart, Edge::FirstEnter)
        .map("witness", EventKind::SynthEnd, Edge::Close)
        .map("prove_segment", EventKind::GpuStart, Edge::FirstEnter)
        .map("prove_segment", EventKind::GpuEnd, Edge::Close)
        .partitions_for("batch-", parts)
        .engine_config(engine_cfg())
}

pub fn engine_cfg() -> EngineConfig {
    EngineConfig::default()
        .reorder_window_ms(1000)
        .completion_grace_ms(1000)
}

/// A small cuzk: synthesis threads, one GPU queue, two GPUs with two workers each, a lock
/// per GPU around `gpu_prove`.
pub fn run_cuzk_shaped(
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

/// A minimal executor for a future that never waits.
pub fn futures_lite_block_on<F: std::future::Future>(fut: F) -> F::Output {
    use std::task::{Context, Poll, Waker};
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
    }
}
