//! `kubefedctl completion SHELL`: print a completion script.

use crate::terminal::completion::Shell;

use crate::terminal::completion::script;
use clap::Args;

#[derive(Args, Debug)]
#[command(after_help = "Install, for example:
  bash:  kubefedctl completion bash > /etc/bash_completion.d/kubefedctl
  zsh:   kubefedctl completion zsh > \"${fpath[1]}/_kubefedctl\"
  fish:  kubefedctl completion fish \\
             > ~/.config/fish/completions/kubefedctl.fish
  powershell:  kubefedctl completion powershell >> $PROFILE
Context names (--host-cluster-context, ...) complete from your kubeconfig.
`kubectl fed <TAB>` completes through the kubectl_complete-fed helper.")]
pub struct CompletionOptions {
    /// The shell to write the script for
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(o: &CompletionOptions) -> anyhow::Result<()> {
    print!("{}", script(o.shell));
    Ok(())
}
