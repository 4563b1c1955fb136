//! Offsets that jump forward (a prover paused for hours, a clock stepped): the definitions
//! still hold. The idle time splits into "partitions waiting" and "queue empty" that add up
//! to the idle gaps; the serial sum holds no time in which nothing was seen, so concurrency
//! stays what the workers allow (a 3 h jump read as 47 workers busy on a 2-worker GPU).

use proofline_core::EngineConfig;
use proofline_sim::SimConfig;
use proofline_tests::analyze_str;

#[test]
fn a_jump_of_three_hours_keeps_the_idle_split_and_the_concurrency_true() {
    let mut log = Vec::new();
    proofline_sim::instant::write_log(&SimConfig::porep(8), &mut log).unwrap();
    let lines: Vec<String> = String::from_utf8(log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let cut = lines.len() * 2 / 5;
    let jumped: String = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut f: Vec<String> = l.splitn(3, ',').map(str::to_owned).collect();
            if i >= cut && f[0] == "TIMELINE" {
                f[1] = (f[1].parse::<u64>().unwrap() + 10_800_000).to_string();
            }
            f.join(",") + "\n"
        })
        .collect();
    let r = analyze_str(&jumped, EngineConfig::default());
    let g = &r.gpus[0];
    assert!(g.idle_total.total_ms > 10_800_000, "{:?}", g.idle_total);
    assert_eq!(
        g.idle_with_queue_ms + g.idle_queue_empty_ms,
        g.idle_total.total_ms,
        "the idle split does not add up to the gaps"
    );
    let concurrency = g.concurrency.unwrap();
    assert!(concurrency < 2.5, "concurrency {concurrency} on 2 workers");
}
