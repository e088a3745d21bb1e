//! Exporting a federation to another system's objects, as pure functions:
//! [`karmada`] (KubeFed → Karmada v1.13's API), with a report of every
//! field that could not be carried over exactly; [`migration`] the
//! decisions of `migrate karmada` beside the mapping.

mod division;
mod ingress;
pub mod karmada;
pub mod migration;
mod report;

pub use report::{Finding, FindingKind, ObjectReport};

#[cfg(test)]
mod tests;
