//! Crossplane field paths: parse `spec.forProvider.tags[0]`,
//! `metadata.labels[crossplane.io/claim-name]` or `spec.a["b.c"]`, and get, set and
//! wildcard-expand them in a [`serde_json::Value`].
//!
//! The syntax and the error messages follow crossplane-runtime's `pkg/fieldpath`:
//! - a period separates fields; a leading, trailing or doubled period is an error;
//! - brackets hold an array index (an unsigned 32-bit decimal) or, otherwise, a field
//!   name in which periods are not separators;
//! - quotes (`'` and `"`) around a field name are trimmed;
//! - the field `*` is a wildcard, expanded by [`expand_wildcards`].
//!
//! Setting a value creates missing intermediate objects and arrays (growing arrays with
//! `null`s as needed). Two deliberate deviations, both on input upstream rejects or
//! crashes on: an intermediate `null` is replaced as if missing (upstream reports "is not
//! an object"), and an array is never grown past [`MAX_GROWN_ARRAY_LEN`] elements
//! (upstream would allocate up to 2³² elements).

mod access;

pub use access::{expand_wildcards, get, set};

use std::fmt;
use std::str::FromStr;

/// Arrays are never grown past this many elements when a value is set.
pub const MAX_GROWN_ARRAY_LEN: usize = 1 << 16;

/// A field path error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The path does not parse.
    #[error("cannot parse path {path:?}: {reason} at position {position}")]
    Parse {
        /// The path.
        path: String,
        /// What is wrong, for example `unexpected '.'`.
        reason: String,
        /// The byte offset.
        position: usize,
    },
    /// A field or array element along the path does not exist.
    #[error("{path}: no such {}", if *.element { "element" } else { "field" })]
    NotFound {
        /// The path up to and including the missing segment.
        path: String,
        /// Whether the missing segment is an array index.
        element: bool,
    },
    /// Reading: a field segment met a non-object.
    #[error("{0}: not an object")]
    NotAnObject(String),
    /// Reading: an index segment met a non-array.
    #[error("{0}: not an array")]
    NotAnArray(String),
    /// Writing: a field segment met a non-object.
    #[error("{0} is not an object")]
    SetNotAnObject(String),
    /// Writing: an index segment met a non-array.
    #[error("{0} is not an array")]
    SetNotAnArray(String),
    /// Writing would grow an array past [`MAX_GROWN_ARRAY_LEN`].
    #[error("{path}: index {index} would grow the array past {MAX_GROWN_ARRAY_LEN} elements")]
    ArrayTooLong {
        /// The path up to and including the index.
        path: String,
        /// The index.
        index: usize,
    },
    /// A wildcard met a value that is neither an object nor an array.
    #[error("{0:?}: unexpected wildcard usage")]
    Wildcard(String),
}

impl Error {
    /// Whether the error says that the path does not exist. Patch policies and readiness
    /// checks treat this case specially.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }
}

/// One segment of a field path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// An object field.
    Field(String),
    /// An array index.
    Index(usize),
}

impl Segment {
    /// Whether this is the wildcard field `*`.
    pub fn is_wildcard(&self) -> bool {
        matches!(self, Self::Field(f) if f == WILDCARD)
    }

    /// A segment from bracket contents: an index if the text is an unsigned 32-bit
    /// decimal, else a field.
    fn field_or_index(s: &str) -> Self {
        if !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_digit())
            && let Ok(i) = s.parse::<u32>()
        {
            return Self::Index(i as usize);
        }
        Self::field(s)
    }

    /// A field segment, with surrounding quotes trimmed.
    fn field(s: &str) -> Self {
        Self::Field(s.trim_matches(|c| c == '\'' || c == '"').to_owned())
    }
}

const WILDCARD: &str = "*";

/// A parsed field path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FieldPath {
    segments: Vec<Segment>,
}

impl FieldPath {
    /// Parses a field path.
    pub fn parse(path: &str) -> Result<Self, Error> {
        parse(path).map(|segments| Self { segments })
    }

    /// A field path from segments.
    pub fn from_segments(segments: Vec<Segment>) -> Self {
        Self { segments }
    }

    /// The segments.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Whether any segment is the wildcard `*`.
    pub fn has_wildcard(&self) -> bool {
        self.segments.iter().any(Segment::is_wildcard)
    }
}

impl FromStr for FieldPath {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&display(&self.segments))
    }
}

/// Renders segments as crossplane-runtime does: fields containing a period, and the
/// wildcard, in brackets.
pub(crate) fn display(segments: &[Segment]) -> String {
    let mut out = String::new();
    for s in segments {
        match s {
            Segment::Field(name) if name == WILDCARD || name.contains('.') => {
                out.push('[');
                out.push_str(name);
                out.push(']');
            }
            Segment::Field(name) => {
                out.push('.');
                out.push_str(name);
            }
            Segment::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    match out.strip_prefix('.') {
        Some(rest) => rest.to_owned(),
        None => out,
    }
}

/// The lexer of crossplane-runtime's field paths, as a loop over states.
fn parse(path: &str) -> Result<Vec<Segment>, Error> {
    enum State {
        Field,
        Period,
        LeftBracket,
        FieldOrIndex,
        RightBracket,
    }
    let err = |reason: String, position: usize| Error::Parse {
        path: path.to_owned(),
        reason,
        position,
    };
    let bytes = path.as_bytes();
    let mut segments = Vec::new();
    let mut pos = 0;
    let mut start = 0;
    let mut state = State::Field;
    loop {
        match state {
            State::Field => {
                let rest = path.get(pos..).unwrap_or_default();
                let stop = rest.char_indices().find(|(_, c)| matches!(c, ']' | '[' | '.'));
                match stop {
                    Some((i, ']')) => return Err(err("unexpected ']'".into(), pos + i)),
                    Some((i, c)) => {
                        pos += i;
                        if pos > start {
                            segments.push(Segment::field(path.get(start..pos).unwrap_or_default()));
                        }
                        start = pos;
                        state = if c == '[' {
                            State::LeftBracket
                        } else {
                            State::Period
                        };
                    }
                    None => {
                        if path.len() > start {
                            segments.push(Segment::field(path.get(start..).unwrap_or_default()));
                        }
                        return Ok(segments);
                    }
                }
            }
            State::Period => {
                if pos == 0 || pos + 1 == path.len() {
                    return Err(err("unexpected '.'".into(), pos));
                }
                pos += 1;
                start = pos;
                match bytes.get(pos) {
                    Some(b'.') => return Err(err("unexpected '.'".into(), pos)),
                    Some(b'[') => return Err(err("unexpected '['".into(), pos)),
                    _ => state = State::Field,
                }
            }
            State::LeftBracket => {
                if !path.get(pos..).unwrap_or_default().contains(']') {
                    return Err(err("unterminated '['".into(), pos));
                }
                pos += 1;
                start = pos;
                state = State::FieldOrIndex;
            }
            State::FieldOrIndex => {
                let rest = path.get(pos..).unwrap_or_default();
                let rbi = rest.find(']').unwrap_or(rest.len());
                if rbi == 0 {
                    return Err(err("unexpected ']'".into(), pos));
                }
                if let Some(lbi) = rest.get(..rbi).and_then(|s| s.find('[')) {
                    return Err(err("unexpected '['".into(), pos + lbi));
                }
                pos += rbi;
                segments.push(Segment::field_or_index(path.get(start..pos).unwrap_or_default()));
                start = pos;
                state = State::RightBracket;
            }
            State::RightBracket => {
                pos += 1;
                start = pos;
                state = State::Field;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn f(s: &str) -> Segment {
        Segment::Field(s.into())
    }

    // crossplane-runtime fieldpath.go documents these valid examples.
    #[test]
    fn parses_documented_valid_examples() {
        let cases: Vec<(&str, Vec<Segment>)> = vec![
            ("metadata.name", vec![f("metadata"), f("name")]),
            (
                "spec.containers[0].name",
                vec![f("spec"), f("containers"), Segment::Index(0), f("name")],
            ),
            ("data[.config.yml]", vec![f("data"), f(".config.yml")]),
            (
                "metadata.annotations['crossplane.io/external-name']",
                vec![f("metadata"), f("annotations"), f("crossplane.io/external-name")],
            ),
            (
                "spec.items[0][8]",
                vec![f("spec"), f("items"), Segment::Index(0), Segment::Index(8)],
            ),
            ("apiVersion", vec![f("apiVersion")]),
            ("[42]", vec![Segment::Index(42)]),
            (
                "metadata.labels[crossplane.io/claim-name]",
                vec![f("metadata"), f("labels"), f("crossplane.io/claim-name")],
            ),
            ("spec.a[\"b.c\"]", vec![f("spec"), f("a"), f("b.c")]),
            ("spec.a[*].b", vec![f("spec"), f("a"), f("*"), f("b")]),
            // Bigger than u32: a field, not an index.
            ("a[4294967296]", vec![f("a"), f("4294967296")]),
            ("a[+1]", vec![f("a"), f("+1")]),
        ];
        for (path, want) in cases {
            assert_eq!(FieldPath::parse(path).unwrap().segments(), &want[..], "{path}");
        }
    }

    // crossplane-runtime fieldpath.go documents these invalid examples.
    #[test]
    fn rejects_documented_invalid_examples() {
        let cases = [
            (".metadata.name", "unexpected '.' at position 0"),
            ("metadata..name", "unexpected '.' at position 9"),
            ("metadata.name.", "unexpected '.' at position 13"),
            ("spec.containers[]", "unexpected ']' at position 16"),
            ("spec.containers.[0].name", "unexpected '[' at position 16"),
            ("spec.containers[0", "unterminated '[' at position 15"),
            ("spec]", "unexpected ']' at position 4"),
            ("a[b[c]]", "unexpected '[' at position 3"),
        ];
        for (path, want) in cases {
            let err = FieldPath::parse(path).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("cannot parse path {path:?}: {want}"),
                "{path}"
            );
        }
    }

    #[test]
    fn displays_like_crossplane_runtime() {
        for (path, want) in [
            (
                "metadata.labels[crossplane.io/claim-name]",
                "metadata.labels[crossplane.io/claim-name]",
            ),
            ("a['b']", "a.b"),
            ("a[*][0]", "a[*][0]"),
            ("[1].a", "[1].a"),
        ] {
            assert_eq!(FieldPath::parse(path).unwrap().to_string(), want);
        }
    }
}
