//! kubefedctl: Kubernetes Cluster Federation (KubeFed v0.10's API) from the
//! command line.
//!
//! Layers, top to bottom (each only uses the ones below it; docs/
//! architecture.md names every module, and `hack/check-layers.py` keeps
//! both true):
//! - entry: [`cli`] (the clap tree, global flags, errors → exit codes),
//!   [`man`];
//! - [`cmd`]: one module per command, options → validate → run;
//! - engines: [`sync`] (the one-shot reconcile, render, the watch);
//! - the shell: clients and kubeconfigs ([`kubeconfig`], [`client`],
//!   [`members`], [`host`], [`discovery`], [`tls`]), what a write does
//!   ([`apply`], [`federated_types`], [`reconciler`]), terminal and files
//!   ([`output`], [`yaml`], [`completion`], [`logging`], [`signals`]);
//! - [`api`]: KubeFed v0.10's types;
//! - [`core`]: the pure core, no I/O (the `kubefed-core` crate).

pub mod answers;
pub mod api;
pub mod api_warnings;
pub mod apply;
pub mod cli;
pub mod client;
pub mod clock;
pub mod cmd;
pub mod completion;
/// The pure core, a crate of its own so that "no I/O" holds by its Cargo.toml.
pub use kubefed_core as core;
pub mod discovery;
pub mod error;
pub mod federated_types;
pub mod host;
pub mod kubeconfig;
pub mod logging;
pub mod man;
pub mod members;
pub mod output;
pub mod parallel;
pub mod poll;
pub mod reconciler;
pub mod request_metrics;
pub mod server_retry;
pub mod signals;
pub mod sync;
pub mod tls;
pub mod version;
pub mod yaml;
