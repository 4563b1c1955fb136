//! Transition chains: per device, the jobs in the order their GPU work started there, paired
//! into [`TransitionRecord`]s as they finish.
//!
//! A job enters a device's chain at its first GPU_START there (ties by job id). The front
//! of the chain is paired with the job before it once it has finished; a job that finishes
//! before the one ahead of it waits in the chain, so transitions come out in chain order.

use std::collections::VecDeque;
use std::sync::Arc;

use super::Engine;
use super::job::JobState;
use crate::report::TransitionRecord;
use crate::sink::Update;
use crate::sink::UpdateSink;

/// The `from` side of a device's next transition.
#[derive(Debug, Clone)]
pub(super) struct PrevJob {
    /// Its job id.
    pub name: Arc<str>,
    /// Its attempt.
    pub attempt: u32,
    /// Its last GPU_END on the device.
    pub last_end: u64,
    /// The GPU_END before that.
    pub second_last_end: Option<u64>,
}

/// A device's jobs in the order their GPU work started there, waiting to be paired.
#[derive(Debug, Default)]
pub(super) struct Chain {
    /// Jobs (indexes into the engine's job table), oldest first.
    jobs: VecDeque<usize>,
    /// The last job paired, the `from` side of the next transition.
    prev: Option<PrevJob>,
}

impl Engine {
    /// Puts job `idx` (named `name`, first GPU_START `t` on `gpu`) in the device's chain.
    pub(super) fn chain_insert(&mut self, gpu: u32, idx: usize, name: &str, t: u64) {
        let Some(dev) = self.devices.get_mut(gpu) else {
            return;
        };
        let chain = &mut dev.chain_mut().jobs;
        let mut at = chain.len();
        while at > 0 {
            let Some(prev) = self.jobs.get(chain[at - 1]).and_then(Option::as_ref) else {
                break;
            };
            let prev_start = prev
                .devs
                .iter()
                .find(|d| d.gpu == gpu)
                .map(|d| d.first_start);
            if prev_start != Some(t) || **self.names.name(prev.name) <= *name {
                break;
            }
            at -= 1;
        }
        chain.insert(at, idx);
    }

    /// Drains the chains of every device job `idx` worked on.
    pub(super) fn drain_chains_of(&mut self, idx: usize, sink: &mut impl UpdateSink) {
        // by place, read again each time (draining a chain changes no job's devices): a
        // vector of the GPUs was an allocation per job
        for at in 0.. {
            let gpu = self.jobs[idx].as_ref().and_then(|j| j.devs.get(at));
            let Some(gpu) = gpu.map(|d| d.gpu) else {
                return;
            };
            self.drain_chain(gpu, sink);
        }
    }

    /// Pairs consecutive finished jobs on a device, in the order their GPU work started.
    fn drain_chain(&mut self, gpu: u32, sink: &mut impl UpdateSink) {
        loop {
            let Some(dev) = self.devices.get_mut(gpu) else {
                return;
            };
            let chain = dev.chain_mut();
            let Some(&front) = chain.jobs.front() else {
                return;
            };
            let Some(job) = self.jobs[front].as_mut() else {
                chain.jobs.pop_front();
                continue;
            };
            if job.state == JobState::Active {
                return;
            }
            chain.jobs.pop_front();
            job.leave_chain();
            let Some(dj) = job.dev(gpu).copied() else {
                continue;
            };
            let Some(last_end) = dj.last_end else {
                continue;
            };
            let name = self.names.name(job.name).clone();
            let first_synth_end = job.first_synth_end;
            let (run, to_attempt) = (job.run, job.attempt);
            let cur = PrevJob {
                name: name.clone(),
                attempt: to_attempt,
                last_end,
                second_last_end: dj.second_last_end,
            };
            let Some(prev) = chain.prev.replace(cur) else {
                continue;
            };
            let gap = dj.first_start as i64 - prev.last_end as i64;
            let rec = TransitionRecord {
                gpu,
                from_job: prev.name,
                from_attempt: prev.attempt,
                to_job: name,
                run,
                to_attempt,
                from_last_gpu_end_ms: prev.last_end,
                to_first_gpu_start_ms: dj.first_start,
                gap_ms: gap,
                overlap_ms: if gap < 0 { gap.unsigned_abs() } else { 0 },
                handoff_ms: prev
                    .second_last_end
                    .map(|s| dj.first_start as i64 - s as i64),
                synthesis_lead_ms: first_synth_end.map(|s| prev.last_end as i64 - s as i64),
            };
            self.totals.record_transition(&rec, self.cfg.max_rows);
            if sink.wants_records() {
                sink.update(Update::Transition(Arc::new(rec)));
            }
        }
    }
}
