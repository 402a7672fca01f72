//! The protobuf wire format, read in place: each field's number and value, with length-delimited
//! values borrowed from the buffer. A decoder takes the fields it wants and passes over the rest
//! without decoding them: a pod's managedFields are one length to skip.

/// A malformed message. The decoder of the message it was in adds which field of which object.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("the message ends inside a field")]
    Truncated,
    #[error("a varint runs over 10 bytes")]
    VarintTooLong,
    #[error("field {field} has wire type {wire_type}, which no message of the API uses")]
    WireType { field: u32, wire_type: u8 },
    #[error("field {field} is {found}, where {expected} was expected")]
    Kind {
        field: u32,
        expected: &'static str,
        found: &'static str,
    },
    #[error("field {field} is not UTF-8")]
    NotUtf8 { field: u32 },
    #[error("field {field} ({value}) is out of range")]
    OutOfRange { field: u32, value: i64 },
}

/// One field's value as the wire carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl<'a> Value<'a> {
    fn kind(&self) -> &'static str {
        match self {
            Value::Varint(_) => "a varint",
            Value::Fixed64(_) => "a 64-bit value",
            Value::Bytes(_) => "length-delimited",
            Value::Fixed32(_) => "a 32-bit value",
        }
    }

    fn expected(&self, field: u32, expected: &'static str) -> WireError {
        WireError::Kind {
            field,
            expected,
            found: self.kind(),
        }
    }

    /// A nested message, bytes, or a string's bytes.
    pub fn bytes(self, field: u32) -> Result<&'a [u8], WireError> {
        match self {
            Value::Bytes(b) => Ok(b),
            other => Err(other.expected(field, "length-delimited")),
        }
    }

    pub fn str(self, field: u32) -> Result<&'a str, WireError> {
        std::str::from_utf8(self.bytes(field)?).map_err(|_| WireError::NotUtf8 { field })
    }

    /// An `int64` (two's complement in ten bytes when negative).
    pub fn int64(self, field: u32) -> Result<i64, WireError> {
        match self {
            Value::Varint(v) => Ok(v as i64),
            other => Err(other.expected(field, "a varint")),
        }
    }

    /// An `int32`: Go writes a negative one sign-extended to 64 bits.
    pub fn int32(self, field: u32) -> Result<i32, WireError> {
        let value = self.int64(field)?;
        i32::try_from(value).map_err(|_| WireError::OutOfRange { field, value })
    }

    pub fn bool(self, field: u32) -> Result<bool, WireError> {
        match self {
            Value::Varint(v) => Ok(v != 0),
            other => Err(other.expected(field, "a varint")),
        }
    }
}

/// The fields of one message, in the order written.
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Fields { buf }
    }

    #[inline(always)]
    fn varint(&mut self) -> Result<u64, WireError> {
        // Tags, and the lengths of most strings, fit one byte.
        if let Some((&byte, rest)) = self.buf.split_first()
            && byte < 0x80
        {
            self.buf = rest;
            return Ok(u64::from(byte));
        }
        self.long_varint()
    }

    #[inline(never)]
    fn long_varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for (i, &byte) in self.buf.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                self.buf = &self.buf[i + 1..];
                return Ok(value);
            }
        }
        if self.buf.len() >= 10 {
            Err(WireError::VarintTooLong)
        } else {
            Err(WireError::Truncated)
        }
    }

    #[inline(always)]
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.buf.len() {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The next field's number and value; `None` at the end of the message. Inlined into each
    /// decoder's loop: the call and its returned value cost more than the reading.
    #[inline(always)]
    pub fn next_field(&mut self) -> Result<Option<(u32, Value<'a>)>, WireError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        // Field numbers are 29 bits; a larger tag is no message of the API.
        let field = u32::try_from(tag >> 3).unwrap_or(u32::MAX);
        let value = match (tag & 7) as u8 {
            0 => Value::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                Value::Fixed64(u64::from_le_bytes([
                    b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                ]))
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| WireError::Truncated)?;
                Value::Bytes(self.take(len)?)
            }
            5 => {
                let b = self.take(4)?;
                Value::Fixed32(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            }
            // 3 and 4 are proto2's groups: no Kubernetes message has one.
            wire_type => return Err(WireError::WireType { field, wire_type }),
        };
        Ok(Some((field, value)))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), WireError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_field() {
            Ok(Some(field)) => Some(Ok(field)),
            Ok(None) => None,
            Err(e) => {
                // Nothing after a malformed field can be read.
                self.buf = &[];
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(buf: &[u8]) -> Result<Vec<(u32, Value<'_>)>, WireError> {
        Fields::new(buf).collect()
    }

    #[test]
    fn reads_each_wire_type() {
        // 1: varint 300; 2: "hi"; 3: fixed64 1; 4: fixed32 2.
        let buf = [
            0x08, 0xac, 0x02, 0x12, 0x02, b'h', b'i', 0x19, 1, 0, 0, 0, 0, 0, 0, 0, 0x25, 2, 0, 0,
            0,
        ];
        assert_eq!(
            fields(&buf),
            Ok(vec![
                (1, Value::Varint(300)),
                (2, Value::Bytes(b"hi")),
                (3, Value::Fixed64(1)),
                (4, Value::Fixed32(2)),
            ])
        );
    }

    #[test]
    fn negative_int32_is_sign_extended() {
        let minus_one = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        let (field, value) = fields(&minus_one).unwrap()[0];
        assert_eq!(value.int32(field), Ok(-1));
        let too_big = [0x08, 0x80, 0x80, 0x80, 0x80, 0x10];
        let (field, value) = fields(&too_big).unwrap()[0];
        assert!(matches!(
            value.int32(field),
            Err(WireError::OutOfRange { .. })
        ));
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        assert_eq!(fields(&[0x12, 0x05, b'a']), Err(WireError::Truncated));
        assert_eq!(fields(&[0x08]), Err(WireError::Truncated));
        assert_eq!(fields(&[0x08, 0x80]), Err(WireError::Truncated));
        assert_eq!(
            fields(&[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
            ]),
            Err(WireError::VarintTooLong)
        );
        assert_eq!(
            fields(&[0x0b]),
            Err(WireError::WireType {
                field: 1,
                wire_type: 3
            })
        );
        // A length past the end of the buffer, however large.
        assert_eq!(
            fields(&[0x12, 0xff, 0xff, 0xff, 0xff, 0x0f]),
            Err(WireError::Truncated)
        );
        let (field, value) = fields(&[0x12, 0x01, 0xff]).unwrap()[0];
        assert_eq!(value.str(field), Err(WireError::NotUtf8 { field: 2 }));
        assert!(value.int64(field).is_err());
    }
}
