//! `proofline watch` following a log as logrotate and operators change it: rotation,
//! truncation, a truncate and regrow, malformed lines named (a few) and counted (all), read
//! from its `/metrics`.

use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

mod common;
use common::{
    Proc, free_port, fresh_dir, generated_text, http_get, proofline, stderr_lines, wait_completed,
    wait_line, watch,
};

fn tmp(name: &str) -> PathBuf {
    fresh_dir("watch", name)
}

#[test]
fn watch_follows_rotation_and_truncation_and_numbers_bad_lines() {
    let dir = tmp("rotate");
    let log = dir.join("cuzk.log");
    let text = generated_text(&dir, 2);
    std::fs::write(&log, "daemon starting\n").unwrap();

    let (_watch, rx, addr) = watch(&["--poll-ms", "50", "--reorder-window-ms", "0"], &log);

    // appended lines, one of them malformed (line 3 of the file), and a timing line with a
    // value over an hour (line 4; said, where it was silently left out)
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    writeln!(
        f,
        "some log line\nTIMELINE,x,GPU_START,j,worker=1\nCUZK_TIMING: gpu_tid=0 mutex_held_ms=37423742 mutex_wait_ms=1"
    )
    .unwrap();
    // and a line one byte over the limit (line 5): skipped and said, as analyze skips it
    // (read whole and used, up to the limit and a read)
    let head = "TIMELINE,1,SYNTH_START,pad-1,partition=0,";
    writeln!(f, "{head}{}", "x".repeat((1 << 20) + 1 - head.len())).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    drop(f);
    let bad = wait_line(&rx, "not an unsigned integer");
    assert!(bad.contains("cuzk.log:3:"), "{bad}");
    let absurd = wait_line(&rx, "a value over an hour");
    assert!(
        absurd.contains("cuzk.log:4:") && absurd.contains("(mutex_held_ms=37423742)"),
        "{absurd}"
    );
    let long = wait_line(&rx, "longer than 1 MiB");
    assert!(long.contains("cuzk.log:5:"), "{long}");
    wait_completed(&addr, 2.0);

    // rotation: the log is moved away and a new one started (the daemon restarted: offsets from 0)
    std::fs::rename(&log, dir.join("cuzk.log.1")).unwrap();
    std::fs::write(&log, text.replace("porep-1000-", "porep-2000-")).unwrap();
    wait_line(&rx, "was rotated");
    wait_completed(&addr, 4.0);

    // truncation in place
    std::fs::write(&log, "").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&log, text.replace("porep-1000-", "porep-3000-")).unwrap();
    wait_line(&rx, "was truncated");
    wait_completed(&addr, 6.0);

    let (_, _, body) = http_get(&addr, "/metrics", None).unwrap();
    // (the malformed line and the long one)
    assert!(body.contains("proofline_malformed_lines_total 2"), "{body}");
}

/// 5,000 malformed lines: `watch` names ten of them on stderr, sums the rest up once its
/// 10 s window ends, and `/metrics` counts every one.
#[test]
fn watch_names_a_few_malformed_lines_and_counts_them_all() {
    let dir = tmp("bad");
    let log = dir.join("cuzk.log");
    let mut text = String::new();
    for i in 0..5000 {
        text.push_str(&format!("TIMELINE,{i},GPU_START,porep-1-1,partition=0\n"));
    }
    std::fs::write(&log, text).unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = proofline()
        .args([
            "watch",
            "--from-start",
            "--poll-ms",
            "50",
            "--metrics-addr",
            &addr,
        ])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let _watch = Proc(child);
    let mut named = 0;
    let summary = loop {
        let l = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("no summary of the malformed lines");
        if l.contains("more malformed lines") {
            break l;
        }
        named += usize::from(l.contains("cuzk.log:") && l.contains("without `worker=`"));
    };
    assert_eq!(named, 10, "ten named in the window");
    assert!(summary.contains("4990 more malformed lines"), "{summary}");
    let (_, _, body) = http_get(&addr, "/metrics", None).unwrap();
    assert!(
        body.contains("proofline_malformed_lines_total 5000"),
        "{}",
        body.lines()
            .filter(|l| l.contains("malformed"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let after = std::iter::from_fn(|| rx.try_recv().ok()).count();
    assert_eq!(after, 0, "nothing after the summary while the log is quiet");
}

/// `watch` follows files like `tail -F` at its best: a truncation followed by a regrowth past
/// the old size between two polls is seen (the first bytes differ), and lines a writer
/// appends to the rotated file after `watch` moved on are still read.
#[test]
fn watch_sees_a_truncate_and_regrow_and_reads_a_rotated_file_a_while() {
    let dir = tmp("regrow");
    let log = dir.join("cuzk.log");
    let two = generated_text(&dir, 2);
    let four = generated_text(&dir, 4);
    std::fs::write(&log, format!("daemon started\n{two}")).unwrap();
    let opts = [
        "--from-start",
        "--poll-ms",
        "1000",
        "--reorder-window-ms",
        "0",
    ];
    let (_watch, rx, addr) = watch(&opts, &log);
    wait_completed(&addr, 2.0);
    // truncated and written anew, longer than before, within one poll
    std::fs::write(
        &log,
        format!(
            "daemon restarted\n{}",
            four.replace("porep-1000-", "porep-3000-")
        ),
    )
    .unwrap();
    wait_line(&rx, "was truncated");
    wait_completed(&addr, 6.0);
    // rotated; the old writer appends two more sectors to the rotated file afterwards
    let old = dir.join("cuzk.log.1");
    std::fs::rename(&log, &old).unwrap();
    std::fs::write(&log, "daemon started again\n").unwrap();
    wait_line(&rx, "was rotated");
    let mut f = std::fs::OpenOptions::new().append(true).open(&old).unwrap();
    f.write_all(two.replace("porep-1000-", "porep-4000-").as_bytes())
        .unwrap();
    drop(f);
    wait_completed(&addr, 8.0);
}

/// Each way a log is truncated under a running `watch`: `: > log` and a writer appending on;
/// logrotate's copytruncate with a writer that appends (`O_APPEND`) and with one that does
/// not (it writes on at its old offset, leaving a hole of NUL bytes, here over 1 MiB, before
/// its next line); a truncate and regrow within one poll, also one whose first lines are
/// the old ones. Each is said once, and every
/// proof is counted once: the new content's four, the old content's two, no more however
/// long `watch` goes on polling.
#[test]
fn every_kind_of_truncation_is_read_once_and_said_once() {
    let dir = tmp("truncations");
    // over 1 MiB before the first sector, so that a hole left where it was is longer than
    // the longest line watch reads
    let filler: String = (0..12_000)
        .map(|i| format!("2026-12-01T00:00:00Z INFO cuzk: filler line {i:>8} of the old log\n"))
        .collect();
    let old = format!("{filler}{}", generated_text(&dir, 2));
    let new = generated_text(&dir, 4).replace("porep-1000-", "porep-3000-");
    for form in [
        "truncate",
        "copytruncate",
        "copytruncate-no-append",
        "regrow",
        "regrow-same-start",
    ] {
        let log = dir.join(format!("{form}.log"));
        std::fs::write(&log, &old).unwrap();
        let opts = [
            "--from-start",
            "--poll-ms",
            "100",
            "--reorder-window-ms",
            "0",
        ];
        let (_watch, rx, addr) = watch(&opts, &log);
        wait_completed(&addr, 2.0);
        let old_len = old.len() as u64;
        match form {
            "truncate" | "copytruncate" => {
                if form == "copytruncate" {
                    std::fs::copy(&log, dir.join(format!("{form}.log.1"))).unwrap();
                }
                let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
                f.set_len(0).unwrap();
                std::thread::sleep(Duration::from_millis(300));
                let mut w = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
                w.write_all(new.as_bytes()).unwrap();
            }
            "copytruncate-no-append" => {
                use std::io::{Seek, SeekFrom};
                // the writer's handle, opened before the rotation, without O_APPEND
                let mut w = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
                w.seek(SeekFrom::Start(old_len)).unwrap();
                std::fs::copy(&log, dir.join(format!("{form}.log.1"))).unwrap();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&log)
                    .unwrap()
                    .set_len(0)
                    .unwrap();
                std::thread::sleep(Duration::from_millis(300));
                w.write_all(new.as_bytes()).unwrap();
            }
            // the same first lines (a restarted prover writes what it wrote before), longer
            "regrow-same-start" => std::fs::write(&log, format!("{filler}{new}{filler}")).unwrap(),
            _ => std::fs::write(&log, format!("daemon restarted\n{new}{filler}")).unwrap(),
        }
        wait_completed(&addr, 6.0);
        // ten polls more: nothing is read again
        std::thread::sleep(Duration::from_millis(1000));
        assert_eq!(common::completed(&addr), 6.0, "{form}: counted again");
        let said: Vec<String> = rx
            .try_iter()
            .filter(|l| l.contains("was truncated"))
            .collect();
        assert_eq!(said.len(), 1, "{form}: {said:?}");
    }
}

/// `journalctl -f | proofline watch -` and a named pipe: read as their lines come (`-`
/// waited for a file named "-", and a FIFO failed with "Illegal seek"); standard input that
/// ends ends watch (exit 0); a FIFO is read again for its next writer.
#[test]
fn watch_reads_standard_input_and_fifos() {
    let dir = tmp("streams");
    let two = generated_text(&dir, 2);
    // standard input
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = proofline()
        .args(["watch", "--poll-ms", "50", "--reorder-window-ms", "0"])
        .args(["--metrics-addr", &addr, "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let rx = stderr_lines(&mut child);
    wait_line(&rx, "metrics on");
    stdin.write_all(two.as_bytes()).unwrap();
    wait_completed(&addr, 2.0);
    drop(stdin);
    wait_line(&rx, "- ended");
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "still running");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    // a FIFO, written by two writers one after the other
    let fifo = dir.join("cuzk.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let (_watch, _, addr) = watch(&["--poll-ms", "50", "--reorder-window-ms", "0"], &fifo);
    for (n, prefix) in [(2.0, "porep-5000-"), (4.0, "porep-6000-")] {
        let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        w.write_all(two.replace("porep-1000-", prefix).as_bytes())
            .unwrap();
        drop(w);
        wait_completed(&addr, n);
    }
}

/// The file rotated in cannot be read (here a directory where the log was): watch says so
/// once, keeps serving /metrics and tries again; the log that then appears is read.
#[test]
fn an_unreadable_file_rotated_in_keeps_watch_serving() {
    let dir = tmp("unreadable");
    let log = dir.join("cuzk.log");
    let two = generated_text(&dir, 2);
    std::fs::write(&log, &two).unwrap();
    let opts = [
        "--from-start",
        "--poll-ms",
        "50",
        "--reorder-window-ms",
        "0",
    ];
    let (_watch, rx, addr) = watch(&opts, &log);
    wait_completed(&addr, 2.0);
    std::fs::rename(&log, dir.join("cuzk.log.1")).unwrap();
    std::fs::create_dir(&log).unwrap();
    wait_line(&rx, "cannot be read");
    std::thread::sleep(Duration::from_millis(300));
    let (status, _, _) = http_get(&addr, "/healthz", None).unwrap();
    assert_eq!(status, 200, "/metrics went down with the log");
    std::fs::remove_dir(&log).unwrap();
    std::fs::write(&log, two.replace("porep-1000-", "porep-7000-")).unwrap();
    wait_completed(&addr, 4.0);
}

/// A compressed log or a Docker json-file log is named with what to do (watch said
/// nothing and counted nothing).
#[test]
fn watch_names_logs_it_cannot_follow() {
    let dir = tmp("foreign");
    let gz = dir.join("cuzk.log.gz");
    std::fs::write(&gz, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0]).unwrap();
    let docker = dir.join("container-json.log");
    std::fs::write(
        &docker,
        "{\"log\":\"TIMELINE,1,SYNTH_START,j,partition=0\\n\",\"stream\":\"stderr\"}\n",
    )
    .unwrap();
    for (file, says) in [(&gz, "gzip-compressed"), (&docker, "Docker json-file log")] {
        let mut child = proofline()
            .args(["watch", "--from-start", "--metrics-addr", "127.0.0.1:0"])
            .arg(file)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let rx = stderr_lines(&mut child);
        let _watch = Proc(child);
        wait_line(&rx, says);
    }
}

/// The value of a sample on /metrics, by its name and labels as written.
fn sample(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// A prover dead inside GPU work: its log stops at 140 s with GPU intervals open. watch's
/// clock goes on; past the stuck threshold (here 12 s, more than 1x the longest interval
/// closed, ~8 s: `--stuck-min-s 12 --stuck-factor 1`, for a test's patience; 60 s and 4x by
/// default)
/// the GPU stops counting as busy, its idle gauge grows, the intervals are counted stuck,
/// and the silence and the oldest job's age are on /metrics.
#[test]
fn a_prover_dead_inside_gpu_work_is_silent_and_idle_on_metrics() {
    let dir = tmp("dead");
    let log = dir.join("cuzk.log");
    let full = generated_text(&dir, 8);
    let cut = proofline_tests::lines_until(&full, 140_000);
    std::fs::write(&log, cut).unwrap();
    let (_watch, _rx, addr) = watch(
        &[
            "--from-start",
            "--stuck-min-s",
            "12",
            "--stuck-factor",
            "1",
            "--reorder-window-ms",
            "200",
            "--poll-ms",
            "100",
        ],
        &log,
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    let body = loop {
        let (_, _, body) = http_get(&addr, "/metrics", None).unwrap();
        // every open interval of the GPU past the threshold: idle from the last line on
        let idle = sample(&body, "proofline_gpu_idle_seconds{gpu=\"0\"}").unwrap_or(0.0);
        if idle > 0.0 {
            break body;
        }
        assert!(std::time::Instant::now() < deadline, "never stuck:\n{body}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(
        sample(&body, "proofline_gpu_stuck_intervals_total{gpu=\"0\"}").unwrap() >= 1.0,
        "{body}"
    );
    assert_eq!(
        sample(&body, "proofline_partitions_in_flight{stage=\"gpu\"}"),
        Some(0.0),
        "{body}"
    );
    assert!(
        sample(&body, "proofline_last_event_age_seconds").unwrap() >= 5.0,
        "{body}"
    );
    assert!(
        sample(&body, "proofline_oldest_job_age_seconds").unwrap() >= 60.0,
        "{body}"
    );
    assert_eq!(sample(&body, "proofline_runs_total"), Some(1.0), "{body}");
}

/// Standard error closed under watch (`proofline watch LOG 2>&1 | head -1`, a log collector
/// gone): its next message was a panic (status 101) that took /metrics with it. Now the
/// message is lost and watch goes on.
#[test]
fn watch_goes_on_when_its_standard_error_is_closed() {
    let dir = tmp("closed-stderr");
    let log = dir.join("cuzk.log");
    std::fs::write(&log, generated_text(&dir, 2)).unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = proofline()
        .args([
            "watch",
            "--from-start",
            "--poll-ms",
            "50",
            "--metrics-addr",
            &addr,
        ])
        .arg(&log)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // the first line read, then the pipe closed, as `head -1` does
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut err, &mut first).unwrap();
    assert!(first.contains("following"), "{first}");
    drop(err);
    wait_completed(&addr, 2.0);
    // things to say: a truncation, and malformed lines
    std::fs::write(&log, "TIMELINE,x,GPU_START,j,worker=1\n").unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert!(child.try_wait().unwrap().is_none(), "watch ended");
    let (status, _, body) = http_get(&addr, "/metrics", None).unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("proofline_malformed_lines_total 1"), "{body}");
    let _ = Proc(child);
}
