//! Jaeger, as an operator sees it: traces sent over OTLP/gRPC to `otlp-embedded` (an
//! in-memory collector that serves Jaeger's own web UI and query API), read back through the
//! query API, and opened in Jaeger's UI in headless Chromium. Three ways in: `proofline
//! replay` of an old log, the live exporter of `proofline demo`, and an exemplar that a real
//! Prometheus scraped from `proofline watch`, followed as Grafana follows it (the data source
//! provisioning of deploy/ read for the label and the URL).
//!
//! One adjustment is made to what otlp-embedded serves, so that the UI sees what a real
//! Jaeger serves: in a span's `references`, the parent (CHILD_OF) is put first. Jaeger's own
//! OTLP translator does that ("usually backends look for it as the first CHILD_OF item"),
//! Jaeger's UI takes `references[0]` as the parent, and otlp-embedded lists a span's links
//! first. Nothing else is touched: a root whose only reference points into another trace
//! (where proofline used to put the sector-to-sector link) still reads as a missing parent.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{
    Proc, assert_not_blank, free_port, fresh_dir, generated_log, http_get, prometheus, proofline,
    urlencode,
};

fn tmp(name: &str) -> PathBuf {
    fresh_dir("jaeger", name)
}

/// otlp-embedded: Jaeger's UI and query API at `ui`, OTLP/gRPC at `grpc`.
struct Jaeger {
    ui: String,
    grpc: String,
    _rt: tokio::runtime::Runtime,
}

impl Jaeger {
    fn start() -> Jaeger {
        use otlp_embedded::{Config, State, TraceServiceImpl, TraceServiceServer, ui_app};
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let state = State::new(Config {
            max_length: 10_000,
            max_memory_usage: 1 << 28,
        });
        let ui = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let ui_addr = ui.local_addr().unwrap();
        let app = ui_app(state.clone(), "/").layer(axum::middleware::from_fn(parent_first));
        rt.spawn(async move { axum::serve(ui, app).await });
        let grpc_port = free_port();
        rt.spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(TraceServiceImpl::new(state)))
                .serve(([127, 0, 0, 1], grpc_port).into()),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", grpc_port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the gRPC collector did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Jaeger {
            ui: ui_addr.to_string(),
            grpc: format!("http://127.0.0.1:{grpc_port}"),
            _rt: rt,
        }
    }

    fn api(&self, path: &str) -> Value {
        let (status, _, body) = http_get(&self.ui, path, None).unwrap();
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// The complete traces of `service`, waiting until there are `n`.
    fn traces(&self, service: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let v = self.api(&format!(
                "/api/traces?service={}&limit=1000",
                urlencode(service)
            ));
            let traces = v["data"].as_array().unwrap().clone();
            if traces.len() >= n {
                assert_eq!(traces.len(), n, "more traces than sent");
                return traces;
            }
            assert!(
                Instant::now() < deadline,
                "{service}: {} of {n} traces",
                traces.len()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Puts each span's CHILD_OF reference first in the query API's answers, as Jaeger does.
async fn parent_first(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let api = req.uri().path().starts_with("/api/traces");
    let res = next.run(req).await;
    if !api {
        return res;
    }
    let (parts, body) = res.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) else {
        return axum::response::Response::from_parts(parts, axum::body::Body::from(bytes));
    };
    for t in v["data"].as_array_mut().into_iter().flatten() {
        for s in t["spans"].as_array_mut().into_iter().flatten() {
            if let Some(r) = s["references"].as_array_mut() {
                r.sort_by_key(|r| r["refType"] != "CHILD_OF");
            }
        }
    }
    let mut parts = parts;
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    axum::response::Response::from_parts(parts, axum::body::Body::from(v.to_string()))
}

fn spans(trace: &Value) -> &Vec<Value> {
    trace["spans"].as_array().unwrap()
}

fn tag<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["tags"]
        .as_array()?
        .iter()
        .find(|t| t["key"] == key)
        .map(|t| &t["value"])
}

fn refs(span: &Value) -> Vec<(String, String, String)> {
    span["references"]
        .as_array()
        .map(|r| {
            r.iter()
                .map(|r| {
                    (
                        r["refType"].as_str().unwrap().to_owned(),
                        r["traceID"].as_str().unwrap().to_owned(),
                        r["spanID"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The span without a parent in its trace.
fn root(trace: &Value) -> &Value {
    let roots: Vec<&Value> = spans(trace)
        .iter()
        .filter(|s| !refs(s).iter().any(|(t, ..)| t == "CHILD_OF"))
        .collect();
    assert_eq!(roots.len(), 1, "one root per trace");
    roots[0]
}

/// What Chromium shows of a page of the UI: the DOM after scripts ran, and the console
/// lines. `shot`: also a screenshot there.
fn open(ui: &str, path: &str, profile: &Path, shot: Option<&Path>) -> (String, Vec<String>) {
    // bounded: a browser that hangs fails the test instead of holding CI
    let mut cmd = Command::new("timeout");
    cmd.args([
        "--kill-after=5",
        "60",
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1600,1000",
        "--virtual-time-budget=8000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    match shot {
        Some(png) => cmd.arg(format!("--screenshot={}", png.display())),
        None => cmd.arg("--dump-dom"),
    };
    let out = cmd
        .arg(format!("http://{ui}{path}"))
        .stdin(Stdio::null())
        .output()
        .expect("timeout (coreutils) not found");
    assert!(
        out.status
            .code()
            .is_some_and(|c| c != 124 && c != 137 && c != 127),
        "chromium did not finish within 60 s, or is not installed (scripts/test.sh installs it): {:?}",
        out.status
    );
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_owned)
        .collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

/// A page's text, tags removed (`tight`, as words read: "porep-c2 porep-1000-4") and
/// replaced by spaces (`spaced`, for labels and values in separate elements).
fn text(dom: &str) -> (String, String) {
    let mut tight = String::new();
    let mut spaced = String::new();
    let mut in_tag = false;
    let mut skip = None::<&str>;
    let mut rest = dom;
    while let Some(c) = rest.chars().next() {
        if let Some(end) = skip {
            match rest.find(end) {
                Some(i) => rest = &rest[i + end.len()..],
                None => break,
            }
            skip = None;
            continue;
        }
        if rest.starts_with("<script") {
            skip = Some("</script>");
            continue;
        }
        if rest.starts_with("<style") {
            skip = Some("</style>");
            continue;
        }
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                spaced.push(' ');
            }
            _ if !in_tag => {
                tight.push(c);
                spaced.push(c);
            }
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    (squeeze(&tight), squeeze(&spaced))
}

/// Opens `/trace/<id>` and checks what an operator must see there: the root's name, every
/// span name given, the span count, no console error, no mark of a broken trace.
fn check_trace_page(jaeger: &Jaeger, profile: &Path, trace: &Value, names: &[&str]) {
    let id = trace["traceID"].as_str().unwrap();
    let op = root(trace)["operationName"].as_str().unwrap();
    let (dom, console) = open(&jaeger.ui, &format!("/trace/{id}"), profile, None);
    let (tight, spaced) = text(&dom);
    assert!(tight.contains(op), "{id}: `{op}` not on the page: {spaced}");
    assert!(
        spaced.contains(&format!("Total Spans {}", spans(trace).len())),
        "{id}: {spaced}"
    );
    for name in names {
        assert!(
            tight.contains(name),
            "{id}: no `{name}` on the page: {spaced}"
        );
    }
    for broken in ["ncomplete", "missing", "invalid parent", "orphan"] {
        assert!(
            !spaced.to_lowercase().contains(broken),
            "{id}: `{broken}` on the page: {spaced}"
        );
    }
    assert!(errors(&console).is_empty(), "{id}: console: {console:?}");
}

/// The console lines that report errors (Chromium logs every level alike; the UI's charts
/// warn about their size in a headless window, which is not an error).
fn errors(console: &[String]) -> Vec<&String> {
    console
        .iter()
        .filter(|l| {
            let l = l.to_lowercase();
            l.contains("error") || l.contains("uncaught") || l.contains("failed")
        })
        .collect()
}

#[test]
fn replayed_sectors_open_in_jaegers_ui_whole_and_linked() {
    let dir = tmp("replay");
    let jaeger = Jaeger::start();
    let log = generated_log(&dir, &["--jobs", "5"]);
    let out = proofline()
        .args(["replay", "--protocol", "grpc", "--endpoint", &jaeger.grpc])
        .args(["--epoch", "2026-11-30T01:31:00Z"])
        .arg(&log)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // the query API: one trace per sector, whole
    assert_eq!(
        jaeger.api("/api/services")["data"],
        serde_json::json!(["cuzk"])
    );
    let traces = jaeger.traces("cuzk", 5);
    let by_job = |i: usize| {
        traces
            .iter()
            .find(|t| root(t)["operationName"] == format!("porep-c2 porep-1000-{i}"))
            .unwrap_or_else(|| panic!("no trace for porep-1000-{i}"))
    };
    for i in 0..5 {
        let t = by_job(i);
        let r = root(t);
        assert_eq!(tag(r, "partitions.done"), Some(&serde_json::json!(10)));
        assert!(tag(r, "wall_ms").is_some_and(|v| v.as_i64().unwrap() > 0));
        let partitions: Vec<&Value> = spans(t)
            .iter()
            .filter(|s| {
                s["operationName"]
                    .as_str()
                    .unwrap()
                    .starts_with("partition ")
            })
            .collect();
        assert_eq!(partitions.len(), 10);
        for p in partitions {
            assert!(refs(p).contains(&(
                "CHILD_OF".into(),
                t["traceID"].as_str().unwrap().into(),
                r["spanID"].as_str().unwrap().into()
            )));
            let mut stages: Vec<&str> = spans(t)
                .iter()
                .filter(|s| {
                    refs(s)
                        .iter()
                        .any(|(k, _, id)| k == "CHILD_OF" && *id == p["spanID"])
                })
                .map(|s| s["operationName"].as_str().unwrap())
                .collect();
            stages.sort_unstable();
            assert_eq!(stages, ["gpu", "lock_wait", "queue", "synthesis"]);
        }
        let previous: Vec<&Value> = spans(t)
            .iter()
            .filter(|s| s["operationName"] == "previous sector")
            .collect();
        if i == 0 {
            assert!(previous.is_empty());
            assert_eq!(spans(t).len(), 51);
            continue;
        }
        // the link to the sector before: on a child of the root, followable to its root
        assert_eq!(previous.len(), 1);
        assert_eq!(spans(t).len(), 52);
        let before = by_job(i - 1);
        let link = (
            "FOLLOWS_FROM".to_owned(),
            before["traceID"].as_str().unwrap().to_owned(),
            root(before)["spanID"].as_str().unwrap().to_owned(),
        );
        let parent = (
            "CHILD_OF".to_owned(),
            t["traceID"].as_str().unwrap().to_owned(),
            r["spanID"].as_str().unwrap().to_owned(),
        );
        assert_eq!(refs(previous[0]), vec![parent, link]);
        assert!(tag(r, "transition.gap_ms").is_some());
    }

    // the UI: every sector's page shows its spans, whole
    let profile = dir.join("profile");
    for i in 0..5 {
        let mut names = vec![
            "partition 0",
            "partition 9",
            "synthesis",
            "lock_wait",
            "gpu",
        ];
        if i > 0 {
            names.push("previous sector");
        }
        check_trace_page(&jaeger, &profile, by_job(i), &names);
    }
    // the search page lists the five, none marked
    let (dom, console) = open(&jaeger.ui, "/search?service=cuzk&limit=20", &profile, None);
    let (tight, spaced) = text(&dom);
    assert!(spaced.contains("5 Traces"), "{spaced}");
    for i in 0..5 {
        assert!(
            tight.contains(&format!("porep-c2 porep-1000-{i}")),
            "{spaced}"
        );
    }
    assert!(!spaced.to_lowercase().contains("ncomplete"), "{spaced}");
    assert!(errors(&console).is_empty(), "{console:?}");

    // a picture of a sector, for the README (PROOFLINE_SCREENSHOTS=DIR keeps it)
    let png_path = dir.join("jaeger-trace.png");
    let id = by_job(1)["traceID"].as_str().unwrap();
    open(
        &jaeger.ui,
        &format!("/trace/{id}"),
        &profile,
        Some(&png_path),
    );
    assert_not_blank(&png_path);
    if let Some(keep) = std::env::var_os("PROOFLINE_SCREENSHOTS") {
        std::fs::copy(&png_path, Path::new(&keep).join("jaeger-trace.png")).unwrap();
    }
}

#[test]
fn live_traces_reach_the_ui_and_an_exemplar_leads_to_its_sector() {
    let dir = tmp("live");
    let jaeger = Jaeger::start();
    let profile = dir.join("profile");
    let otel = |cmd: &mut Command, service: &str| {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &jaeger.grpc)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            .env("OTEL_SERVICE_NAME", service)
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL");
    };

    // the demo's live layer, over gRPC
    let mut demo = proofline();
    demo.args([
        "demo",
        "--speed",
        "100",
        "--jobs",
        "2",
        "--no-metrics",
        "--out",
    ])
    .arg(dir.join("demo"));
    otel(&mut demo, "cuzk-demo");
    let out = demo.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let traces = jaeger.traces("cuzk-demo", 2);
    for t in &traces {
        check_trace_page(&jaeger, &profile, t, &["partition 0", "gpu"]);
    }

    // watch: traces to Jaeger, metrics to a real Prometheus keeping exemplars
    let log = generated_log(&dir, &["--jobs", "4"]);
    let port = free_port();
    let mut watch = proofline();
    watch
        .args(["watch", "--from-start", "--poll-ms", "50", "--metrics-addr"])
        .arg(format!("127.0.0.1:{port}"))
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    otel(&mut watch, "cuzk-watch");
    let _watch = Proc(watch.spawn().unwrap());
    let (_prom, api) = prometheus(
        &dir,
        "prometheus",
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: proofline\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
        &["--enable-feature=exemplar-storage"],
    );
    let sectors = jaeger.traces("cuzk-watch", 4);

    // Grafana's way from an exemplar to a trace: the label and the data source deploy/
    // provisions
    let ds: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../deploy/grafana/provisioning/datasources/datasources.yml"),
        )
        .unwrap(),
    )
    .unwrap();
    let sources = ds["datasources"].as_array().unwrap();
    let site = sources.iter().find(|d| d["uid"] == "prometheus").unwrap();
    let dest = &site["jsonData"]["exemplarTraceIdDestinations"][0];
    let label = dest["name"].as_str().unwrap();
    let target = sources
        .iter()
        .find(|d| d["uid"] == dest["datasourceUid"])
        .expect("the exemplar destination is a provisioned data source");
    assert_eq!(target["type"], "jaeger");
    let url = target["url"].as_str().unwrap();
    // the compose file's Jaeger, here otlp-embedded: same scheme and path, our address
    let base = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once(':').map(|(_, port_path)| port_path))
        .and_then(|port_path| {
            port_path
                .split_once('/')
                .map(|(_, p)| format!("/{p}"))
                .or(Some(String::new()))
        })
        .unwrap();
    let base = base.trim_end_matches('/');

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let deadline = Instant::now() + Duration::from_secs(40);
    let ids: Vec<String> = loop {
        let (status, _, body) = http_get(
            &api,
            &format!(
                "/api/v1/query_exemplars?query={}&start={}&end={}",
                urlencode("{__name__=~\"proofline_.+_bucket\"}"),
                now - 3600,
                now + 3600
            ),
            None,
        )
        .unwrap();
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        let found: Vec<(String, String)> = v["data"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| {
                let name = s["seriesLabels"]["__name__"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                s["exemplars"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(move |e| {
                        Some((name.clone(), e["labels"][label].as_str()?.to_owned()))
                    })
            })
            .collect();
        let ids: std::collections::BTreeSet<String> =
            found.iter().map(|(_, id)| id.clone()).collect();
        // a bucket shows its latest exemplar: the gap, lead and sector histograms name
        // at least two of the four sectors, one of them from a gap or lead histogram
        let from_gap_or_lead = found.iter().any(|(name, _)| {
            name.contains("gap")
                || name.contains("lead")
                || name.contains("overlap")
                || name.contains("lag")
        });
        if ids.len() >= 2 && from_gap_or_lead {
            break ids.into_iter().collect();
        }
        assert!(Instant::now() < deadline, "exemplars: {body}");
        std::thread::sleep(Duration::from_millis(300));
    };
    let known: std::collections::BTreeSet<&str> = sectors
        .iter()
        .map(|t| t["traceID"].as_str().unwrap())
        .collect();
    for id in &ids {
        assert!(
            known.contains(id.as_str()),
            "exemplar {id} names no trace Jaeger has"
        );
        // what Grafana's Jaeger data source asks, then the UI's page of the trace
        let v = jaeger.api(&format!("{base}/api/traces/{id}"));
        let t = &v["data"][0];
        assert_eq!(t["traceID"], id.as_str());
        check_trace_page(&jaeger, &profile, t, &["partition 0", "gpu"]);
    }
}
