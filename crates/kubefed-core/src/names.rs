//! Kubernetes object names: validation, and turning context names into
//! valid names.
//!
//! Kubeconfig context names are free text (`user@cluster`, an EKS ARN such
//! as `arn:aws:eks:eu-west-1:123456789012:cluster/prod`), but join uses the
//! host's name inside object names in the member (`<cluster>-<host>`), so it
//! must become a DNS-1123 label first.

/// Why a name is not a valid DNS-1123 subdomain (as Kubernetes validates
/// most object names), or `None` when it is.
pub fn subdomain_error(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".into());
    }
    if name.len() > 253 {
        return Some(format!(
            "must be no more than 253 characters (has {})",
            name.len()
        ));
    }
    for label in name.split('.') {
        if let Some(e) = label_error(label) {
            return Some(e);
        }
    }
    None
}

/// Why `label` is not a DNS-1123 label, or `None` when it is.
pub fn label_error(label: &str) -> Option<String> {
    if label.is_empty() {
        return Some("must not have empty parts between dots".into());
    }
    if label.len() > 63 {
        return Some(format!(
            "parts must be no more than 63 characters (has {})",
            label.len()
        ));
    }
    if let Some(c) = label
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Some(format!(
            "must consist of lower case letters, digits, '-' and '.' (found {c:?})"
        ));
    }
    if label.starts_with('-') || label.ends_with('-') {
        return Some("must start and end with a letter or digit".into());
    }
    None
}

/// A DNS-1123 label made from free text: lower case, every run of other
/// characters replaced by one `-`, trimmed, at most 63 characters.
/// `None` when nothing usable remains.
pub fn sanitize_label(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut dash = false;
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
            dash = false;
        } else if !dash && !out.is_empty() {
            out.push('-');
            dash = true;
        }
    }
    let mut out = out.trim_end_matches('-').to_string();
    if out.len() > 63 {
        out.truncate(63);
        out = out.trim_end_matches('-').to_string();
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_subdomains() {
        assert_eq!(subdomain_error("member1"), None);
        assert_eq!(subdomain_error("a.b-c.d"), None);
        assert!(subdomain_error("").is_some());
        assert!(subdomain_error("Member1").unwrap().contains("lower case"));
        assert!(subdomain_error("a_b").unwrap().contains("'_'"));
        assert!(subdomain_error("-a").unwrap().contains("start and end"));
        assert!(subdomain_error("a..b").is_some());
        assert!(subdomain_error(&"a".repeat(64)).unwrap().contains("63"));
    }

    #[test]
    fn sanitizes_context_names() {
        assert_eq!(sanitize_label("host").as_deref(), Some("host"));
        assert_eq!(
            sanitize_label("admin@Prod_Cluster").as_deref(),
            Some("admin-prod-cluster")
        );
        assert_eq!(
            sanitize_label("arn:aws:eks:eu-west-1:123456789012:cluster/prod").as_deref(),
            Some("arn-aws-eks-eu-west-1-123456789012-cluster-prod")
        );
        assert_eq!(sanitize_label("--x--").as_deref(), Some("x"));
        assert_eq!(sanitize_label("@@@"), None);
        let long = sanitize_label(&"ab-".repeat(40)).unwrap();
        assert!(long.len() <= 63 && label_error(&long).is_none(), "{long}");
    }
}
