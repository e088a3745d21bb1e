//! What a change under review adds to a run: its federated objects read
//! from files ([`files`], `reconcile -f`), the member objects shown as
//! diffs ([`diff`], `--diff`), and the plan checked by the members' own
//! validation ([`validate`], `--dry-run --validate`).

pub mod diff;
pub mod files;
pub mod validate;
