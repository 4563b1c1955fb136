//! A systemd journal written as a test goes: Debian's systemd-journal-remote turns
//! journald's export format, read on its standard input, into a journal file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The boot id of every entry.
pub const BOOT: &str = "0123456789abcdef0123456789abcdef";

/// A journal entry: realtime µs from the journal's start, pid, unit, message.
pub type Entry = (u64, u32, &'static str, String);

/// Writes `entries` in journald's export format (what systemd-journal-remote reads), their
/// times counted from `t0_us`.
pub fn write_export(w: &mut impl Write, t0_us: u64, entries: &[Entry]) {
    for (t, pid, unit, msg) in entries {
        write!(
            w,
            "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={t}\n_BOOT_ID={BOOT}\n_PID={pid}\n_SYSTEMD_UNIT={unit}\nMESSAGE={msg}\n\n",
            t0_us + t
        )
        .unwrap();
    }
}

/// A journal written as the test goes (systemd-journal-remote reading its stdin), its
/// entries stamped with the present: `watch` follows it as it grows.
pub struct LiveJournal {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    /// The journal file.
    pub path: PathBuf,
    /// The wall-clock time its entries count from, µs since the Unix epoch.
    pub t0_us: u64,
    /// The same moment on the monotonic clock.
    pub started: std::time::Instant,
}

impl LiveJournal {
    pub fn start(dir: &Path) -> LiveJournal {
        let path = dir.join("live.journal");
        let mut child = Command::new("/lib/systemd/systemd-journal-remote")
            .arg("-o")
            .arg(&path)
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("systemd-journal-remote");
        let stdin = child.stdin.take();
        let t0_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        LiveJournal {
            child,
            stdin,
            path,
            t0_us,
            started: std::time::Instant::now(),
        }
    }

    pub fn write(&mut self, entries: &[Entry]) {
        let stdin = self.stdin.as_mut().unwrap();
        write_export(stdin, self.t0_us, entries);
        stdin.flush().unwrap();
    }
}

impl LiveJournal {
    /// Writes one entry stamped with the present.
    pub fn write_now(&mut self, pid: u32, unit: &'static str, message: &str) {
        let t = self.started.elapsed().as_micros() as u64;
        self.write(&[(t, pid, unit, message.to_owned())]);
    }

    /// Waits (10 s at most) until journalctl can read the file: it cannot open one that
    /// systemd-journal-remote has not written yet.
    pub fn wait_readable(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !Command::new("journalctl")
            .arg("--file")
            .arg(&self.path)
            .args(["-q", "-n", "1"])
            .output()
            .is_ok_and(|o| o.status.success() && !o.stdout.is_empty())
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the journal was not written"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for LiveJournal {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
