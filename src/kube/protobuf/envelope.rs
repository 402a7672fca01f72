//! The envelope around every object and list the API server sends as protobuf (the `k8s\0` magic,
//! then a `runtime.Unknown` naming the type), watch events (`meta.v1.WatchEvent`, sent without
//! the envelope, each framed by its length), and the list metadata a paged list resumes from.

use super::wire::{Fields, WireError};

/// What precedes every enveloped object: "k8s" and a zero byte.
pub const MAGIC: &[u8; 4] = b"k8s\0";
/// The media type the API server serves protobuf as.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    #[error("not a Kubernetes protobuf object: it does not begin with \"k8s\\0\"")]
    NoMagic,
    #[error("{what}: {error}")]
    Wire {
        what: &'static str,
        error: WireError,
    },
    #[error("the object is {found}, where {expected} was expected")]
    Kind {
        expected: &'static str,
        found: String,
    },
    #[error("content encoding {0:?} is not supported")]
    ContentEncoding(String),
    #[error("a frame of {0} bytes is larger than any object the API server sends")]
    FrameTooLarge(u64),
}

fn wire(what: &'static str) -> impl Fn(WireError) -> ProtobufError {
    move |error| ProtobufError::Wire { what, error }
}

/// An object as `runtime.Unknown` carries it: its type and its own bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unknown<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub raw: &'a [u8],
}

/// The enveloped object in `bytes`.
pub fn unknown(bytes: &[u8]) -> Result<Unknown<'_>, ProtobufError> {
    let body = bytes.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let mut out = Unknown::default();
    let what = wire("runtime.Unknown");
    for field in Fields::new(body) {
        let (n, value) = field.map_err(&what)?;
        match n {
            1 => {
                // runtime.TypeMeta: apiVersion 1, kind 2.
                for field in Fields::new(value.bytes(n).map_err(&what)?) {
                    let (n, value) = field.map_err(wire("runtime.TypeMeta"))?;
                    match n {
                        1 => out.api_version = value.str(n).map_err(wire("runtime.TypeMeta"))?,
                        2 => out.kind = value.str(n).map_err(wire("runtime.TypeMeta"))?,
                        _ => {}
                    }
                }
            }
            2 => out.raw = value.bytes(n).map_err(&what)?,
            3 => {
                let encoding = value.str(n).map_err(&what)?;
                if !encoding.is_empty() {
                    return Err(ProtobufError::ContentEncoding(encoding.to_string()));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// A watch event: its type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR) and the enveloped object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchEventFields<'a> {
    pub event_type: &'a str,
    pub object: &'a [u8],
}

/// One frame of a watch stream: a `meta.v1.WatchEvent` without an envelope.
pub fn watch_event(frame: &[u8]) -> Result<WatchEventFields<'_>, ProtobufError> {
    let what = wire("meta.v1.WatchEvent");
    let mut out = WatchEventFields::default();
    for field in Fields::new(frame) {
        let (n, value) = field.map_err(&what)?;
        match n {
            1 => out.event_type = value.str(n).map_err(&what)?,
            2 => {
                // runtime.RawExtension: raw 1.
                for field in Fields::new(value.bytes(n).map_err(&what)?) {
                    let (n, value) = field.map_err(wire("runtime.RawExtension"))?;
                    if n == 1 {
                        out.object = value.bytes(n).map_err(wire("runtime.RawExtension"))?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// A list (`PodList` and the like: metadata 1, items 2): where the next page starts, the version
/// it was read at, and each item's bytes (items are not enveloped).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListFields<'a> {
    pub resource_version: &'a str,
    pub continue_token: &'a str,
    pub items: Vec<&'a [u8]>,
}

/// The list enveloped in `bytes`, of kind `kind` (`PodList`).
pub fn list<'a>(bytes: &'a [u8], kind: &'static str) -> Result<ListFields<'a>, ProtobufError> {
    let object = unknown(bytes)?;
    if object.kind != kind {
        return Err(ProtobufError::Kind {
            expected: kind,
            found: object.kind.to_string(),
        });
    }
    let what = wire("list");
    let mut out = ListFields::default();
    for field in Fields::new(object.raw) {
        let (n, value) = field.map_err(&what)?;
        match n {
            1 => {
                // meta.v1.ListMeta: resourceVersion 2, continue 3.
                for field in Fields::new(value.bytes(n).map_err(&what)?) {
                    let (n, value) = field.map_err(wire("meta.v1.ListMeta"))?;
                    match n {
                        2 => {
                            out.resource_version = value.str(n).map_err(wire("meta.v1.ListMeta"))?
                        }
                        3 => out.continue_token = value.str(n).map_err(wire("meta.v1.ListMeta"))?,
                        _ => {}
                    }
                }
            }
            2 => out.items.push(value.bytes(n).map_err(&what)?),
            _ => {}
        }
    }
    Ok(out)
}

/// A `meta.v1.Status`: an error answer, or a watch's ERROR event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusFields<'a> {
    pub status: &'a str,
    pub message: &'a str,
    pub reason: &'a str,
    pub code: i32,
}

/// The Status enveloped in `bytes`.
pub fn status(bytes: &[u8]) -> Result<StatusFields<'_>, ProtobufError> {
    let object = unknown(bytes)?;
    if object.kind != "Status" {
        return Err(ProtobufError::Kind {
            expected: "Status",
            found: object.kind.to_string(),
        });
    }
    let what = wire("meta.v1.Status");
    let mut out = StatusFields::default();
    for field in Fields::new(object.raw) {
        let (n, value) = field.map_err(&what)?;
        match n {
            2 => out.status = value.str(n).map_err(&what)?,
            3 => out.message = value.str(n).map_err(&what)?,
            4 => out.reason = value.str(n).map_err(&what)?,
            6 => out.code = value.int32(n).map_err(&what)?,
            _ => {}
        }
    }
    Ok(out)
}

/// The largest frame taken: the API server refuses objects over 3 MiB (etcd's limit of 1.5 MiB,
/// with room), so a longer length is a broken stream, not a large object.
const MAX_FRAME: usize = 64 << 20;

/// A watch stream's frames, each a 4-byte big-endian length and that many bytes, taken as the
/// body's chunks arrive, whatever their boundaries.
#[derive(Debug, Default)]
pub struct Frames {
    buf: Vec<u8>,
    start: usize,
}

impl Frames {
    pub fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole frame, if one has arrived.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, ProtobufError> {
        let pending = &self.buf[self.start..];
        let Some((head, rest)) = pending.split_first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*head) as usize;
        if len > MAX_FRAME {
            return Err(ProtobufError::FrameTooLarge(len as u64));
        }
        if rest.len() < len {
            // Compact before the rest of a large frame arrives.
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            return Ok(None);
        }
        let from = self.start + 4;
        self.start = from + len;
        Ok(Some(&self.buf[from..from + len]))
    }

    /// Bytes of a frame not yet whole.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_across_chunk_boundaries() {
        let mut stream = Vec::new();
        for payload in [&b"one"[..], b"", b"three"] {
            stream.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            stream.extend_from_slice(payload);
        }
        for split in 0..stream.len() {
            let mut frames = Frames::default();
            let mut got: Vec<Vec<u8>> = Vec::new();
            for chunk in [&stream[..split], &stream[split..]] {
                frames.push(chunk);
                while let Some(frame) = frames.next_frame().unwrap() {
                    got.push(frame.to_vec());
                }
            }
            assert_eq!(
                got,
                [b"one".to_vec(), Vec::new(), b"three".to_vec()],
                "split at {split}"
            );
            assert_eq!(frames.pending(), 0);
        }
    }

    #[test]
    fn a_length_past_any_object_is_an_error() {
        let mut frames = Frames::default();
        frames.push(&u32::MAX.to_be_bytes());
        assert_eq!(
            frames.next_frame(),
            Err(ProtobufError::FrameTooLarge(u64::from(u32::MAX)))
        );
    }

    #[test]
    fn an_object_without_the_magic_is_refused() {
        assert_eq!(unknown(b"{\"kind\":\"Pod\"}"), Err(ProtobufError::NoMagic));
        assert_eq!(
            unknown(b"k8s\0\x12"),
            Err(ProtobufError::Wire {
                what: "runtime.Unknown",
                error: WireError::Truncated
            })
        );
    }
}
