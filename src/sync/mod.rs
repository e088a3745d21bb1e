//! The reconcile: what KubeFed's sync and scheduling controllers do, once
//! ([`live`]: reads the host and the members and applies the plan, in four
//! steps; [`render`]: on files, no cluster) or for as long as it runs
//! ([`watch`]). [`passes`] are the other controllers' work in a run,
//! [`review`] what a change under review adds, [`lock`] the run lock,
//! [`run`] what all of them share (mode, observation, report, member
//! requests). All ask the pure core (`crates/kubefed-core`) what every
//! member should hold.

pub mod agent;
pub mod karmada;
pub mod live;
pub mod lock;
pub mod passes;
pub mod render;
pub mod review;
pub mod run;
pub mod watch;
