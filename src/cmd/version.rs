//! `kubefedctl version`: what this client is.

use crate::terminal::output;

use crate::terminal::output::DocumentFormat;
use crate::version::VersionInfo;
use clap::Args;

#[derive(Args, Debug)]
pub struct VersionOptions {
    /// Output format: yaml or json (default: one human line)
    #[arg(short = 'o', long = "output", value_name = "FORMAT")]
    pub output: Option<DocumentFormat>,
}

pub fn run(o: &VersionOptions) -> anyhow::Result<()> {
    let info = VersionInfo::current();
    match o.output {
        None => println!(
            "kubefedctl version: {} (commit {}, {})",
            info.git_version, info.git_commit, info.platform
        ),
        Some(format) => {
            #[derive(serde::Serialize)]
            #[serde(rename_all = "camelCase")]
            struct Doc {
                client_version: VersionInfo,
            }
            output::print(
                &Doc {
                    client_version: info,
                },
                format,
            )?;
        }
    }
    Ok(())
}
