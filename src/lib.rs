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
//! - the shell: [`clients`] (kubeconfigs, the host and its members,
//!   discovery, TLS, the layers every client shares), what a write does
//!   ([`apply`], [`federated_types`], [`reconciler`]), the [`terminal`]
//!   (output, logging, signals, completion) and files ([`yaml`]);
//! - [`api`]: KubeFed v0.10's types;
//! - [`core`]: the pure core, no I/O (the `kubefed-core` crate).

pub mod api;
pub mod apply;
pub mod cli;
pub mod clients;
pub mod clock;
pub mod cmd;
/// The pure core, a crate of its own so that "no I/O" holds by its Cargo.toml.
pub use kubefed_core as core;
pub mod error;
pub mod federated_types;
pub mod inventory;
pub mod man;
pub mod member_rbac;
pub mod member_token;
pub mod parallel;
pub mod poll;
pub mod pull_member;
pub mod reconciler;
pub mod sync;
pub mod terminal;
pub mod version;
pub mod yaml;
