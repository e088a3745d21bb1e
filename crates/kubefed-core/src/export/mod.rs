//! Exporting a federation to another system's objects, as pure functions:
//! [`karmada`] (KubeFed → Karmada v1.13's API), with a report of every
//! field that could not be carried over exactly.

mod ingress;
pub mod karmada;
mod report;

pub use report::{Finding, FindingKind, ObjectReport};

#[cfg(test)]
mod tests;
