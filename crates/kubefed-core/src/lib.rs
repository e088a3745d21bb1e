//! kubefedctl's pure core: KubeFed v0.10's rules with no I/O, no `async`,
//! no clock. Its dependencies (Cargo.toml) are serde, JSON, MD5 and schema
//! generation, so that holds by construction; the shell in the
//! `kubefedctl` crate does the talking to clusters, files and terminals.
//!
//! Folders follow KubeFed's controllers: [`propagation`] (the sync
//! controller: placement, overrides, what each member gets, the status),
//! [`scheduling`] (ReplicaSchedulingPreference), [`dns`], [`events`],
//! [`service_status`], [`export`] (to Karmada), [`cluster`] (membership and health), [`types`]
//! (federated types and `federate`), and [`run`] (what one run or watch is
//! set up with: settings, lock, shard, queue, the in-cluster reconciler).

pub mod cluster;
pub mod describe;
pub mod dns;
pub mod events;
pub mod export;
pub mod held;
pub mod names;
pub mod object_text;
pub mod outcome;
pub mod propagation;
pub mod run;
pub mod scheduling;
pub mod secrets;
pub mod service_status;
pub mod time;
pub mod types;
pub mod warning;
