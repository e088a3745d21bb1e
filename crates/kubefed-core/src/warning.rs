//! The `Warning:` headers API servers answer with (deprecated API versions
//! and fields, `kubernetes.io/enforce-mountable-secrets`, v1 Endpoints,
//! Service `externalIPs`...): RFC 7234 warnings with code 299, read as
//! client-go's `ParseWarningHeader` reads them
//! (`k8s.io/apimachinery/pkg/util/net/http.go`), so that they are shown as
//! kubectl shows them.

/// The text of one warning value (`299 - "text"`), or `None` for a value
/// of another code or shape. A header may hold several values separated by
/// commas: [`warning_texts`] splits them.
pub fn warning_text(value: &str) -> Option<String> {
    let value = value.trim();
    let (code, rest) = value.split_once(' ')?;
    if code != "299" {
        return None;
    }
    let (_agent, rest) = rest.trim_start().split_once(' ')?;
    let quoted = rest.trim_start().strip_prefix('"')?;
    let mut text = String::new();
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => text.push(chars.next()?),
            '"' => return Some(text),
            c => text.push(c),
        }
    }
    None
}

/// Every warning text of one header value, in order (a value may carry
/// several, separated by commas outside the quoted texts).
pub fn warning_texts(header: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in header.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.extend(warning_text(&header[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    out.extend(warning_text(&header[start..]));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_read_as_client_go_reads_them() {
        assert_eq!(
            warning_text(r#"299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice""#)
                .as_deref(),
            Some("v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice")
        );
        assert_eq!(
            warning_text(r#"299 kube-apiserver "say \"hi\", \\ ok""#).as_deref(),
            Some(r#"say "hi", \ ok"#)
        );
        for bad in [
            "199 - \"misc\"",
            "299 -",
            "299 - unquoted",
            "299 - \"open",
            "",
        ] {
            assert_eq!(warning_text(bad), None, "{bad}");
        }
        assert_eq!(
            warning_texts(r#"299 - "a, b", 299 - "c""#),
            vec!["a, b".to_string(), "c".to_string()]
        );
        assert_eq!(
            warning_texts(r#"199 - "x", 299 - "y""#),
            vec!["y".to_string()]
        );
    }
}
