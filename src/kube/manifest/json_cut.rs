//! A JSON stream cut into its documents and, inside each, the items of `items`, on a thread of
//! its own: the items already cut are decoded on the other cores while the rest is still being
//! read. A List names its kind after its items (kubectl prints keys in order), so items are sent
//! before anyone knows whether the document is a List: the reader decides at [`Cut::Document`].

use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::mpsc::SyncSender;

use serde::Deserialize;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// Items sent at once.
const BATCH: usize = 1024;

/// What the cutter sends, in the order of the text. Ranges are byte ranges of the text.
pub(super) enum Cut {
    /// The current document's `items` begin (again, when the key is repeated: the last counts).
    Items,
    /// The next items of the current document's `items`.
    ItemTexts(Vec<Range<usize>>),
    /// The current document ended.
    Document(Header),
    /// A value that does not read as a document: the value path words it. Nothing follows.
    NotDocument,
}

/// A document's text, and its kind and apiVersion when they are plain strings.
pub(super) struct Header {
    pub text: Range<usize>,
    pub kind: Option<Range<usize>>,
    pub api_version: Option<Range<usize>>,
    pub has_items: bool,
}

/// Where the items being read go: the cutter's thread only.
struct Sink {
    base: usize,
    to: SyncSender<Cut>,
    batch: Vec<Range<usize>>,
}

thread_local! {
    static SINK: RefCell<Option<Sink>> = const { RefCell::new(None) };
}

/// Where `part`, a slice of the text at `base`, lies in it.
fn range_of(base: usize, part: &str) -> Range<usize> {
    let start = (part.as_ptr() as usize).saturating_sub(base);
    start..start + part.len()
}

fn send(cut: Cut) {
    SINK.with_borrow_mut(|sink| {
        if let Some(sink) = sink {
            // The reader stopped listening only if it is gone: nothing more to do then.
            let _ = sink.to.send(cut);
        }
    });
}

fn flush() {
    SINK.with_borrow_mut(|sink| {
        if let Some(sink) = sink
            && !sink.batch.is_empty()
        {
            let batch = std::mem::take(&mut sink.batch);
            let _ = sink.to.send(Cut::ItemTexts(batch));
        }
    });
}

/// Cuts `text` and sends what it finds to `to`, ending with the last document or `NotDocument`.
pub(super) fn cut(text: &str, to: SyncSender<Cut>) {
    let base = text.as_ptr() as usize;
    SINK.with_borrow_mut(|sink| {
        *sink = Some(Sink {
            base,
            to,
            batch: Vec::with_capacity(BATCH),
        })
    });
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Document>();
    let mut end = 0;
    while let Some(document) = stream.next() {
        let Ok(document) = document else {
            send(Cut::NotDocument);
            break;
        };
        let start = end;
        end = stream.byte_offset();
        let whole = text.get(start..end).unwrap_or_default().trim_start();
        send(Cut::Document(Header {
            text: range_of(base, whole),
            kind: document.kind.map(|k| range_of(base, k)),
            api_version: document.api_version.map(|v| range_of(base, v)),
            has_items: document.items.is_some(),
        }));
    }
    SINK.with_borrow_mut(|sink| *sink = None);
}

/// An object's kind and apiVersion, and whether it has `items`, read in one pass; for any other
/// value nothing. A string with escapes does not borrow and fails the read: the value path then
/// reads the object.
#[derive(Default)]
struct Document<'a> {
    kind: Option<&'a str>,
    api_version: Option<&'a str>,
    items: Option<()>,
}

impl<'de> Deserialize<'de> for Document<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DocumentVisitor)
    }
}

struct DocumentVisitor;

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Document<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document<'de>, A::Error> {
        let mut document = Document::default();
        // A key that does not borrow (it has escapes) is none of these three.
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "kind" => document.kind = map.next_value()?,
                "apiVersion" => document.api_version = map.next_value()?,
                "items" => document.items = map.next_value_seed(ItemsSeed)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(document)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Document<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Document::default())
    }

    fn visit_bool<E>(self, _: bool) -> Result<Document<'de>, E> {
        Ok(Document::default())
    }

    fn visit_i64<E>(self, _: i64) -> Result<Document<'de>, E> {
        Ok(Document::default())
    }

    fn visit_u64<E>(self, _: u64) -> Result<Document<'de>, E> {
        Ok(Document::default())
    }

    fn visit_f64<E>(self, _: f64) -> Result<Document<'de>, E> {
        Ok(Document::default())
    }

    fn visit_str<E>(self, _: &str) -> Result<Document<'de>, E> {
        Ok(Document::default())
    }

    fn visit_unit<E>(self) -> Result<Document<'de>, E> {
        Ok(Document::default())
    }
}

/// `items`: null, or a list whose elements are sent as they are read.
struct ItemsSeed;

impl<'de> DeserializeSeed<'de> for ItemsSeed {
    type Value = Option<()>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<()>, D::Error> {
        d.deserialize_option(ItemsSeed)
    }
}

impl<'de> Visitor<'de> for ItemsSeed {
    type Value = Option<()>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of items")
    }

    fn visit_none<E>(self) -> Result<Option<()>, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Option<()>, E> {
        Ok(None)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<()>, D::Error> {
        d.deserialize_seq(ItemsSeed)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<()>, A::Error> {
        flush();
        send(Cut::Items);
        while let Some(item) = seq.next_element::<&'de RawValue>()? {
            let full = SINK.with_borrow_mut(|sink| match sink {
                Some(sink) => {
                    sink.batch.push(range_of(sink.base, item.get()));
                    sink.batch.len() >= BATCH
                }
                None => false,
            });
            if full {
                flush();
            }
        }
        flush();
        Ok(Some(()))
    }
}
