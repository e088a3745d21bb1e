//! Overrides with KubeFed's JSON-patch semantics: any object and any
//! override list are applied or refused, never a panic; a refused patch
//! leaves the object as it was.
#![no_main]

use kubefedctl::core::propagation::overrides::{
    MemberCluster, apply_overrides, overrides_for_cluster,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    // `{"object": ..., "fed": ...}` or any JSON at all.
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let object = doc.get("object").cloned().unwrap_or(Value::Null);
    let fed = doc.get("fed").cloned().unwrap_or(doc.clone());
    let Ok(list) = overrides_for_cluster(&fed, MemberCluster::named("c1")) else {
        return;
    };
    let mut patched = object.clone();
    if apply_overrides(&mut patched, "c1", &list).is_err() {
        assert_eq!(patched, object, "all or nothing");
    }
});
