//! The Go-compatible JSON used for KubeFed's hashes: it is JSON that reads
//! back as the same value (numbers as Go's float64 sees them).
#![no_main]

use kubefedctl::core::propagation::version::{floats_only, go_json};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;


fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let text = go_json(&value);
    let back: Value = serde_json::from_str(&text).expect("go_json writes JSON");
    assert_eq!(floats_only(&back), floats_only(&value), "round trip of {text}");
});
