use proofline_core::{EventKind, parse_line};
use proofline_sim::{SimConfig, instant};

#[test]
fn same_seed_same_log_and_every_partition_has_six_events() {
    let cfg = SimConfig::porep(3);
    let a = instant::log_string(&cfg);
    assert_eq!(a, instant::log_string(&cfg));
    let mut counts = [0usize; 6];
    for line in a.lines() {
        let ev = parse_line(line).unwrap().unwrap();
        counts[ev.kind.index()] += 1;
    }
    assert_eq!(counts, [30; 6]);
    let mut other = cfg.clone();
    other.seed = 2;
    assert_ne!(a, instant::log_string(&other));
}

#[test]
fn output_is_in_time_order_unless_shuffled() {
    let mut cfg = SimConfig::porep(3);
    let offsets = |cfg: &SimConfig| -> Vec<u64> {
        instant::log_string(cfg)
            .lines()
            .map(|l| parse_line(l).unwrap().unwrap().offset_ms)
            .collect()
    };
    let sorted = offsets(&cfg);
    assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
    cfg.shuffle_ms = 500;
    let shuffled = offsets(&cfg);
    assert!(shuffled.windows(2).any(|w| w[0] > w[1]));
    assert!(shuffled.windows(2).all(|w| w[0] <= w[1] + 500));
}

#[test]
fn never_finishing_partition_has_no_gpu_end() {
    let mut cfg = SimConfig::porep(2);
    cfg.faults.never_finish = Some((1, 4));
    let log = instant::log_string(&cfg);
    let ends = log
        .lines()
        .filter_map(|l| parse_line(l).unwrap())
        .filter(|e| e.kind == EventKind::GpuEnd && e.job_id == "porep-1000-1")
        .count();
    assert_eq!(ends, 9);
}
