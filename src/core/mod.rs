//! The pure core: rules with no I/O, no `async`, no clock.

pub mod builtin_types;
pub mod compare;
pub mod convert;
pub mod lookup;
pub mod membership;
pub mod names;
pub mod typegen;
