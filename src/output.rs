//! Printing results: YAML and JSON documents on stdout.

use anyhow::Result;
use serde::Serialize;
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
