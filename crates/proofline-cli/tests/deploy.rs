//! deploy/: the Prometheus config, rules and alert tests, the Grafana dashboards and data
//! sources, and the compose file, checked by the real tools (promtool from Debian's prometheus
//! package; Python's jsonschema against Grafana's published dashboard schema and against the
//! Compose Specification's schema as Debian's docker-compose package ships it).

use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (scripts/test.sh installs what the tests need)"));
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn prometheus_config_and_rules_pass_promtool() {
    let d = deploy().join("prometheus");
    let (ok, out) = run(Command::new("promtool")
        .arg("check")
        .arg("config")
        .arg(d.join("site.yml"))
        .arg(d.join("global.yml")));
    assert!(ok, "{out}");
    let (ok, out) = run(Command::new("promtool")
        .args(["check", "rules"])
        .arg(d.join("rules.yml"))
        .arg(d.join("alerts.yml")));
    assert!(ok, "{out}");
    let alerts = std::fs::read_to_string(d.join("alerts.yml")).unwrap();
    let n = alerts
        .lines()
        .filter(|l| l.trim().starts_with("- alert: "))
        .count();
    assert!(n >= 6, "alerts.yml has {n} alerts");
    assert!(
        out.contains(&format!(
            "Checking {}\n  SUCCESS: {n} rules found",
            d.join("alerts.yml").display()
        )),
        "{out}"
    );
}

#[test]
fn every_alert_fires_where_it_must_and_not_elsewhere() {
    let d = deploy().join("prometheus");
    let (ok, out) = run(Command::new("promtool")
        .args(["test", "rules"])
        .arg(d.join("tests/alerts_test.yml"))
        .arg(d.join("tests/rules_test.yml")));
    assert!(ok, "{out}");
    // every recording rule has a test
    let rules = std::fs::read_to_string(d.join("rules.yml")).unwrap();
    let rule_tests = std::fs::read_to_string(d.join("tests/rules_test.yml")).unwrap();
    for name in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record: "))
    {
        assert!(
            rule_tests.contains(&format!("- expr: {name}\n")),
            "recording rule {name} has no promtool test"
        );
    }
    // every alert has a test
    let alerts = std::fs::read_to_string(d.join("alerts.yml")).unwrap();
    let tests = std::fs::read_to_string(d.join("tests/alerts_test.yml")).unwrap();
    for line in alerts
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        assert!(
            tests.contains(&format!("alertname: {line}")),
            "alert {line} has no promtool test"
        );
    }
}

#[test]
fn the_dashboards_are_valid_and_their_queries_parse() {
    let (ok, out) = run(Command::new("python3").arg(deploy().join("test/check_dashboards.py")));
    assert!(ok, "{out}");
    assert!(out.contains("2 dashboards"), "{out}");
}

/// A way to break a dashboard.
type Breakage = (&'static str, fn(&mut serde_json::Value));

/// The checker itself must fail on broken dashboards.
#[test]
fn the_dashboard_check_catches_broken_dashboards() {
    let src = deploy();
    let cases: [Breakage; 5] = [
        ("duplicate panel id", |d| {
            d["panels"][1]["id"] = d["panels"][0]["id"].clone()
        }),
        ("overlapping panels", |d| {
            d["panels"][1]["gridPos"] = d["panels"][0]["gridPos"].clone()
        }),
        ("query that does not parse", |d| {
            d["panels"][0]["targets"][0]["expr"] = "rate(proofline_gpu_busy_seconds_total[".into()
        }),
        ("not a Grafana dashboard", |d| {
            d["panels"][0]["gridPos"]["w"] = "wide".into()
        }),
        ("repeated refId", |d| {
            let t = d["panels"][0]["targets"][0].clone();
            d["panels"][0]["targets"].as_array_mut().unwrap().push(t);
        }),
    ];
    for (what, mutate) in cases {
        let dir = std::env::temp_dir().join(format!(
            "proofline-dash-{}-{}",
            std::process::id(),
            what.replace(' ', "-")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("grafana/dashboards")).unwrap();
        std::fs::create_dir_all(dir.join("grafana/schema")).unwrap();
        std::fs::create_dir_all(dir.join("test")).unwrap();
        std::fs::copy(
            src.join("test/check_dashboards.py"),
            dir.join("test/check_dashboards.py"),
        )
        .unwrap();
        std::fs::copy(
            src.join("grafana/schema/dashboard.schema.json"),
            dir.join("grafana/schema/dashboard.schema.json"),
        )
        .unwrap();
        let mut d: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(src.join("grafana/dashboards/prover.json")).unwrap(),
        )
        .unwrap();
        mutate(&mut d);
        std::fs::write(dir.join("grafana/dashboards/prover.json"), d.to_string()).unwrap();
        let (ok, out) = run(Command::new("python3").arg(dir.join("test/check_dashboards.py")));
        assert!(!ok, "the check passed a dashboard with a {what}:\n{out}");
    }
}

#[test]
fn the_committed_dashboards_are_what_the_generator_writes() {
    let d = deploy().join("grafana/dashboards");
    let out = std::env::temp_dir().join(format!("proofline-gen-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let (ok, msg) = run(Command::new("python3")
        .arg(deploy().join("grafana/gen_dashboards.py"))
        .arg(&out));
    assert!(ok, "{msg}");
    for f in ["prover.json", "fleet.json"] {
        assert_eq!(
            std::fs::read_to_string(d.join(f)).unwrap(),
            std::fs::read_to_string(out.join(f)).unwrap(),
            "deploy/grafana/dashboards/{f} differs from gen_dashboards.py's output: run it and commit"
        );
    }
}

/// The Compose Specification's JSON schema as Debian packages it (docker-compose's
/// `compose_spec.json`; scripts/test.sh extracts it), or `PROOFLINE_COMPOSE_SCHEMA`.
fn compose_schema() -> PathBuf {
    std::env::var_os("PROOFLINE_COMPOSE_SCHEMA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/compose-spec/compose_spec.json")
        })
}

/// Validates `compose` (YAML text) against the schema with Python's jsonschema.
fn compose_valid(compose: &str) -> (bool, String) {
    let schema = compose_schema();
    assert!(
        schema.is_file(),
        "{} missing: scripts/test.sh extracts it from Debian's docker-compose package",
        schema.display()
    );
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import json,sys,yaml,jsonschema; jsonschema.validate(yaml.safe_load(sys.stdin), json.load(open(sys.argv[1])))",
        ])
        .arg(&schema)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(compose.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_compose_file_follows_the_compose_specification_and_mounts_the_files_the_tests_check() {
    let text = std::fs::read_to_string(deploy().join("compose.yaml")).unwrap();
    let (ok, err) = compose_valid(&text);
    assert!(ok, "deploy/compose.yaml is not valid Compose: {err}");
    // the check can fail: a misspelt key is caught
    let (ok, _) = compose_valid(&text.replacen("    image:", "    imagee:", 1));
    assert!(!ok, "a misspelt key passed the schema");
    // every file or folder it mounts exists, and the configs it names are the tests' ones
    for line in text.lines().map(str::trim) {
        let Some(mount) = line.strip_prefix("- ./") else {
            continue;
        };
        let local = mount.split(':').next().unwrap();
        assert!(
            deploy().join(local).exists(),
            "compose mounts ./{local}, which is missing"
        );
    }
    for (flag, file) in [
        (
            "--config.file=/etc/prometheus/site.yml",
            "prometheus/site.yml",
        ),
        (
            "--config.file=/etc/prometheus/global.yml",
            "prometheus/global.yml",
        ),
        (
            "--config.file=/etc/alertmanager/alertmanager.yml",
            "alertmanager/alertmanager.yml",
        ),
    ] {
        assert!(text.contains(flag), "compose does not run {flag}");
        assert!(deploy().join(file).is_file(), "{file} missing");
    }
    assert!(text.contains("--web.enable-remote-write-receiver"));
}

/// The VictoriaMetrics variant: valid Compose over compose.yaml, its mounts there, and it
/// stands where the sites write and the fleet dashboard reads (the global Prometheus's name
/// and port), its vmalert on the alerts file the fleet runs.
#[test]
fn the_victoriametrics_override_takes_the_global_prometheus_s_place() {
    let text = std::fs::read_to_string(deploy().join("compose.victoriametrics.yaml")).unwrap();
    let (ok, err) = compose_valid(&text);
    assert!(
        ok,
        "deploy/compose.victoriametrics.yaml is not valid Compose: {err}"
    );
    let (ok, _) = compose_valid(&text.replacen("    command:", "    comand:", 1));
    assert!(!ok, "a misspelt key passed the schema");
    for line in text.lines().map(str::trim) {
        if let Some(mount) = line.strip_prefix("- ./") {
            let local = mount.split(':').next().unwrap();
            assert!(
                deploy().join(local).exists(),
                "it mounts ./{local}, which is missing"
            );
        }
    }
    let base = std::fs::read_to_string(deploy().join("compose.yaml")).unwrap();
    assert!(base.contains("\n  prometheus-global:\n") && text.contains("\n  prometheus-global:\n"));
    assert!(text.contains("- -httpListenAddr=:9090"));
    let site = std::fs::read_to_string(deploy().join("prometheus/site.yml")).unwrap();
    assert!(site.contains("url: http://prometheus-global:9090/api/v1/write"));
    assert!(text.contains("- -rule=/etc/prometheus/alerts.yml"));
    assert!(text.contains("- ./prometheus:/etc/prometheus:ro"));
    assert!(
        text.contains("- -notifier.url=http://alertmanager:9093")
            && base.contains("\n  alertmanager:\n")
    );
}

#[test]
fn grafana_sends_exemplars_to_the_jaeger_the_compose_file_runs() {
    let ds =
        std::fs::read_to_string(deploy().join("grafana/provisioning/datasources/datasources.yml"))
            .unwrap();
    // the exemplar label Grafana follows is the one proofline's exemplars carry
    assert!(ds.contains("- name: trace_id"), "{ds}");
    let exemplar_label = "trace_id";
    let om = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../proofline-prometheus/tests/golden/known_answers.om.txt"),
    )
    .unwrap();
    assert!(
        om.contains(&format!("# {{{exemplar_label}=\"")),
        "no {exemplar_label} exemplar"
    );
    // it leads to the Jaeger data source, whose URL is the Jaeger UI the compose file serves
    assert!(ds.contains("datasourceUid: jaeger"));
    assert!(
        ds.contains("uid: jaeger") && ds.contains("url: http://jaeger:16686"),
        "{ds}"
    );
    let compose = std::fs::read_to_string(deploy().join("compose.yaml")).unwrap();
    assert!(compose.contains("  jaeger:") && compose.contains(":16686:16686"));
    // the site Prometheus (with exemplar storage) is the default data source
    assert!(ds.contains("url: http://prometheus-site:9090"));
    assert!(
        compose.contains("  prometheus-site:")
            && compose.contains("--enable-feature=exemplar-storage")
    );
}

/// The sidecar's systemd unit, checked by systemd itself: `systemd-analyze verify` with no
/// warning (an unknown key is only a warning: none is allowed), and its hardening's exposure
/// by `systemd-analyze security` at most 2.0 ("OK") of 10.
fn check_unit(unit: &Path, binary: &Path, dir: &Path) {
    let text = std::fs::read_to_string(unit).unwrap();
    assert!(text.contains("ExecStart=/usr/bin/proofline watch --journal-unit"));
    let local = dir.join("proofline-watch.service");
    std::fs::write(
        &local,
        text.replace("/usr/bin/proofline", binary.to_str().unwrap()),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&local)
        .output()
        .expect("systemd-analyze (Debian's systemd package; scripts/test.sh installs it)");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
    let (ok, out) = run(Command::new("systemd-analyze")
        .args(["security", "--offline=yes"])
        .arg(&local));
    assert!(ok, "{out}");
    let exposure: f64 = out
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for proofline-watch.service: ")
                .nth(1)
        })
        .and_then(|l| l.split_whitespace().next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level: {out}"));
    assert!(exposure <= 2.0, "exposure {exposure}: {out}");
}

/// The Debian package, built by cargo-deb from the tested binary and installed with dpkg -i
/// into a private root: the binary runs from it, the unit it installs passes systemd's checks,
/// and its options file is a conffile (an operator's edits survive an upgrade).
#[test]
fn the_debian_package_installs_the_binary_and_a_hardened_sidecar_unit() {
    let dir = std::env::temp_dir().join(format!("proofline-deb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("var/lib/dpkg/info")).unwrap();
    std::fs::create_dir_all(root.join("var/lib/dpkg/updates")).unwrap();
    std::fs::write(root.join("var/lib/dpkg/status"), "").unwrap();
    // the check of the unit as it stands in deploy/ first: it needs no package
    check_unit(
        &deploy().join("systemd/proofline-watch.service"),
        Path::new(env!("CARGO_BIN_EXE_proofline")),
        &dir,
    );
    let deb = dir.join("proofline.deb");
    // the binary this test run built (cargo-deb warns that it is no release build)
    let (ok, out) = run(Command::new(env!("CARGO"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .args([
            "deb",
            "-p",
            "proofline-cli",
            "--no-build",
            "--profile",
            "dev",
            "-o",
        ])
        .arg(&deb));
    assert!(ok, "cargo deb (scripts/test.sh installs cargo-deb): {out}");
    let (ok, out) = run(Command::new("dpkg-deb").arg("--info").arg(&deb));
    assert!(ok, "{out}");
    assert!(
        out.contains("Package: proofline") && out.contains("conffiles"),
        "{out}"
    );
    let (ok, out) = run(Command::new("dpkg-deb")
        .args(["--field"])
        .arg(&deb)
        .arg("Depends"));
    assert!(ok && out.contains("systemd"), "{out}");
    let mut dpkg = Command::new("dpkg");
    dpkg.arg(format!("--root={}", root.display()))
        .args(["--force-depends", "--force-not-root", "-i"])
        .arg(&deb);
    let (ok, out) = run(&mut dpkg);
    assert!(ok, "dpkg -i: {out}");
    let (ok, out) = run(Command::new(root.join("usr/bin/proofline")).arg("--version"));
    assert!(ok && out.starts_with("proofline "), "{out}");
    let conffiles =
        std::fs::read_to_string(root.join("var/lib/dpkg/info/proofline.conffiles")).unwrap();
    assert_eq!(conffiles.trim(), "/etc/default/proofline");
    // the README's links into docs/ hold where the package puts it, and so do the unit's
    let doc = root.join("usr/share/doc/proofline");
    let readme = std::fs::read_to_string(doc.join("README.md")).unwrap();
    let pages: Vec<&str> = readme
        .split("](docs/")
        .skip(1)
        .map(|s| s.split([')', '#']).next().unwrap())
        .collect();
    assert!(pages.len() > 4, "{pages:?}");
    for page in pages {
        assert!(
            doc.join("docs").join(page).is_file(),
            "docs/{page} not installed"
        );
    }
    let unit =
        std::fs::read_to_string(root.join("lib/systemd/system/proofline-watch.service")).unwrap();
    for url in unit
        .lines()
        .filter_map(|l| l.strip_prefix("Documentation="))
        .flat_map(str::split_whitespace)
    {
        let path = url.strip_prefix("file://").unwrap();
        assert!(root.join(&path[1..]).is_file(), "{url} not installed");
    }
    check_unit(
        &root.join("lib/systemd/system/proofline-watch.service"),
        &root.join("usr/bin/proofline"),
        &dir,
    );
    let _ = std::fs::remove_dir_all(&dir);
}
