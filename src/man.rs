//! Man pages, as kubectl-style tools ship them: `kubefedctl(1)` and one
//! page per command (`kubefedctl-reconcile(1)` ...), rendered from the same
//! clap tree as `--help` so they never disagree. `docs/man/` holds them;
//! `hack/update-generated.sh` rewrites them and a test fails while stale.

use crate::cli::Cli;
use clap::CommandFactory;

/// Every page: file name and roff text.
pub fn pages() -> Vec<(String, Vec<u8>)> {
    let mut root = Cli::command().bin_name("kubefedctl");
    root.build();
    let mut pages = vec![("kubefedctl.1".to_string(), render(root.clone()))];
    for sub in root
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        // clap names are static strings; a page is made once per process.
        let name: &'static str = format!("kubefedctl-{}", sub.get_name()).leak();
        let page = sub
            .clone()
            .name(name)
            .bin_name(format!("kubefedctl {}", sub.get_name()));
        pages.push((format!("{name}.1"), render(page)));
    }
    pages
}

fn render(cmd: clap::Command) -> Vec<u8> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .expect("rendering into memory");
    out
}
