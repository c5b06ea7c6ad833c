//! Time, without a date library: the system clock read as seconds, and every form the provider writes or
//! reads a time or a duration in. The log's RFC 3339 timestamps, OCI's RFC 7231 `date` header, the compact
//! stamp of an owner marker (`20261201t083555z`), a cloud's RFC 3339 times shown to the minute in UTC
//! (`2026-12-01T10:02Z`), and durations as a `timeouts` block writes them (`90m`). Nothing here knows a
//! cloud or a resource; other modules call these instead of formatting or rounding times themselves.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const DAY: i64 = 86_400;

/// Seconds since the epoch now (0 for a clock set before 1970).
pub fn now_secs() -> u64 {
    secs_of(SystemTime::now())
}

fn secs_of(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `(year, month, day)` of the day `days` after 1970-01-01 (Howard Hinnant's civil-from-days).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Days from 1970-01-01 to a civil date (Howard Hinnant's days-from-civil); the inverse of
/// [`civil_from_days`].
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let (y, m) = if month <= 2 { (year - 1, month + 9) } else { (year, month - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
}

/// `(date, hours, minutes, seconds)` of seconds since the epoch, in UTC.
fn split(secs: i64) -> ((i64, i64, i64), i64, i64, i64) {
    let (days, rem) = (secs.div_euclid(DAY), secs.rem_euclid(DAY));
    (civil_from_days(days), rem / 3600, rem % 3600 / 60, rem % 60)
}

/// RFC 3339 in UTC with microseconds, as the log writes it: `2026-11-29T20:10:23.123456Z`.
pub fn rfc3339_micros(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let ((y, mo, d), h, mi, s) = split(since.as_secs() as i64);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}Z", since.subsec_micros())
}

/// RFC 7231 date (`Sun, 29 Nov 2026 20:00:00 GMT`), the form OCI's `date` header and signature use.
pub fn http_date(t: SystemTime) -> String {
    let secs = secs_of(t) as i64;
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][secs.div_euclid(DAY).rem_euclid(7) as usize];
    let ((year, month, day), h, mi, s) = split(secs);
    let name = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][(month - 1) as usize];
    format!("{weekday}, {day:02} {name} {year} {h:02}:{mi:02}:{s:02} GMT")
}

/// The compact stamp of seconds since the epoch, lowercase so it fits a label value: `20261201t083555z`.
pub fn compact_stamp(secs: u64) -> String {
    let ((y, mo, d), h, mi, s) = split(secs as i64);
    format!("{y:04}{mo:02}{d:02}t{h:02}{mi:02}{s:02}z")
}

/// A [`compact_stamp`] as people read it: `2026-12-01 08:35:55 UTC`; `None` for anything else.
pub fn compact_stamp_readable(stamp: &str) -> Option<String> {
    let (date, time) = stamp.split_once('t')?;
    let time = time.strip_suffix('z')?;
    if date.len() != 8 || time.len() != 6 || !date.chars().chain(time.chars()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some(format!("{}-{}-{} {}:{}:{} UTC", &date[..4], &date[4..6], &date[6..], &time[..2], &time[2..4], &time[4..]))
}

/// Seconds since the epoch of an RFC 3339 time (`2026-12-05T00:00:29.600-08:00`), its fraction dropped.
/// Strict: digits where digits belong, fields in range, and an offset (`Z` or `+hh:mm`); the seconds may
/// be left out (`2026-12-05T00:00Z`), as some clouds write them.
pub fn parse_rfc3339(t: &str) -> Option<i64> {
    let b = t.as_bytes();
    let num = |at: usize, len: usize| -> Option<i64> {
        let digits = t.get(at..at + len)?;
        digits.bytes().all(|c| c.is_ascii_digit()).then(|| digits.parse().ok()).flatten()
    };
    let sep = |at: usize, allowed: &[u8]| b.get(at).is_some_and(|c| allowed.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt") && sep(13, b":")) {
        return None;
    }
    let (y, mo, d, h, mi) = (num(0, 4)?, num(5, 2)?, num(8, 2)?, num(11, 2)?, num(14, 2)?);
    let mut at = 16;
    let mut s = 0;
    if sep(at, b":") {
        s = num(at + 1, 2)?;
        at += 3;
        if sep(at, b".") {
            let digits = b[at + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            at += 1 + digits;
        }
    }
    let offset = match t.get(at..)? {
        "Z" | "z" => 0,
        zone if zone.len() == 6 && sep(at, b"+-") && sep(at + 3, b":") => {
            let (oh, om) = (num(at + 1, 2)?, num(at + 4, 2)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let minutes = oh * 60 + om;
            if b[at] == b'-' { -minutes } else { minutes }
        }
        _ => return None,
    };
    let days_in_month = match mo {
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if !(1..=days_in_month).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * DAY + h * 3600 + mi * 60 + s - offset * 60)
}

/// Seconds since the epoch as the plan shows a time: the UTC minute, `2026-12-01T10:02Z`.
pub fn utc_minute_of(secs: i64) -> String {
    let ((y, mo, d), h, mi, _) = split(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}Z")
}

/// A cloud's RFC 3339 time as the plan shows it, the UTC minute it is in (`2026-12-05T00:00:00.000-08:00`
/// is `2026-12-05T08:00Z`); a text that is not such a time is shown as given.
pub fn utc_minute(t: &str) -> String {
    parse_rfc3339(t).map_or_else(|| t.to_owned(), utc_minute_of)
}

/// `90m`, `2h`, `1h30m`, `45s` (a `timeouts` block's durations) -> seconds; `None` for anything else.
pub fn parse_duration(s: &str) -> Option<u64> {
    let mut total = 0u64;
    let mut num = String::new();
    for ch in s.chars() {
        if ch.is_ascii_digit() {
            num.push(ch);
        } else {
            let n: u64 = num.parse().ok()?;
            num.clear();
            let unit = match ch {
                'h' => 3600,
                'm' => 60,
                's' => 1,
                _ => return None,
            };
            // A number too large to count in seconds is no duration (never an overflow).
            total = total.checked_add(n.checked_mul(unit)?)?;
        }
    }
    (num.is_empty() && total > 0).then_some(total)
}

/// A job time limit the way Slurm reads `MaxTime` (`time_str2mins`, src/common/parse_time.c): minutes, MM:SS,
/// HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or `INFINITE` / `UNLIMITED` / `-1` (any case). Some(None) is no limit,
/// Some(Some(minutes)) a limit (seconds round up to a minute), None what Slurm refuses ("Bad value ... for MaxTime",
/// which stops slurmctld).
pub fn slurm_time_limit_minutes(text: &str) -> Option<Option<u32>> {
    if ["INFINITE", "UNLIMITED", "-1"].iter().any(|w| text.eq_ignore_ascii_case(w)) {
        return Some(None);
    }
    // Only digits, one '-' before any ':', at most two ':', and enough numbers for the separators.
    if text.is_empty() || !text.chars().all(|c| c.is_ascii_digit() || c == '-' || c == ':') {
        return None;
    }
    let (days, rest) = match text.split_once('-') {
        Some((d, rest)) => (Some(d), rest),
        None => (None, text),
    };
    if rest.contains('-') || rest.matches(':').count() > 2 {
        return None;
    }
    let number = |s: &str| -> Option<i64> { if s.is_empty() { None } else { s.parse::<i64>().ok().filter(|n| *n <= i64::from(i32::MAX)) } };
    let parts: Vec<&str> = rest.split(':').collect();
    let seconds = match days {
        // days-hours[:minutes[:seconds]]
        Some(d) => {
            let d = number(d)?;
            let mut hms = [0i64; 3];
            if !(parts.len() == 1 && parts[0].is_empty()) {
                for (slot, p) in hms.iter_mut().zip(&parts) {
                    *slot = number(p)?;
                }
            }
            d * 86_400 + hms[0] * 3_600 + hms[1] * 60 + hms[2]
        }
        None => match parts.as_slice() {
            [m] => number(m)? * 60,
            [m, s] => number(m)? * 60 + number(s)?,
            [h, m, s] => number(h)? * 3_600 + number(m)? * 60 + number(s)?,
            _ => return None,
        },
    };
    // Slurm adds it up in an int: more than that wraps negative, which it refuses.
    if seconds > i64::from(i32::MAX) {
        return None;
    }
    Some(Some(((seconds + 59) / 60) as u32))
}

/// The longest a `timeouts` entry may ask for: a day. Longer is a mistake (a unit slip, `90h` for `90m`),
/// and a wait that long is past any capacity the clouds promise.
pub const LONGEST_TIMEOUT_SECS: u64 = 24 * 3600;

/// `90m`, `2h`, `45s`, `200ms`: a duration as a `timeouts` block would write it.
pub fn format_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    match d.as_secs() {
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any day, hour, minute and second reads as its minutes (seconds rounded up) in every form that names them, as
    /// long as Slurm's int holds the seconds; any text at all is read without a panic.
    #[test]
    fn every_slurm_time_form_reads_as_its_minutes() {
        use proptest::prelude::*;
        crate::fuzz::check("slurm time forms", (0u64..30_000, 0u64..100, 0u64..100, 0u64..100), |(d, h, m, s)| {
            let (day, hour, minute) = (24 * 3600, 3600, 60);
            let forms = [
                (format!("{d}-{h}:{m}:{s}"), d * day + h * hour + m * minute + s),
                (format!("{d}-{h}:{m}"), d * day + h * hour + m * minute),
                (format!("{d}-{h}"), d * day + h * hour),
                (format!("{h}:{m}:{s}"), h * hour + m * minute + s),
                (format!("{m}:{s}"), m * minute + s),
                (format!("{m}"), m * minute),
            ];
            for (text, secs) in forms {
                let want = (secs <= i32::MAX as u64).then(|| Some(secs.div_ceil(60) as u32));
                let got = slurm_time_limit_minutes(&text);
                if got != want {
                    return Err(format!("{text}: {got:?}, want {want:?}"));
                }
            }
            Ok(())
        });
        crate::fuzz::check("slurm time text", any::<String>(), |t| {
            let _ = slurm_time_limit_minutes(&t);
            Ok(())
        });
    }

    /// Slurm's own reading of a time limit (`time_str2mins`): minutes, rounded up from seconds.
    #[test]
    fn max_time_is_read_as_slurm_reads_it() {
        let valid = [
            ("INFINITE", None),
            ("unlimited", None),
            ("-1", None),
            ("0", Some(0)),
            ("90", Some(90)),
            ("90:30", Some(91)),
            ("1:30:00", Some(90)),
            ("36:00:00", Some(2160)),
            ("7-0", Some(10080)),
            ("2-12", Some(3600)),
            ("1-00:30", Some(1470)),
            ("7-00:00:00", Some(10080)),
            ("0-0:0:59", Some(1)),
            ("3-", Some(4320)),
        ];
        for (text, minutes) in valid {
            assert_eq!(slurm_time_limit_minutes(text), Some(minutes), "{text}");
        }
        let refused = [
            "",
            "forever",
            "7d",
            "1h",
            "1.5",
            " 90",
            "90 ",
            "+90",
            "1:",
            ":30",
            "1::2",
            "1:2:3:4",
            "1-2-3",
            "1:2-3",
            "-5",
            "--1",
            "1-2:3:4:5",
            "99999999999",
            "24856-0",
            "inf",
            "NONE",
        ];
        for text in refused {
            assert_eq!(slurm_time_limit_minutes(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_duration_too_large_to_count_is_none_not_an_overflow() {
        assert_eq!(parse_duration("99999999999999999999h"), None);
        assert_eq!(parse_duration("18446744073709551615h"), None);
        assert_eq!(parse_duration("5124095576030431h5124095576030431h"), None);
        assert_eq!(parse_duration("24h"), Some(LONGEST_TIMEOUT_SECS));
    }

    #[test]
    fn known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        for days in [-800_000, -1, 0, 59, 60, 11_016, 20_786, 3_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
    }

    #[test]
    fn the_log_and_the_date_header_write_the_clock() {
        let at = |secs: u64| UNIX_EPOCH + Duration::from_secs(secs);
        assert_eq!(rfc3339_micros(at(1_795_982_400) + Duration::from_micros(123_456)), "2026-11-29T20:00:00.123456Z");
        let now = rfc3339_micros(SystemTime::now());
        assert!(now.len() == 27 && now.ends_with('Z') && now.as_bytes()[10] == b'T' && now[..4].parse::<i32>().unwrap() >= 2024, "{now}");
        assert_eq!(http_date(UNIX_EPOCH), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(at(1_795_982_400)), "Sun, 29 Nov 2026 20:00:00 GMT");
        assert_eq!(http_date(at(951_782_400)), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert!(now_secs() > 1_700_000_000);
    }

    #[test]
    fn compact_stamps_write_and_read_back() {
        assert_eq!(compact_stamp(1_796_114_155), "20261201t083555z");
        assert_eq!(compact_stamp_readable("20261201t083555z").as_deref(), Some("2026-12-01 08:35:55 UTC"));
        for other in ["20261201t083555", "2026121t083555z", "20261201x083555z", "2026120at083555z", "legacy"] {
            assert_eq!(compact_stamp_readable(other), None, "{other}");
        }
    }

    /// The four ways the clouds' times were shown to the minute (AWS, Azure, Google, OCI) are this one.
    #[test]
    fn times_read_as_utc_minutes() {
        for (given, shown) in [
            ("2026-12-01T10:02:59Z", "2026-12-01T10:02Z"),
            ("2026-12-01T10:02:41.1234567+00:00", "2026-12-01T10:02Z"),
            ("2026-12-05T00:00:29.600Z", "2026-12-05T00:00Z"),
            ("2026-12-05T00:00:00.000-08:00", "2026-12-05T08:00Z"),
            ("2026-12-31T23:30:00+01:00", "2026-12-31T22:30Z"),
            ("2026-12-31T23:30:00-01:00", "2027-01-01T00:30Z"),
            ("2027-01-01T00:30:00+01:00", "2026-12-31T23:30Z"),
            ("2024-02-29T00:10:00.123+00:30", "2024-02-28T23:40Z"),
            ("2028-03-01T00:10+00:20", "2028-02-29T23:50Z"),
            ("2026-12-01t10:02:00z", "2026-12-01T10:02Z"),
        ] {
            assert_eq!(utc_minute(given), shown, "{given}");
        }
        // What is not an RFC 3339 time with its offset is shown as given (the readers this replaced
        // disagreed here: one took a missing offset as UTC, one a `+1` for a number).
        for odd in [
            "soon",
            "",
            "2026-12-01T10:02",
            "2026-12-01T10:02:00",
            "2026-12-01T10:02:00+05",
            "2026-12-01T+1:02:00Z",
            "2026-13-01T10:02:00Z",
            "2026-02-30T10:02:00Z",
            "2026-12-01T24:00:00Z",
            "2026-12-01T10:02:00.Z",
            "2026-12-01 10:02:00Z",
            "2026-12-01T10:02:00Zjunk",
        ] {
            assert_eq!(utc_minute(odd), odd, "{odd}");
        }
        assert_eq!(utc_minute_of(1_796_114_155), "2026-12-01T08:35Z");
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z"), Some(-1));
    }

    /// A cloud's time may be any text, and a time any number of seconds: every reader gives a value or
    /// `None`, never a panic, and what it reads writes back to the same minute.
    #[test]
    fn any_text_reads_as_a_time_or_none_and_any_second_writes() {
        use crate::fuzz::{check, hostile_str};
        use proptest::prelude::*;
        check("parse_rfc3339", hostile_str(), |t| {
            let _ = (utc_minute(&t), compact_stamp_readable(&t), parse_duration(&t));
            match parse_rfc3339(&t) {
                Some(secs) if parse_rfc3339(&utc_minute_of(secs)) != Some(secs - secs.rem_euclid(60)) => {
                    Err(format!("{t:?} read as {secs} but {} reads otherwise", utc_minute_of(secs)))
                }
                _ => Ok(()),
            }
        });
        check("utc_minute_of", (any::<i64>(), any::<u64>()), |(secs, stamp)| {
            let _ = (utc_minute_of(secs), compact_stamp(stamp), civil_from_days(secs / DAY));
            Ok(())
        });
    }

    #[test]
    fn durations_read_as_written() {
        assert_eq!(parse_duration("90m"), Some(5400));
        assert_eq!(parse_duration("1h30m"), Some(5400));
        assert_eq!(parse_duration("45s"), Some(45));
        for bad in ["2", "2d", "", "m", "0s", "1h 30m"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        assert_eq!(format_duration(Duration::from_millis(200)), "200ms");
        assert_eq!(format_duration(Duration::from_secs(5400)), "90m");
        assert_eq!(format_duration(Duration::from_secs(7200)), "2h");
        assert_eq!(format_duration(Duration::from_secs(61)), "61s");
        for s in [45, 60, 61, 3600, 5400] {
            assert_eq!(parse_duration(&format_duration(Duration::from_secs(s))), Some(s));
        }
    }
}
