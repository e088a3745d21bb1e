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

impl DocumentFormat {
    /// A file's extension for documents in this format.
    pub fn extension(self) -> &'static str {
        match self {
            DocumentFormat::Yaml => "yaml",
            DocumentFormat::Json => "json",
        }
    }
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
    on_stdout(
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(anyhow::Error::from),
    )
}

/// The reader of stdout went away (`kubefedctl ... | head -1`): the command
/// stops quietly with exit 0, as ripgrep does; not an error to report.
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed by its reader")]
pub struct StdoutClosed;

/// The result of writing to stdout, a closed pipe made [`StdoutClosed`].
pub fn on_stdout<T>(result: Result<T>) -> Result<T> {
    result.map_err(|e| {
        let closed = e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        });
        if closed { StdoutClosed.into() } else { e }
    })
}

/// `println!` and `eprintln!` panic when their reader has gone; that too
/// ends the command quietly (exit 0) instead of with a backtrace.
pub fn quiet_broken_pipes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info)
    }));
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

/// A kubectl-style table: no borders, headers as given, no terminal
/// styling unless cells ask for colour.
pub fn table(headers: &[&str]) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    t.set_header(
        headers
            .iter()
            .map(comfy_table::Cell::new)
            .collect::<Vec<_>>(),
    );
    t.force_no_tty();
    t
}

/// A table's text with the preset's leading and trailing blanks trimmed,
/// as kubectl prints.
pub fn table_text(t: &comfy_table::Table) -> String {
    t.lines()
        .map(|l| l.strip_prefix(' ').unwrap_or(&l).trim_end().to_string() + "\n")
        .collect()
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
