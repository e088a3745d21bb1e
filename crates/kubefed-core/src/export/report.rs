//! What an export tells its user about each input object: what it became,
//! and every field that was approximated, not mapped, or only noted.

use serde::Serialize;

/// How far a finding is from an exact mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FindingKind {
    /// Exact, but worth knowing (a type listed, a token left out).
    Note,
    /// Mapped to something that behaves differently in some case.
    Approximated,
    /// Nothing in the output carries it.
    NotMapped,
}

impl FindingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::Note => "note",
            FindingKind::Approximated => "approximated",
            FindingKind::NotMapped => "not mapped",
        }
    }
}

/// One finding: the input field it is about and what was done.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    /// The input field (`spec.clusters.us-east.minReplicas`), or empty for
    /// the object as a whole.
    pub field: String,
    pub message: String,
}

impl Finding {
    pub fn new(kind: FindingKind, field: &str, message: impl Into<String>) -> Finding {
        Finding {
            kind,
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// One input object: what it became and its findings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ObjectReport {
    /// `FederatedDeployment ns/name`, `KubeFedCluster member1`.
    pub object: String,
    /// The objects written for it (`apps/v1 Deployment ns/name`).
    pub produced: Vec<String>,
    pub findings: Vec<Finding>,
}

impl ObjectReport {
    pub fn new(object: impl Into<String>) -> ObjectReport {
        ObjectReport {
            object: object.into(),
            ..ObjectReport::default()
        }
    }

    pub fn add(&mut self, kind: FindingKind, field: &str, message: impl Into<String>) {
        self.findings.push(Finding::new(kind, field, message));
    }

    /// Whether anything of this object was approximated or not mapped.
    pub fn inexact(&self) -> bool {
        self.findings.iter().any(|f| f.kind != FindingKind::Note)
    }
}
