//! The layer with both exporters: one run for both sinks, so exemplars name received
//! traces; the recipe of docs/layer.md, a fresh crate, builds, runs and sends its traces.

use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::any_value::Value;

mod common;
use common::*;

/// One instance, one key: given both sinks, the layer wires them to the same run, so every
/// exemplar on /metrics names a trace the collector received; and the OTLP counters reach
/// /metrics without being wired by hand.
#[test]
fn the_layer_gives_both_sinks_one_run_so_exemplars_name_received_traces() {
    use proofline::TimelineLayer;

    let rx = HttpReceiver::start(Mode::Answer);
    // a run of its own: whatever it says, the layer's run wins
    let c = cfg(rx.endpoint());
    let (otlp, mut handle) = proofline_otlp::start(c).unwrap();
    let metrics = proofline_prometheus::Metrics::new();
    let (layer, mut guard) = TimelineLayer::builder()
        .instance("prover-7")
        .reorder_window(Duration::from_millis(1000))
        .no_timeline()
        .sink(otlp)
        .sink(proofline_prometheus::PrometheusSink::new(metrics.clone()))
        .build();
    assert!(guard.run().run_key.starts_with("prover-7@"));
    run_three_sectors_with_a_stall(layer);
    guard.shutdown(Duration::from_secs(10)).unwrap();
    handle.shutdown(Duration::from_secs(10)).unwrap();
    let received: std::collections::HashSet<String> = rx
        .got
        .spans()
        .iter()
        .map(|s| s.trace_id.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    assert_eq!(received.len(), 3, "a trace per sector");
    // the gpu stage spans say where their interval came from (cuzk's gpu_worker span)
    let spans = rx.got.spans();
    let gpu: Vec<_> = spans.iter().filter(|s| s.name == "gpu").collect();
    assert_eq!(gpu.len(), 30);
    assert!(gpu.iter().all(|s| matches!(
        attr(s, "proofline.gpu_interval_source"),
        Some(Value::StringValue(v)) if v.contains("`gpu_worker`")
    )));
    let text = metrics.render_openmetrics();
    let exemplars: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split("trace_id=\"").nth(1))
        .filter_map(|r| r.split('"').next())
        .collect();
    assert!(!exemplars.is_empty(), "{text}");
    for id in &exemplars {
        assert!(
            received.contains(*id),
            "exemplar {id} names no received trace"
        );
    }
    // the exporter's counters are published without with_export_counters
    assert!(
        text.contains("proofline_otlp_spans_exported_total 155"),
        "{}",
        text.lines()
            .filter(|l| l.contains("otlp"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// docs/layer.md's recipe is `examples/recipe`, a crate of its own: the page shows its files
/// verbatim, and it builds outside the workspace (so no feature another member enables can
/// hide one it lacks), runs, and sends a trace per sector to a real receiver.
#[test]
fn the_readme_recipe_is_a_fresh_crate_that_builds_runs_and_sends_its_traces() {
    use std::path::Path;
    use std::process::Command;

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    let readme = read(&root.join("docs/layer.md"));
    let recipe = root.join("examples/recipe");
    let main = read(&recipe.join("src/main.rs"));
    assert!(
        readme.contains(&format!("```rust\n{main}```")),
        "docs/layer.md's recipe is not examples/recipe/src/main.rs"
    );
    let toml = read(&recipe.join("Cargo.toml"));
    let deps =
        &toml[toml.find("\n[dependencies]").unwrap() + 1..toml.find("\n# This crate").unwrap()];
    assert!(
        readme.contains(&format!("```toml\n{}\n```", deps.trim_end())),
        "docs/layer.md's dependencies are not examples/recipe/Cargo.toml's:\n{deps}"
    );

    let target = root.join("target/recipe");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let build = Command::new(cargo)
        .args(["build", "--locked", "--quiet", "--manifest-path"])
        .arg(recipe.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "the recipe does not build:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let rx = HttpReceiver::start(Mode::Answer);
    let run = Command::new(target.join("debug/proofline-recipe"))
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rx.endpoint())
        .env("PROOFLINE_METRICS_ADDR", "127.0.0.1:0")
        .env_remove("RUST_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("jobs complete 2"), "{stdout}");
    assert!(!stderr.contains("proofline:"), "no warning: {stderr}");
    // 2 sectors x (root + 10 partitions x (partition + 4 stages)), and the second's
    // `previous sector` span
    let spans = rx.got.wait_for(103, 10);
    assert_eq!(spans.len(), 103);
}
