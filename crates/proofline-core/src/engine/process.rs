//! One event, in time order: to its job and partition, to the device, to the gauges; and a
//! job's end (complete or given up).

use std::sync::Arc;

use super::Engine;
use super::job::{Job, JobState, Part, PartStage, Recorded};
use super::reorder::Ev;
use super::summary::StageValues;
use crate::event::EventKind;
use crate::report::{JobRecord, JobStatus, PartitionRecord};
use crate::sink::Update;
use crate::sink::UpdateSink;

/// The job at `idx`. Every index handled here comes from [`Engine::job_for`] (or a sweep's
/// scan of live jobs) in the same call, and a job leaves its slot only in
/// `Engine::remove_job`, which runs between events: an empty slot is a bug.
fn live(jobs: &[Option<Job>], idx: usize) -> &Job {
    jobs[idx]
        .as_ref()
        .expect("a job index handed out in this call is live")
}

/// [`live`], to change it.
fn live_mut(jobs: &mut [Option<Job>], idx: usize) -> &mut Job {
    jobs[idx]
        .as_mut()
        .expect("a job index handed out in this call is live")
}

/// Where [`Engine::request_instance`] sends an event.
enum Instance {
    /// To this job instance.
    Found(usize),
    /// Its request's job (this one, or one no longer held) has ended: a duplicate or a late
    /// line.
    Ended(Option<usize>),
    /// The usual rules decide (the id's current instance).
    Usual,
}

impl Engine {
    /// Applies one event. Events come in time order, except late ones (older than the
    /// present), which are recorded at their own time and accounted at the present.
    pub(super) fn process(&mut self, e: &Ev, sink: &mut impl UpdateSink) {
        // (a late event, older than the present, does not move it)
        self.advance_time(e.t, sink);
        // accounting time: a late event is placed at the present for busy/queue bookkeeping
        let at = e.t.max(self.now);
        let Some(idx) = self.job_for(e, sink) else {
            self.names.unref(e.name);
            return;
        };
        self.names.unref(e.name);
        let pidx = e.nums.partition().unwrap_or(0) as usize;
        if !self.record(idx, pidx, e) {
            return;
        }
        match e.nums.kind {
            EventKind::SynthStart => self.on_synth_start(idx, pidx, e.t),
            EventKind::SynthEnd => self.on_synth_end(idx, pidx, e),
            EventKind::GpuQueue => self.on_gpu_queue(idx, pidx, e.t),
            EventKind::GpuPickup => self.on_gpu_pickup(idx, pidx),
            EventKind::GpuStart => self.on_gpu_start(idx, pidx, e, at, sink),
            EventKind::GpuEnd => self.on_gpu_end(idx, pidx, e, at, sink),
        }
    }

    /// The job instance the event belongs to: the id's current instance while it is
    /// active; after it finished, a new instance for a SYNTH_START (a retry reusing the id),
    /// else nothing (a duplicate, or a conflict: counted).
    fn job_for(&mut self, e: &Ev, sink: &mut impl UpdateSink) -> Option<usize> {
        let entry = self.names.get(e.name);
        let Some(idx) = entry.current else {
            return Some(self.new_job(e, sink));
        };
        if e.request().is_some() || !entry.others.is_empty() {
            match self.request_instance(e, idx, sink) {
                Instance::Found(i) => return Some(i),
                Instance::Ended(i) => return self.after_end(i, e),
                Instance::Usual => {}
            }
        }
        let job = live(&self.jobs, idx);
        if job.state == JobState::Active {
            return Some(idx);
        }
        let part = job.parts.get(e.nums.partition().unwrap_or(0) as usize);
        if part.is_some_and(|p| p.is_recorded(e.nums.kind, e.t, e.signature())) {
            self.totals.stats.duplicates += 1;
            return None;
        }
        if job.state == JobState::Finished(JobStatus::Evicted) {
            self.totals.stats.after_eviction += 1;
        }
        if e.nums.kind == EventKind::SynthStart {
            if job.request.is_some() {
                // kept findable by its request (a late line of it is no new request)
                self.names.get_mut(e.name).others.push(idx);
            }
            return Some(self.new_job(e, sink));
        }
        self.totals.stats.conflicts += 1;
        let name = self.names.name(e.name).clone();
        self.example(|| format!("{name}: {} after the job had ended, ignored", e.nums.kind));
        None
    }

    /// An event of a request whose job has ended while another of the id runs: a line sent
    /// again (a duplicate) or late (a conflict), never a new request.
    fn after_end(&mut self, idx: Option<usize>, e: &Ev) -> Option<usize> {
        let part = idx.and_then(|i| {
            live(&self.jobs, i)
                .parts
                .get(e.nums.partition().unwrap_or(0) as usize)
        });
        if part.is_some_and(|p| p.is_recorded(e.nums.kind, e.t, e.signature())) {
            self.totals.stats.duplicates += 1;
        } else {
            self.totals.stats.conflicts += 1;
            let name = self.names.name(e.name).clone();
            self.example(|| {
                format!(
                    "{name}: {} of a request after its job had ended, ignored",
                    e.nums.kind
                )
            });
        }
        None
    }

    /// Where requests are told apart (`request=`): the instance in flight for the event's
    /// request, or a new one when another request of the id is in flight (a retry that did
    /// not cancel the first: the next attempt, a job of its own). An event that names no
    /// request, while several are in flight (the GPU spans of a prover may lie outside its
    /// request spans), goes to the oldest that waits for it on that partition (has the stage
    /// before it and not it), else the oldest that lacks it: exact unless two requests
    /// are at the same stage of the same partition at once. `None`: the usual rules decide.
    fn request_instance(&mut self, e: &Ev, current: usize, sink: &mut impl UpdateSink) -> Instance {
        let entry = self.names.get(e.name);
        let Some(r) = e.request() else {
            let pidx = e.nums.partition().unwrap_or(0) as usize;
            // the stage before it on that partition, if the event has one to wait for
            let before = match e.nums.kind {
                EventKind::GpuPickup | EventKind::GpuStart => Some(EventKind::SynthEnd),
                EventKind::GpuEnd => Some(EventKind::GpuStart),
                _ => None,
            };
            let (mut lacking, mut ready) = (None::<(u32, usize)>, None::<(u32, usize)>);
            for i in std::iter::once(current).chain(entry.others.iter().copied()) {
                let job = live(&self.jobs, i);
                if job.state != JobState::Active {
                    continue;
                }
                let part = job.parts.get(pidx);
                if part.is_some_and(|p| p.at(e.nums.kind).is_some()) {
                    continue;
                }
                let oldest = |o: Option<(u32, usize)>| match o {
                    Some((a, _)) if a < job.attempt => o,
                    _ => Some((job.attempt, i)),
                };
                lacking = oldest(lacking);
                if before.is_none_or(|b| part.is_some_and(|p| p.at(b).is_some())) {
                    ready = oldest(ready);
                }
            }
            // the oldest that waits for it, else the oldest that lacks it
            return ready
                .or(lacking)
                .map_or(Instance::Usual, |(_, i)| Instance::Found(i));
        };
        let mut ended = None;
        for i in std::iter::once(current).chain(entry.others.iter().copied()) {
            let job = live(&self.jobs, i);
            if job.request == Some(r) {
                if job.state == JobState::Active {
                    return Instance::Found(i);
                }
                ended = Some(i);
            }
        }
        let job = live_mut(&mut self.jobs, current);
        if job.state != JobState::Active {
            return Instance::Usual;
        }
        if ended.is_some() || r.get() <= self.names.get(e.name).max_request {
            // the request's job ended (and may be gone) while another of the id runs
            return Instance::Ended(ended);
        }
        if job.request.is_none() && r.get() == 1 {
            // its events so far named no request, and this is the first: they were its
            job.request = Some(r);
            let entry = self.names.get_mut(e.name);
            entry.max_request = entry.max_request.max(r.get());
            return Instance::Found(current);
        }
        // another request while this one is in flight (a writer names the first request
        // `1` or not at all, proofline's layer the latter: cuzk's own lines then stay as
        // they are while requests do not overlap)
        self.totals.stats.concurrent_requests += 1;
        self.names.get_mut(e.name).others.push(current);
        Instance::Found(self.new_job(e, sink))
    }

    /// Records the event on its partition. Returns false for a second record of the same
    /// (event, partition): a duplicate or a conflict, counted, the first kept.
    fn record(&mut self, idx: usize, pidx: usize, e: &Ev) -> bool {
        let job = live_mut(&mut self.jobs, idx);
        job.saw(e.nums.partition().is_none(), e.proof_kind());
        let job = if job.expected.is_some_and(|n| pidx as u64 >= u64::from(n)) {
            self.partition_past_count(idx, pidx);
            live_mut(&mut self.jobs, idx)
        } else {
            job
        };
        match job
            .slot(pidx)
            .record(e.nums.kind, e.t, e.signature(), e.nums.worker())
        {
            Recorded::New => {
                job.touch(e.t);
                true
            }
            Recorded::Duplicate => {
                self.totals.stats.duplicates += 1;
                false
            }
            Recorded::Conflict { first } => {
                self.totals.stats.conflicts += 1;
                let name = self.names.name(job.name).clone();
                // a partition started twice while its job is in flight: a second attempt of
                // the job under the same id (Curio resubmits after its 30-minute timeout
                // without cancelling the first), not a garbled line. Said, not merged: the
                // job's figures are its first attempt's.
                if e.nums.kind == EventKind::SynthStart
                    && job.state == JobState::Active
                    && !job.overlapped
                {
                    job.overlapped = true;
                    self.totals.stats.overlapping_attempts += 1;
                    super::push_example(&mut self.totals.stats.overlapping_examples, || {
                        name.to_string()
                    });
                }
                let (kind, t) = (e.nums.kind, e.t);
                let part = match e.nums.partition() {
                    Some(p) => format!("partition {p}"),
                    None => "(whole job)".to_owned(),
                };
                super::push_example(&mut self.totals.stats.conflict_examples, || {
                    format!(
                        "{name} {part}: second {kind} at {t} differs from the first at {first}, first kept"
                    )
                });
                false
            }
        }
    }

    /// Counts an event of job `idx`'s partition `pidx`, past the count that completes the
    /// job; the first is described, with where the count came from.
    #[cold]
    fn partition_past_count(&mut self, idx: usize, pidx: usize) {
        let s = &mut self.totals.stats;
        s.partitions_past_count += 1;
        if s.partition_past_count_example.is_some() {
            return;
        }
        use super::config::CountFrom;
        let job = live(&self.jobs, idx);
        let n = job.expected.unwrap_or(0);
        let name = self.names.name(job.name);
        let from = match job.expected_from {
            Some(CountFrom::Rule) => match self.cfg.partitions_rule_of(name) {
                Some(prefix) if !prefix.is_empty() => {
                    format!("the rule for ids starting `{prefix}` (--partitions-for)")
                }
                _ => "the rule for every id (--partitions-for with no prefix)".to_owned(),
            },
            Some(CountFrom::Whole) => {
                "a whole proof (its first line named no partition)".to_owned()
            }
            Some(CountFrom::Id) => "its id's form".to_owned(),
            Some(CountFrom::Default) | None => "the default count (--partitions)".to_owned(),
        };
        self.totals.stats.partition_past_count_example = Some(format!(
            "{name} partition {pidx}, past the {n} partition(s) of {from}"
        ));
    }

    fn on_synth_start(&mut self, idx: usize, pidx: usize, t: u64) {
        let job = live_mut(&mut self.jobs, idx);
        job.synth_started(t);
        self.gauges
            .advance(&mut job.parts[pidx], PartStage::Synthesizing);
    }

    fn on_synth_end(&mut self, idx: usize, pidx: usize, e: &Ev) {
        live_mut(&mut self.jobs, idx).synth_ended(pidx, e.t, e.nums.synth_ms());
        self.enqueue(idx, pidx, e.t, false);
    }

    fn on_gpu_queue(&mut self, idx: usize, pidx: usize, t: u64) {
        // queue time starts at GPU_QUEUE when present
        self.enqueue(idx, pidx, t, true);
    }

    fn enqueue(&mut self, idx: usize, pidx: usize, t: u64, explicit: bool) {
        let part = &mut live_mut(&mut self.jobs, idx).parts[pidx];
        part.queued_at(t, explicit);
        self.gauges.advance(part, PartStage::Queued);
    }

    fn on_gpu_pickup(&mut self, idx: usize, pidx: usize) {
        let part = &mut live_mut(&mut self.jobs, idx).parts[pidx];
        self.gauges.advance(part, PartStage::PickedUp);
    }

    /// The device of a GPU event: `gpu=` if the event says, else the worker's.
    fn device_of(&self, e: &Ev, part: &Part) -> u32 {
        e.nums
            .gpu()
            .or(part.gpu())
            .or(part.worker().map(|w| self.gpu_of_worker(w)))
            .unwrap_or(0)
    }

    fn on_gpu_start(
        &mut self,
        idx: usize,
        pidx: usize,
        e: &Ev,
        at: u64,
        sink: &mut impl UpdateSink,
    ) {
        let gpu = self.device_of(e, &live(&self.jobs, idx).parts[pidx]);
        let job = live_mut(&mut self.jobs, idx);
        let part = &mut job.parts[pidx];
        part.place_on(gpu);
        if let Some(end) = part.at(EventKind::GpuEnd) {
            // GPU_END came first (late GPU_START): the interval is known whole; it adds to the
            // serial sum (the busy sweep cannot go back for it)
            let len = end.saturating_sub(e.t);
            job.gpu_known_whole(len);
            self.devices.get_or_insert(gpu).interval_known_whole(len);
            return;
        }
        let worker = part.worker();
        self.gauges.advance(part, PartStage::OnGpu);
        let (first_anywhere, new_on_dev) = job.gpu_started(gpu, e.t);
        let (uid, attempt, first_synth_start) = (job.uid, job.attempt, job.first_synth_start);
        let name = self.names.name(job.name).clone();
        let dev = self.devices.get_or_insert(gpu);
        if let Some(w) = worker {
            dev.add_worker(w);
        }
        // cold start: the job's first GPU work found its device idle, for long enough
        if first_anywhere && dev.idle_at_least(at, self.cfg.cold_start_min_idle_ms) {
            if let Some(s) = first_synth_start {
                let cs = e.t.saturating_sub(s);
                if let Some(job) = self.jobs[idx].as_mut() {
                    job.started_cold(cs);
                }
                if self.totals.first_cold_start.is_none() && self.run == 0 {
                    self.totals.first_cold_start = Some(cs);
                }
            }
        }
        if new_on_dev {
            self.chain_insert(gpu, idx, &name, e.t);
        }
        let dev = self.devices.get_mut(gpu).expect("device exists");
        let seq = (self.cfg.stuck_min_ms > 0).then(|| dev.opened(at, idx, uid, pidx));
        if dev.start(at, uid, (name, attempt), sink) {
            self.pending_gap_devs.push(gpu);
        }
        if let Some(seq) = seq {
            live_mut(&mut self.jobs, idx).parts[pidx].set_open_seq(seq);
        }
    }

    fn on_gpu_end(&mut self, idx: usize, pidx: usize, e: &Ev, at: u64, sink: &mut impl UpdateSink) {
        let job = live_mut(&mut self.jobs, idx);
        let part = &mut job.parts[pidx];
        let was = part.stage();
        if !self.gauges.advance(part, PartStage::Done) {
            return;
        }
        let gpu = part.gpu().unwrap_or(0);
        let start = part.at(EventKind::GpuStart).unwrap_or(e.t);
        let open = (was == PartStage::OnGpu).then_some((start, gpu));
        job.gpu_ended(pidx, e.t, e.nums.gpu_ms(), open);
        self.totals.partitions_done += 1;
        if open.is_some() {
            let (uid, len) = (job.uid, e.t.saturating_sub(start));
            let dev = self
                .devices
                .get_mut(gpu)
                .expect("device of an open interval");
            if let Some(seq) = job.parts[pidx].open_seq() {
                dev.mark_closed(seq);
            }
            dev.close_interval((start, at, len), uid, self.cfg.busy_window_ms, sink);
        }
        let part = &job.parts[pidx];
        self.totals.record_stages(StageValues::new(
            part.stages(),
            part.synth_reported(),
            part.gpu_reported(),
        ));
        if sink.wants_partitions() {
            let rec = self.partition_record(idx, pidx);
            sink.update(Update::Partition(Arc::new(rec)));
        }
        let job = live(&self.jobs, idx);
        if job.expected.is_some_and(|n| job.done >= n) {
            self.complete(idx, sink);
        } else if job.unknown_count_complete() {
            let t = job.last_activity + self.cfg.completion_grace_ms;
            self.due(t);
        }
    }

    pub(super) fn partition_record(&self, idx: usize, pidx: usize) -> PartitionRecord {
        let job = live(&self.jobs, idx);
        let p = &job.parts[pidx];
        let [synthesis_ms, queue_ms, lock_wait_ms, gpu_ms] = p.stages();
        let job_id = self.names.name(job.name).clone();
        PartitionRecord {
            kernel_ms: self.partition_kernel(&job_id, pidx as u32),
            job_id,
            run: job.run,
            proof_kind: job.proof_kind.map(|k| self.kinds.name(k).clone()),
            partition: if job.whole { None } else { Some(pidx as u32) },
            worker: p.worker(),
            gpu: p.gpu(),
            synth_start_ms: p.at(EventKind::SynthStart),
            synth_end_ms: p.at(EventKind::SynthEnd),
            queue_start_ms: p.queue_start(),
            pickup_ms: p.at(EventKind::GpuPickup),
            gpu_start_ms: p.at(EventKind::GpuStart),
            gpu_end_ms: p.at(EventKind::GpuEnd),
            synthesis_ms,
            queue_ms,
            lock_wait_ms,
            gpu_ms,
            synth_reported_ms: p.synth_reported(),
            gpu_reported_ms: p.gpu_reported(),
        }
    }

    fn job_record(&self, idx: usize, status: JobStatus) -> JobRecord {
        let job = live(&self.jobs, idx);
        JobRecord {
            job_id: self.names.name(job.name).clone(),
            run: job.run,
            attempt: job.attempt,
            proof_kind: job.proof_kind.map(|k| self.kinds.name(k).clone()),
            status,
            partitions_expected: job.expected,
            partitions_done: job.done,
            first_synth_start_ms: job.first_synth_start,
            first_synth_end_ms: job.first_synth_end,
            first_gpu_start_ms: job.first_gpu_start,
            last_gpu_end_ms: job.last_gpu_end,
            wall_ms: match (job.first_synth_start, job.last_gpu_end) {
                (Some(s), Some(e)) => Some(e.saturating_sub(s)),
                _ => None,
            },
            synthesis_total_ms: job.synth_total,
            gpu_total_ms: job.gpu_total,
            synth_reported_total_ms: job.synth_reported,
            gpu_reported_total_ms: job.gpu_reported,
            first_synth_to_first_gpu_ms: match (job.first_synth_start, job.first_gpu_start) {
                (Some(s), Some(g)) => Some(g.saturating_sub(s)),
                _ => None,
            },
            cold_start_ms: job.cold_start,
            unobserved_gpu: job.gpu_unobserved(),
        }
    }

    /// Job `idx` completed: its record, the steady state, its transitions.
    pub(super) fn complete(&mut self, idx: usize, sink: &mut impl UpdateSink) {
        self.finished_one();
        let job = live_mut(&mut self.jobs, idx);
        job.finish(
            JobStatus::Complete,
            self.now + self.cfg.reorder_window_ms * 2 + self.cfg.completion_grace_ms,
        );
        let retain = job.retain_until;
        let tc = job.last_gpu_end.unwrap_or(self.now);
        self.due(retain);
        // a partition beyond the count it completed at (a count set too low) that is still
        // open will not end: its GPU_END is a line after the job's end (it kept its GPU
        // busy to the end of the log)
        if live(&self.jobs, idx).parts.iter().any(|p| !p.is_done()) {
            self.abandon_open_parts(idx, sink);
        }
        let rec = self.job_record(idx, JobStatus::Complete);
        self.totals.record_complete(&rec, self.cfg.max_rows);
        // steady state: from the first completion to the last
        let rs = &mut self.steady;
        rs.completions += 1;
        let refirst = rs.first_completion.is_none_or(|f| tc < f);
        if refirst {
            rs.first_completion = Some(tc);
        }
        let relast = tc >= rs.last_completion;
        if relast {
            rs.last_completion = tc;
        }
        for dev in self.devices.values_mut() {
            dev.mark_completion(tc, refirst, relast);
        }
        // transitions into this job first, so that a sink sees them before the job's record
        self.drain_chains_of(idx, sink);
        if sink.wants_records() {
            sink.update(Update::Job(Arc::new(rec)));
        }
    }

    /// Job `idx` will not complete (`status` says why): its open work is closed as
    /// unobserved, its unfinished partitions and its record are emitted.
    pub(super) fn give_up(&mut self, idx: usize, status: JobStatus, sink: &mut impl UpdateSink) {
        let now = self.now;
        self.finished_one();
        let job = live_mut(&mut self.jobs, idx);
        job.finish(status, now + self.cfg.reorder_window_ms * 2);
        let retain = job.retain_until;
        self.next_sweep = self.next_sweep.min(retain.max(now + 1));
        self.abandon_open_parts(idx, sink);
        let rec = self.job_record(idx, status);
        self.totals.jobs_incomplete += 1;
        if self.totals.incomplete_rows.len() < self.cfg.max_rows {
            self.totals.incomplete_rows.push(rec.clone());
        }
        // transitions into this job first, so that a sink sees them before the job's record
        self.drain_chains_of(idx, sink);
        if sink.wants_records() {
            sink.update(Update::Job(Arc::new(rec)));
        }
    }

    /// The partitions of job `idx` that will not finish now that it ended: out of the
    /// gauges and the kernel attribution's open intervals, those on a GPU closed as
    /// unobserved at the latest instant observed on the device (their GPU_END, if it comes,
    /// is a line after the job's end, dropped), and those that had events sent to the
    /// partition sinks, for charts and traces (not in the stage stats).
    fn abandon_open_parts(&mut self, idx: usize, sink: &mut impl UpdateSink) {
        let key = super::kernel::job_key(self.names.name(live(&self.jobs, idx).name));
        self.forget_open_intervals(key);
        let now = self.now;
        let waiting = self.gauges.queue_depth() > 0;
        let job = live_mut(&mut self.jobs, idx);
        let uid = job.uid;
        let mut unfinished = Vec::new();
        let mut lost = false;
        for (pidx, part) in job.parts.iter_mut().enumerate() {
            if part.is_done() {
                continue;
            }
            if part.any_recorded() {
                unfinished.push(pidx);
            }
            let was = part.stage();
            self.gauges.advance(part, PartStage::Abandoned);
            if was != PartStage::OnGpu {
                continue;
            }
            lost = true;
            let Some(dev) = self.devices.get_mut(part.gpu().unwrap_or(0)) else {
                continue;
            };
            if let Some(seq) = part.open_seq() {
                dev.mark_closed(seq);
            }
            dev.abandon_interval(
                part.at(EventKind::GpuStart),
                (now, waiting),
                uid,
                self.cfg.busy_window_ms,
                sink,
            );
        }
        if lost {
            job.lost_gpu_time();
        }
        if sink.wants_partitions() {
            for pidx in unfinished {
                let rec = self.partition_record(idx, pidx);
                sink.update(Update::Partition(Arc::new(rec)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::codec::parse_line;
    use crate::engine::{Engine, EngineConfig};
    use crate::sink::Update;

    /// An event past its job's count names where the count came from, as the engine took
    /// it when the job began: a prefix rule, a whole proof, the id's form, the default.
    #[test]
    fn a_partition_past_the_count_names_where_the_count_came_from() {
        for (cfg, lines, says) in [
            (
                EngineConfig::default().partitions_for("x-", 2),
                &["TIMELINE,0,SYNTH_START,x-1,partition=5"][..],
                "x-1 partition 5, past the 2 partition(s) of the rule for ids starting `x-` (--partitions-for)",
            ),
            (
                // (a later line naming a partition does not make it other than a whole proof)
                EngineConfig::default().expected_partitions(Some(4)),
                &[
                    "TIMELINE,0,SYNTH_START,w,kind=winning-post",
                    "TIMELINE,1,SYNTH_END,w,partition=3,synth_ms=1",
                ],
                "w partition 3, past the 1 partition(s) of a whole proof (its first line named no partition)",
            ),
            (
                EngineConfig::default(),
                &["TIMELINE,0,SYNTH_START,porep-9-1,partition=12"],
                "porep-9-1 partition 12, past the 10 partition(s) of its id's form",
            ),
            (
                EngineConfig::default().expected_partitions(Some(2)),
                &[
                    "TIMELINE,0,SYNTH_START,j,partition=0",
                    "TIMELINE,1,SYNTH_START,j,partition=2",
                ],
                "j partition 2, past the 2 partition(s) of the default count (--partitions)",
            ),
        ] {
            let mut e = Engine::new(cfg);
            for l in lines {
                let ev = parse_line(l).unwrap().unwrap();
                e.ingest(&ev, &mut crate::sink::NoUpdates);
            }
            e.finish(&mut crate::sink::NoUpdates);
            let ev = e.report().events;
            assert_eq!(ev.partitions_past_count, 1, "{says}");
            assert_eq!(ev.partition_past_count_example.as_deref(), Some(says));
        }
    }

    /// A prefix rule that no job id starts with is named as given, whichever rule took the
    /// ids that came (a longer prefix wins the count, the shorter still matched an id); a
    /// prefix is matched from the id's first character, case and all.
    #[test]
    fn rules_no_job_id_started_with_are_named() {
        let cfg = EngineConfig::default()
            .partitions_for("porep-", 10)
            .partitions_for("porep-1", 3)
            .partitions_for("Porep-", 2)
            .partitions_for("rep-", 2)
            .proof_kind_for("snap", "snap-update")
            .proof_kind_for("", "mine")
            .proof_kind_for("wpost-", "window-post");
        let mut e = Engine::new(cfg);
        for l in [
            "TIMELINE,0,SYNTH_START,porep-12-0,partition=0",
            "TIMELINE,1,SYNTH_START,snap-1,partition=0",
        ] {
            e.ingest(
                &parse_line(l).unwrap().unwrap(),
                &mut crate::sink::NoUpdates,
            );
        }
        e.finish(&mut crate::sink::NoUpdates);
        let ev = e.report().events;
        assert_eq!(
            ev.rules_matching_no_job,
            [
                "--partitions-for Porep-=2",
                "--partitions-for rep-=2",
                "--proof-kind-for wpost-=window-post"
            ]
        );
        assert!(
            crate::text::doubts(&ev).iter().any(|w| w.starts_with(
                "--partitions-for Porep-=2, --partitions-for rep-=2, --proof-kind-for wpost-=window-post matched no job"
            )),
            "{:?}",
            crate::text::doubts(&ev)
        );
        // a prefix given with a newline is said on one line
        let mut e = Engine::new(EngineConfig::default().partitions_for("a\nb", 1));
        e.ingest(
            &parse_line("TIMELINE,0,SYNTH_START,x,partition=0")
                .unwrap()
                .unwrap(),
            &mut crate::sink::NoUpdates,
        );
        e.finish(&mut crate::sink::NoUpdates);
        let said = crate::text::doubts(&e.report().events).join("");
        assert!(
            said.starts_with("--partitions-for a\\u{a}b=1 matched"),
            "{said}"
        );
        assert!(!said.contains('\n'), "{said}");
        // a reading of no event says nothing of them: nothing could have matched
        let mut e = Engine::new(EngineConfig::default().partitions_for("x", 1));
        e.finish(&mut crate::sink::NoUpdates);
        let ev = e.report().events;
        assert_eq!(ev.rules_matching_no_job, ["--partitions-for x=1"]);
        assert!(crate::text::doubts(&ev).is_empty());
    }

    /// A job of two partitions read with a count of one completes at its first partition;
    /// its second, already on the GPU, then never ends (its GPU_END is a line after the
    /// job's end, dropped). That interval kept the GPU busy to the end of the log: busy 0,
    /// a steady state 100 % busy, "GPU-bound" and a GPU floor of 0, none matching the
    /// others. It is now closed as unobserved when the job completes.
    #[test]
    fn a_partition_open_when_its_job_completes_does_not_keep_the_gpu_busy() {
        let mut e = Engine::new(EngineConfig::default().expected_partitions(Some(1)));
        let mut t = 0;
        let mut lines = Vec::new();
        for job in ["a", "b", "c", "d"] {
            for p in 0..2 {
                lines.push(format!("TIMELINE,{t},SYNTH_START,{job},partition={p}"));
                lines.push(format!(
                    "TIMELINE,{t},SYNTH_END,{job},partition={p},synth_ms=0"
                ));
            }
            // the two partitions on the GPU's two workers at once, then 1 s idle
            lines.push(format!("TIMELINE,{t},GPU_START,{job},worker=0,partition=0"));
            lines.push(format!(
                "TIMELINE,{},GPU_START,{job},worker=1,partition=1",
                t + 10
            ));
            lines.push(format!(
                "TIMELINE,{},GPU_END,{job},worker=0,partition=0,gpu_ms=1000",
                t + 1000
            ));
            lines.push(format!(
                "TIMELINE,{},GPU_END,{job},worker=1,partition=1,gpu_ms=1000",
                t + 1010
            ));
            t += 2_000;
        }
        let mut updates: Vec<Update> = Vec::new();
        for l in &lines {
            e.ingest(&parse_line(l).unwrap().unwrap(), &mut updates);
        }
        e.finish(&mut updates);
        let r = e.report();
        assert_eq!(r.summary.jobs_complete, 4);
        // each job's cut partition goes to the partition sinks, its GPU_END missing
        let cut: Vec<_> = updates
            .iter()
            .filter_map(|u| match u {
                Update::Partition(p) if p.partition == Some(1) => Some(p),
                _ => None,
            })
            .collect();
        assert_eq!(cut.len(), 4, "{cut:?}");
        assert!(
            cut.iter()
                .all(|p| p.gpu_start_ms.is_some() && p.gpu_end_ms.is_none())
        );
        let gpu = &r.gpus[0];
        // each job's first partition: 1 s busy in every 2 s; the cut ones end unobserved
        assert!(
            (3_000..=4_100).contains(&gpu.busy_ms),
            "busy {} of {}",
            gpu.busy_ms,
            gpu.elapsed_ms
        );
        let steady = r.verdict.busy_ratio.expect("a busy ratio");
        assert!(steady < 0.9, "steady busy {steady}: {}", r.verdict.sentence);
        assert_ne!(r.verdict.bound, crate::report::Bound::GpuBound);
    }
}
