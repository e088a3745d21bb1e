//! The one-shot reconcile: what KubeFed's sync and scheduling controllers
//! do, once. `render` works on files (no cluster); `live` reads the host and
//! the members and applies the plan. Both ask the pure core (`crates/kubefed-core`)
//! what every member should hold.

pub mod diff;
pub mod dns;
pub mod events;
pub mod execute;
pub mod files;
pub mod live;
pub mod lock;
pub mod observe;
pub mod pipeline;
pub mod progress;
pub mod ready;
pub mod record;
pub mod render;
pub mod report;
pub mod rsp;
pub mod service_status;
pub mod validate;
pub mod watch;
