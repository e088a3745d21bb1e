//! Durations (`--timeout 1m30s`): parsed or refused, never a panic or an
//! absurd value.
#![no_main]

use kubefedctl::cmd::options::parse_duration;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(d) = parse_duration(text) {
        assert!(d.as_secs_f64().is_finite());
    }
});
