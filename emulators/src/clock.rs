//! Civil dates of the system clock, for the times the emulators write in their answers (each cloud in its
//! own format).

use std::time::{SystemTime, UNIX_EPOCH};

/// `(year, month, day, hour, minute, second)` in UTC of seconds since 1970-01-01 (Howard Hinnant's
/// civil-from-days for the date).
pub fn utc(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3_600, rem % 3_600 / 60, rem % 60)
}

/// RFC 3339 in UTC with milliseconds (`2026-01-01T12:00:00.000Z`), as Google and OCI write times.
pub fn rfc3339_millis(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (y, mo, da, h, mi, s) = utc(d.as_secs() as i64);
    format!("{y:04}-{mo:02}-{da:02}T{h:02}:{mi:02}:{s:02}.{:03}Z", d.subsec_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil_dates_in_utc() {
        assert_eq!(utc(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(utc(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(utc(1_796_474_555), (2026, 12, 5, 12, 42, 35));
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_796_474_555_042);
        assert_eq!(rfc3339_millis(t), "2026-12-05T12:42:35.042Z");
    }
}
