//! Member clusters: what `join` writes (KubeFed's `kubefedctl join`), what
//! its identity may do ([`rbac`]) and how long its token lives ([`token`]),
//! how a member's health is judged (its cluster controller), and which TLS
//! checks a member turns off.

pub mod cleanup;
pub mod health;
pub mod inventory;
pub mod membership;
pub mod pull;
pub mod rbac;
pub mod tls;
pub mod token;
