//! A member request to make, as data: what the pipeline runs
//! (`live::execute`), what `--validate` sends as a dry run
//! (`review::validate`) and what `unjoin` cleans up, without the one
//! knowing the others.

use crate::core::describe::{ObjectKey, key_of};
use crate::core::propagation::action::{Action, Decision};
use crate::sync::run::observe::ObservedType;
use serde_json::Value;

/// What a request or a pipeline job is for, within its observed type.
#[derive(Clone, Copy, Debug)]
pub enum Target<'s> {
    /// This federated object, one of its type's observed objects.
    Object(&'s Value),
    /// Member copies whose federated object is gone.
    Orphan,
}

impl<'s> Target<'s> {
    /// The federated object, if there is one.
    pub fn object(&self) -> Option<&'s Value> {
        match *self {
            Target::Object(fed) => Some(fed),
            Target::Orphan => None,
        }
    }

    /// Whether it is `fed` itself, the same observed object (not one
    /// equal to it).
    pub fn is(&self, fed: &Value) -> bool {
        self.object().is_some_and(|o| std::ptr::eq(o, fed))
    }
}

/// One member request to make.
#[derive(Clone)]
pub struct Work<'s> {
    /// Its type, as observed.
    pub ty: &'s ObservedType,
    pub target: Target<'s>,
    pub decision: Decision,
    /// The member object as listed (absent for creates).
    pub live: Option<Value>,
}

/// The type by its name; the rest as it is.
impl std::fmt::Debug for Work<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Work")
            .field("ty", &self.ty.name)
            .field("target", &self.target)
            .field("decision", &self.decision)
            .field("live", &self.live)
            .finish()
    }
}

impl Work<'_> {
    /// The member object's key.
    pub fn key(&self) -> ObjectKey {
        match (&self.live, &self.decision.action) {
            (Some(live), _) => key_of(live),
            (None, Action::Create(obj)) => key_of(obj),
            (None, Action::Update { object, .. }) => key_of(object),
            _ => ObjectKey::default(),
        }
    }
}
