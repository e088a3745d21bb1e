//! The integration tests: one binary, one module per command, driving the
//! built `kubefedctl` against the shared test environment (real API servers
//! of the current Kubernetes release, or of v1.20.2, behind counting,
//! fault-injecting proxies) exactly as a user would. Fixtures live in `fixtures`.
//!
//! Tests run in parallel on the same clusters, so each one isolates itself:
//! its own federation namespace, cluster names, federated group and object
//! namespaces. Cluster-wide objects that would change another test's view
//! (Nodes with topology labels) get an environment of their own.

mod fixtures;

mod busy_servers;
mod cli;
mod dns;
mod environment;
mod errors;
mod events;
mod federate;
mod gitops;
mod handover;
mod in_cluster;
mod install;
mod inventory;
mod karmada;
mod kubefed_e2e;
mod kubefed_ref;
mod membership;
mod overrides;
mod parity;
mod pods;
mod pull;
mod pull_membership;
mod quiet;
mod reconcile;
mod rollout;
mod schemas;
mod server_warnings;
mod status;
mod strategies;
mod types;
mod versions;
mod watch;
mod watch_faults;
