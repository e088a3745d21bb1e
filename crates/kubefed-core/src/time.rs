//! Timestamps as Kubernetes writes them, without a clock: RFC 3339 to
//! seconds since the epoch and back (the shell's `clock` says what now is).

/// Seconds since the epoch as an RFC 3339 UTC timestamp.
pub fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &text[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        rest = frac.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 => {
            let sign = match &rest[..1] {
                "+" => 1,
                "-" => -1,
                _ => return None,
            };
            sign * (rest[1..3].parse::<i64>().ok()? * 3600 + rest[4..6].parse::<i64>().ok()? * 60)
        }
        _ => return None,
    };
    // days from civil (Howard Hinnant)
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + s - offset)
}

/// A duration that cannot be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum DurationError {
    #[error("invalid duration {0:?} (examples: 30s, 500ms, 2m, 1m30s)")]
    Invalid(String),
    #[error("invalid duration unit in {0:?} (use ms, s, m or h)")]
    Unit(String),
    #[error("duration {0:?} is too long")]
    TooLong(String),
}

/// Parses durations the way kubectl's `--request-timeout` does: a number of
/// seconds, or numbers with `ms`, `s`, `m` or `h`, one after another as Go
/// writes them (`1m30s`, `1.5h`, `250ms`).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, DurationError> {
    let invalid = || DurationError::Invalid(text.to_string());
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return seconds(t.parse().map_err(|_| invalid())?, text);
    }
    let mut rest = t;
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(invalid)?;
        let n: f64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => {
                return Err(DurationError::Unit(text.to_string()));
            }
        };
        total += n * scale;
        rest = &rest[unit_len..];
    }
    if t.is_empty() {
        return Err(invalid());
    }
    seconds(total, text)
}

fn seconds(secs: f64, text: &str) -> Result<std::time::Duration, DurationError> {
    std::time::Duration::try_from_secs_f64(secs)
        .map_err(|_| DurationError::TooLong(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_798_761_599), "2026-12-31T23:59:59Z");
        for t in [0, 951_782_400, 1_798_761_599] {
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t));
        }
    }
}
