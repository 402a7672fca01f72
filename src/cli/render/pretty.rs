//! serde_json's pretty printing (two spaces a level), started at a given depth: an element of
//! an array inside the top-level object is printed where it stands, with no pass afterwards to
//! indent each of its lines.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

/// The text of `value` as `serde_json::to_string_pretty` prints it, every line after the first
/// indented `depth` levels further.
pub fn to_string_at<T: Serialize + ?Sized>(value: &T, depth: usize) -> serde_json::Result<String> {
    let mut text = Vec::with_capacity(1024);
    value.serialize(&mut serde_json::Serializer::with_formatter(
        &mut text,
        AtDepth::new(depth),
    ))?;
    // serde_json writes only UTF-8.
    String::from_utf8(text).map_err(|e| serde::ser::Error::custom(e.to_string()))
}

/// The text of the JSON document `json`, reformatted as [`to_string_at`] prints.
pub fn transcode_at(json: &str, depth: usize) -> serde_json::Result<String> {
    if let Some(text) = reindent_at(json, depth) {
        return Ok(text);
    }
    transcode_through_serde(json, depth)
}

/// [`transcode_at`] by way of serde: every token parsed and printed again.
fn transcode_through_serde(json: &str, depth: usize) -> serde_json::Result<String> {
    let mut text = Vec::with_capacity(json.len() * 2);
    let mut from = serde_json::Deserializer::from_str(json);
    let mut to = serde_json::Serializer::with_formatter(&mut text, AtDepth::new(depth));
    serde_transcode::transcode(&mut from, &mut to)?;
    String::from_utf8(text).map_err(|e| serde::ser::Error::custom(e.to_string()))
}

/// [`transcode_at`] without parsing what prints as it reads: a string without escapes, an integer
/// that fits 18 digits, `true`, `false`, `null` are copied; only the layout is redone, through the
/// same formatter. `None` for anything else (escapes, other numbers, anything unexpected): the
/// caller goes through serde, which prints such tokens its own way.
fn reindent_at(json: &str, depth: usize) -> Option<String> {
    let mut copy = Reindent {
        json: json.as_bytes(),
        at: 0,
        out: Vec::with_capacity(json.len() * 2),
        format: AtDepth::new(depth),
    };
    copy.value()?;
    copy.skip_space();
    if copy.at != copy.json.len() {
        return None;
    }
    String::from_utf8(copy.out).ok()
}

struct Reindent<'a> {
    json: &'a [u8],
    at: usize,
    out: Vec<u8>,
    format: AtDepth,
}

impl Reindent<'_> {
    fn skip_space(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.json.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after any space, taken when it is `want`.
    fn take(&mut self, want: u8) -> bool {
        self.skip_space();
        let found = self.json.get(self.at) == Some(&want);
        self.at += usize::from(found);
        found
    }

    fn value(&mut self) -> Option<()> {
        self.skip_space();
        match self.json.get(self.at)? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.integer(),
        }
    }

    fn object(&mut self) -> Option<()> {
        self.at += 1;
        self.format.begin_object(&mut self.out).ok()?;
        let mut first = true;
        if !self.take(b'}') {
            loop {
                self.format.begin_object_key(&mut self.out, first).ok()?;
                self.skip_space();
                if self.json.get(self.at) != Some(&b'"') {
                    return None;
                }
                self.string()?;
                if !self.take(b':') {
                    return None;
                }
                self.format.begin_object_value(&mut self.out).ok()?;
                self.value()?;
                self.format.end_object_value(&mut self.out).ok()?;
                first = false;
                if self.take(b'}') {
                    break;
                }
                if !self.take(b',') {
                    return None;
                }
            }
        }
        self.format.end_object(&mut self.out).ok()
    }

    fn array(&mut self) -> Option<()> {
        self.at += 1;
        self.format.begin_array(&mut self.out).ok()?;
        let mut first = true;
        if !self.take(b']') {
            loop {
                self.format.begin_array_value(&mut self.out, first).ok()?;
                self.value()?;
                self.format.end_array_value(&mut self.out).ok()?;
                first = false;
                if self.take(b']') {
                    break;
                }
                if !self.take(b',') {
                    return None;
                }
            }
        }
        self.format.end_array(&mut self.out).ok()
    }

    /// A string with no escape and no control character: serde_json prints it as it is.
    fn string(&mut self) -> Option<()> {
        let start = self.at;
        let rest = self.json.get(start + 1..)?;
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        self.at = start + len + 2;
        self.out.extend_from_slice(&self.json[start..self.at]);
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if !self.json.get(self.at..)?.starts_with(word) {
            return None;
        }
        self.at += word.len();
        self.out.extend_from_slice(word);
        Some(())
    }

    /// An integer of at most 18 digits, with no leading zero and not `-0`: serde_json reads it as
    /// an `i64` or `u64` and prints the same digits.
    fn integer(&mut self) -> Option<()> {
        let start = self.at;
        let digits_from = start + usize::from(self.json.get(start) == Some(&b'-'));
        let rest = self.json.get(digits_from..)?;
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let leading_zero = rest.first() == Some(&b'0') && (digits > 1 || digits_from > start);
        let more = matches!(rest.get(digits), Some(b'.' | b'e' | b'E'));
        if digits == 0 || digits > 18 || leading_zero || more {
            return None;
        }
        self.at = digits_from + digits;
        self.out.extend_from_slice(&self.json[start..self.at]);
        Some(())
    }
}

/// `serde_json::ser::PrettyFormatter` with two spaces, whose depth starts at `depth`.
struct AtDepth {
    depth: usize,
    has_value: bool,
}

impl AtDepth {
    fn new(depth: usize) -> Self {
        AtDepth {
            depth,
            has_value: false,
        }
    }

    fn indent(&self, out: &mut (impl Write + ?Sized)) -> io::Result<()> {
        const SPACES: &[u8] = &[b' '; 64];
        let mut left = self.depth.saturating_mul(2);
        while left > 0 {
            let now = left.min(SPACES.len());
            out.write_all(&SPACES[..now])?;
            left -= now;
        }
        Ok(())
    }

    fn open(&mut self, out: &mut (impl Write + ?Sized), bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        out.write_all(bracket)
    }

    fn close(&mut self, out: &mut (impl Write + ?Sized), bracket: &[u8]) -> io::Result<()> {
        self.depth = self.depth.saturating_sub(1);
        if self.has_value {
            out.write_all(b"\n")?;
            self.indent(out)?;
        }
        out.write_all(bracket)
    }

    fn element(&mut self, out: &mut (impl Write + ?Sized), first: bool) -> io::Result<()> {
        out.write_all(if first { b"\n" } else { b",\n" })?;
        self.indent(out)
    }
}

impl Formatter for AtDepth {
    fn begin_array<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.open(out, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.close(out, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, out: &mut W, first: bool) -> io::Result<()> {
        self.element(out, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _out: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.open(out, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.close(out, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, out: &mut W, first: bool) -> io::Result<()> {
        self.element(out, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        out.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _out: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// What the output printed before: serde_json's own pretty text, each line after the first
    /// indented by hand.
    fn by_hand(value: &serde_json::Value, depth: usize) -> String {
        let text = serde_json::to_string_pretty(value).unwrap_or_default();
        text.replace('\n', &format!("\n{}", "  ".repeat(depth)))
    }

    /// JSON text with the tokens the copy takes and the ones it leaves to serde.
    fn json_text() -> impl Strategy<Value = String> {
        let string = prop_oneof![
            "[a-z0-9./:-]{0,12}",
            Just("caf\u{e9} \"quoted\" back\\slash\ttab \u{1F600}".to_owned()),
        ];
        let leaf = prop_oneof![
            Just(json!(null)),
            any::<bool>().prop_map(|b| json!(b)),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            string.clone().prop_map(|s| json!(s)),
        ];
        let value = leaf.prop_recursive(4, 40, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::Array),
                prop::collection::vec(("[a-zA-Z]{1,8}", inner), 0..5)
                    .prop_map(|pairs| serde_json::Value::Object(pairs.into_iter().collect())),
            ]
        });
        (value, 0..3usize).prop_map(|(v, layout)| match layout {
            0 => v.to_string(),
            1 => serde_json::to_string_pretty(&v).unwrap_or_default(),
            // Escapes where none are needed, and a number serde prints its own way.
            _ => v.to_string().replace('/', "\\/").replace(":1,", ":1.0e0,"),
        })
    }

    proptest! {
        #[test]
        fn the_copy_prints_what_serde_prints(text in json_text(), depth in 0..4usize) {
            prop_assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
            let serde = transcode_through_serde(&text, depth).ok();
            prop_assert_eq!(transcode_at(&text, depth).ok(), serde.clone());
            if let Some(copy) = reindent_at(&text, depth) {
                prop_assert_eq!(Some(copy), serde);
            }
        }
    }

    #[test]
    fn tokens_serde_prints_its_own_way_are_left_to_it() {
        for odd in [
            r#""\u00e9""#,
            r#""a\/b""#,
            "1.0",
            "1e3",
            "-0",
            "100000000000000000000",
            "01",
        ] {
            let text = format!(r#"{{"a": [{odd}]}}"#);
            assert_eq!(reindent_at(&text, 1), None, "{odd}");
        }
        let text =
            r#"{"kind": "Pod", "n": [1, -2, 0, true, null], "s": "plain", "e": {}, "l": []}"#;
        assert_eq!(reindent_at(text, 2), transcode_through_serde(text, 2).ok());
    }

    #[test]
    fn prints_as_serde_json_pretty_prints_then_indented() {
        let values = [
            json!({}),
            json!([]),
            json!({"a": [], "b": {}, "c": [1, {"d": [true, null, "x\ny"]}], "e": {"f": {"g": 1.5}}}),
            json!([[[]], [{}], [{"k": "v"}]]),
            json!("text"),
            json!(7),
        ];
        for value in &values {
            for depth in [0, 1, 2, 40] {
                assert_eq!(to_string_at(value, depth).ok(), Some(by_hand(value, depth)));
                let compact = value.to_string();
                assert_eq!(
                    transcode_at(&compact, depth).ok(),
                    Some(by_hand(value, depth))
                );
            }
        }
    }
}
