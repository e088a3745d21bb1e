//! Reading YAML streams (`---`-separated documents) into JSON values.
//! Large streams are cut at document markers and parsed on all cores;
//! any error re-parses the whole stream, so messages and line numbers are
//! the sequential ones. Printing is `output`'s.

/// Every document of a YAML (or JSON) stream. serde-saphyr's default budget
/// stops at 1,024 documents and 250,000 nodes — a protection against
/// document storms that real manifest sets (thousands of objects) exceed.
/// Limits here scale to about a million objects; the defaults against
/// alias bombs and deep nesting stay.
///
/// Large streams are cut at document markers and the pieces parsed on all
/// cores; any error re-parses the whole stream, so errors and their line
/// numbers are exactly those of a sequential parse.
pub fn yaml_documents(text: &str) -> Result<Vec<serde_json::Value>, YamlError> {
    documents(text).map_err(|e| YamlError::of(&e))
}

/// A YAML syntax error in one line, for a message that names its file
/// first (`bad.yaml: invalid YAML: line 6, column 6: unclosed bracket '['`):
/// the parser's own words and position, without its source excerpt (which
/// calls the file `<input>` and spans lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    /// `(line, column)`, both from 1, when known.
    pub at: Option<(u64, u64)>,
    pub message: String,
}

impl YamlError {
    /// The line of the parser's error.
    pub fn of(e: &serde_saphyr::Error) -> YamlError {
        let at = e.location().map(|l| (l.line(), l.column()));
        let mut message = e.without_snippet().to_string();
        if let Some((line, column)) = at
            && let Some(bare) = message.strip_suffix(&format!(" at line {line}, column {column}"))
        {
            message = bare.to_string();
        }
        // The parser's advice is to its own caller, not to the file's author.
        let message = message
            .replace(", set DuplicateKeyPolicy in Options if acceptable", "")
            .replace('\n', " ");
        YamlError { at, message }
    }
}

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at {
            Some((line, column)) => write!(f, "line {line}, column {column}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for YamlError {}

/// [`yaml_documents`] with the parser's own error.
fn documents(text: &str) -> Result<Vec<serde_json::Value>, serde_saphyr::Error> {
    let pieces = split_documents(text, crate::parallel::workers());
    if pieces.len() < 2 {
        return parse_stream(text);
    }
    let parsed = crate::parallel::map(&pieces, |piece| parse_stream(piece));
    let mut docs = Vec::new();
    for piece in parsed {
        match piece {
            Ok(mut d) => docs.append(&mut d),
            Err(_) => return parse_stream(text),
        }
    }
    Ok(docs)
}

/// Streams below this size are parsed on one thread.
const PARALLEL_PARSE_BYTES: usize = 256 << 10;

/// `text` cut into about `pieces` parts, each starting at a `---` line.
/// A `---` at the start of a line, followed by a blank or the line's end,
/// is always a document marker in YAML (no scalar may contain one), so every
/// piece is a stream of whole documents. Streams with directives (`%YAML`,
/// `%TAG`), which belong to the document after them, are not cut.
fn split_documents(text: &str, pieces: usize) -> Vec<&str> {
    if pieces < 2
        || text.len() < PARALLEL_PARSE_BYTES
        || text.starts_with('%')
        || text.contains("\n%")
    {
        return vec![text];
    }
    let mut out = Vec::with_capacity(pieces);
    let mut start = 0;
    for k in 1..pieces {
        let target = (text.len() * k / pieces).max(start);
        let Some(cut) = next_marker(text, target) else {
            break;
        };
        if cut > start {
            out.push(&text[start..cut]);
            start = cut;
        }
    }
    out.push(&text[start..]);
    out
}

/// The start of the first `---` marker line beginning at or after `from`.
fn next_marker(text: &str, from: usize) -> Option<usize> {
    // Bytes, not str: `from` need not be a char boundary; a line start is.
    let bytes = text.as_bytes();
    let mut at = from;
    loop {
        let found = bytes.get(at..)?.windows(4).position(|w| w == b"\n---")?;
        let line = at + found + 1;
        match bytes.get(line + 3) {
            None | Some(b' ' | b'\t' | b'\n' | b'\r') => return Some(line),
            _ => at = line,
        }
    }
}

/// One sequential parse with the raised budget.
fn parse_stream(text: &str) -> Result<Vec<serde_json::Value>, serde_saphyr::Error> {
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

    /// Cutting a stream at any marker and parsing the pieces gives the
    /// documents of the whole stream.
    #[test]
    fn cutting_at_markers_keeps_the_documents() {
        let streams = [
            "a: 1\n---\nb: 2\n",
            "---\na: 1\n--- # comment\nb: |\n  keep\n  ---not a marker\n---\n---\nc: 3\n",
            "a: 1\r\n---\r\nb: 2\r\n",
            "a: 1\n...\n---\nb: [1, 2]\n---\n",
            "x: é\n---\n- 1\n- 2\n---\nk: v\n---nope: 1\n",
        ];
        for text in streams {
            let whole = parse_stream(text).unwrap();
            let mut from = 1;
            let mut cuts = 0;
            while let Some(cut) = next_marker(text, from) {
                let mut pieces = parse_stream(&text[..cut]).unwrap();
                pieces.extend(parse_stream(&text[cut..]).unwrap());
                assert_eq!(pieces, whole, "cut at byte {cut} of {text:?}");
                cuts += 1;
                from = cut + 1;
            }
            assert!(cuts > 0, "no marker found in {text:?}");
        }
        assert_eq!(next_marker("a: 1\n---nope\n", 0), None);
    }

    #[test]
    fn large_streams_parse_in_pieces_with_sequential_errors() {
        let doc = |i: usize| {
            format!("---\nkind: ConfigMap\nmetadata: {{name: c{i}}}\ndata: {{k: \"é{i}\"}}\n")
        };
        let text: String = (0..20_000).map(doc).collect();
        assert!(text.len() > PARALLEL_PARSE_BYTES);
        assert!(split_documents(&text, 2).len() == 2);
        assert!(split_documents(&format!("%YAML 1.2\n{text}"), 2).len() == 1);
        let docs = yaml_documents(&text).unwrap();
        assert_eq!(docs.len(), 20_000);
        assert_eq!(docs[15_000]["data"]["k"], "é15000");
        // A bad document late in the stream: the error is the whole
        // stream's, with its own line number.
        let bad = format!("{text}---\nkind: [unclosed\n");
        let sequential = YamlError::of(&parse_stream(&bad).unwrap_err());
        assert_eq!(yaml_documents(&bad).unwrap_err(), sequential);
        assert_eq!(sequential.at.map(|(line, _)| line), Some(80_002));
    }

    #[test]
    fn a_syntax_error_is_one_line_with_its_position() {
        let e = yaml_documents("kind: ConfigMap\ndata:\n  a: [unclosed\n").unwrap_err();
        assert_eq!(e.to_string(), "line 3, column 6: unclosed bracket '['");
        let e = yaml_documents("a: 1\n   b: 2\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2, column 5: mapping values are not allowed in this context"
        );
        let e = yaml_documents("---\na: 1\n---\nb: 1\nb: 2\n").unwrap_err();
        assert_eq!(e.to_string(), "line 5, column 1: duplicate mapping key: b");
        for text in ["a: [x\n", "a: 'x\n", "a: *nope\n"] {
            let line = yaml_documents(text).unwrap_err().to_string();
            assert!(!line.contains('\n') && !line.contains("<input>"), "{line}");
            assert!(!line.contains("error"), "{line}");
        }
    }
}
