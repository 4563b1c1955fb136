#!/usr/bin/env bash
# The demo: a simulated cuzk prover (8 PoRep sectors, one GPU, two GPU workers, ten
# synthesis workers, 6x cuzk's speed) runs with proofline inside it for about a minute,
# shows live progress, prints the final report, and leaves its TIMELINE log in out/.
# Extra arguments go to `proofline demo` (try --stall 5:150000, --gpus 2, --mixed, --help).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p proofline-cli
exec ./target/release/proofline demo "$@"
