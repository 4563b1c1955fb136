//! Traces from engine records: a root span per job, a span per partition, its stages; ids
//! derived from the run and the job, so that a replay sends the very traces the live layer
//! sent, and Prometheus exemplars name them.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use proofline_core::ids::trace_id;
use proofline_core::report::{JobRecord, JobStatus, PartitionRecord, TransitionRecord};

/// A trace: the spans of one job.
pub(crate) type Trace = Vec<SpanData>;

/// A transition's numbers, as the root of the job it leads into carries them (and a
/// `next_sector` link, when that job's trace went out first).
fn push_transition_numbers(attrs: &mut Vec<KeyValue>, t: &TransitionRecord) {
    attrs.push(KeyValue::new("transition.gap_ms", t.gap_ms));
    attrs.push(KeyValue::new("transition.overlap_ms", t.overlap_ms as i64));
    if let Some(h) = t.handoff_ms {
        attrs.push(KeyValue::new("transition.handoff_ms", h));
    }
    if let Some(l) = t.synthesis_lead_ms {
        attrs.push(KeyValue::new("synthesis.lead_ms", l));
    }
}

/// The transitions a job's trace carries.
#[derive(Debug, Clone, Copy, Default)]
pub struct Transitions<'a> {
    /// Into the job, from the job before it on each GPU: the root's `transition.*`
    /// attributes (the first GPU's) and a `previous_sector` link per GPU.
    pub into: &'a [Arc<TransitionRecord>],
    /// Out of the job, into one that finished, and was sent, before the transition was
    /// known: a `next_sector` link each, with the transition's numbers on the link.
    pub out_of: &'a [Arc<TransitionRecord>],
}

/// Turns job records into spans.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TraceBuilder {
    /// The run key of trace ids.
    pub run_key: String,
    /// Unix ms of TIMELINE offset 0.
    pub epoch_unix_ms: u64,
    /// Where GPU intervals come from when not the prover's own events (span edges): the
    /// `gpu` stage spans carry it as `proofline.gpu_interval_source`.
    pub gpu_interval_source: Option<String>,
    /// The prover's words for a job and its parts, in span names.
    pub nouns: proofline_core::Nouns,
}

/// A span id derived from the trace id and a name ([`proofline_core::ids::span_id`]).
fn span_id(trace: &[u8; 16], what: &str) -> SpanId {
    SpanId::from_bytes(proofline_core::ids::span_id(
        &proofline_core::ids::TraceId(*trace),
        what,
    ))
}

impl TraceBuilder {
    fn time(&self, ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.epoch_unix_ms + ms)
    }

    /// A link to the root span of a job's trace.
    fn root_link(&self, (run, job, attempt): (u32, &str, u32), attrs: Vec<KeyValue>) -> Link {
        let context = self.context(
            self.trace_id(run, job, attempt),
            self.root_id(run, job, attempt),
        );
        Link::new(context, attrs, 0)
    }

    fn context(&self, trace: TraceId, span: SpanId) -> SpanContext {
        SpanContext::new(
            trace,
            span,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn span(
        &self,
        trace: TraceId,
        id: SpanId,
        parent: SpanId,
        name: String,
        start: u64,
        end: u64,
        attributes: Vec<KeyValue>,
        links: Vec<Link>,
        status: Status,
    ) -> SpanData {
        SpanData {
            span_context: self.context(trace, id),
            parent_span_id: parent,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Owned(name),
            start_time: self.time(start),
            end_time: self.time(end.max(start)),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: {
                let mut l = SpanLinks::default();
                l.links = links;
                l
            },
            status,
            instrumentation_scope: InstrumentationScope::builder("proofline")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }
    }

    /// The trace id of a job.
    pub fn trace_id(&self, run: u32, job: &str, attempt: u32) -> TraceId {
        TraceId::from_bytes(trace_id(&self.run_key, run, job, attempt).0)
    }

    /// The root span id of a job's trace.
    pub fn root_id(&self, run: u32, job: &str, attempt: u32) -> SpanId {
        span_id(&trace_id(&self.run_key, run, job, attempt).0, "root")
    }

    /// The spans of one job: root, partitions, stages.
    pub fn trace(
        &self,
        job: &JobRecord,
        parts: &[Arc<PartitionRecord>],
        transitions: Transitions<'_>,
    ) -> Trace {
        let raw = trace_id(&self.run_key, job.run, &job.job_id, job.attempt).0;
        let tid = TraceId::from_bytes(raw);
        let root = span_id(&raw, "root");
        let mut spans = Vec::with_capacity(1 + parts.len() * 5);

        let first = parts.iter().flat_map(|p| p.instants()).flatten().min();
        let last = parts.iter().flat_map(|p| p.instants()).flatten().max();
        let start = job.first_synth_start_ms.or(first).unwrap_or(0);
        let end = job
            .last_gpu_end_ms
            .or(last)
            .unwrap_or(start)
            .max(last.unwrap_or(0));

        let kind = job.proof_kind.as_deref().unwrap_or("unknown");
        let mut attrs = vec![
            KeyValue::new("job.id", job.job_id.to_string()),
            KeyValue::new("proof.kind", kind.to_owned()),
            KeyValue::new("job.attempt", i64::from(job.attempt)),
            KeyValue::new("job.run", i64::from(job.run)),
            KeyValue::new("job.status", job.status.as_str()),
            KeyValue::new("job.incomplete", job.status != JobStatus::Complete),
            KeyValue::new("partitions.done", i64::from(job.partitions_done)),
            KeyValue::new("synthesis.total_ms", job.synthesis_total_ms as i64),
            KeyValue::new("gpu.total_ms", job.gpu_total_ms as i64),
        ];
        if let Some(n) = job.partitions_expected {
            attrs.push(KeyValue::new("partitions.expected", i64::from(n)));
        }
        if let Some(w) = job.wall_ms {
            attrs.push(KeyValue::new("wall_ms", w as i64));
        }
        if let Some(c) = job.cold_start_ms {
            attrs.push(KeyValue::new("cold_start_ms", c as i64));
        }
        if job.unobserved_gpu {
            attrs.push(KeyValue::new("gpu.unobserved", true));
        }
        // the transition into this job: the first GPU's as `transition.*`; when it ran on
        // several, how many, and the widest gap (each GPU's own numbers are on its link of
        // the `previous sector` span)
        let mut trs: Vec<&Arc<TransitionRecord>> = transitions.into.iter().collect();
        trs.sort_by_key(|t| t.gpu);
        if let Some(t) = trs.first() {
            attrs.push(KeyValue::new("transition.from_job", t.from_job.to_string()));
            attrs.push(KeyValue::new("transition.gpu", i64::from(t.gpu)));
            push_transition_numbers(&mut attrs, t);
        }
        if trs.len() > 1 {
            attrs.push(KeyValue::new("transition.gpus", trs.len() as i64));
            if let Some(w) = trs
                .iter()
                .max_by_key(|t| (t.gap_ms, std::cmp::Reverse(t.gpu)))
            {
                attrs.push(KeyValue::new("transition.max_gap_ms", w.gap_ms));
                attrs.push(KeyValue::new("transition.max_gap_gpu", i64::from(w.gpu)));
            }
        }
        let status = match job.status {
            JobStatus::Complete => Status::Unset,
            other => Status::error(format!("incomplete: {}", other.as_str())),
        };
        // an unknown kind is left out of the name, not spelled `unknown`
        let root_name = match job.proof_kind.as_deref() {
            Some(k) => format!("{k} {}", job.job_id),
            None => job.job_id.to_string(),
        };
        spans.push(self.span(
            tid,
            root,
            SpanId::INVALID,
            root_name,
            start,
            end,
            attrs,
            Vec::new(),
            status,
        ));
        // Sector-to-sector links ride on children of the root: a root whose only reference
        // points into another trace reads, in Jaeger, as a trace with a missing parent
        // ("Incomplete"); a child has its parent and the link besides.
        if let Some(first) = trs.first() {
            // a link per GPU, each with that GPU's transition (a stall on the second GPU
            // of two is in the trace, not only the first GPU's numbers)
            let links = trs
                .iter()
                .map(|t| {
                    let mut a = vec![
                        KeyValue::new("link.kind", "previous_sector"),
                        KeyValue::new("gpu", i64::from(t.gpu)),
                        KeyValue::new("transition.from_job", t.from_job.to_string()),
                    ];
                    push_transition_numbers(&mut a, t);
                    self.root_link((t.run, &t.from_job, t.from_attempt), a)
                })
                .collect();
            let mut a = vec![
                KeyValue::new("transition.from_job", first.from_job.to_string()),
                KeyValue::new("transition.gpu", i64::from(first.gpu)),
            ];
            push_transition_numbers(&mut a, first);
            // it spans every GPU's transition
            let s = trs
                .iter()
                .map(|t| t.from_last_gpu_end_ms.min(t.to_first_gpu_start_ms))
                .min()
                .unwrap_or(0);
            let e = trs
                .iter()
                .map(|t| t.from_last_gpu_end_ms.max(t.to_first_gpu_start_ms))
                .max()
                .unwrap_or(0);
            spans.push(self.span(
                tid,
                span_id(&raw, "previous sector"),
                root,
                format!("previous {}", self.nouns.job()),
                s,
                e,
                a,
                links,
                Status::Unset,
            ));
        }
        if !transitions.out_of.is_empty() {
            // the jobs after this one, sent before their transitions were known
            let links = transitions
                .out_of
                .iter()
                .map(|t| {
                    let mut a = vec![
                        KeyValue::new("link.kind", "next_sector"),
                        KeyValue::new("gpu", i64::from(t.gpu)),
                    ];
                    push_transition_numbers(&mut a, t);
                    self.root_link((t.run, &t.to_job, t.to_attempt), a)
                })
                .collect();
            spans.push(self.span(
                tid,
                span_id(&raw, "next sector"),
                root,
                format!("next {}", self.nouns.job()),
                end,
                end,
                Vec::new(),
                links,
                Status::Unset,
            ));
        }

        for p in parts {
            // (the id from cuzk's words, whatever the name: ids stay as they were)
            let key = p
                .partition
                .map_or_else(|| "proof".to_owned(), |n| format!("partition {n}"));
            let pid = span_id(&raw, &key);
            let name = p.partition.map_or_else(
                || "proof".to_owned(),
                |n| format!("{} {n}", self.nouns.part()),
            );
            let (Some(ps), Some(pe)) = (
                p.instants().into_iter().flatten().min(),
                p.instants().into_iter().flatten().max(),
            ) else {
                continue;
            };
            let mut pattrs = Vec::new();
            if let Some(n) = p.partition {
                pattrs.push(KeyValue::new("partition", i64::from(n)));
            }
            if let Some(w) = p.worker {
                pattrs.push(KeyValue::new("gpu.worker", i64::from(w)));
            }
            if let Some(g) = p.gpu {
                pattrs.push(KeyValue::new("gpu.id", i64::from(g)));
            }
            let done = p.gpu_end_ms.is_some();
            let pstatus = if done {
                Status::Unset
            } else {
                Status::error("unfinished")
            };
            spans.push(self.span(
                tid,
                pid,
                root,
                name.clone(),
                ps,
                pe,
                pattrs.clone(),
                Vec::new(),
                pstatus,
            ));
            let stage = |stage: &str, s: Option<u64>, e: Option<u64>, extra: Vec<KeyValue>| {
                let (Some(s), Some(e)) = (s, e) else {
                    return None;
                };
                let mut a = pattrs.clone();
                a.extend(extra);
                Some(self.span(
                    tid,
                    span_id(&raw, &format!("{key}/{stage}")),
                    pid,
                    stage.to_owned(),
                    s,
                    e,
                    a,
                    Vec::new(),
                    Status::Unset,
                ))
            };
            let synth_extra = p
                .synth_reported_ms
                .map(|v| vec![KeyValue::new("synth_ms.reported", v as i64)])
                .unwrap_or_default();
            let mut gpu_extra = p
                .gpu_reported_ms
                .map(|v| vec![KeyValue::new("gpu_ms.reported", v as i64)])
                .unwrap_or_default();
            if let Some(src) = &self.gpu_interval_source {
                gpu_extra.push(KeyValue::new("proofline.gpu_interval_source", src.clone()));
            }
            spans.extend(
                [
                    stage("synthesis", p.synth_start_ms, p.synth_end_ms, synth_extra),
                    stage(
                        "queue",
                        p.queue_start_ms,
                        p.pickup_ms.or(p.gpu_start_ms),
                        Vec::new(),
                    ),
                    stage("lock_wait", p.pickup_ms, p.gpu_start_ms, Vec::new()),
                    stage("gpu", p.gpu_start_ms, p.gpu_end_ms, gpu_extra),
                ]
                .into_iter()
                .flatten(),
            );
        }
        spans
    }
}
