//! One module per command: options (clap) → validate → run.

pub mod completion;
pub mod version;
