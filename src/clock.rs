//! The shell's clock: RFC 3339 timestamps for status conditions (the pure
//! core takes time as an argument).

/// Now, as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now_rfc3339() -> String {
    rfc3339(now_unix())
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
    }
}
