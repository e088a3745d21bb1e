//! What a run tells its user, as data: each change it made (or, dry, would
//! make) and each failure, with where it happened. The engines fill them
//! in; the command prints them as text, markdown or JSON in one place, so
//! that no line is written to be parsed back.

use std::fmt;

/// Where a change or a failure happened.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Place {
    /// The host cluster: federated objects, their status, DNS records,
    /// FederatedServiceStatus objects.
    Host,
    /// A member cluster, by its KubeFedCluster's name.
    Member(String),
}

impl Place {
    pub fn member(name: impl Into<String>) -> Place {
        Place::Member(name.into())
    }

    /// The member's name; `None` for the host.
    pub fn member_name(&self) -> Option<&str> {
        match self {
            Place::Host => None,
            Place::Member(m) => Some(m),
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Host => f.write_str("host"),
            Place::Member(m) => f.write_str(m),
        }
    }
}

/// One change a run made or, dry, would make: `m1: create ConfigMap
/// shop/web`, `host: update FederatedDeployment shop/web (replica
/// scheduling)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub place: Place,
    /// What happens to the object: `create`, `update`, `delete`,
    /// `unlabel`, `created`, `delete (pruned)`, ...
    pub verb: String,
    /// The object, as messages name it (`ConfigMap shop/web`).
    pub object: String,
    /// Why, when the verb does not say it (`replica scheduling`).
    pub reason: Option<String>,
    /// A dry run's unified diff of a member object (created and deleted
    /// objects whole), Secret values masked.
    pub diff: Option<String>,
}

impl Change {
    pub fn new(place: Place, verb: impl Into<String>, object: impl Into<String>) -> Change {
        Change {
            place,
            verb: verb.into(),
            object: object.into(),
            reason: None,
            diff: None,
        }
    }

    pub fn because(mut self, reason: impl Into<String>) -> Change {
        self.reason = Some(reason.into());
        self
    }

    /// Without its place: `create ConfigMap shop/web`.
    pub fn what(&self) -> String {
        match &self.reason {
            None => format!("{} {}", self.verb, self.object),
            Some(r) => format!("{} {} ({r})", self.verb, self.object),
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.what())
    }
}

/// One thing that went wrong: `m1: ConfigMap shop/web: admission webhook
/// denied the request`, `FederatedConfigMap shop/web: deletion waits for
/// clusters that are not ready or not observed: m2`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Where; `None` for a federated object as a whole (its placement or
    /// its deletion), which its name says.
    pub place: Option<Place>,
    /// The object it concerns, when one (`ConfigMap shop/web`).
    pub object: Option<String>,
    /// What went wrong.
    pub why: String,
}

impl Failure {
    /// A failure at `place`, of no one object.
    pub fn at(place: Place, why: impl Into<String>) -> Failure {
        Failure {
            place: Some(place),
            object: None,
            why: why.into(),
        }
    }

    /// A failure of `object` at `place`.
    pub fn of(place: Place, object: impl Into<String>, why: impl Into<String>) -> Failure {
        Failure {
            place: Some(place),
            object: Some(object.into()),
            why: why.into(),
        }
    }

    /// A failure of a federated object as a whole.
    pub fn of_federated(object: impl Into<String>, why: impl Into<String>) -> Failure {
        Failure {
            place: None,
            object: Some(object.into()),
            why: why.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.place {
            write!(f, "{p}: ")?;
        }
        if let Some(o) = &self.object {
            write!(f, "{o}: ")?;
        }
        f.write_str(&self.why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_and_failures_read_as_the_report_lines_always_did() {
        let c = Change::new(Place::member("m1"), "create", "ConfigMap shop/web");
        assert_eq!(c.to_string(), "m1: create ConfigMap shop/web");
        let rsp = Change::new(Place::Host, "update", "FederatedDeployment shop/web")
            .because("replica scheduling");
        assert_eq!(
            rsp.to_string(),
            "host: update FederatedDeployment shop/web (replica scheduling)"
        );
        assert_eq!(
            rsp.what(),
            "update FederatedDeployment shop/web (replica scheduling)"
        );
        let cases = [
            (
                Failure::of(Place::member("m2"), "ConfigMap shop/web", "denied"),
                "m2: ConfigMap shop/web: denied",
            ),
            (
                Failure::at(Place::Host, "topology of m1: gone"),
                "host: topology of m1: gone",
            ),
            (
                Failure::of_federated("FederatedConfigMap shop/web", "no placement"),
                "FederatedConfigMap shop/web: no placement",
            ),
        ];
        for (failure, line) in cases {
            assert_eq!(failure.to_string(), line);
        }
        assert!(Place::Host < Place::member("a"), "the host sorts first");
        assert_eq!(Place::member("m1").member_name(), Some("m1"));
        assert_eq!(Place::Host.member_name(), None);
    }
}
