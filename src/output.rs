//! Printing results: YAML and JSON documents on stdout.

use anyhow::Result;
use serde::Serialize;
use serde_json::{Value, json};
use std::io::Write;

/// `-o` for commands that print a document (`version`, dry runs).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocumentFormat {
    Yaml,
    Json,
}

/// A document as text in `format`, ending with a newline.
pub fn render<T: Serialize>(value: &T, format: DocumentFormat) -> Result<String> {
    Ok(match format {
        DocumentFormat::Json => serde_json::to_string_pretty(value)? + "\n",
        DocumentFormat::Yaml => {
            let text = serde_saphyr::to_string(value)?;
            if text.ends_with('\n') {
                text
            } else {
                text + "\n"
            }
        }
    })
}

/// Writes `value` to stdout in `format`.
pub fn print<T: Serialize>(value: &T, format: DocumentFormat) -> Result<()> {
    let text = render(value, format)?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Several objects: a multi-document YAML stream, or a JSON `List`, both of
/// which `kubectl apply -f` takes.
pub fn print_objects(objects: &[Value], format: DocumentFormat) -> Result<()> {
    match format {
        DocumentFormat::Json => print(
            &json!({"apiVersion": "v1", "kind": "List", "items": objects}),
            format,
        ),
        DocumentFormat::Yaml => {
            let mut text = String::new();
            for obj in objects {
                text.push_str("---\n");
                text.push_str(&render(obj, format)?);
            }
            print!("{text}");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Doc {
        git_version: String,
        items: Vec<u32>,
    }

    #[test]
    fn renders_yaml_and_json() {
        let d = Doc {
            git_version: "v1".into(),
            items: vec![1, 2],
        };
        let yaml = render(&d, DocumentFormat::Yaml).unwrap();
        let back: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back["gitVersion"], "v1");
        assert_eq!(back["items"][1], 2);
        let json = render(&d, DocumentFormat::Json).unwrap();
        assert!(json.ends_with("}\n"));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&json).unwrap()["items"][0],
            1
        );
    }
}

/// Every document of a YAML (or JSON) stream. serde-saphyr's default budget
/// stops at 1,024 documents and 250,000 nodes — a protection against
/// document storms that real manifest sets (thousands of objects) exceed.
/// Limits here scale to about a million objects; the defaults against
/// alias bombs and deep nesting stay.
pub fn yaml_documents(text: &str) -> Result<Vec<serde_json::Value>, serde_saphyr::Error> {
    // Both structs are non-exhaustive: start from the defaults.
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 1_000_000;
    budget.max_nodes = 100_000_000;
    budget.max_events = 200_000_000;
    budget.max_total_scalar_bytes = 4 << 30;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    serde_saphyr::from_multiple_with_options(text, options)
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    #[test]
    fn thousands_of_documents_parse() {
        let text: String = (0..2000)
            .map(|i| format!("---\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n"))
            .collect();
        let docs = yaml_documents(&text).unwrap();
        assert_eq!(docs.len(), 2000);
        assert_eq!(docs[1999]["metadata"]["name"], "c1999");
    }
}
