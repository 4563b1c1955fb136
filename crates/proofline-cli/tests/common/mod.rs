//! Helpers shared by the tests that start servers on 127.0.0.1.
#![allow(dead_code)] // each test file uses a part

pub mod journal;
pub mod tls;

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The `proofline` binary under test.
pub fn proofline() -> Command {
    Command::new(env!("CARGO_BIN_EXE_proofline"))
}

/// What a command that ran to its end left: its exit status code (`None` when a signal
/// ended it), its standard output and standard error (lossily UTF-8).
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` to its end and checks that it exited with `code` (0: success, 1: an error, 2:
/// a usage error); the message of a wrong status has its standard error.
#[track_caller]
pub fn ran(cmd: &mut Command, code: i32) -> Ran {
    let o = cmd.output().unwrap();
    let r = Ran {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert_eq!(r.code, Some(code), "{cmd:?}: {}", r.stderr);
    r
}

/// A fresh, empty directory `proofline-<file>-<pid>-<name>` under the temporary directory.
pub fn fresh_dir(file: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("proofline-{file}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `proofline generate ARGS -o DIR/cuzk.log`; the log's path.
pub fn generated_log(dir: &Path, args: &[&str]) -> PathBuf {
    let log = dir.join("cuzk.log");
    let st = proofline()
        .arg("generate")
        .args(args)
        .arg("-o")
        .arg(&log)
        .status()
        .unwrap();
    assert!(st.success());
    log
}

/// The text of a log of `jobs` PoRep jobs from `proofline generate`, made in a directory of
/// its own under `dir` (the test's log may be `dir/cuzk.log`).
pub fn generated_text(dir: &Path, jobs: u32) -> String {
    let sub = dir.join(format!("generated-{jobs}"));
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::read_to_string(generated_log(&sub, &["--jobs", &jobs.to_string()])).unwrap()
}

/// `proofline watch OPTS LOG` serving /metrics on a port of 127.0.0.1 of its choosing, once
/// it says where: the process, its stderr lines after that one, and the address
/// (`127.0.0.1:PORT`).
pub fn watch(
    opts: &[&str],
    log: impl AsRef<std::ffi::OsStr>,
) -> (Proc, mpsc::Receiver<String>, String) {
    let mut child = proofline()
        .args(["watch", "--metrics-addr", "127.0.0.1:0"])
        .args(opts)
        .arg(log)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let watch = Proc(child);
    let line = wait_line(&rx, "metrics on ");
    let addr = line
        .split_once("://")
        .and_then(|(_, r)| r.split_once('/'))
        .map(|(addr, _)| addr.to_string())
        .unwrap_or_else(|| panic!("{line}"));
    (watch, rx, addr)
}

/// `proofline analyze --format json LOG`, parsed.
pub fn analyze_json(log: &Path) -> serde_json::Value {
    analyze_json_with(&[], log)
}

/// `proofline analyze --format json ARGS LOG`, parsed.
pub fn analyze_json_with(args: &[&str], log: &Path) -> serde_json::Value {
    let out = proofline()
        .args(["analyze", "--format", "json"])
        .args(args)
        .arg(log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Reads a child's stderr lines on a thread.
pub fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// The first line containing `needle` within 20 s.
pub fn wait_line(rx: &mpsc::Receiver<String>, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(needle) => return l,
            Ok(_) => {}
            Err(_) => panic!("no stderr line containing {needle:?}"),
        }
    }
}

/// A browser's screenshot that is not blank: at least 1000 x 600 and many distinct colours.
pub fn assert_not_blank(png_path: &Path) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).expect("no screenshot"),
    ));
    let mut reader = decoder.read_info().unwrap();
    let size = reader
        .output_buffer_size()
        .expect("a screenshot of sane size");
    let mut buf = vec![0; size];
    let info = reader.next_frame(&mut buf).unwrap();
    let bpp = info.color_type.samples();
    let colours: std::collections::HashSet<&[u8]> = buf[..info.buffer_size()].chunks(bpp).collect();
    assert!(info.width >= 1000 && info.height >= 600);
    assert!(
        colours.len() > 20,
        "the screenshot looks blank ({} colours)",
        colours.len()
    );
}

/// Kills the process when dropped, so that every test stops what it started.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A minimal HTTP/1.0 GET (no client library needed for loopback tests): status,
/// content type, body.
pub fn http_get(
    addr: &str,
    path_and_query: &str,
    accept: Option<&str>,
) -> Option<(u16, String, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path_and_query} HTTP/1.0\r\nHost: {addr}\r\n{accept}\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let ctype = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    Some((status, ctype, body.to_owned()))
}

/// An instant query's first value from the Prometheus at `api`, if any.
pub fn query(api: &str, expr: &str) -> Option<f64> {
    let (status, _, body) = http_get(
        api,
        &format!("/api/v1/query?query={}", urlencode(expr)),
        None,
    )?;
    assert_eq!(status, 200, "{expr}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["data"]["result"].as_array()?.first()?["value"][1]
        .as_str()?
        .parse()
        .ok()
}

/// Percent-encodes a query value.
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// deploy/'s alerts.yml with its marked GPU-idle threshold and `for` scaled down (idle 3 s,
/// for 1 s), for tests that cannot wait minutes.
pub fn scaled_alerts() -> String {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus/alerts.yml");
    let text = std::fs::read_to_string(path).unwrap();
    let scaled = text
        .replace(
            "proofline:gpu_idle_seconds:max > 30 # threshold: idle_seconds",
            "proofline:gpu_idle_seconds:max > 3 # threshold: idle_seconds",
        )
        .replace("for: 1m # for: idle", "for: 1s # for: idle");
    assert_ne!(scaled, text, "alerts.yml lost its threshold markers");
    scaled
}

/// The sum of `proofline_proofs_completed_total` on the endpoint at `addr`.
pub fn completed(addr: &str) -> f64 {
    let (_, _, body) = http_get(addr, "/metrics", None).unwrap();
    body.lines()
        .filter(|l| l.starts_with("proofline_proofs_completed_total"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

/// Waits (20 s at most) until the endpoint at `addr` counts `n` completed proofs.
pub fn wait_completed(addr: &str, n: f64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while completed(addr) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "completed stayed at {} (want {n})",
            completed(addr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits (30 s at most) until `GET path` on `addr` answers 200; `what` names the server in
/// the failure.
pub fn wait_ready(addr: &str, path: &str, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while http_get(addr, path, None).is_none_or(|(s, ..)| s != 200) {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not become ready on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The lines of a log up to the first moment its GPUs all fell idle after some GPU work: a
/// prover that stopped there, its next sector in flight (no interval left open).
pub fn cut_where_the_gpus_first_idle(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut open = 0i32;
    for (i, l) in lines.iter().enumerate() {
        if l.contains(",GPU_START,") {
            open += 1;
        } else if l.contains(",GPU_END,") {
            open -= 1;
            if open == 0 {
                return lines[..=i].to_vec();
            }
        }
    }
    panic!("the log's GPUs never fell idle")
}

/// An Alertmanager on a free loopback port with the configuration `config` (its files under
/// `dir`), clustering off, ready; its process and address.
pub fn alertmanager(dir: &std::path::Path, config: &str) -> (Proc, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    std::fs::write(dir.join("alertmanager.yml"), config).unwrap();
    let p = Proc(
        std::process::Command::new("prometheus-alertmanager")
            .arg(format!("--config.file={}", dir.join("alertmanager.yml").display()))
            .arg(format!("--storage.path={}", dir.join("am").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--cluster.listen-address=")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("prometheus-alertmanager not found: install Debian's prometheus-alertmanager (scripts/test.sh does)"),
    );
    wait_ready(&addr, "/-/ready", "alertmanager");
    (p, addr)
}

/// A Prometheus server on a free loopback port with the configuration `config` (its files
/// and TSDB under `dir`, named `name`), ready; its process and address.
pub fn prometheus(
    dir: &std::path::Path,
    name: &str,
    config: &str,
    extra: &[&str],
) -> (Proc, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let cfg = dir.join(format!("{name}.yml"));
    std::fs::write(&cfg, config).unwrap();
    let p = Proc(
        std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join(format!("{name}-tsdb")).display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--rules.alert.resend-delay=1s")
            .arg("--log.level=warn")
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect(
                "prometheus not found: install Debian's prometheus package (scripts/test.sh does)",
            ),
    );
    wait_ready(&addr, "/-/ready", name);
    (p, addr)
}
