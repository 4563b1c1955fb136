//! The engine's settings and their defaults.

/// Default reorder window: events may arrive this much out of time order.
pub const DEFAULT_REORDER_WINDOW_MS: u64 = 5_000;
/// Default job timeout: a job with no event for this long is evicted as incomplete.
pub const DEFAULT_JOB_TIMEOUT_MS: u64 = 30 * 60 * 1000;
/// Default [`EngineConfig::restart_after_ms`]: a line this far ahead of the newest one,
/// alone, is a stray early line. (Threads print lines milliseconds out of order, never a
/// minute.)
pub const DEFAULT_RESTART_AFTER_MS: u64 = 60 * 1000;
/// Default busy history kept per device (also the live busy-ratio window).
pub const DEFAULT_BUSY_WINDOW_MS: u64 = 60_000;
/// Default cap on job, transition and incomplete rows kept for the report.
pub const DEFAULT_MAX_ROWS: usize = 10_000;
/// Default [`EngineConfig::max_jobs_in_flight`]: a prover has tens of jobs in flight; a
/// log with more is broken or hostile, and each costs about a kilobyte.
pub const DEFAULT_MAX_JOBS_IN_FLIGHT: usize = 100_000;
/// cuzk's default number of GPU workers per device.
pub const DEFAULT_GPU_WORKERS_PER_DEVICE: u32 = 2;
/// Partition indexes at or above this are rejected as absurd.
pub const MAX_PARTITION: u32 = 1 << 16;
/// GPU indexes at or above this are rejected as absurd (an event's `gpu=`; a start-up line's
/// placement there is not used). The engine steps through every GPU it knows as its clock
/// moves and at each completion: a log naming tens of thousands of GPUs made `analyze`
/// quadratic (40 000 GPUs, 80 000 lines: 6.6 s). A prover has a few; the engine follows at
/// most this many.
pub const MAX_GPU: u32 = 1 << 12;
/// Worker indexes at or above this are rejected as absurd (64 GPUs of 64 workers fit). A GPU
/// taken from a worker (`worker / gpu_workers_per_device`) is then below [`MAX_GPU`]
/// whatever the mapping, and a GPU's list of its workers stays short.
pub const MAX_WORKER: u32 = MAX_GPU;

/// Default [`EngineConfig::stuck_min_ms`]: a GPU interval open a minute is not yet stuck.
pub const DEFAULT_STUCK_MIN_MS: u64 = 60_000;
/// Default [`EngineConfig::stuck_factor`].
pub const DEFAULT_STUCK_FACTOR: u32 = 4;

/// Default [`EngineConfig::cold_start_min_idle_ms`].
pub const DEFAULT_COLD_START_MIN_IDLE_MS: u64 = 1_000;

/// The engine sweeps (completes, evicts, forgets jobs) at most this often in timeline time.
pub(super) const SWEEP_EVERY_MS: u64 = 1_000;
/// Conflict examples kept for the report.
pub(super) const MAX_EXAMPLES: usize = 10;
/// Distinct proof kinds kept; more are folded into `other`.
pub(super) const MAX_KINDS: usize = 64;

/// Engine settings: `EngineConfig::default()`, then what differs, e.g.
/// `EngineConfig::default().reorder_window_ms(0).expected_partitions(Some(3))`. Every setting
/// has a documented default. The fields are private, so that a new setting is no breaking
/// change; the `get_` methods read back what the engine runs with ([`crate::engine::Engine::config`]).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub(crate) gpu_workers_per_device: u32,
    pub(crate) gpu_workers_per_device_given: bool,
    pub(crate) reorder_window_ms: u64,
    pub(crate) job_timeout_ms: u64,
    pub(crate) restart_after_ms: u64,
    pub(crate) partitions_by_prefix: Vec<(String, u32)>,
    pub(crate) kinds_by_prefix: Vec<(String, String)>,
    pub(crate) expected_partitions: Option<u32>,
    pub(crate) completion_grace_ms: u64,
    pub(crate) busy_window_ms: u64,
    pub(crate) max_rows: usize,
    pub(crate) max_jobs_in_flight: usize,
    pub(crate) cold_start_min_idle_ms: u64,
    pub(crate) gpu_interval_source: Option<String>,
    pub(crate) stuck_min_ms: u64,
    pub(crate) stuck_factor: u32,
    pub(crate) default_kind: Option<String>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            gpu_workers_per_device: DEFAULT_GPU_WORKERS_PER_DEVICE,
            gpu_workers_per_device_given: false,
            reorder_window_ms: DEFAULT_REORDER_WINDOW_MS,
            job_timeout_ms: DEFAULT_JOB_TIMEOUT_MS,
            restart_after_ms: DEFAULT_RESTART_AFTER_MS,
            partitions_by_prefix: Vec::new(),
            kinds_by_prefix: Vec::new(),
            expected_partitions: None,
            completion_grace_ms: DEFAULT_REORDER_WINDOW_MS,
            busy_window_ms: DEFAULT_BUSY_WINDOW_MS,
            max_rows: DEFAULT_MAX_ROWS,
            max_jobs_in_flight: DEFAULT_MAX_JOBS_IN_FLIGHT,
            cold_start_min_idle_ms: DEFAULT_COLD_START_MIN_IDLE_MS,
            gpu_interval_source: None,
            stuck_min_ms: DEFAULT_STUCK_MIN_MS,
            stuck_factor: DEFAULT_STUCK_FACTOR,
            default_kind: None,
        }
    }
}

impl EngineConfig {
    /// GPU = worker / this (at least 1), unless the event says `gpu=`. Default 2, as cuzk. Given here,
    /// cuzk's start-up lines in a log do not change it (a disagreement is said); not given,
    /// they do, when the log has them.
    pub fn gpu_workers_per_device(mut self, n: u32) -> Self {
        self.gpu_workers_per_device = n.max(1);
        self.gpu_workers_per_device_given = true;
        self
    }

    /// How far out of time order events may arrive and still be processed in order.
    /// Default [`DEFAULT_REORDER_WINDOW_MS`].
    pub fn reorder_window_ms(mut self, ms: u64) -> Self {
        self.reorder_window_ms = ms;
        self
    }

    /// A job with no event for this long is evicted and counted as incomplete.
    /// Default [`DEFAULT_JOB_TIMEOUT_MS`].
    pub fn job_timeout_ms(mut self, ms: u64) -> Self {
        self.job_timeout_ms = ms;
        self
    }

    /// A line this far ahead of the newest one, alone, is a stray early line; lines that
    /// fall back behind the newest by more than the reorder window are one restart only when
    /// within this of one another. At least the reorder window.
    /// Default [`DEFAULT_RESTART_AFTER_MS`].
    pub fn restart_after_ms(mut self, ms: u64) -> Self {
        self.restart_after_ms = ms;
        self
    }

    /// Jobs whose id starts with `prefix` have `n` partitions, e.g. `("porep-", 3)` for a
    /// test prover with 3-partition sectors (default: no rule). Each call adds a rule; the
    /// longest matching prefix wins, and wins over everything else; see
    /// [`EngineConfig::expected_partitions_of`].
    pub fn partitions_for(mut self, prefix: impl Into<String>, n: u32) -> Self {
        self.partitions_by_prefix.push((prefix.into(), n));
        self
    }

    /// Jobs whose id starts with `prefix` are of proof kind `kind`, e.g. `("batch-",
    /// "batch")` for a prover whose lines name no kind (default: no rule). Each call adds a
    /// rule; the longest matching prefix wins, over the id's own form (`porep-` is
    /// `porep-c2`, ...); a `kind=` on the job's lines wins over both. The empty prefix is
    /// every job's. A job nothing names is `unknown`.
    pub fn proof_kind_for(mut self, prefix: impl Into<String>, kind: impl Into<String>) -> Self {
        self.kinds_by_prefix.push((prefix.into(), kind.into()));
        self
    }

    /// Partitions of a partitioned job that neither a prefix rule nor its id's form tells
    /// (`None`, the default: the highest partition seen + 1, once the job has been quiet for
    /// the completion grace).
    pub fn expected_partitions(mut self, n: Option<u32>) -> Self {
        self.expected_partitions = n;
        self
    }

    /// A job whose partition count is unknown completes when all its partitions are done
    /// and nothing happened to it for this long. Default [`DEFAULT_REORDER_WINDOW_MS`].
    pub fn completion_grace_ms(mut self, ms: u64) -> Self {
        self.completion_grace_ms = ms;
        self
    }

    /// Busy history kept per device, for the live busy ratio (at least the reorder window
    /// and the completion grace, and a little more). Default [`DEFAULT_BUSY_WINDOW_MS`].
    pub fn busy_window_ms(mut self, ms: u64) -> Self {
        self.busy_window_ms = ms;
        self
    }

    /// Rows of jobs, transitions and incomplete jobs kept for the report.
    /// Default [`DEFAULT_MAX_ROWS`].
    pub fn max_rows(mut self, n: usize) -> Self {
        self.max_rows = n;
        self
    }

    /// Jobs in flight at most: a new job past it evicts the oldest one in flight (the first
    /// seen), counted in `EventStats::evicted_over_cap`, so that memory stays bounded
    /// whatever the log. Default [`DEFAULT_MAX_JOBS_IN_FLIGHT`].
    pub fn max_jobs_in_flight(mut self, n: usize) -> Self {
        self.max_jobs_in_flight = n;
        self
    }

    /// A job's first GPU work is a cold start only when its GPU had been idle at least this
    /// long (or had never worked): a job that starts on a GPU idle for a few ms, queued
    /// behind the sector before it, is no cold start.
    /// Default [`DEFAULT_COLD_START_MIN_IDLE_MS`].
    pub fn cold_start_min_idle_ms(mut self, ms: u64) -> Self {
        self.cold_start_min_idle_ms = ms;
        self
    }

    /// Where GPU_START and GPU_END come from when they are not the prover's own events
    /// (`None`, the default): the layer sets it when spans give them, and every output
    /// labels the GPU intervals with it, since span edges need not fall where the prover's
    /// own GPU_START/GPU_END would.
    pub fn gpu_interval_source(mut self, source: Option<String>) -> Self {
        self.gpu_interval_source = source;
        self
    }

    /// A GPU interval open longer than the larger of this and
    /// [`EngineConfig::stuck_factor`] times the longest its device has closed is stuck (a
    /// CUDA call that never returns, a prover dead inside GPU work): its device stops
    /// counting it as busy from the last edge seen there, and counts it. 0 turns this off.
    /// Default [`DEFAULT_STUCK_MIN_MS`].
    pub fn stuck_min_ms(mut self, ms: u64) -> Self {
        self.stuck_min_ms = ms;
        self
    }

    /// See [`EngineConfig::stuck_min_ms`]. Default [`DEFAULT_STUCK_FACTOR`].
    pub fn stuck_factor(mut self, factor: u32) -> Self {
        self.stuck_factor = factor;
        self
    }

    /// The proof kind of a job nothing else names: no `kind=` on its lines, no
    /// [`EngineConfig::proof_kind_for`] rule, an id of no known form (`None`, the default:
    /// `unknown`). The layer sets it to the name of the prover's GPU span when its mapping is
    /// its own (see `Builder::default_proof_kind`).
    pub fn default_proof_kind(mut self, kind: Option<String>) -> Self {
        self.default_kind = kind;
        self
    }

    /// The proof kind of a job nothing else names, if set.
    pub fn get_default_proof_kind(&self) -> Option<&str> {
        self.default_kind.as_deref()
    }

    /// GPU workers per device.
    pub fn get_gpu_workers_per_device(&self) -> u32 {
        self.gpu_workers_per_device
    }

    /// Whether [`EngineConfig::gpu_workers_per_device`] was given.
    pub fn get_gpu_workers_per_device_given(&self) -> bool {
        self.gpu_workers_per_device_given
    }

    /// The reorder window, ms.
    pub fn get_reorder_window_ms(&self) -> u64 {
        self.reorder_window_ms
    }

    /// The completion grace, ms.
    pub fn get_completion_grace_ms(&self) -> u64 {
        self.completion_grace_ms
    }

    /// The job timeout, ms.
    pub fn get_job_timeout_ms(&self) -> u64 {
        self.job_timeout_ms
    }

    /// The restart threshold, ms.
    pub fn get_restart_after_ms(&self) -> u64 {
        self.restart_after_ms
    }

    /// Where the GPU intervals come from, when not from the prover's own events.
    pub fn get_gpu_interval_source(&self) -> Option<&str> {
        self.gpu_interval_source.as_deref()
    }

    /// The proof kind a job is taken to be before a line names one: the longest of
    /// [`EngineConfig::proof_kind_for`] rules its id starts with, else the id's own form,
    /// else [`EngineConfig::default_proof_kind`].
    pub fn kind_of(&self, job_id: &str) -> Option<&str> {
        longest_prefix(&self.kinds_by_prefix, job_id)
            .map(String::as_str)
            .or_else(|| crate::event::kind_from_job_id(job_id))
            .or(self.default_kind.as_deref())
    }

    /// The partitions that complete job `job_id`, in this order: the longest of
    /// [`EngineConfig::partitions_for`] rules the id starts with; 1 for a whole-proof job
    /// (`whole`: its first event carries no partition, e.g. a multi-sector PoRep batch with
    /// a `porep-` id); the id's own form (10 for `porep-*`, 16 for `snap-*`, 1 for PoSt ids);
    /// [`EngineConfig::expected_partitions`]; else `None` (the highest partition seen + 1,
    /// once the job is quiet).
    pub fn expected_partitions_of(&self, job_id: &str, whole: bool) -> Option<u32> {
        self.count_of(job_id, whole).map(|(n, _)| n)
    }

    /// [`EngineConfig::expected_partitions_of`], with where the count came from.
    pub(crate) fn count_of(&self, job_id: &str, whole: bool) -> Option<(u32, CountFrom)> {
        longest_prefix(&self.partitions_by_prefix, job_id)
            .map(|&n| (n, CountFrom::Rule))
            .or(whole.then_some((1, CountFrom::Whole)))
            .or_else(|| {
                crate::event::expected_partitions_from_job_id(job_id).map(|n| (n, CountFrom::Id))
            })
            .or(self.expected_partitions.map(|n| (n, CountFrom::Default)))
    }

    /// The prefix of the [`EngineConfig::partitions_for`] rule that gives job `job_id` its
    /// count, if one does.
    pub(crate) fn partitions_rule_of(&self, job_id: &str) -> Option<&str> {
        longest_rule(&self.partitions_by_prefix, job_id).map(|(p, _)| p.as_str())
    }

    /// The settings the engine runs with: at least one worker per device, a busy history
    /// long enough to look back past the reorder window and the completion grace, and a
    /// restart threshold no shorter than the reorder window.
    pub(super) fn normalized(mut self) -> Self {
        self.gpu_workers_per_device = self.gpu_workers_per_device.max(1);
        self.busy_window_ms = self
            .busy_window_ms
            .max(self.reorder_window_ms + self.completion_grace_ms + 2 * SWEEP_EVERY_MS);
        self.restart_after_ms = self.restart_after_ms.max(self.reorder_window_ms);
        self
    }
}

/// Where a job's count of partitions came from ([`EngineConfig::count_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CountFrom {
    /// A [`EngineConfig::partitions_for`] rule.
    Rule,
    /// A whole proof: the job's first event named no partition.
    Whole,
    /// The id's form (`porep-*` 10, ...).
    Id,
    /// [`EngineConfig::expected_partitions`].
    Default,
}

/// The value of the longest of `rules`' prefixes that `job_id` starts with.
fn longest_prefix<'a, T>(rules: &'a [(String, T)], job_id: &str) -> Option<&'a T> {
    longest_rule(rules, job_id).map(|(_, v)| v)
}

/// The rule of `rules` with the longest prefix that `job_id` starts with.
fn longest_rule<'a, T>(rules: &'a [(String, T)], job_id: &str) -> Option<&'a (String, T)> {
    rules
        .iter()
        .filter(|(p, _)| job_id.starts_with(p.as_str()))
        .max_by_key(|(p, _)| p.len())
}
