//! API types: finding the one a user names ([`lookup`], [`builtin`],
//! [`legacy`] spellings), generating its federated type ([`typegen`]), and
//! turning its objects into federated ones ([`convert`], `federate`).

pub mod builtin;
pub mod convert;
pub mod legacy;
pub mod lookup;
pub mod typegen;
