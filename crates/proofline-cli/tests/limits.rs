//! The `/metrics` endpoint under abuse, with real sockets: hundreds of idle connections
//! under a low file-descriptor limit, a client that trickles its headers, and connections
//! that never send anything.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{Proc, free_port, fresh_dir, http_get, wait_ready};

fn tmp(name: &str) -> PathBuf {
    fresh_dir("limits", name)
}

/// `proofline watch` of an empty log, under `ulimit -n fds`, with `args`; waits for /healthz.
fn watch(dir: &std::path::Path, fds: u32, args: &[&str]) -> (Proc, String) {
    let log = dir.join("cuzk.log");
    std::fs::write(&log, "").unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut cmd = format!(
        "ulimit -n {fds} && exec '{}' watch '{}' --metrics-addr {addr}",
        env!("CARGO_BIN_EXE_proofline"),
        log.display()
    );
    for a in args {
        cmd.push(' ');
        cmd.push_str(a);
    }
    let child = Command::new("bash")
        .args(["-c", &cmd])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let p = Proc(child);
    wait_ready(&addr, "/healthz", "proofline watch");
    (p, addr)
}

/// CPU seconds (user + system) the process has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // fields after the command name, which is in parentheses
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// Whether the server closed `s` (a read gives end of file or a reset) within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 64];
    matches!(s.read(&mut b), Ok(0) | Err(_))
        && {
            // a timeout is an error too: tell it from a close
            s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
            !matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut)
        }
}

#[test]
fn three_hundred_idle_connections_under_a_low_fd_limit_do_not_stop_scrapes_or_spin() {
    let dir = tmp("fds");
    // 64 descriptors: the idle connections exhaust them long before the cap
    let (p, addr) = watch(&dir, 64, &["--metrics-max-connections", "1000"]);
    let pid = p.0.id();
    let idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    for round in 0..5 {
        let t = Instant::now();
        let got = http_get(&addr, "/metrics", None);
        let took = t.elapsed();
        assert!(
            got.as_ref()
                .is_some_and(|(s, _, body)| *s == 200 && body.contains("proofline_")),
            "scrape {round} not answered: {got:?}"
        );
        assert!(
            took < Duration::from_secs(1),
            "scrape {round} took {took:?}"
        );
    }
    // the server does not spin on a failing accept while the idle ones hold the descriptors
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_seconds(pid) - before;
    assert!(
        used < 0.5,
        "{used} CPU seconds in 2 s with idle connections open"
    );
    drop(idle);
}

#[test]
fn idle_and_trickling_connections_are_closed_after_their_timeouts_and_scrapes_are_not() {
    let dir = tmp("timeouts");
    let (_p, addr) = watch(
        &dir,
        1024,
        &[
            "--metrics-idle-timeout-s",
            "1",
            "--metrics-header-timeout-s",
            "2",
            "--metrics-max-connections",
            "8",
        ],
    );
    // connected, never sends a byte: closed after the idle timeout
    let mut silent = TcpStream::connect(&addr).unwrap();
    // sends half a request's headers, then a byte every half second: closed by the header
    // timeout although it is never idle for a second
    let mut trickle = TcpStream::connect(&addr).unwrap();
    trickle
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let t = Instant::now();
    let trickler = std::thread::spawn(move || {
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(400));
            if trickle.write_all(b"X").is_err() {
                break;
            }
        }
        let closed = closed_within(&mut trickle, Duration::from_secs(3));
        (closed, t.elapsed())
    });
    assert!(
        closed_within(&mut silent, Duration::from_secs(4)),
        "an idle connection was kept past its timeout"
    );
    let (closed, after) = trickler.join().unwrap();
    assert!(closed, "a trickling request was kept open");
    assert!(
        after >= Duration::from_secs(2),
        "closed before its header timeout: {after:?}"
    );

    // a keep-alive scraper's connection lives across requests within the idle timeout
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for _ in 0..3 {
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        std::thread::sleep(Duration::from_millis(400));
    }
}

#[test]
fn at_the_cap_the_connection_idle_the_longest_makes_room_even_a_slow_sender() {
    let dir = tmp("cap");
    // the idle timeout far away: only the cap closes connections here
    let (_p, addr) = watch(
        &dir,
        1024,
        &[
            "--metrics-idle-timeout-s",
            "60",
            "--metrics-header-timeout-s",
            "60",
            "--metrics-max-connections",
            "8",
        ],
    );
    // the oldest sends half a request's headers and then a byte now and then: a request
    // begun over a second ago counts as idle from its first byte, so a flood of such senders
    // cannot lock scrapers out
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let mut held: Vec<TcpStream> = (0..7).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    slow.write_all(b"X").unwrap();
    let got = http_get(&addr, "/metrics", None);
    assert!(
        got.is_some_and(|(s, ..)| s == 200),
        "a scrape at the cap was not answered"
    );
    assert!(
        closed_within(&mut slow, Duration::from_millis(500)),
        "the oldest connection (a slow sender) was not closed to make room"
    );
    // at the cap again (the scrape's connection closed after its answer): the next scrape
    // closes the next oldest, not the newest
    let _extra = TcpStream::connect(&addr).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let got = http_get(&addr, "/metrics", None);
    assert!(got.is_some_and(|(s, ..)| s == 200));
    assert!(closed_within(&mut held[0], Duration::from_millis(500)));
    assert!(
        !closed_within(&mut held[6], Duration::from_millis(100)),
        "the newest was closed"
    );
}
