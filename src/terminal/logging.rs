//! Diagnostics on stderr, through `tracing`: the levels `-v` chooses, and
//! two formats. `text` prints what a person reads (`warning: …`,
//! `error: …`, plain lines for information); `json` prints one object per
//! event and line (`time` to the millisecond, `level`, `target`, `message`
//! and the event's fields) for the watch and in-cluster runs, whose logs a
//! collector reads. Messages never carry tokens or Secret data: they name
//! objects, not their contents.

use std::fmt;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// `--log-format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Lines for people: `warning: …`, `error: …`, information as is.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The levels `-v N` shows: kubefedctl's own events, and other crates'.
/// 0: what the tool has to say (information, warnings); 2: progress;
/// 4: debug, kube's own request errors included; 6: every request, one
/// line each (`clients::request_log`), failures included, in place of
/// kube's; 8: their bodies; 10: the HTTP libraries' own traces, for a bug
/// report.
pub fn levels(verbosity: u8) -> (Level, Option<Level>) {
    match verbosity {
        0 | 1 => (Level::INFO, None),
        2 | 3 | 6..=9 => (Level::DEBUG, None),
        4 | 5 => (Level::DEBUG, Some(Level::WARN)),
        _ => (Level::TRACE, Some(Level::TRACE)),
    }
}

/// What `-v N` shows of the requests: their lines from 6, their bodies
/// from 8 (cut), whole from 9.
fn request_levels(verbosity: u8) -> [(&'static str, bool); 3] {
    use crate::clients::request_log::{BODY_TARGET, FULL_BODY_TARGET, TARGET};
    [
        (TARGET, verbosity >= 6),
        (BODY_TARGET, verbosity >= 8),
        (FULL_BODY_TARGET, verbosity >= 9),
    ]
}

/// Installs the global subscriber (once; later calls do nothing).
pub fn init(verbosity: u8, format: LogFormat) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    let (ours, kube) = levels(verbosity);
    // kube's client logs every failed request itself (`ERROR failed with
    // status 502`, `WARN eof in poll`); kubefedctl reports failures in its
    // own words, once, so those lines are shown only at `-v 4` and 5, and
    // its request-by-request traces (spans, `requesting`) only from `-v 10`:
    // from `-v 6` on a line of ours says each request and how it ended.
    // Other crates say only their warnings below `-v 10`.
    let mut filter = Targets::new()
        .with_default(kube.map_or(LevelFilter::WARN, LevelFilter::from_level))
        .with_target(
            "kube_client",
            kube.map_or(LevelFilter::OFF, LevelFilter::from_level),
        )
        .with_target("kubefedctl", LevelFilter::from_level(ours));
    for (target, on) in request_levels(verbosity) {
        let level = if on {
            LevelFilter::DEBUG
        } else {
            LevelFilter::OFF
        };
        filter = filter.with_target(target, level);
    }
    let fmt = tracing_subscriber::fmt()
        .with_max_level(Level::TRACE)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let format = Format {
        json: format == LogFormat::Json,
        with_target: verbosity >= 4,
    };
    let _ = tracing::subscriber::set_global_default(fmt.event_format(format).finish().with(filter));
}

/// Text (`warning: message`, `error: message`, or the message alone) or
/// one JSON object per event.
struct Format {
    json: bool,
    with_target: bool,
}

impl<S, N> FormatEvent<S, N> for Format
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        if self.json {
            let line = json_line(
                &crate::clock::now_rfc3339_millis(),
                *meta.level(),
                meta.target(),
                fields,
            );
            return writeln!(w, "{line}");
        }
        write!(w, "{}", text_prefix(*meta.level(), meta.target()))?;
        // A request's line and a server's warning are kubectl's, without
        // a target before them.
        if self.with_target && !kubectls_own_line(meta.target()) {
            write!(w, "{}: ", meta.target())?;
        }
        write!(w, "{}", fields.message)?;
        for (k, v) in &fields.rest {
            write!(w, " {k}={v}")?;
        }
        writeln!(w)
    }
}

/// Lines kubectl prints itself, which keep its words: requests' lines
/// (`-v 6`) and the servers' `Warning: ...`.
fn kubectls_own_line(target: &str) -> bool {
    target.starts_with(crate::clients::request_log::TARGET)
        || target == crate::clients::api_warnings::TARGET
}

/// What a text line starts with: `error: `, `warning: `, or nothing
/// (information, and a server's warning, whose `Warning: ` is its own).
fn text_prefix(level: Level, target: &str) -> &'static str {
    match level {
        Level::ERROR => "error: ",
        Level::WARN if target == crate::clients::api_warnings::TARGET => "",
        Level::WARN => "warning: ",
        _ => "",
    }
}

/// The JSON object of one event.
fn json_line(time: &str, level: Level, target: &str, fields: Fields) -> String {
    let mut obj = serde_json::Map::new();
    obj.insert("time".into(), time.into());
    obj.insert("level".into(), level.as_str().to_lowercase().into());
    obj.insert("target".into(), target.into());
    obj.insert("message".into(), fields.message.into());
    for (k, v) in fields.rest {
        obj.entry(k).or_insert(v.into());
    }
    serde_json::Value::Object(obj).to_string()
}

/// An event's message and its other fields, as text.
#[derive(Default)]
struct Fields {
    message: String,
    rest: Vec<(String, String)>,
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.rest
                .push((field.name().to_string(), value.to_string()));
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.rest
                .push((field.name().to_string(), format!("{value:?}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_chooses_levels() {
        assert_eq!(levels(0), (Level::INFO, None));
        assert_eq!(levels(2), (Level::DEBUG, None));
        assert_eq!(levels(4), (Level::DEBUG, Some(Level::WARN)));
        // -v 6 to 9: our request lines, not kube's or tower's traces.
        assert_eq!(levels(6), (Level::DEBUG, None));
        assert_eq!(levels(9), (Level::DEBUG, None));
        assert_eq!(levels(10), (Level::TRACE, Some(Level::TRACE)));
        let on = |v| request_levels(v).map(|(_, on)| on);
        assert_eq!(on(4), [false, false, false]);
        assert_eq!(on(6), [true, false, false]);
        assert_eq!(on(8), [true, true, false]);
        assert_eq!(on(9), [true, true, true]);
    }

    #[test]
    fn a_servers_warning_is_kubectls_line_in_text_and_warn_in_json() {
        use crate::clients::api_warnings::TARGET;
        assert_eq!(text_prefix(Level::WARN, TARGET), "");
        assert!(kubectls_own_line(TARGET));
        assert_eq!(text_prefix(Level::WARN, "kubefedctl::sync"), "warning: ");
        assert_eq!(text_prefix(Level::ERROR, "kubefedctl::sync"), "error: ");
        assert_eq!(text_prefix(Level::INFO, "kubefedctl::sync"), "");
        assert!(!kubectls_own_line("kubefedctl::sync"));
        let line = json_line(
            "2026-01-01T00:00:00Z",
            Level::WARN,
            TARGET,
            Fields {
                message: "Warning: m1: v1 Endpoints is deprecated".into(),
                rest: vec![],
            },
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "warn");
        assert_eq!(v["target"], TARGET);
    }

    #[test]
    fn a_json_line_is_one_object_with_fields() {
        let fields = Fields {
            message: "m2: not ready \"x\"\nsecond line".into(),
            rest: vec![
                ("cluster".into(), "m2".into()),
                ("message".into(), "dup".into()),
            ],
        };
        let line = json_line(
            "2026-01-01T00:00:00Z",
            Level::WARN,
            "kubefedctl::sync",
            fields,
        );
        assert!(!line.contains('\n'), "one event, one line: {line}");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "warn");
        assert_eq!(v["message"], "m2: not ready \"x\"\nsecond line");
        assert_eq!(v["cluster"], "m2");
        assert_eq!(v["target"], "kubefedctl::sync");
        assert_eq!(v["time"], "2026-01-01T00:00:00Z");
    }
}
