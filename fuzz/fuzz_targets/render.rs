//! The offline render's input: any YAML stream of federated objects, RSPs
//! and clusters is either rendered or refused with an error, never a panic;
//! and rendering the same input twice gives the same bytes.
#![no_main]

use kubefedctl::core::propagation::placement::Cluster;
use kubefedctl::sync::render;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let run = || -> Option<Vec<u8>> {
        let mut inputs = render::Inputs::default();
        render::add_documents(&mut inputs, "fuzz.yaml", text).ok()?;
        let clusters = [Cluster::new("a", &[("region", "eu")], true), Cluster::new("b", &[], true)];
        let plan = render::plan(inputs, &clusters).ok()?;
        let mut out = Vec::new();
        render::write_stream(&plan, &mut out).ok()?;
        Some(out)
    };
    assert_eq!(run(), run(), "render is deterministic");
});
