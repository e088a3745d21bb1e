//! One module per command: options (clap) → validate → run.

pub mod agent;
pub mod completion;
pub mod credential;
pub mod disable;
pub mod enable;
pub mod export;
pub mod federate;
pub mod init;
pub mod join;
pub mod migrate;
pub mod options;
pub mod orphaning;
pub mod reconcile;
pub mod rollout;
pub mod rotate;
pub mod status;
pub mod unjoin;
pub mod version;
