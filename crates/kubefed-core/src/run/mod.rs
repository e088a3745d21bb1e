//! What one run or watch is set up with: the KubeFedConfig's [`settings`],
//! the run lock ([`lease`]), its part of the objects ([`shard`]), the
//! watch's work [`queue`], what one run covers ([`scope`]), and the
//! in-cluster [`reconciler`] `init` installs.

pub mod lease;
pub mod queue;
pub mod reconciler;
pub mod scope;
pub mod settings;
pub mod shard;
