//! Man pages, as kubectl-style tools ship them: `kubefedctl(1)` and one
//! page per command (`kubefedctl-reconcile(1)` ...), rendered from the same
//! clap tree as `--help` so they never disagree. `docs/man/` holds them;
//! `hack/update-generated.sh` rewrites them and a test fails while stale.
//!
//! clap_mangen's own page lists a `kubefedctl-<sub>-<subsub>(1)` for nested
//! commands and `kubefedctl-help(1)`, pages nobody ships; so the sections
//! are put together here: clap_mangen's name, synopsis, description and
//! options, then our COMMANDS (only pages that exist), NOTES and EXAMPLES
//! (the help's after-text), EXIT STATUS (one table for every command) and
//! SEE ALSO.

use crate::cli::{COMMAND_GROUPS, Cli};
use clap::CommandFactory;
use clap_mangen::roff::{Roff, bold, roman};

/// Every page: file name and roff text.
pub fn pages() -> Vec<(String, Vec<u8>)> {
    let mut root = Cli::command().bin_name("kubefedctl");
    root.build();
    let subs: Vec<clap::Command> = root
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .cloned()
        .collect();
    let mut pages = vec![("kubefedctl.1".to_string(), render(&root, None))];
    for sub in &subs {
        // clap names are static strings; a page is made once per process.
        let name: &'static str = format!("kubefedctl-{}", sub.get_name()).leak();
        let page = sub
            .clone()
            .name(name)
            .bin_name(format!("kubefedctl {}", sub.get_name()));
        pages.push((format!("{name}.1"), render(&page, Some(sub.get_name()))));
    }
    pages
}

/// The preamble every roff text starts with; written once per page.
const PREAMBLE: &str = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";

/// A page: `command` is the root (None) or the top-level command `name`.
fn render(cmd: &clap::Command, command: Option<&str>) -> Vec<u8> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut section = |f: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| {
        let mut out = Vec::new();
        f(&mut out).expect("rendering into memory");
        parts.push(out);
    };
    section(&|w| man.render_title(w));
    section(&|w| man.render_name_section(w));
    section(&|w| man.render_synopsis_section(w));
    section(&|w| man.render_description_section(w));
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        section(&|w| man.render_options_section(w));
    }
    let mut text = String::new();
    for (i, part) in parts.into_iter().enumerate() {
        let part = String::from_utf8(part).expect("roff is UTF-8");
        text.push_str(if i == 0 {
            &part
        } else {
            part.strip_prefix(PREAMBLE).unwrap_or(&part)
        });
    }
    let mut roff = Roff::new();
    commands(&mut roff, cmd, command);
    after_help(&mut roff, cmd);
    roff.control("SH", ["EXIT STATUS"]);
    roff.control("nf", [] as [&str; 0]);
    roff.text([roman(crate::error::EXIT_CODES_HELP)]);
    roff.control("fi", [] as [&str; 0]);
    see_also(&mut roff, command);
    let extra = roff.render();
    text.push_str(extra.strip_prefix(PREAMBLE).unwrap_or(&extra));
    text.into_bytes()
}

/// The root's commands (each a page of its own), or a command's actions
/// (`orphaning-deletion enable`), which are on this page: their usage.
fn commands(roff: &mut Roff, cmd: &clap::Command, command: Option<&str>) {
    let subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if subs.is_empty() {
        return;
    }
    roff.control("SH", ["COMMANDS"]);
    for sub in subs {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        roff.control("TP", [] as [&str; 0]);
        match command {
            None => roff.text([bold(format!("kubefedctl-{}", sub.get_name())), roman("(1)")]),
            Some(_) => {
                let usage = sub
                    .clone()
                    .bin_name(format!(
                        "{} {}",
                        cmd.get_bin_name().unwrap_or(""),
                        sub.get_name()
                    ))
                    .render_usage()
                    .to_string();
                roff.text([bold(usage.trim_start_matches("Usage: ").to_string())])
            }
        };
        roff.text([roman(about)]);
    }
}

/// The help's after-text: prose as NOTES, from `Examples:` on as EXAMPLES.
fn after_help(roff: &mut Roff, cmd: &clap::Command) {
    let Some(text) = cmd.get_after_long_help().or(cmd.get_after_help()) else {
        return;
    };
    let text = text.to_string();
    let (notes, examples) = match text.find("Examples:") {
        Some(i) => (text[..i].trim(), text[i + "Examples:".len()..].trim_end()),
        None => (text.trim(), ""),
    };
    for (heading, body) in [("NOTES", notes), ("EXAMPLES", examples)] {
        if body.trim().is_empty() {
            continue;
        }
        roff.control("SH", [heading]);
        roff.control("nf", [] as [&str; 0]);
        roff.text([roman(body.trim_start_matches('\n').to_string())]);
        roff.control("fi", [] as [&str; 0]);
    }
}

/// The root names every command's page; a command names the root and the
/// commands of its help group.
fn see_also(roff: &mut Roff, command: Option<&str>) {
    let names: Vec<&str> = match command {
        None => COMMAND_GROUPS
            .iter()
            .flat_map(|(_, names)| names.iter().copied())
            .collect(),
        Some(me) => {
            let group = COMMAND_GROUPS
                .iter()
                .find(|(_, names)| names.contains(&me))
                .map_or(&[][..], |(_, names)| names);
            group.iter().copied().filter(|n| *n != me).collect()
        }
    };
    roff.control("SH", ["SEE ALSO"]);
    let mut refs = Vec::new();
    if command.is_some() {
        refs.push(bold("kubefedctl"));
        refs.push(roman("(1)"));
    }
    for name in names {
        if !refs.is_empty() {
            refs.push(roman(", "));
        }
        refs.push(bold(format!("kubefedctl-{name}")));
        refs.push(roman("(1)"));
    }
    refs.push(roman(", "));
    refs.push(bold("kubectl"));
    refs.push(roman("(1)"));
    roff.text(refs);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every page another page names exists, and each page has the
    /// sections a man page reader looks for.
    #[test]
    fn pages_name_only_pages_that_exist_and_have_every_section() {
        let pages = pages();
        let names: Vec<String> = pages
            .iter()
            .map(|(file, _)| file.trim_end_matches(".1").to_string())
            .collect();
        for (file, text) in &pages {
            let text = String::from_utf8(text.clone()).unwrap();
            for section in ["NAME", "SYNOPSIS", "EXIT STATUS", "SEE ALSO"] {
                let heading = match section.contains(' ') {
                    true => format!(".SH \"{section}\""),
                    false => format!(".SH {section}"),
                };
                assert!(text.contains(&heading), "{file}: {section}");
            }
            assert_eq!(text.matches(".ds Aq").count(), 2, "{file}: one preamble");
            // Every `\fBname\fR(1)` reference is a page we ship, or kubectl.
            for reference in text.split("\\fB").skip(1) {
                let Some((name, rest)) = reference.split_once("\\fR") else {
                    continue;
                };
                if rest.starts_with("(1)") && name != "kubectl" {
                    let name = name.replace("\\-", "-");
                    assert!(names.contains(&name), "{file} names {name}(1)");
                }
            }
            assert!(!text.contains("help(1)"), "{file}");
        }
        let reconcile = &pages
            .iter()
            .find(|(f, _)| f == "kubefedctl-reconcile.1")
            .unwrap()
            .1;
        let reconcile = String::from_utf8(reconcile.clone()).unwrap();
        assert!(reconcile.contains(".SH EXAMPLES"));
    }
}
