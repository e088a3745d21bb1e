//! One module per command: options (clap) → validate → run.

pub mod completion;
pub mod init;
pub mod join;
pub mod unjoin;
pub mod version;
