//! The `string` transform: `Format`, `Convert`, `TrimPrefix`, `TrimSuffix`, `Regexp`,
//! `Join` and `Replace`. The output is always a string.
//!
//! Where upstream first renders the input with Go's `%v` (every type but `Format`, the
//! JSON and hash conversions, and `Join`'s array), so does this module. One deviation:
//! `Join` joins with the separator like Go's `strings.Join`; upstream's loop drops only
//! the last byte of a trailing separator, which differs for separators longer than one
//! byte.

use base64::Engine;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use regex::Regex;
use serde_json::Value;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

use crate::gofmt::{sprint_v, sprintf};
use crate::gojson;
use crate::input::{StringConversionType, StringTransform, StringTransformType};

/// A `string` transform failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No type is set.
    #[error("type  is not supported for string transform type")]
    MissingType,
    /// The field the type needs is not set.
    #[error("string transform of type {type_} {field} is not set")]
    MissingConfig {
        /// The string transform type.
        type_: &'static str,
        /// The missing field.
        field: &'static str,
    },
    /// `FromBase64` input is not standard padded base64.
    #[error("string is not valid base64: {0}")]
    Base64(String),
    /// `Join` input is not an array.
    #[error("could not parse input array")]
    JoinInput,
    /// The `Regexp` expression does not compile.
    #[error("could not compile regexp: {0}")]
    RegexpCompile(String),
    /// The `Regexp` expression does not match, or has no such group.
    #[error("regexp {regexp:?} had no matches for group {group}")]
    RegexpNoMatch {
        /// The expression.
        regexp: String,
        /// The group asked for.
        group: i64,
    },
}

/// Applies the string operation.
pub fn resolve(t: &StringTransform, input: &Value) -> Result<Value, Error> {
    let type_ = t.type_.ok_or(Error::MissingType)?;
    let missing = |field| Error::MissingConfig {
        type_: type_.as_str(),
        field,
    };
    let out = match type_ {
        StringTransformType::Format => {
            let format = t.format.as_deref().ok_or_else(|| missing("fmt"))?;
            sprintf(format, &[input])
        }
        StringTransformType::Convert => convert(t.convert.ok_or_else(|| missing("convert"))?, input)?,
        StringTransformType::TrimPrefix => {
            let trim = t.trim.as_deref().ok_or_else(|| missing("trim"))?;
            let s = sprint_v(input);
            s.strip_prefix(trim).map(str::to_owned).unwrap_or(s)
        }
        StringTransformType::TrimSuffix => {
            let trim = t.trim.as_deref().ok_or_else(|| missing("trim"))?;
            let s = sprint_v(input);
            s.strip_suffix(trim).map(str::to_owned).unwrap_or(s)
        }
        StringTransformType::Regexp => {
            let r = t.regexp.as_ref().ok_or_else(|| missing("regexp"))?;
            let re = Regex::new(&r.match_).map_err(|e| Error::RegexpCompile(e.to_string()))?;
            let group = r.group.unwrap_or(0);
            let no_match = || Error::RegexpNoMatch {
                regexp: r.match_.clone(),
                group,
            };
            let s = sprint_v(input);
            let caps = re.captures(&s).ok_or_else(no_match)?;
            let index = usize::try_from(group).map_err(|_| no_match())?;
            if index >= caps.len() {
                return Err(no_match());
            }
            // A group that did not participate yields "", as in Go.
            caps.get(index).map(|m| m.as_str().to_owned()).unwrap_or_default()
        }
        StringTransformType::Join => {
            let join = t.join.as_ref().ok_or_else(|| missing("join"))?;
            let items = input.as_array().ok_or(Error::JoinInput)?;
            items
                .iter()
                .map(sprint_v)
                .collect::<Vec<_>>()
                .join(&join.separator)
        }
        StringTransformType::Replace => {
            let r = t.replace.as_ref().ok_or_else(|| missing("replace"))?;
            sprint_v(input).replace(&r.search, &r.replace)
        }
    };
    Ok(Value::String(out))
}

/// Go's `StdEncoding`: padding required, non-zero trailing bits tolerated.
const GO_STD_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

fn convert(c: StringConversionType, input: &Value) -> Result<String, Error> {
    Ok(match c {
        StringConversionType::ToUpper => sprint_v(input)
            .chars()
            .map(|c| single(c, char::to_uppercase))
            .collect(),
        StringConversionType::ToLower => sprint_v(input)
            .chars()
            .map(|c| single(c, char::to_lowercase))
            .collect(),
        StringConversionType::ToJson => gojson::marshal(input),
        StringConversionType::ToBase64 => GO_STD_BASE64.encode(sprint_v(input)),
        StringConversionType::FromBase64 => {
            // Go's decoder skips carriage returns and newlines.
            let s: String = sprint_v(input)
                .chars()
                .filter(|c| !matches!(c, '\r' | '\n'))
                .collect();
            let bytes = GO_STD_BASE64
                .decode(s)
                .map_err(|e| Error::Base64(e.to_string()))?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
        StringConversionType::ToSha1 => hex(&Sha1::digest(hash_input(input))),
        StringConversionType::ToSha256 => hex(&Sha256::digest(hash_input(input))),
        StringConversionType::ToSha512 => hex(&Sha512::digest(hash_input(input))),
        StringConversionType::ToAdler32 => adler32(&hash_input(input)).to_string(),
    })
}

/// Go's per-rune case mapping: a character whose mapping is not a single character is
/// kept (Go's `unicode.ToUpper('ß')` is `'ß'`, Rust's `"ß".to_uppercase()` is `"SS"`).
fn single<I: Iterator<Item = char>>(c: char, map: impl Fn(char) -> I) -> char {
    let mut mapped = map(c);
    match (mapped.next(), mapped.next()) {
        (Some(m), None) => m,
        _ => c,
    }
}

/// The bytes hashed: a string's own, else the Go JSON encoding of the value.
fn hash_input(input: &Value) -> Vec<u8> {
    match input {
        Value::String(s) => s.as_bytes().to_vec(),
        other => gojson::marshal(other).into_bytes(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Adler-32 (RFC 1950).
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5_552) {
        for byte in chunk {
            a += u32::from(*byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(t: Value, input: Value) -> Result<Value, Error> {
        let t: StringTransform = serde_json::from_value(t).unwrap();
        resolve(&t, &input)
    }

    // Crossplane docs, "String formatting": `fmt: "the-field-%s"` with Go verbs.
    #[test]
    fn format() {
        assert_eq!(
            run(json!({"type": "Format", "fmt": "the-field-%s"}), json!("field1")).unwrap(),
            json!("the-field-field1")
        );
        assert_eq!(
            run(json!({"type": "Format", "fmt": "%d-gb"}), json!(10)).unwrap(),
            json!("10-gb")
        );
    }

    // Docs, "Convert": upper and lower case, base64 both ways, JSON.
    #[test]
    fn convert_case_base64_json() {
        let c = |conv: &str, v: Value| run(json!({"type": "Convert", "convert": conv}), v).unwrap();
        assert_eq!(c("ToUpper", json!("abcdEFGH")), json!("ABCDEFGH"));
        assert_eq!(c("ToLower", json!("ABCDefgh")), json!("abcdefgh"));
        assert_eq!(c("ToUpper", json!("straße")), json!("STRAßE"));
        assert_eq!(c("ToBase64", json!("Crossplane")), json!("Q3Jvc3NwbGFuZQ=="));
        assert_eq!(c("FromBase64", json!("Q3Jvc3NwbGFuZQ==")), json!("Crossplane"));
        assert_eq!(
            c("ToJson", json!({"b": 1, "a": ["x"]})),
            json!(r#"{"a":["x"],"b":1}"#)
        );
        assert_eq!(c("ToJson", json!("s")), json!(r#""s""#));
    }

    // Docs: ToSha1/ToSha256/ToSha512 hash the string (or the JSON of a non-string);
    // ToAdler32 gives the decimal checksum. Standard test vectors.
    #[test]
    fn convert_hashes() {
        let c = |conv: &str, v: Value| run(json!({"type": "Convert", "convert": conv}), v).unwrap();
        assert_eq!(
            c("ToSha1", json!("abc")),
            json!("a9993e364706816aba3e25717850c26c9cd0d89d")
        );
        assert_eq!(
            c("ToSha256", json!("abc")),
            json!("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(
            c("ToSha512", json!("abc")),
            json!(
                "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
            )
        );
        // Adler-32 of "Wikipedia" is 0x11E60398.
        assert_eq!(c("ToAdler32", json!("Wikipedia")), json!("300286872"));
        // A non-string is hashed as its JSON: sha256 of `{"a":1}`.
        assert_eq!(c("ToSha256", json!({"a": 1})), c("ToSha256", json!(r#"{"a":1}"#)));
    }

    // Docs: a failed base64 decoding is an error.
    #[test]
    fn from_base64_failure() {
        let err = run(
            json!({"type": "Convert", "convert": "FromBase64"}),
            json!("not base64!"),
        )
        .unwrap_err();
        assert!(matches!(err, Error::Base64(_)), "{err}");
    }

    // Docs, "Trim": TrimPrefix and TrimSuffix remove a fixed string if present.
    #[test]
    fn trim() {
        assert_eq!(
            run(
                json!({"type": "TrimPrefix", "trim": "https://"}),
                json!("https://crossplane.io")
            )
            .unwrap(),
            json!("crossplane.io")
        );
        assert_eq!(
            run(
                json!({"type": "TrimSuffix", "trim": "-test"}),
                json!("my-bucket-test")
            )
            .unwrap(),
            json!("my-bucket")
        );
        assert_eq!(
            run(json!({"type": "TrimSuffix", "trim": "x"}), json!("abc")).unwrap(),
            json!("abc")
        );
    }

    // Docs, "Regular expression type": the whole match by default, or a group.
    #[test]
    fn regexp() {
        let t = json!({"type": "Regexp", "regexp": {"match": "my-([a-z]+)-(\\d+)", "group": 2}});
        assert_eq!(run(t, json!("xx-my-bucket-42-yy")).unwrap(), json!("42"));
        let t = json!({"type": "Regexp", "regexp": {"match": "my-[a-z]+"}});
        assert_eq!(run(t, json!("xx-my-bucket-42")).unwrap(), json!("my-bucket"));
        let t = json!({"type": "Regexp", "regexp": {"match": "my-([a-z]+)", "group": 2}});
        assert_eq!(
            run(t, json!("my-bucket")).unwrap_err().to_string(),
            "regexp \"my-([a-z]+)\" had no matches for group 2"
        );
        let t = json!({"type": "Regexp", "regexp": {"match": "nope"}});
        assert!(matches!(
            run(t, json!("my-bucket")),
            Err(Error::RegexpNoMatch { .. })
        ));
    }

    // Docs, "Join": array elements joined with the separator.
    #[test]
    fn join() {
        let t = json!({"type": "Join", "join": {"separator": ", "}});
        assert_eq!(
            run(t.clone(), json!(["cross", "plane", 1])).unwrap(),
            json!("cross, plane, 1")
        );
        assert_eq!(run(t.clone(), json!([])).unwrap(), json!(""));
        assert_eq!(run(t, json!("x")).unwrap_err(), Error::JoinInput);
    }

    // Docs, "Replace": every occurrence of the search string is replaced.
    #[test]
    fn replace() {
        let t = json!({"type": "Replace", "replace": {"search": "Cr", "replace": "cR"}});
        assert_eq!(run(t, json!("Crossplane Cr")).unwrap(), json!("cRossplane cR"));
        let t = json!({"type": "Replace", "replace": {"search": "-", "replace": ""}});
        assert_eq!(run(t, json!("a-b-c")).unwrap(), json!("abc"));
    }

    #[test]
    fn missing_configuration() {
        assert_eq!(
            run(json!({"type": "Format"}), json!("x"))
                .unwrap_err()
                .to_string(),
            "string transform of type Format fmt is not set"
        );
    }
}
