//! `kubectl fed ...`: kubefedctl as a kubectl plugin.
fn main() -> std::process::ExitCode {
    kubefedctl::cli::main("kubectl fed")
}
