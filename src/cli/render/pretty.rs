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
    let mut text = Vec::with_capacity(json.len() * 2);
    let mut from = serde_json::Deserializer::from_str(json);
    let mut to = serde_json::Serializer::with_formatter(&mut text, AtDepth::new(depth));
    serde_transcode::transcode(&mut from, &mut to)?;
    String::from_utf8(text).map_err(|e| serde::ser::Error::custom(e.to_string()))
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
    use serde_json::json;

    /// What the output printed before: serde_json's own pretty text, each line after the first
    /// indented by hand.
    fn by_hand(value: &serde_json::Value, depth: usize) -> String {
        let text = serde_json::to_string_pretty(value).unwrap_or_default();
        text.replace('\n', &format!("\n{}", "  ".repeat(depth)))
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
