//! Member fields that other controllers own (ours; kubefed#1510, #1354,
//! PR #1381): KubeFed writes the whole template over each member object, so
//! a field another field manager sets there (cert-manager's injected
//! `caBundle`, an HPA's `replicas` through the `scale` subresource, a
//! sidecar injector's container, a mesh's label) is reverted on every sync
//! and the two controllers fight forever. Opted in (per type or object),
//! the update keeps every field another manager owns (the member object's
//! `managedFields`) that neither the template nor an override sets, and the
//! paths a user lists for fields no manager records. A field the template
//! does set, which another manager owns with another value, is a conflict:
//! their value is kept and the conflict reported, unless the run forces
//! ours. Upstream's fixed retain rules (`retain.rs`) still apply first.

use serde_json::{Map, Value};

/// On a FederatedTypeConfig or a federated object: `"true"` keeps the
/// fields other managers own (`"false"` on an object turns it off for it).
pub const RETAIN_FOREIGN_ANNOTATION: &str = "kubefedctl.kubefed.io/retain-foreign-fields";
/// On a FederatedTypeConfig or a federated object: paths whose member
/// value always stays (`spec.replicas,webhooks[*].clientConfig.caBundle`).
pub const RETAIN_FIELDS_ANNOTATION: &str = "kubefedctl.kubefed.io/retain-fields";
/// The field manager this tool writes member objects as.
pub const FIELD_MANAGER: &str = "kubefedctl";
/// Managers whose fields are the federation's own: ours, and KubeFed's
/// controller-manager (a federation handed over keeps its ownership).
pub const FEDERATION_MANAGERS: [&str; 2] = [FIELD_MANAGER, "controller-manager"];

/// What a federated object keeps of its member copies beyond upstream's rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// Keep the fields other managers own.
    pub foreign: bool,
    /// Paths whose member value stays.
    pub paths: Vec<Vec<Step>>,
}

/// One step of a retained path: a field, or every element of a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Field(String),
    Each,
}

impl Policy {
    /// The policy of a FederatedTypeConfig's annotations, with a federated
    /// object's over it (its `retain-foreign-fields` wins; paths add up).
    /// A malformed value is an error naming the annotation.
    pub fn of(type_annotations: &Value, object: &Value) -> Result<Policy, String> {
        let object_annotations = &object["metadata"]["annotations"];
        let flag = |a: &Value| -> Result<Option<bool>, String> {
            match a[RETAIN_FOREIGN_ANNOTATION].as_str() {
                None => Ok(None),
                Some("true") => Ok(Some(true)),
                Some("false") => Ok(Some(false)),
                Some(other) => Err(format!(
                    "annotation {RETAIN_FOREIGN_ANNOTATION}: {other:?} is not \"true\" or \"false\""
                )),
            }
        };
        let foreign = flag(object_annotations)?
            .or(flag(type_annotations)?)
            .unwrap_or(false);
        let mut paths = Vec::new();
        for a in [type_annotations, object_annotations] {
            if let Some(text) = a[RETAIN_FIELDS_ANNOTATION].as_str() {
                paths.extend(parse_paths(text)?);
            }
        }
        Ok(Policy { foreign, paths })
    }

    pub fn is_active(&self) -> bool {
        self.foreign || !self.paths.is_empty()
    }
}

/// Whether these annotations (a FederatedTypeConfig's or a federated
/// object's) ask to keep anything of the member copies, or to compare
/// them (report-only): their runs then read the copies whole,
/// `managedFields` included.
pub fn wants_whole_copies(annotations: &Value) -> bool {
    // Report-only objects compare every field they set (`drift`).
    annotations[crate::propagation::strategy::APPLY_ANNOTATION] == "ReportDiff"
        || annotations[RETAIN_FOREIGN_ANNOTATION] == "true"
        || annotations[RETAIN_FIELDS_ANNOTATION]
            .as_str()
            .is_some_and(|p| !p.trim().is_empty())
}

/// `spec.replicas,webhooks[*].clientConfig.caBundle` as paths.
pub fn parse_paths(text: &str) -> Result<Vec<Vec<Step>>, String> {
    let mut out = Vec::new();
    for path in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mut steps = Vec::new();
        for part in path.split('.') {
            let (name, each) = match part.strip_suffix("[*]") {
                Some(name) => (name, true),
                None => (part, false),
            };
            if name.is_empty() || name.contains(['[', ']', '*']) {
                return Err(format!(
                    "annotation {RETAIN_FIELDS_ANNOTATION}: {path:?} is not a path like spec.replicas or webhooks[*].clientConfig.caBundle"
                ));
            }
            steps.push(Step::Field(name.to_string()));
            if each {
                steps.push(Step::Each);
            }
        }
        out.push(steps);
    }
    Ok(out)
}

/// A field the template sets that another manager owns with another value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// `spec.replicas`, `webhooks[name=w].clientConfig.caBundle`.
    pub path: String,
    pub managers: Vec<String>,
}

/// `desired` (the template with retention and overrides applied) with what
/// `policy` keeps of `live`; the conflicts found. With `force`, a conflict
/// keeps the template's value, else the member's.
pub fn keep_theirs(
    desired: &mut Value,
    live: &Value,
    policy: &Policy,
    force: bool,
) -> Vec<Conflict> {
    let mut conflicts = Vec::new();
    if policy.foreign {
        for (manager, fields) in foreign_fields(live) {
            let mut walk = Walk {
                manager: &manager,
                force,
                conflicts: &mut conflicts,
            };
            walk.node(&fields, live, desired, &mut Vec::new());
        }
    }
    for path in &policy.paths {
        keep_path(path, live, desired);
    }
    merge_managers(conflicts)
}

/// Each other manager's field set of the main resource and its `scale`
/// subresource (an HPA's replicas), status aside.
fn foreign_fields(live: &Value) -> Vec<(String, Map<String, Value>)> {
    let entries = live["metadata"]["managedFields"].as_array();
    let mut out = Vec::new();
    for e in entries.into_iter().flatten() {
        let manager = e["manager"].as_str().unwrap_or("");
        let subresource = e["subresource"].as_str().unwrap_or("");
        if FEDERATION_MANAGERS.contains(&manager) || !matches!(subresource, "" | "scale") {
            continue;
        }
        let Some(fields) = e["fieldsV1"].as_object() else {
            continue;
        };
        let mut fields = fields.clone();
        fields.remove("f:status");
        out.push((manager.to_string(), fields));
    }
    out
}

/// A walk of one manager's field set over the member and desired objects.
struct Walk<'a> {
    manager: &'a str,
    force: bool,
    conflicts: &'a mut Vec<Conflict>,
}

impl Walk<'_> {
    /// Keeps in `desired` what the manager owns under this node of `live`.
    fn node(
        &mut self,
        set: &Map<String, Value>,
        live: &Value,
        desired: &mut Value,
        at: &mut Vec<String>,
    ) {
        for (key, sub) in set {
            let sub = sub.as_object().cloned().unwrap_or_default();
            if let Some(name) = key.strip_prefix("f:") {
                let Some(theirs) = live.get(name) else {
                    continue;
                };
                at.push(name.to_string());
                self.field(&sub, theirs, desired, name, at);
                at.pop();
            } else if let Some(k) = key.strip_prefix("k:") {
                let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(k) else {
                    continue;
                };
                let Some(theirs) = element(live, &keys) else {
                    continue;
                };
                at.push(format!("[{}]", describe_keys(&keys)));
                self.element(&sub, theirs, desired, &keys, at);
                at.pop();
            } else if let Some(v) = key.strip_prefix("v:") {
                let (Ok(v), Some(list)) =
                    (serde_json::from_str::<Value>(v), desired.as_array_mut())
                else {
                    continue;
                };
                if !list.contains(&v) {
                    list.push(v);
                }
            }
        }
    }

    /// A field they own: copied when desired lacks it, walked into when
    /// they own fields below it, a conflict when both set it differently.
    fn field(
        &mut self,
        sub: &Map<String, Value>,
        theirs: &Value,
        desired: &mut Value,
        name: &str,
        at: &mut Vec<String>,
    ) {
        let Some(obj) = desired.as_object_mut() else {
            return;
        };
        match obj.get_mut(name) {
            None => {
                obj.insert(name.to_string(), theirs.clone());
            }
            Some(ours) if is_leaf(sub) => self.leaf(theirs, ours, at),
            Some(ours) => self.node(sub, theirs, ours, at),
        }
    }

    /// A list element they own (or own fields of).
    fn element(
        &mut self,
        sub: &Map<String, Value>,
        theirs: &Value,
        desired: &mut Value,
        keys: &Map<String, Value>,
        at: &mut Vec<String>,
    ) {
        let Some(list) = desired.as_array_mut() else {
            return;
        };
        match list.iter_mut().find(|e| matches_keys(e, keys)) {
            None => list.push(theirs.clone()),
            Some(ours) if is_leaf(sub) => self.leaf(theirs, ours, at),
            Some(ours) => self.node(sub, theirs, ours, at),
        }
    }

    fn leaf(&mut self, theirs: &Value, ours: &mut Value, at: &[String]) {
        if ours == theirs {
            return;
        }
        self.conflicts.push(Conflict {
            path: join(at),
            managers: vec![self.manager.to_string()],
        });
        if !self.force {
            *ours = theirs.clone();
        }
    }
}

/// A node that owns nothing below itself.
fn is_leaf(sub: &Map<String, Value>) -> bool {
    sub.keys().all(|k| k == ".")
}

fn element<'v>(list: &'v Value, keys: &Map<String, Value>) -> Option<&'v Value> {
    list.as_array()?.iter().find(|e| matches_keys(e, keys))
}

fn matches_keys(e: &Value, keys: &Map<String, Value>) -> bool {
    keys.iter().all(|(k, v)| e.get(k) == Some(v))
}

fn describe_keys(keys: &Map<String, Value>) -> String {
    keys.iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_string)))
        .collect::<Vec<_>>()
        .join(",")
}

/// `spec.template.spec.containers[name=web].image`.
fn join(at: &[String]) -> String {
    let mut out = String::new();
    for step in at {
        if !out.is_empty() && !step.starts_with('[') {
            out.push('.');
        }
        out.push_str(step);
    }
    out
}

/// One listed path: the member's value stays wherever it has one. List
/// elements pair up by `name` when they have one, else by position.
fn keep_path(path: &[Step], live: &Value, desired: &mut Value) {
    match path {
        [] => {}
        [Step::Field(name)] => {
            if let (Some(theirs), Some(obj)) = (live.get(name), desired.as_object_mut()) {
                obj.insert(name.clone(), theirs.clone());
            }
        }
        [Step::Field(name), rest @ ..] => {
            if let (Some(theirs), Some(ours)) = (live.get(name), desired.get_mut(name)) {
                keep_path(rest, theirs, ours);
            }
        }
        [Step::Each, rest @ ..] => {
            let (Some(theirs), Some(ours)) = (live.as_array(), desired.as_array_mut()) else {
                return;
            };
            for (i, ours) in ours.iter_mut().enumerate() {
                let named = ours.get("name").filter(|n| n.is_string());
                let partner = match named {
                    Some(n) => theirs.iter().find(|t| t.get("name") == Some(n)),
                    None => theirs.get(i),
                };
                if let Some(t) = partner {
                    keep_path(rest, t, ours);
                }
            }
        }
    }
}

/// What a run says of the conflicts in one member object (none: `None`).
pub fn conflicts_line(conflicts: &[Conflict], forced: bool) -> Option<String> {
    if conflicts.is_empty() {
        return None;
    }
    let fields: Vec<String> = conflicts
        .iter()
        .map(|c| format!("{} (owned by {})", c.path, c.managers.join(", ")))
        .collect();
    Some(match forced {
        true => format!(
            "conflict: the template's value written over {}",
            fields.join("; ")
        ),
        false => format!(
            "conflict: kept the member's value of {}: the template sets it too (change it there, drop it from the template, or --force-conflicts)",
            fields.join("; ")
        ),
    })
}

/// One conflict per path, naming every manager that owns it.
fn merge_managers(conflicts: Vec<Conflict>) -> Vec<Conflict> {
    let mut out: Vec<Conflict> = Vec::new();
    for c in conflicts {
        match out.iter_mut().find(|o| o.path == c.path) {
            Some(o) => o.managers.extend(c.managers),
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
