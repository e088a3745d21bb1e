//! Writing a render: one YAML stream, JSON by cluster, or a directory
//! per cluster written all or nothing.

use super::*;
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

/// A multi-document stream, each object preceded by `# cluster: NAME`
/// (`# host` for the host's own objects, DNSEndpoints). Every piece is
/// built before the first byte is written: an error writes nothing.
pub fn write_stream(plan: &RenderPlan, out: &mut dyn Write) -> Result<()> {
    let yaml = |obj: &Value| {
        crate::terminal::output::render(obj, crate::terminal::output::DocumentFormat::Yaml)
    };
    let mut host = String::new();
    for obj in &plan.host {
        host.push_str("---\n# host\n");
        host.push_str(&yaml(obj)?);
    }
    let shared = plan.shared_texts(yaml)?;
    let pieces = plan.per_cluster(|cluster, objects| {
        let mut piece = String::new();
        for obj in &objects {
            piece.push_str("---\n# cluster: ");
            piece.push_str(cluster);
            piece.push('\n');
            piece.push_str(&obj.text(&shared, yaml)?);
        }
        Ok(piece)
    })?;
    out.write_all(host.as_bytes())?;
    for piece in pieces {
        out.write_all(piece.as_bytes())?;
    }
    Ok(out.flush()?)
}

/// `{"<cluster>": [objects], "_host": [DNSEndpoints]}`, byte for byte what
/// serde_json's pretty printer writes for that map, but built from
/// per-cluster pieces in parallel without holding every object at once.
/// As [`write_stream`], an error writes nothing.
pub fn write_json(plan: &RenderPlan, out: &mut dyn Write) -> Result<()> {
    let shared = plan.shared_texts(indented_json)?;
    let mut members: Vec<(String, String)> = plan.per_cluster(|cluster, objects| {
        let texts = objects.iter().map(|o| o.text(&shared, indented_json));
        Ok((cluster.to_string(), json_member(cluster, texts)?))
    })?;
    if !plan.host.is_empty() {
        let texts = plan.host.iter().map(|o| indented_json(o).map(Cow::Owned));
        members.push(("_host".into(), json_member("_host", texts)?));
    }
    members.sort_by(|a, b| a.0.cmp(&b.0));
    if members.is_empty() {
        out.write_all(b"{}\n")?;
        return Ok(out.flush()?);
    }
    out.write_all(b"{\n")?;
    for (i, (_, member)) in members.iter().enumerate() {
        if i > 0 {
            out.write_all(b",\n")?;
        }
        out.write_all(member.as_bytes())?;
    }
    out.write_all(b"\n}\n")?;
    Ok(out.flush()?)
}

/// `  "key": [ ... ]` at depth one of a pretty-printed map, from the
/// elements' [`indented_json`].
pub(super) fn json_member<'a>(
    key: &str,
    elements: impl ExactSizeIterator<Item = Result<Cow<'a, str>>>,
) -> Result<String> {
    let mut text = format!("  {}: ", serde_json::to_string(key)?);
    if elements.len() == 0 {
        text.push_str("[]");
        return Ok(text);
    }
    text.push_str("[\n");
    let last = elements.len() - 1;
    for (i, element) in elements.enumerate() {
        text.push_str("    ");
        text.push_str(&element?);
        text.push_str(if i < last { ",\n" } else { "\n" });
    }
    text.push_str("  ]");
    Ok(text)
}

/// `value` as pretty JSON for an array inside a map (four more spaces
/// after every newline).
pub(super) fn indented_json(value: &Value) -> Result<String> {
    let mut text = Vec::new();
    serde_json::to_writer_pretty(Indented(&mut text), value)?;
    Ok(String::from_utf8(text)?)
}

/// Pretty JSON two levels deeper than serde_json starts it. Pretty JSON
/// has no raw newline inside strings, so indenting after every newline is
/// exact.
pub(super) struct Indented<'a>(&'a mut Vec<u8>);

impl std::io::Write for Indented<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut rest = buf;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.0.extend_from_slice(&rest[..=i]);
            self.0.extend_from_slice(b"    ");
            rest = &rest[i + 1..];
        }
        self.0.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Marks a directory as ours, so a re-render may replace it.
pub const RENDER_MARKER: &str = ".kubefedctl-render";

/// Writes `DIR/<cluster>/<namespace or _cluster>/<kind>-<name>.yaml`
/// (`.json` in JSON), all or nothing: into a new directory, renamed into place at the end.
pub fn write_dir(
    plan: &RenderPlan,
    dir: &Path,
    format: crate::terminal::output::DocumentFormat,
) -> Result<usize> {
    let extension = format.extension();
    if dir.exists() {
        let ours = dir.join(RENDER_MARKER).exists();
        let empty = std::fs::read_dir(dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !ours && !empty {
            bail!(
                "{} exists and was not written by kubefedctl reconcile --output-dir: refusing to replace it",
                dir.display()
            );
        }
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let staging = parent.join(format!(
        ".{}.tmp-{}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("render"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&staging);
    let result = (|| -> Result<usize> {
        std::fs::create_dir_all(&staging)?;
        std::fs::write(
            staging.join(RENDER_MARKER),
            "rendered by kubefedctl reconcile --from\n",
        )?;
        let write = |cluster: &str, obj: &Value, text: &str| -> Result<()> {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or("_cluster");
            let file = staging.join(cluster).join(ns).join(format!(
                "{}-{}.{extension}",
                obj["kind"].as_str().unwrap_or("object").to_lowercase(),
                obj["metadata"]["name"].as_str().unwrap_or("")
            ));
            std::fs::create_dir_all(file.parent().expect("has a parent"))?;
            Ok(std::fs::write(&file, text)?)
        };
        let render = |obj: &Value| crate::terminal::output::render(obj, format);
        let mut count = 0;
        for obj in &plan.host {
            write("_host", obj, &render(obj)?)?;
            count += 1;
        }
        let shared = plan.shared_texts(render)?;
        for written in plan.per_cluster(|cluster, objects| {
            for obj in &objects {
                write(cluster, obj.value(), &obj.text(&shared, render)?)?;
            }
            Ok(objects.len())
        })? {
            count += written;
        }
        Ok(count)
    })();
    match result {
        Ok(count) => {
            if dir.exists() {
                std::fs::remove_dir_all(dir)
                    .with_context(|| format!("replacing {}", dir.display()))?;
            }
            std::fs::rename(&staging, dir)
                .with_context(|| format!("moving the output into {}", dir.display()))?;
            Ok(count)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e.context(format!("writing {}", dir.display())))
        }
    }
}
