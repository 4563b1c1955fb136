//! RFC 3339 timestamps, as `--epoch` takes them.

/// Parses an RFC 3339 timestamp (`2026-11-30T01:31:00Z`, `...T01:31:00.250+01:00`) to Unix
/// ms, or says what is wrong with it: not written so (an offset hour past 23 included, with
/// the field the `time` crate names), no such time (a 30th of February), or one before 1970.
pub(crate) fn parse_rfc3339(s: &str) -> Result<u64, String> {
    use time::format_description::well_known::Rfc3339;
    let t = time::OffsetDateTime::parse(s.trim(), &Rfc3339).map_err(|e| match e {
        time::error::Parse::TryFromParsed(e) => format!("no such time ({e})"),
        e => format!("not an RFC 3339 time such as 2026-11-30T01:31:00Z ({e})"),
    })?;
    // (rounded down: a time in the last millisecond of 1969 is before 1970 too)
    u64::try_from(t.unix_timestamp_nanos().div_euclid(1_000_000))
        .map_err(|_| "before 1970-01-01T00:00:00Z, which no log's time can be".to_owned())
}

/// Unix ms as an RFC 3339 timestamp in UTC, to the millisecond (`2026-12-01T03:00:00.250Z`).
pub(crate) fn format_rfc3339(unix_ms: u64) -> String {
    let secs = (unix_ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // civil from days (Howard Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        unix_ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_is_parsing_backwards() {
        for s in [
            "1970-01-01T00:00:00.000Z",
            "2026-12-01T03:04:05.250Z",
            "2000-02-29T23:59:59.999Z",
            "2100-03-01T00:00:00.001Z",
        ] {
            assert_eq!(format_rfc3339(parse_rfc3339(s).unwrap()), s);
        }
    }

    #[test]
    fn rfc3339() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_rfc3339("2026-11-30T01:31:00Z"), Ok(1_796_002_260_000));
        assert_eq!(
            parse_rfc3339("2026-11-30T02:31:00.25+01:00"),
            Ok(1_796_002_260_250)
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T12:00:00-05:30"),
            Ok(1_709_227_800_000)
        );
        // (past the millisecond is dropped)
        assert_eq!(
            parse_rfc3339("2026-11-30T01:31:00.2509Z"),
            Ok(1_796_002_260_250)
        );
        for bad in [
            "2026-11-30",
            "2026-11-30T01:31:00",
            "yesterday",
            "2026-11-30T01:31:00.Z",
            // a multi-byte character where the offset's digits go (it panicked)
            "2026-01-01T00:00:00+0\u{e9}00",
            "2026-01-01T00:00:00+\u{e9}:00",
            // an offset past 23:59
            "2026-01-01T00:00:00+25:00",
        ] {
            let e = parse_rfc3339(bad).unwrap_err();
            assert!(e.starts_with("not an RFC 3339 time"), "{bad}: {e}");
        }
        // times that are written right and do not exist
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-01-01T24:00:00Z",
        ] {
            let e = parse_rfc3339(bad).unwrap_err();
            assert!(e.starts_with("no such time ("), "{bad}: {e}");
        }
        assert!(
            parse_rfc3339("2026-02-30T00:00:00Z")
                .unwrap_err()
                .contains("day must be in the range 1..=28")
        );
        assert!(
            parse_rfc3339("2026-01-01T00:00:00+25:00")
                .unwrap_err()
                .contains("offset hour")
        );
        for early in ["1960-01-01T00:00:00Z", "1969-12-31T23:59:59.9999Z"] {
            let e = parse_rfc3339(early).unwrap_err();
            assert!(e.starts_with("before 1970"), "{early}: {e}");
        }
    }
}
