//! The passes of a run beside the sync itself, each one of KubeFed's other
//! controllers done once: [`rsp`] (scheduling, before decide), [`dns`]
//! (multi-cluster DNS), [`service_status`] (the status controller for
//! Services) and [`events`] (what the controllers record as Events).

pub mod dns;
pub mod events;
pub mod rsp;
pub mod service_status;
