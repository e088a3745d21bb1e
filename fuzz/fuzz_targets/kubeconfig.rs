//! Kubeconfigs: kube's parser and our context resolution take any text
//! without a panic.
#![no_main]

use kube::config::Kubeconfig;
use kubefedctl::clients::kubeconfig::LoadedKubeconfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = Kubeconfig::from_yaml(text) else {
        return;
    };
    let loaded = LoadedKubeconfig {
        config,
        source: "fuzz".into(),
    };
    let names = loaded.context_names();
    let _ = loaded.resolve_context(None);
    for n in names.iter().take(3) {
        assert_eq!(loaded.resolve_context(Some(n)).ok().as_deref(), Some(n.as_str()));
    }
    let _ = loaded.resolve_context(Some("no-such-context"));
});
