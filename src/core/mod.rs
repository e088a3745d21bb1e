//! The pure core: rules with no I/O, no `async`, no clock.

pub mod builtin_types;
pub mod compare;
pub mod convert;
pub mod decide;
pub mod describe;
pub mod desired;
pub mod dns;
pub mod lease;
pub mod legacy;
pub mod lookup;
pub mod membership;
pub mod names;
pub mod overrides;
pub mod placement;
pub mod plan;
pub mod planner;
pub mod queue;
pub mod reconciler;
pub mod record;
pub mod retain;
pub mod scheduling;
pub mod settings;
pub mod shard;
pub mod time;
pub mod typegen;
pub mod version;
