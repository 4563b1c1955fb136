//! SIGTERM, SIGINT and SIGHUP, as a service manager, an operator and a closed terminal send
//! them: the first asks the command to stop its work and deliver what it holds within a bound;
//! a second exits at once with status 128 + the signal, as a shell reports a process a signal
//! ended. (SIGHUP reloads nothing here: there is no configuration file to read again, and its
//! default, to end the process at once, lost what `watch` held.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// Whether a stop was asked for, and by which signal.
#[derive(Debug, Clone)]
pub(crate) struct Stop {
    flag: Arc<AtomicBool>,
    signal: Arc<AtomicUsize>,
}

/// A command that stopped on a signal, after delivering what it could: `main` exits with
/// `status` (128 + the signal) after printing this.
#[derive(Debug, thiserror::Error)]
#[error("stopped by {name}")]
pub(crate) struct Stopped {
    pub name: &'static str,
    pub status: i32,
}

impl Stop {
    /// Installs the handlers for SIGTERM, SIGINT and SIGHUP.
    pub(crate) fn install() -> anyhow::Result<Stop> {
        let flag = Arc::new(AtomicBool::new(false));
        let signal = Arc::new(AtomicUsize::new(0));
        for sig in [SIGTERM, SIGINT, SIGHUP] {
            // in this order: a signal that finds the flag set (a second one) exits at once;
            // the first only records itself and sets the flag
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, flag.clone())?;
            signal_hook::flag::register_usize(sig, signal.clone(), sig as usize)?;
            signal_hook::flag::register(sig, flag.clone())?;
        }
        Ok(Stop { flag, signal })
    }

    /// The flag a signal sets (for work that polls one, such as the simulator).
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }

    /// Whether a signal asked to stop.
    pub(crate) fn requested(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    /// The signal that asked, by name (`None` before one did).
    pub(crate) fn name(&self) -> Option<&'static str> {
        match self.signal.load(Ordering::Relaxed) as i32 {
            SIGTERM => Some("SIGTERM"),
            SIGINT => Some("SIGINT"),
            SIGHUP => Some("SIGHUP"),
            _ => None,
        }
    }

    /// The error that ends a command a signal stopped (`None` when none did).
    pub(crate) fn stopped(&self) -> Option<Stopped> {
        let sig = self.signal.load(Ordering::Relaxed) as i32;
        Some(Stopped {
            name: self.name()?,
            status: 128 + sig,
        })
    }
}
