//! `proofline generate`: a simulated cuzk TIMELINE log, deterministic for a seed.

use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::sim_args::SimArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct GenerateArgs {
    #[command(flatten)]
    sim: SimArgs,
    /// Print lines up to this many ms out of time order, as concurrent threads do.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    shuffle_ms: u64,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub(crate) fn run(args: &GenerateArgs) -> Result<()> {
    let mut cfg = args.sim.sim_config()?;
    cfg.shuffle_ms = args.shuffle_ms;
    match &args.output {
        Some(p) => {
            let mut w = io::BufWriter::new(
                File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
            );
            let written = proofline_sim::instant::write_log(&cfg, &mut w)
                .map_err(anyhow::Error::from)
                .and_then(|_| Ok(w.flush()?));
            if let Err(e) = written {
                // no truncated log left behind to be taken for a whole one (a regular file
                // only: never a device or a pipe named as the output)
                if std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()) {
                    let _ = std::fs::remove_file(p);
                    return Err(e.context(format!("cannot write {} (removed)", p.display())));
                }
                return Err(e.context(format!("cannot write {}", p.display())));
            }
        }
        None => {
            let mut w = io::BufWriter::new(io::stdout().lock());
            proofline_sim::instant::write_log(&cfg, &mut w)?;
            w.flush()?;
        }
    }
    Ok(())
}
