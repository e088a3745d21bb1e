//! `kubectl fed <TAB>`: kubectl (>= 1.26) runs this with the plugin's words.
fn main() {
    let words: Vec<String> = std::env::args().skip(1).collect();
    print!(
        "{}",
        kubefedctl::completion::kubectl_plugin_completions(words)
    );
}
