//! cuzk's span and line shapes, one macro each, shared by the layer's bench
//! (`benches/layer.rs`) and the example that counts their instructions
//! (`examples/span_instructions.rs`), so that both measure the same spans. Each macro makes a
//! closure of the iteration number; a macro, not a function, so that every use has a
//! callsite of its own (a callsite's cached interest depends on the dispatchers alive when it
//! was registered).

/// A span TimelineLayer maps (cuzk's synthesis span). A macro, so that every
/// configuration measures its own callsite: a callsite's cached interest depends on the
/// dispatchers alive when it was registered.
macro_rules! mapped {
    () => {
        |i: u32| {
            tracing::info_span!(
                "synthesize_partition",
                job_id = "porep-1000-42",
                partition = i % 10
            )
            .in_scope(|| std::hint::black_box(i));
        }
    };
}

/// cuzk's `gpu_worker` span as cuzk makes it (engine.rs: `worker_id`, `gpu`, `job_id`,
/// `proof_kind`, `batch_size`, `partition = ?Some(n)`): GPU_PICKUP at its creation,
/// GPU_START and GPU_END at its first enter and close.
macro_rules! gpu_worker {
    () => {
        |i: u32| {
            tracing::info_span!(
                "gpu_worker",
                worker_id = i % 4,
                gpu = (i % 4) / 2,
                job_id = %"porep-1000-42",
                proof_kind = %"porep-c2",
                batch_size = 1usize,
                partition = ?Some(i % 10),
            )
            .in_scope(|| std::hint::black_box(i));
        }
    };
}

/// The same span with its values recorded plainly (`job_id = "..."`, `partition = n`): what
/// tracing's `%` and `?` formatting (`Display` and `Debug` into a buffer, then read back)
/// adds to cuzk's span, apart from what the layer does with the values.
macro_rules! gpu_worker_plain {
    () => {
        |i: u32| {
            tracing::info_span!(
                "gpu_worker",
                worker_id = i % 4,
                gpu = (i % 4) / 2,
                job_id = "porep-1000-42",
                proof_kind = "porep-c2",
                batch_size = 1usize,
                partition = i % 10,
            )
            .in_scope(|| std::hint::black_box(i));
        }
    };
}

/// cuzk's TIMELINE line logged through `tracing` (the one-line change), and one of its
/// `CUZK_TIMING:` lines so logged.
macro_rules! timeline_line {
    () => {
        |i: u32| {
            tracing::info!(target: "timeline", "TIMELINE,{},SYNTH_START,porep-1000-42,partition={}", i, i % 10);
        }
    };
}
macro_rules! timing_line {
    () => {
        |i: u32| {
            tracing::info!(target: "timeline", "CUZK_TIMING: gpu_tid={} pre_lock_cpu_ms=312 mutex_wait_ms=4 ntt_msm_h_ms=2901 batch_add_ms=402 tail_msm_ms=233 gpu_total_ms=3541 mutex_held_ms=3566", i % 4);
        }
    };
}

/// A span it does not map.
macro_rules! unmapped {
    () => {
        |i: u32| {
            tracing::info_span!("deserialize_c1", bytes = i).in_scope(|| std::hint::black_box(i));
        }
    };
}
