//! The `/metrics` text for a fixed event sequence, against golden files. The golden files
//! are linted by a real `promtool check metrics` in the e2e tier
//! (`crates/proofline-cli/tests/promtool_lint.rs`).

use proofline_core::reader::LineFeeder;
use proofline_core::sink::{ExportCount, ExportCounters, TelemetryCounts, UpdateSink};
use proofline_core::{Engine, EngineConfig};
use proofline_prometheus::{Metrics, PrometheusSink};

/// Four jobs of two partitions on one GPU (the known-answer log of the core tests), plus a
/// proof kind that needs escaping.
const LOG: &str = concat!(
    include_str!("../../../tests/tests/data/four_jobs.log"),
    "TIMELINE,11000,SYNTH_START,winpost-1-x,kind=winning \"post\"\n",
    "TIMELINE,11500,SYNTH_END,winpost-1-x,synth_ms=500\n",
    "TIMELINE,11500,GPU_START,winpost-1-x,worker=2\n",
    "TIMELINE,11800,GPU_END,winpost-1-x,worker=2,gpu_ms=300\n",
);

fn rendered() -> std::sync::Arc<Metrics> {
    let metrics = Metrics::new();
    // an OTLP exporter's counters, registered in the run as the OTLP sink does
    let export = std::sync::Arc::new(ExportCounters::default());
    for (c, n) in [
        (ExportCount::TracesDropped, 2),
        (ExportCount::SpansExported, 36),
        (ExportCount::SpansFailed, 9),
        (ExportCount::LinksUnplaced, 1),
    ] {
        export.add(c, n);
    }
    let mut sink = PrometheusSink::new(metrics.clone());
    let run = proofline_core::RunInfo::new("golden", 0);
    run.exports.register(&export);
    sink.start_run(&run);
    let mut engine = Engine::new(EngineConfig::default());
    let mut feeder = LineFeeder::new();
    feeder
        .feed_all(&mut LOG.as_bytes(), &mut engine, &mut sink, |_| {})
        .unwrap();
    engine.finish(&mut sink);
    sink.tick(&engine.live(), &{
        let mut c = TelemetryCounts::default();
        c.events_dropped = 3;
        c.malformed_lines = 1;
        c
    });
    metrics
}

/// The classic text of `metrics` after the known-answer log, with no exporter and no tick
/// (what the tests of buckets and words compare).
fn fed(metrics: std::sync::Arc<Metrics>) -> String {
    let mut sink = PrometheusSink::new(metrics.clone());
    sink.start_run(&proofline_core::RunInfo::new("fed", 0));
    let mut engine = Engine::new(EngineConfig::default());
    LineFeeder::new()
        .feed_all(&mut LOG.as_bytes(), &mut engine, &mut sink, |_| {})
        .unwrap();
    engine.finish(&mut sink);
    metrics.render_classic()
}

/// Families keep their series in a hash map: sort each family's sample lines so that the
/// comparison does not depend on hashing order (the metadata lines stay in front).
fn normalize(text: &str) -> String {
    let mut out = String::new();
    let mut samples: Vec<&str> = Vec::new();
    let flush = |samples: &mut Vec<&str>, out: &mut String| {
        samples.sort_unstable();
        for s in samples.drain(..) {
            out.push_str(s);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with("# HELP ") || line == "# EOF" {
            flush(&mut samples, &mut out);
        }
        if line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
        } else {
            samples.push(line);
        }
    }
    flush(&mut samples, &mut out);
    out
}

fn check(name: &str, actual: &str) {
    let actual = normalize(actual);
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (UPDATE_GOLDEN=1 writes it)"));
    assert_eq!(
        actual, expected,
        "{name} differs from its golden file (UPDATE_GOLDEN=1 rewrites it after review)"
    );
}

#[test]
fn classic_text_matches_its_golden_file() {
    check("known_answers.prom", &rendered().render_classic());
}

#[test]
fn openmetrics_text_matches_its_golden_file_with_exemplars() {
    let text = rendered().render_openmetrics();
    check("known_answers.om.txt", &text);
    assert!(text.ends_with("# EOF\n"));
    // the cross-sector gap before c carries c's trace id
    let c = proofline_core::ids::trace_id("golden@0", 0, "c", 0).to_string();
    assert!(
        text.contains(&format!("# {{trace_id=\"{c}\"}} 1.0")),
        "no exemplar for c:\n{text}"
    );
}

#[test]
fn the_numbers_are_the_engines() {
    let text = rendered().render_classic();
    let value = |series: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(series))
            .unwrap_or_else(|| panic!("no {series}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(
        value("proofline_gpu_busy_seconds_total{gpu=\"0\"}"),
        7.0,
        "union, not the 9.3 s sum"
    );
    assert_eq!(
        value("proofline_gpu_idle_gap_seconds_count{boundary=\"cross_sector\"}"),
        2.0
    );
    assert_eq!(
        value("proofline_gpu_idle_gap_seconds_sum{boundary=\"cross_sector\"}"),
        1.5
    );
    assert_eq!(
        value("proofline_gpu_idle_gap_seconds_count{boundary=\"intra_sector\"}"),
        1.0
    );
    // per GPU, the idle time of its gaps by boundary
    assert_eq!(
        value("proofline_gpu_gap_idle_seconds_total{gpu=\"0\",boundary=\"cross_sector\"}"),
        1.5
    );
    // transitions -0.5, 1 and 0.5 s: two waits (1.5 s) and one overlap (0.5 s), each in a
    // histogram of its own, so that no histogram has a negative observation
    assert_eq!(value("proofline_sector_transition_gap_seconds_count"), 2.0);
    assert_eq!(value("proofline_sector_transition_gap_seconds_sum"), 1.5);
    assert_eq!(
        value("proofline_sector_transition_overlap_seconds_count"),
        1.0
    );
    assert_eq!(
        value("proofline_sector_transition_overlap_seconds_sum"),
        0.5
    );
    assert_eq!(
        value("proofline_sector_transition_overlap_seconds_bucket{le=\"0.5\"}"),
        1.0
    );
    // leads 1 and 0.5 s ahead, 0.2 s behind
    assert_eq!(value("proofline_synthesis_lead_seconds_sum"), 1.5);
    assert_eq!(value("proofline_synthesis_lag_seconds_sum"), 0.2);
    assert_eq!(value("proofline_synthesis_lag_seconds_count"), 1.0);
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        let name = line.split(['{', ' ']).next().unwrap();
        if name.ends_with("_sum") || name.ends_with("_bucket") || name.ends_with("_count") {
            assert!(v >= 0.0, "a histogram with a negative observation: {line}");
        }
    }
    assert_eq!(
        value("proofline_proofs_completed_total{proof_kind=\"unknown\"}"),
        4.0
    );
    assert_eq!(
        value("proofline_proofs_completed_total{proof_kind=\"winning \\\"post\\\"\"}"),
        1.0
    );
    assert_eq!(value("proofline_events_dropped_total"), 3.0);
    assert_eq!(value("proofline_malformed_lines_total"), 1.0);
    // the last completed job that found its GPU idle for at least 1 s: c (8000 - 2000; its
    // partition count is unknown, so it completes when the log ends); d found it idle for
    // 500 ms only, queued behind c: no cold start
    assert_eq!(value("proofline_cold_start_seconds"), 6.0);
    // seconds per proof over the completions, earliest to latest whatever their order:
    // a 3500, b 7000, winpost 11800, c 9000 and d 10500 at the end: (11800 - 3500) / 4
    assert_eq!(value("proofline_seconds_per_proof"), 2.075);
}

/// cuzk serves its metrics as hand-built text from its `GetMetrics` RPC (no `/metrics`): a
/// prover that adds proofline's metrics to that text appends `render_classic()` to its own.
/// cuzk's own `/metrics` text (`cuzk_getmetrics.prom`: the names and types of curio
/// e0294b0f's cuzk-server service.rs, made-up values) joined with proofline's defines no
/// family twice; promtool lints the joined text in the e2e tier.
#[test]
fn cuzk_getmetrics_text_joined_with_proofline_defines_no_family_twice() {
    let cuzk = std::fs::read_to_string(format!(
        "{}/tests/golden/cuzk_getmetrics.prom",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let joined = format!("{cuzk}{}", rendered().render_classic());
    let mut families: Vec<&str> = joined
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let n = families.len();
    families.sort_unstable();
    families.dedup();
    assert_eq!(families.len(), n, "a family defined twice");
    assert!(
        families
            .iter()
            .all(|f| f.starts_with("cuzk_") || f.starts_with("proofline_"))
    );
}

/// Buckets of a prover of another size: the exposition has its bounds, and the engine's
/// observations fall in them; bounds that cannot be a histogram's are refused by name.
#[test]
fn buckets_of_the_provers_own_size() {
    use proofline_prometheus::Buckets;
    let text = fed(Metrics::with_buckets(Buckets::default().job(vec![1.0, 2.5, 4.0])).unwrap());
    let les: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("proofline_sector_seconds_bucket{") && l.contains("kind=\"unknown\"")
        })
        .map(|l| l.split("le=\"").nth(1).unwrap().split('"').next().unwrap())
        .collect();
    assert_eq!(les, ["1.0", "2.5", "4.0", "+Inf"], "{text}");
    // the others keep cuzk's
    assert!(
        text.contains(
            "proofline_gpu_idle_gap_seconds_bucket{le=\"300.0\",boundary=\"cross_sector\"}"
        )
    );
    for (b, want) in [
        (Buckets::default().job(vec![]), "buckets of `job`: 0 bounds"),
        (
            Buckets::default().stage(vec![1.0, 0.5]),
            "buckets of `stage`: bounds not increasing: 1 then 0.5",
        ),
        (
            Buckets::default().idle_gap(vec![0.1, f64::INFINITY]),
            "buckets of `idle_gap`: bound inf",
        ),
        (
            Buckets::default().cold_start((1..=11).map(f64::from).collect()),
            "buckets of `cold_start`: 11 bounds",
        ),
    ] {
        let err = Metrics::with_buckets(b).unwrap_err().to_string();
        assert!(err.starts_with(want), "{err}");
    }
}

/// The metric reference (docs/metrics.md) names every metric the registry exposes, and
/// nothing else.
#[test]
fn the_metric_reference_table_is_what_the_registry_exposes() {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/metrics.md"
    ))
    .unwrap();
    let documented: std::collections::BTreeSet<String> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `proofline_"))
        .filter_map(|l| l.split('`').next())
        .map(|n| format!("proofline_{n}"))
        .collect();
    let text = rendered().render_classic();
    let exposed: std::collections::BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let mut it = l.split(' ');
            let (name, kind) = (it.next().unwrap(), it.next().unwrap());
            if kind == "counter" && !name.ends_with("_total") {
                format!("{name}_total")
            } else {
                name.to_owned()
            }
        })
        .collect();
    // a family shows once it has a series: the folding counter has none until a label
    // value is folded, the interval source none unless span edges give the GPU intervals;
    // the known-answer log does neither
    assert_eq!(
        documented.difference(&exposed).collect::<Vec<_>>(),
        vec![
            "proofline_gpu_interval_source",
            "proofline_label_values_folded_total"
        ],
        "in docs/metrics.md, not exposed"
    );
    assert_eq!(
        exposed.difference(&documented).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "exposed, not in docs/metrics.md's table"
    );
}

/// A prover of batches of segments reads its own words in every HELP text that named a
/// sector or a partition; the metric names and the label values stay cuzk's; cuzk's own
/// text is the golden file's (the tests above).
#[test]
fn help_texts_in_the_provers_own_words() {
    use proofline_core::Nouns;
    use proofline_prometheus::Buckets;
    let cuzk = fed(Metrics::new());
    let batch = fed(Metrics::with_buckets_and_nouns(
        Buckets::default(),
        &Nouns::new("batch", "segment"),
    )
    .unwrap());
    let helps = |text: &str| -> Vec<(String, String)> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# HELP "))
            .map(|l| {
                let (name, help) = l.split_once(' ').unwrap();
                (name.to_owned(), help.to_owned())
            })
            .collect()
    };
    let (ours, theirs) = (helps(&cuzk), helps(&batch));
    assert_eq!(ours.len(), theirs.len());
    let mut changed = 0;
    for ((name, c), (name2, b)) in ours.iter().zip(&theirs) {
        assert_eq!(name, name2, "the same families in the same order");
        // cuzk's words gone, except in the label value `cross_sector`
        let scrubbed = b.replace("cross_sector", "");
        for word in ["sector", "Sector", "partition", "Partition"] {
            assert!(!scrubbed.contains(word), "{name}: {b}");
        }
        if c != b {
            changed += 1;
            assert!(
                b.contains("batch")
                    || b.contains("Batch")
                    || b.contains("segment")
                    || b.contains("Segment"),
                "{name}: {b}"
            );
        }
    }
    assert!(changed >= 12, "{changed} HELP texts in the prover's words");
    assert!(batch.contains(
        "# HELP proofline_sector_transition_gap_seconds Batch transitions where the GPU waited: first GPU_START of batch N+1 minus last GPU_END of batch N"
    ), "{batch}");
    // the samples are the same, byte for byte (a family's series in any order)
    let samples = |t: &str| -> std::collections::BTreeSet<String> {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(samples(&cuzk), samples(&batch));
    assert!(batch.contains("boundary=\"cross_sector\""));
}
