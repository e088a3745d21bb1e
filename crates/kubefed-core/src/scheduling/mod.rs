//! ReplicaSchedulingPreference (upstream `pkg/controller/schedulingpreference`):
//! the controller's rules ([`preference`]) and its replica planner
//! ([`replicas`], upstream's `planner.go`).

pub mod preference;
pub mod replicas;
