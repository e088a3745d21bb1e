//! How a federated object is applied to its members: whether an existing
//! member object that the federation does not manage yet is taken over
//! (`kubefedctl.kubefed.io/take-over`), and whether anything is written at
//! all or only the differences reported (`kubefedctl.kubefed.io/apply`).
//!
//! The names follow KubeFleet's `applyStrategy` (`whenToTakeOver: Always |
//! IfNoDiff | Never`, `type: ReportDiff`). KubeFed knows only the
//! federation-wide `KubeFedConfig.spec.syncController.adoptResources`,
//! which stays the default; its controller, handed the federation,
//! ignores both annotations (docs/kubefed-differences.md).

use serde_json::Value;

/// The annotation (on a FederatedTypeConfig for its objects, or on a
/// federated object, which wins) choosing when an existing member object
/// is taken over.
pub const TAKE_OVER_ANNOTATION: &str = "kubefedctl.kubefed.io/take-over";
/// The annotation (same places) choosing whether member objects are
/// written (`Apply`, the default) or only compared (`ReportDiff`).
pub const APPLY_ANNOTATION: &str = "kubefedctl.kubefed.io/apply";

/// When a member object that exists but is not managed yet (no
/// `kubefed.io/managed` label) becomes the federation's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeOver {
    /// Always: it is overwritten with the desired object (KubeFed's
    /// `adoptResources: Enabled`).
    Always,
    /// Only when the fields the template and overrides set already hold
    /// the desired values; otherwise it is left as it is (`AlreadyExists`).
    IfNoDiff,
    /// Never: it is left as it is (KubeFed's `adoptResources: Disabled`).
    Never,
}

impl TakeOver {
    fn parse(text: &str) -> Option<TakeOver> {
        match text {
            "Always" => Some(TakeOver::Always),
            "IfNoDiff" => Some(TakeOver::IfNoDiff),
            "Never" => Some(TakeOver::Never),
            _ => None,
        }
    }
}

/// What a run does with an object's member copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// Create, update and delete them as the decide step says.
    Apply,
    /// Write nothing to the members; compare each copy with what would be
    /// written and report the differences (drift).
    ReportDiff,
}

/// One object's strategy, its annotations and its type's read together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strategy {
    pub take_over: TakeOver,
    pub apply: Apply,
}

impl Strategy {
    /// The strategy of a federated object: its own annotations, then its
    /// FederatedTypeConfig's, then the federation's (`adopt_resources`,
    /// and `report_only` for `reconcile --report-only`, which no
    /// annotation can lift). A value that is not one of the names is an
    /// error naming the annotation and where it was found.
    pub fn of(
        type_annotations: &Value,
        object: &Value,
        adopt_resources: bool,
        report_only: bool,
    ) -> Result<Strategy, String> {
        let object_annotations = &object["metadata"]["annotations"];
        let read = |name: &str| {
            (object_annotations[name].as_str()).or_else(|| type_annotations[name].as_str())
        };
        let take_over = match read(TAKE_OVER_ANNOTATION) {
            None if adopt_resources => TakeOver::Always,
            None => TakeOver::Never,
            Some(v) => TakeOver::parse(v).ok_or_else(|| {
                bad_value(
                    TAKE_OVER_ANNOTATION,
                    v,
                    "Always, IfNoDiff or Never",
                    object_annotations,
                )
            })?,
        };
        let apply = match read(APPLY_ANNOTATION) {
            None | Some("Apply") => Apply::Apply,
            Some("ReportDiff") => Apply::ReportDiff,
            Some(v) => {
                return Err(bad_value(
                    APPLY_ANNOTATION,
                    v,
                    "Apply or ReportDiff",
                    object_annotations,
                ));
            }
        };
        let apply = if report_only {
            Apply::ReportDiff
        } else {
            apply
        };
        Ok(Strategy { take_over, apply })
    }

    /// The strategy of an object with no annotation of its own or its
    /// type's, in a federation adopting (or not) and a run writing.
    pub fn plain(adopt_resources: bool) -> Strategy {
        Strategy::of(&Value::Null, &Value::Null, adopt_resources, false)
            .expect("no annotation to misread")
    }

    pub fn reports_only(&self) -> bool {
        self.apply == Apply::ReportDiff
    }
}

/// `annotation kubefedctl.kubefed.io/take-over (of its FederatedTypeConfig): "x" is not Always, ...`
fn bad_value(annotation: &str, value: &str, allowed: &str, object_annotations: &Value) -> String {
    let place = match object_annotations[annotation].as_str() {
        Some(_) => "",
        None => " (of its FederatedTypeConfig)",
    };
    format!("annotation {annotation}{place}: {value:?} is not {allowed}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(annotations: Value) -> Value {
        json!({"metadata": {"name": "a", "annotations": annotations}})
    }

    #[test]
    fn the_object_wins_over_its_type_and_the_type_over_the_federation() {
        let ftc = json!({TAKE_OVER_ANNOTATION: "IfNoDiff", APPLY_ANNOTATION: "ReportDiff"});
        let s = Strategy::of(
            &ftc,
            &obj(json!({TAKE_OVER_ANNOTATION: "Never"})),
            true,
            false,
        )
        .unwrap();
        assert_eq!(s.take_over, TakeOver::Never);
        assert_eq!(s.apply, Apply::ReportDiff);
        let s = Strategy::of(&ftc, &obj(json!({APPLY_ANNOTATION: "Apply"})), true, false).unwrap();
        assert_eq!((s.take_over, s.apply), (TakeOver::IfNoDiff, Apply::Apply));
    }

    #[test]
    fn without_annotations_adopt_resources_decides() {
        let none = Value::Null;
        let on = Strategy::of(&none, &obj(json!({})), true, false).unwrap();
        let off = Strategy::of(&none, &obj(Value::Null), false, false).unwrap();
        assert_eq!(on.take_over, TakeOver::Always);
        assert_eq!(off.take_over, TakeOver::Never);
        assert_eq!((on.apply, off.apply), (Apply::Apply, Apply::Apply));
    }

    #[test]
    fn a_report_only_run_reports_whatever_the_annotations_say() {
        let o = obj(json!({APPLY_ANNOTATION: "Apply"}));
        assert!(
            Strategy::of(&Value::Null, &o, true, true)
                .unwrap()
                .reports_only()
        );
    }

    #[test]
    fn an_unknown_value_is_an_error_naming_the_annotation_and_where() {
        let e = Strategy::of(
            &Value::Null,
            &obj(json!({TAKE_OVER_ANNOTATION: "Sometimes"})),
            true,
            false,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "annotation kubefedctl.kubefed.io/take-over: \"Sometimes\" is not Always, IfNoDiff or Never"
        );
        let ftc = json!({APPLY_ANNOTATION: "reportdiff"});
        let e = Strategy::of(&ftc, &obj(json!({})), true, false).unwrap_err();
        assert_eq!(
            e,
            "annotation kubefedctl.kubefed.io/apply (of its FederatedTypeConfig): \"reportdiff\" is not Apply or ReportDiff"
        );
    }
}
