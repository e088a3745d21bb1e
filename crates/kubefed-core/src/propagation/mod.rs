//! KubeFed's sync controller (`pkg/controller/sync`), as rules: which
//! members a federated object (read through [`federated`]) selects ([`placement`]), what each gets
//! ([`overrides`] with [`member_values`], [`desired`], [`retain`]), whether a member already holds
//! it ([`compare`], [`version`]), the decide step ([`decide`]: [`member`]
//! and [`deletion`] choose each member's [`action`], [`status`] is what is
//! written back), what a request's answer means ([`retry`], [`readiness`])
//! and the record step ([`record`]); [`crd_first`] puts federated CRDs
//! before the objects of the types they define. [`proposal`] and [`field_owners`] are
//! `reconcile -f`'s; [`rollout`] gates a change wave by wave; [`strategy`]
//! says when a copy is taken over or only compared ([`drift`]).

pub mod action;
pub mod compare;
pub mod crd_first;
pub mod decide;
pub mod deletion;
pub mod desired;
pub mod drift;
pub mod federated;
pub mod field_owners;
pub mod foreign;
pub mod member;
pub mod member_values;
pub mod overrides;
pub mod placement;
pub mod proposal;
pub mod readiness;
pub mod record;
pub mod report;
pub mod retain;
pub mod retry;
pub mod rollout;
pub mod status;
pub mod strategy;
#[cfg(test)]
mod strategy_tests;
#[cfg(test)]
mod tests;
pub mod version;
