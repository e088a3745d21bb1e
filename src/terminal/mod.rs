//! The terminal: printing results ([`output`]), diagnostics ([`logging`]),
//! signals ([`signals`]) and shell completion ([`completion`]).

pub mod completion;
pub mod logging;
pub mod output;
pub mod signals;
