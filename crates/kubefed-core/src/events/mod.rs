//! Kubernetes Events as KubeFed v0.10 records them ([`record`]), and
//! client-go's event correlator ([`correlator`]) that decides whether an
//! Event is created or an existing one's `count` bumped.

pub mod correlator;
pub mod record;
#[cfg(test)]
mod tests;
