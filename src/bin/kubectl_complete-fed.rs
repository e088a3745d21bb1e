//! `kubectl fed <TAB>`: kubectl (>= 1.26) runs this with the plugin's words.
use clap::CommandFactory;

fn main() {
    let words: Vec<String> = std::env::args().skip(1).collect();
    let tree = kubefedctl::cli::Cli::command();
    print!(
        "{}",
        kubefedctl::terminal::completion::kubectl_plugin_completions(tree, words)
    );
}
