//! /metrics behind TLS, basic auth and a client certificate, scraped by a real Prometheus
//! (e2e tier): the same figures as a plain scrape; a wrong password or no certificate is a
//! target down, said so.

use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::tls::*;
use common::{http_get, prometheus, query};

#[test]
fn prometheus_scrapes_watch_over_tls_with_basic_auth_and_a_client_certificate() {
    let dir = tmp("prometheus");
    let pki = Pki::new(&dir);
    let log = two_gpu_log(&dir, 6);
    // deploy/tls's two files, with the test's certificates under the names they use
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/tls");
    for (copy, of) in [
        ("prover.crt", "server.crt"),
        ("prover.key", "server.key"),
        ("clients-ca.crt", "ca.crt"),
        ("provers-ca.crt", "ca.crt"),
        ("prometheus.crt", "client.crt"),
        ("prometheus.key", "client.key"),
    ] {
        std::fs::copy(pki.path(of), dir.join(copy)).unwrap();
    }
    std::fs::write(dir.join("password"), "s3cret").unwrap();
    let hash = bcrypt::hash("s3cret", 8).unwrap();
    let web = dir.join("web-config.yml");
    let text = std::fs::read_to_string(deploy.join("web-config.yml")).unwrap();
    assert!(text.contains("REPLACE-WITH-A-BCRYPT-HASH"));
    std::fs::write(
        &web,
        text.replace("REPLACE-WITH-A-BCRYPT-HASH", &format!("'{hash}'")),
    )
    .unwrap();
    let job = std::fs::read_to_string(deploy.join("prometheus-job.yml"))
        .unwrap()
        .replace("/etc/prometheus/tls/", &format!("{}/", dir.display()))
        .replace("job_name: proofline", "job_name: tls");
    let job: String = job.lines().map(|l| format!("  {l}\n")).collect();
    let (_w1, secure) = watch(&log, Some(&web));
    let (_w2, plain) = watch(&log, None);

    // straight over rustls: the password, the client certificate and TLS itself are required,
    // on every path
    let right = Client {
        auth: Some(("prometheus", "s3cret")),
        ..WITH_CERT
    };
    let ok = https_get(secure, &pki, "/metrics", right).unwrap().0;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let wrong = Client {
        auth: Some(("prometheus", "guess")),
        ..WITH_CERT
    };
    let denied = https_get(secure, &pki, "/metrics", wrong).unwrap().0;
    assert!(denied.starts_with("HTTP/1.1 401"), "{denied}");
    assert!(
        denied
            .to_ascii_lowercase()
            .contains("www-authenticate: basic realm=\"proofline\""),
        "{denied}"
    );
    let none = https_get(secure, &pki, "/metrics", WITH_CERT).unwrap().0;
    assert!(none.starts_with("HTTP/1.1 401"), "{none}");
    let health = https_get(secure, &pki, "/healthz", WITH_CERT).unwrap().0;
    assert!(health.starts_with("HTTP/1.1 401"), "{health}");
    let health = https_get(secure, &pki, "/healthz", right).unwrap().0;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let no_cert = https_get(
        secure,
        &pki,
        "/metrics",
        Client {
            cert: None,
            ..right
        },
    );
    assert!(
        no_cert
            .as_ref()
            .is_err_and(|e| e.to_lowercase().contains("certificaterequired")),
        "{no_cert:?}"
    );
    let (status, _, body) = http_get(&format!("127.0.0.1:{secure}"), "/metrics", None)
        .expect("plain HTTP to the TLS port is answered");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("use https://"), "{body}");
    // and the endpoint counts what it refused: three 401s, two failed handshakes
    let body = https_get(secure, &pki, "/metrics", right).unwrap().0;
    let refused = |reason: &str| -> f64 {
        let prefix = format!("proofline_metrics_requests_refused_total{{reason=\"{reason}\"}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {prefix}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(refused("unauthorized"), 3.0);
    assert_eq!(refused("tls_handshake"), 2.0);
    assert_eq!(refused("too_many_checks"), 0.0);

    let tls = |user: &str, password: &str, client_cert: bool| {
        let cert = if client_cert {
            format!(
                "\n      cert_file: {}\n      key_file: {}",
                pki.path("client.crt").display(),
                pki.path("client.key").display()
            )
        } else {
            String::new()
        };
        format!(
            "    scheme: https\n    tls_config:\n      ca_file: {}\n      server_name: localhost{cert}\n    basic_auth:\n      username: {user}\n      password: {password}\n",
            pki.path("ca.crt").display()
        )
    };
    let target =
        |port: u16| format!("    static_configs:\n      - targets: ['127.0.0.1:{port}']\n");
    std::fs::create_dir_all(dir.join("targets")).unwrap();
    std::fs::write(
        dir.join("targets/provers.yml"),
        format!("- targets: ['127.0.0.1:{secure}']\n"),
    )
    .unwrap();
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n{job}  - job_name: plain\n{}  - job_name: wrong_password\n{}{}  - job_name: no_client_cert\n{}{}",
        target(plain),
        tls("prometheus", "guess", true),
        target(secure),
        tls("prometheus", "s3cret", false),
        target(secure),
    );
    let (_prom, api) = prometheus(&dir, "prometheus", &config, &[]);

    // the same figures over TLS as over plain HTTP
    let deadline = Instant::now() + Duration::from_secs(60);
    let both = |expr: &str| {
        let f = |job: &str| query(&api, &expr.replace("JOB", job));
        (f("tls"), f("plain"))
    };
    loop {
        if let (Some(a), Some(b)) = both("sum(proofline_proofs_completed_total{job=\"JOB\"})") {
            if a >= 6.0 && b >= 6.0 {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no complete scrape: {:?}",
            targets(&api)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    for expr in [
        "sum(proofline_proofs_completed_total{job=\"JOB\"})",
        "max(proofline_seconds_per_proof{job=\"JOB\"})",
        "sum(proofline_gpu_busy_seconds_total{job=\"JOB\", gpu=\"0\"})",
        "sum(proofline_gpu_busy_seconds_total{job=\"JOB\", gpu=\"1\"})",
        "sum(proofline_gpu_idle_gap_seconds_count{job=\"JOB\"})",
    ] {
        // the same log, summed in tick-dependent order: equal but for float rounding
        let (a, b) = both(expr);
        assert!(
            a.zip(b)
                .is_some_and(|(a, b)| (a - b).abs() <= 1e-9 * a.abs().max(1.0)),
            "{expr}: tls {a:?}, plain {b:?}"
        );
    }
    assert_eq!(
        both("sum(proofline_proofs_completed_total{job=\"JOB\"})").0,
        Some(6.0)
    );

    // and the scrapes that must fail do, for the reason they must: a scrape's last error,
    // read until both say it (under load one scrape of the wrong password once failed in
    // its TLS handshake, "certificate required", and the next said 401)
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = targets(&api);
        let of = |job: &str| t.iter().find(|(j, ..)| j == job).cloned().unwrap();
        let (_, wrong_health, wrong_error) = of("wrong_password");
        let (_, cert_health, cert_error) = of("no_client_cert");
        let (_, tls_health, _) = of("tls");
        // (the status as Prometheus words it: the error also holds the target's URL, whose
        // port may hold "401", as 40145 once did)
        let unauthorized = |e: &str| e.contains("HTTP status 401");
        let wrong_for_its_password = wrong_health == "down" && unauthorized(&wrong_error);
        let no_cert_at_tls =
            cert_health == "down" && cert_error.contains("tls:") && !unauthorized(&cert_error);
        if wrong_for_its_password && no_cert_at_tls {
            assert_eq!(tls_health, "up");
            break;
        }
        assert!(Instant::now() < deadline, "targets: {t:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}
