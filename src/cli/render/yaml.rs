//! A YAML writer for what `reconcile` prints: block style, a string plain when it plainly is one
//! (letters, digits and `-._/`, starting with a letter, not a YAML 1.1 keyword), else in JSON's
//! double quotes, which YAML reads alike. serde-saphyr's writer weighs every string against all
//! of YAML's rules, and a million-pod cluster's slices spent most of their output time there.
//!
//! Only what serialising Kubernetes objects needs: maps, structs, sequences, scalars, options.

use std::fmt::Write as _;

use serde::ser::{self, Serialize};

/// `value` as a YAML document's body (without the `---` line).
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    let mut out = String::with_capacity(1024);
    value.serialize(Emitter {
        out: &mut out,
        slot: Slot::Top,
    })?;
    Ok(out)
}

/// JSON text as a YAML document's body, written as it is read (no value tree between).
pub fn from_json(text: &str) -> Result<String, Error> {
    let mut out = String::with_capacity(text.len());
    let mut json = serde_json::Deserializer::from_str(text);
    serde_transcode::transcode(
        &mut json,
        Emitter {
            out: &mut out,
            slot: Slot::Top,
        },
    )?;
    Ok(out)
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Error(String);

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// Where the value being written goes.
#[derive(Clone, Copy)]
enum Slot {
    /// The document itself.
    Top,
    /// After `key:` of a map whose keys are at `indent`.
    Value { indent: usize },
    /// After `- ` of a sequence whose dashes are at `indent`.
    Item { indent: usize },
}

struct Emitter<'a> {
    out: &'a mut String,
    slot: Slot,
}

impl<'a> Emitter<'a> {
    fn scalar(self, text: &str) -> Result<(), Error> {
        if matches!(self.slot, Slot::Value { .. }) {
            self.out.push(' ');
        }
        self.out.push_str(text);
        self.out.push('\n');
        Ok(())
    }

    fn string(self, s: &str) -> Result<(), Error> {
        if is_plain(s) {
            self.scalar(s)
        } else {
            self.scalar(&quoted(s))
        }
    }

    fn map(self) -> Block<'a> {
        // Keys of a map that is an item start on the dash's line, two columns in.
        let (indent, inline) = match self.slot {
            Slot::Top => (0, false),
            Slot::Value { indent } => (indent + 2, false),
            Slot::Item { indent } => (indent + 2, true),
        };
        Block {
            out: self.out,
            slot: self.slot,
            indent,
            inline,
            count: 0,
        }
    }

    fn seq(self) -> Block<'a> {
        // A sequence under a key has its dashes at the key's column, as kubectl prints it.
        let (indent, inline) = match self.slot {
            Slot::Top => (0, false),
            Slot::Value { indent } => (indent, false),
            Slot::Item { indent } => (indent + 2, true),
        };
        Block {
            out: self.out,
            slot: self.slot,
            indent,
            inline,
            count: 0,
        }
    }
}

/// A map or a sequence being written.
struct Block<'a> {
    out: &'a mut String,
    slot: Slot,
    indent: usize,
    /// The first entry goes on the current line (after a dash).
    inline: bool,
    count: usize,
}

impl Block<'_> {
    /// Starts an entry: the line break after the parent's key, and the indentation.
    fn entry(&mut self) {
        if self.count == 0 && matches!(self.slot, Slot::Value { .. }) {
            self.out.push('\n');
        }
        if !(self.count == 0 && self.inline) {
            self.out.extend(std::iter::repeat_n(' ', self.indent));
        }
        self.count += 1;
    }

    fn end(self, empty: &str) -> Result<(), Error> {
        if self.count == 0 {
            Emitter {
                out: self.out,
                slot: self.slot,
            }
            .scalar(empty)?;
        }
        Ok(())
    }

    fn key(&mut self, key: &str) -> Result<(), Error> {
        self.entry();
        if is_plain(key) {
            self.out.push_str(key);
        } else {
            self.out.push_str(&quoted(key));
        }
        self.out.push(':');
        Ok(())
    }

    fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(Emitter {
            out: self.out,
            slot: Slot::Value {
                indent: self.indent,
            },
        })
    }

    fn item<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.entry();
        self.out.push_str("- ");
        value.serialize(Emitter {
            out: self.out,
            slot: Slot::Item {
                indent: self.indent,
            },
        })
    }
}

/// Plain only when no YAML reader could take it for anything but this string.
fn is_plain(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '/'))
    {
        return false;
    }
    if first.is_ascii_digit() {
        // A number, a date, or a number in hex, octal, binary or with an exponent, unless a
        // letter no number has shows it is text (a uid, `8080tcp`).
        let digits = |prefixes: [&str; 2], digit: fn(char) -> bool| {
            prefixes.iter().any(|p| {
                s.strip_prefix(p)
                    .is_some_and(|rest| rest.chars().all(|c| digit(c) || c == '_'))
            })
        };
        let radix = digits(["0x", "0X"], |c| c.is_ascii_hexdigit())
            || digits(["0o", "0O"], |c| matches!(c, '0'..='7'))
            || digits(["0b", "0B"], |c| matches!(c, '0' | '1'));
        return !radix
            && s.chars()
                .any(|c| c.is_ascii_alphabetic() && !matches!(c, 'e' | 'E'));
    }
    first.is_ascii_alphabetic() && !KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(s))
}

/// `s` in double quotes, with what YAML does not allow in a document escaped: control
/// characters (C0, DEL, C1), the byte order mark, and the two Unicode line separators.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || matches!(c, '\u{feff}' | '\u{2028}' | '\u{2029}') => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Words YAML 1.1 or 1.2 reads as booleans or null.
const KEYWORDS: [&str; 11] = [
    "y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf",
];

impl<'a> ser::Serializer for Emitter<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Block<'a>;
    type SerializeTuple = Block<'a>;
    type SerializeTupleStruct = Block<'a>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = Block<'a>;
    type SerializeStruct = Block<'a>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.scalar(if v { "true" } else { "false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.scalar(&v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.scalar(&v.to_string())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        // JSON's form of a finite number is YAML's too; YAML spells the others with a dot.
        let text = match v {
            v if v.is_nan() => ".nan".to_owned(),
            v if v.is_infinite() => if v > 0.0 { ".inf" } else { "-.inf" }.to_owned(),
            v => serde_json::to_string(&v).map_err(|e| Error(e.to_string()))?,
        };
        self.scalar(&text)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.string(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.string(v)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Error> {
        Err(Error("bytes have no YAML form here".to_owned()))
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.scalar("null")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.scalar("null")
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.scalar("null")
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(Error(
            "enum variants with data have no YAML form here".to_owned(),
        ))
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Block<'a>, Error> {
        Ok(self.seq())
    }
    fn serialize_tuple(self, _: usize) -> Result<Block<'a>, Error> {
        Ok(self.seq())
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Block<'a>, Error> {
        Ok(self.seq())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(Error(
            "enum variants with data have no YAML form here".to_owned(),
        ))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Block<'a>, Error> {
        Ok(self.map())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Block<'a>, Error> {
        Ok(self.map())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(Error(
            "enum variants with data have no YAML form here".to_owned(),
        ))
    }
}

impl ser::SerializeSeq for Block<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.item(value)
    }
    fn end(self) -> Result<(), Error> {
        Block::end(self, "[]")
    }
}

impl ser::SerializeTuple for Block<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.item(value)
    }
    fn end(self) -> Result<(), Error> {
        Block::end(self, "[]")
    }
}

impl ser::SerializeTupleStruct for Block<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.item(value)
    }
    fn end(self) -> Result<(), Error> {
        Block::end(self, "[]")
    }
}

impl ser::SerializeMap for Block<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        // Kubernetes objects' map keys are strings (labels, annotations, quantities).
        match key.serialize(serde_json::value::Serializer) {
            Ok(serde_json::Value::String(key)) => self.key(&key),
            _ => Err(Error("a map key must be a string".to_owned())),
        }
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.value(value)
    }
    fn end(self) -> Result<(), Error> {
        Block::end(self, "{}")
    }
}

impl ser::SerializeStruct for Block<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.key(key)?;
        self.value(value)
    }
    fn end(self) -> Result<(), Error> {
        Block::end(self, "{}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    const CLUSTER: &str = include_str!("../../../fixtures/upstream-1.36/cluster.json");

    /// What is written reads back as the same value, by another YAML reader.
    fn round_trip(value: &Value) {
        let text = super::to_string(value).unwrap();
        let back: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(&back, value, "{text}");
    }

    #[test]
    fn kube_controller_managers_objects_read_back_alike() {
        let list: Value = serde_json::from_str(CLUSTER).unwrap();
        for item in list["items"].as_array().unwrap() {
            round_trip(item);
        }
    }

    /// JSON text written as it is read gives what its value gives.
    #[test]
    fn json_text_is_written_as_its_value() {
        let list: Value = serde_json::from_str(CLUSTER).unwrap();
        for item in list["items"].as_array().unwrap() {
            let text = serde_json::to_string(item).unwrap();
            assert_eq!(
                super::from_json(&text).unwrap(),
                super::to_string(item).unwrap()
            );
        }
    }

    #[test]
    fn strings_that_look_like_something_else_stay_strings() {
        let odd = [
            "",
            "true",
            "True",
            "yes",
            "No",
            "on",
            "OFF",
            "y",
            "n",
            "null",
            "Null",
            "~",
            "nan",
            ".nan",
            "inf",
            "-.inf",
            "1",
            "-1",
            "+1",
            "1.5",
            "1e5",
            "1E5",
            "0x1F",
            "0o17",
            "0b101",
            "1_000",
            "12:30",
            "2001-12-14",
            "2001-12-14t21:59:43.10-05:00",
            "010.000.000.001",
            "10.64.0.1",
            "fd00::1",
            "0c3e4b8a-71d2-4f6e-9a0b-000000000000",
            "8080tcp",
            "a: b",
            "a #b",
            "#c",
            "-x",
            "- x",
            "? x",
            "@x",
            "`x",
            "!x",
            "&x",
            "*x",
            "%x",
            "|",
            ">",
            "'q'",
            "\"q\"",
            "a b",
            " lead",
            "trail ",
            "tab\there",
            "line\nbreak",
            "\u{0}",
            "\u{7f}",
            "caf\u{e9}",
            "\u{1F600}",
            "[a]",
            "{a: 1}",
            "a,b",
            "=",
            "<<",
        ];
        for s in odd {
            round_trip(&json!({ "key": s, "list": [s, {"k": s}], s: 1 }));
        }
    }

    #[test]
    fn shapes_read_back_alike() {
        for value in [
            json!({}),
            json!([]),
            json!({"a": {}, "b": [], "c": [[]], "d": [{}], "e": null}),
            json!([[1, [2, {"x": [3]}]], {"y": {"z": [true, false]}}]),
            json!({"n": [0, -7, 18446744073709551615u64, 1.25, -0.5]}),
            json!({"nested": [{"a": 1, "b": [{"c": 2, "d": []}]}, {"e": {}}]}),
        ] {
            round_trip(&value);
        }
    }
}
