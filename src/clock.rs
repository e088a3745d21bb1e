//! The shell's clock: RFC 3339 timestamps for status conditions (the pure
//! core takes time as an argument).

/// Now, as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now_rfc3339() -> String {
    rfc3339(now_unix())
}

/// Now, as `YYYY-MM-DDTHH:MM:SS.mmmZ`: log lines, where a second cannot
/// order what a watch does (a round, its member writes, a relist).
pub fn now_rfc3339_millis() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339_millis(d.as_secs() as i64, d.subsec_millis())
}

/// Seconds and milliseconds since the epoch as an RFC 3339 UTC timestamp.
pub fn rfc3339_millis(secs: i64, millis: u32) -> String {
    let whole = rfc3339(secs);
    format!("{}.{millis:03}Z", whole.trim_end_matches('Z'))
}

/// Now, in seconds since the epoch.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Seconds since the epoch as an RFC 3339 UTC timestamp.
pub fn rfc3339(secs: i64) -> String {
    crate::core::time::rfc3339(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_this_century() {
        assert!(now_rfc3339().starts_with("20"));
        assert!(rfc3339(now_unix()).starts_with("20"));
        assert!(now_rfc3339_millis().starts_with("20"));
    }

    #[test]
    fn milliseconds_are_three_digits_before_the_zone() {
        assert_eq!(rfc3339_millis(0, 7), "1970-01-01T00:00:00.007Z");
        assert_eq!(rfc3339_millis(86_399, 999), "1970-01-01T23:59:59.999Z");
    }
}
