//! The Go-compatible JSON used for KubeFed's hashes: it is JSON that reads
//! back as the same value (numbers as Go's float64 sees them).
#![no_main]

use kubefedctl::core::version::go_json;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn floats(v: &Value) -> Value {
    match v {
        Value::Number(n) => serde_json::Number::from_f64(n.as_f64().unwrap_or(0.0))
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Value::Array(a) => Value::Array(a.iter().map(floats).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), floats(v))).collect()),
        other => other.clone(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let text = go_json(&value);
    let back: Value = serde_json::from_str(&text).expect("go_json writes JSON");
    assert_eq!(floats(&back), floats(&value), "round trip of {text}");
});
