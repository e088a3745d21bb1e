//! Label selectors: any JSON selector parses or is refused with a reason,
//! and a parsed one answers for any labels, never a panic.
#![no_main]

use kubefedctl::core::propagation::placement::Selector;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::collections::BTreeMap;

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let selector = doc.get("selector").cloned().unwrap_or(doc.clone());
    let labels: BTreeMap<String, String> = doc
        .get("labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    if let Ok(s) = Selector::parse(&selector) {
        let _ = s.matches(&labels);
        let _ = s.matches(&BTreeMap::new());
    }
});
