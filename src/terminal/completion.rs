//! Shell integration: completion scripts for the four shells, dynamic
//! completion of context names from the kubeconfig, and the
//! `kubectl_complete-fed` protocol for `kubectl fed <TAB>`.
//!
//! The scripts are clap's dynamic ones: each only registers a function that
//! calls back `COMPLETE=<shell> kubefedctl -- <words>`, so completions always
//! match the installed binary and can read the user's kubeconfig.

use clap_complete::CompletionCandidate;
use clap_complete::env::{Bash, EnvCompleter, Fish, Powershell, Zsh};
use std::ffi::OsStr;
use std::path::PathBuf;

/// The environment variable that turns a run into a completion request.
pub const COMPLETE_VAR: &str = "COMPLETE";
/// The program the scripts call back.
pub const PROGRAM: &str = "kubefedctl";

/// Shells `completion` can write a script for.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
}

impl Shell {
    pub const ALL: [Shell; 4] = [Shell::Bash, Shell::Zsh, Shell::Fish, Shell::Powershell];

    fn completer(self) -> &'static dyn EnvCompleter {
        match self {
            Shell::Bash => &Bash,
            Shell::Zsh => &Zsh,
            Shell::Fish => &Fish,
            Shell::Powershell => &Powershell,
        }
    }

    /// The file name under `completions/`.
    pub fn file_name(self) -> &'static str {
        match self {
            Shell::Bash => "kubefedctl.bash",
            Shell::Zsh => "_kubefedctl",
            Shell::Fish => "kubefedctl.fish",
            Shell::Powershell => "_kubefedctl.ps1",
        }
    }
}

/// The registration script for `shell`.
pub fn script(shell: Shell) -> String {
    let mut buf = Vec::new();
    shell
        .completer()
        .write_registration(COMPLETE_VAR, PROGRAM, PROGRAM, PROGRAM, &mut buf)
        .expect("writing to memory");
    String::from_utf8(buf).expect("scripts are UTF-8")
}

/// Answers a completion request for the command tree `command` when
/// `COMPLETE` is set (then exits).
pub fn complete_from_env(command: fn() -> clap::Command) {
    clap_complete::CompleteEnv::with_factory(command)
        .var(COMPLETE_VAR)
        .bin(PROGRAM)
        .completer(PROGRAM)
        .complete();
}

/// Candidates for a context name: the contexts of the kubeconfig that the
/// command line being completed would load (its `--kubeconfig`, else
/// `KUBECONFIG`, else `~/.kube/config`). Silent on any error.
pub fn complete_context(current: &OsStr) -> Vec<CompletionCandidate> {
    let prefix = current.to_string_lossy();
    let explicit = kubeconfig_flag(std::env::args());
    let Ok(kc) = crate::clients::kubeconfig::load(explicit.as_deref()) else {
        return Vec::new();
    };
    let current_context = kc.config.current_context.clone().unwrap_or_default();
    kc.context_names()
        .into_iter()
        .filter(|n| n.starts_with(prefix.as_ref()))
        .map(|n| {
            let c = CompletionCandidate::new(n.clone());
            if n == current_context {
                c.help(Some("current context".into()))
            } else {
                c
            }
        })
        .collect()
}

/// The value of `--kubeconfig` in a command line being completed.
fn kubeconfig_flag(args: impl IntoIterator<Item = String>) -> Option<PathBuf> {
    let args: Vec<String> = args.into_iter().collect();
    let mut found = None;
    for (i, a) in args.iter().enumerate() {
        if let Some(v) = a.strip_prefix("--kubeconfig=") {
            found = Some(PathBuf::from(v));
        } else if a == "--kubeconfig"
            && let Some(v) = args.get(i + 1)
        {
            found = Some(PathBuf::from(v));
        }
    }
    found.filter(|p| !p.as_os_str().is_empty())
}

/// `kubectl_complete-fed ARGS... CURRENT`: kubectl passes the plugin's words
/// (the last one being completed, possibly empty) and reads one candidate per
/// line (`value<TAB>help`), then `:<directive>` (4 = no file completion).
pub fn kubectl_plugin_completions(command: clap::Command, words: Vec<String>) -> String {
    let mut cmd = command.bin_name("kubectl fed");
    let mut args: Vec<std::ffi::OsString> = vec![PROGRAM.into()];
    args.extend(words.iter().map(Into::into));
    if words.is_empty() {
        args.push("".into());
    }
    let index = args.len() - 1;
    let cwd = std::env::current_dir().ok();
    let candidates =
        clap_complete::engine::complete(&mut cmd, args, index, cwd.as_deref()).unwrap_or_default();
    let mut out = String::new();
    for c in candidates.iter().filter(|c| !c.is_hide_set()) {
        out.push_str(&c.get_value().to_string_lossy());
        if let Some(help) = c.get_help() {
            out.push('\t');
            out.push_str(&help.to_string().replace('\n', " "));
        }
        out.push('\n');
    }
    out.push_str(":4\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_kubeconfig_flag_in_both_spellings() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            kubeconfig_flag(args(&["kubefedctl", "--kubeconfig", "/x", "join"])),
            Some(PathBuf::from("/x"))
        );
        assert_eq!(
            kubeconfig_flag(args(&["kubefedctl", "--kubeconfig=/y"])),
            Some(PathBuf::from("/y"))
        );
        assert_eq!(kubeconfig_flag(args(&["kubefedctl", "--kubeconfig"])), None);
    }

    #[test]
    fn scripts_call_back_the_program() {
        for shell in Shell::ALL {
            let s = script(shell);
            assert!(s.contains(PROGRAM), "{shell:?}");
            assert!(s.contains(COMPLETE_VAR), "{shell:?}");
        }
    }

    #[test]
    fn plugin_completion_lists_subcommands_and_ends_with_a_directive() {
        use clap::CommandFactory;
        let out = kubectl_plugin_completions(crate::cli::Cli::command(), vec!["ver".into()]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.last(), Some(&":4"));
        assert!(lines.iter().any(|l| l.starts_with("version")), "{out}");
        assert!(!lines.iter().any(|l| l.starts_with("completion")), "{out}");
    }
}
