//! JSON input. The usual file (`kubectl get ... -o json`: a List of objects of the kinds sliced
//! reads) is read item by item: each item's text is decoded straight into the model, on every
//! core, without a value tree, and pods skip the fields no controller reads, as the watch does.
//! Anything else (an item of another kind or apiVersion, a nested List, an item that inherits
//! its kind from a typed list, any error) goes through the value path of `mod.rs`, which words
//! warnings and errors; so a file loads the same objects, warnings and first error either way.

use std::borrow::Cow;
use std::cell::Cell;
use std::ops::Range;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use rayon::prelude::*;
use serde::de::{DeserializeOwned, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::json_cut::{self, Cut, Header};
use super::{Given, Inherited, KINDS, LoadError, Loader, Manifest, Position};
use crate::kube::convert::{self, ConvertError, WatchedPod};
use crate::model::{EndpointSlice, Endpoints, Namespace, Node, Pod, Service};
use crate::sink::Kind;

/// One object's text and where it is: a document, or an item of a document's List.
struct Unit<'a> {
    text: &'a str,
    document: usize,
    item: Option<usize>,
    inherited: Inherited<'a>,
}

impl Unit<'_> {
    fn position(&self) -> Position {
        Position {
            document: self.document,
            items: self.item.into_iter().map(|i| i + 1).collect(),
            ..Position::default()
        }
    }
}

/// An object decoded on the fast path.
enum Decoded {
    Service(Service),
    Pod(Pod),
    Node(Node),
    Namespace(Namespace),
    Endpoints(Endpoints, Given),
    EndpointSlice(EndpointSlice, Given),
}

/// Loads a JSON stream; `None` when the text is not a stream of JSON values (the value path
/// then reads it as YAML after JSON, or words the syntax error). `read` is told how far into
/// `text` the decoding has come, so that a mapped file's pages can be let go behind it.
///
/// The text is cut on a thread of its own ([`json_cut`]) while what is cut is decoded on every
/// core and taken in here, in order.
pub(super) fn load(
    source: &str,
    text: &str,
    read: &dyn Fn(usize),
) -> Result<Option<Manifest>, LoadError> {
    let mut reader = Reader {
        text,
        read,
        done: Loader::new(source),
        document: Staged::new(source),
        number: 0,
        first_error: None,
    };
    let valid = std::thread::scope(|scope| {
        let (to, cuts) = std::sync::mpsc::sync_channel(IN_FLIGHT);
        scope.spawn(move || json_cut::cut(text, to));
        let mut valid = true;
        for cut in cuts {
            match cut {
                Cut::Items => reader.document = Staged::new(source),
                Cut::ItemTexts(ranges) => reader.items(&ranges),
                Cut::Document(header) => reader.document_end(&header),
                Cut::NotDocument => valid = false,
            }
        }
        valid
    });
    // A stream that is not all JSON documents is the value path's to word, whatever came before.
    if !valid {
        return Ok(None);
    }
    match reader.first_error {
        Some(e) => Err(e),
        None => Ok(Some(reader.done.out)),
    }
}

/// Batches of items cut ahead of the decoding: bounds the text cut but not yet taken in.
const IN_FLIGHT: usize = 8;

/// What [`load`] has taken in.
struct Reader<'a> {
    text: &'a str,
    read: &'a dyn Fn(usize),
    /// The objects of the documents that ended.
    done: Loader<'a>,
    /// The current document's items, taken in before it is known to be a List.
    document: Staged<'a>,
    /// Documents ended so far.
    number: usize,
    /// The first error, in the order of the text; nothing is taken in after it.
    first_error: Option<LoadError>,
}

/// The items of a document that may turn out to be a List.
struct Staged<'a> {
    loader: Loader<'a>,
    /// Items taken in so far; the next one's index.
    items: usize,
    /// From the first item the fast path could not decode on: held until the document's kind is
    /// known, since the value path reads such an item with the kind a typed List lends it.
    held: Vec<(Range<usize>, Option<Decoded>)>,
}

impl<'a> Staged<'a> {
    fn new(source: &'a str) -> Self {
        Staged {
            loader: Loader::new(source),
            items: 0,
            held: Vec::new(),
        }
    }
}

impl<'a> Reader<'a> {
    fn part(&self, range: &Range<usize>) -> &'a str {
        self.text.get(range.clone()).unwrap_or_default()
    }

    fn items(&mut self, ranges: &[Range<usize>]) {
        if self.first_error.is_some() {
            return;
        }
        let document = self.number + 1;
        let first = self.document.items;
        let units: Vec<Unit> = (ranges.iter().enumerate())
            .map(|(i, range)| Unit {
                text: self.part(range),
                document,
                item: Some(first + i),
                inherited: None,
            })
            .collect();
        let decoded: Vec<Option<Decoded>> = units.par_iter().map(decode).collect();
        let staged = &mut self.document;
        for (range, decoded) in ranges.iter().zip(decoded) {
            match decoded {
                Some(object) if staged.held.is_empty() => staged.loader.push(object),
                decoded => staged.held.push((range.clone(), decoded)),
            }
        }
        staged.items += ranges.len();
        if let Some(last) = ranges.last() {
            (self.read)(last.end);
        }
    }

    fn document_end(&mut self, header: &Header) {
        self.number += 1;
        let staged = std::mem::replace(&mut self.document, Staged::new(self.done.file));
        if self.first_error.is_some() {
            return;
        }
        let taken = match self.inherited(header) {
            Some(inherited) => self.take_list(staged, inherited),
            None => self.take_whole(self.part(&header.text)),
        };
        if let Err(e) = taken {
            self.first_error = Some(e);
        }
        (self.read)(header.text.end);
    }

    /// For a List whose kind and apiVersion are given, what it lends items without a kind; else
    /// `None`: the document is one object (the value path unwraps anything else).
    fn inherited(&self, header: &Header) -> Option<Inherited<'a>> {
        let kind = self.part(header.kind.as_ref()?);
        let api_version = self.part(header.api_version.as_ref()?);
        if !header.has_items || api_version.is_empty() {
            return None;
        }
        // A typed list (`PodList`) lends its kind to items without one, as on the value path.
        match kind.strip_suffix("List")? {
            "" => Some(None),
            item_kind => Some(Some((api_version, item_kind))),
        }
    }

    fn take_list(&mut self, staged: Staged<'a>, inherited: Inherited<'a>) -> Result<(), LoadError> {
        let Staged {
            mut loader,
            items,
            held,
        } = staged;
        let first_held = items - held.len();
        for (i, (range, decoded)) in held.into_iter().enumerate() {
            match decoded {
                Some(object) => loader.push(object),
                None => loader.value_of_text(&Unit {
                    text: self.part(&range),
                    document: self.number,
                    item: Some(first_held + i),
                    inherited,
                })?,
            }
        }
        self.done.out.merge(loader.out);
        Ok(())
    }

    fn take_whole(&mut self, text: &'a str) -> Result<(), LoadError> {
        let unit = Unit {
            text,
            document: self.number,
            item: None,
            inherited: None,
        };
        match decode(&unit) {
            Some(object) => self.done.push(object),
            None => self.done.value_of_text(&unit)?,
        }
        Ok(())
    }
}

/// The object of a unit, when its kind is one sliced reads and it decodes and converts cleanly.
fn decode(unit: &Unit) -> Option<Decoded> {
    let text = unit.text;
    let (kind, api_version) = kind_and_version(text)?;
    if !KINDS.contains(&(kind, api_version)) {
        return None;
    }
    Some(match kind {
        "Service" => Decoded::Service(typed::<core::Service, _>(text, convert::service_from_k8s)?),
        // Borrowed where it can be, `WatchedPod` where not: both read the same fields alike.
        "Pod" => Decoded::Pod(match convert::pod_from_json_text(text) {
            Some(read) => read.ok()?,
            None => typed::<WatchedPod, _>(text, convert::pod_from_watched)?,
        }),
        "Node" => Decoded::Node(typed::<core::Node, _>(text, convert::node_from_k8s)?),
        "Namespace" => Decoded::Namespace(typed::<core::Namespace, _>(
            text,
            convert::namespace_from_k8s,
        )?),
        // Few, and read with their errors worded on the value path.
        crate::reconcile::load_balancer::pools::KIND => return None,
        "Endpoints" => Decoded::Endpoints(
            typed::<core::Endpoints, _>(text, convert::endpoints_from_k8s)?,
            Given::from_json(text),
        ),
        _ => Decoded::EndpointSlice(
            typed::<discovery::EndpointSlice, _>(text, convert::endpoint_slice_from_k8s)?,
            Given::from_json(text),
        ),
    })
}

/// An object's kind and apiVersion, read no further than both: kubectl and the API server print
/// them first, so the object's text is not scanned once more in full before it is decoded. Either
/// missing, empty, null or not a plain string: `None`. A later duplicate of either is not seen
/// here; the typed decoding refuses it (k8s-openapi's types check every `kind` and `apiVersion`
/// they meet, and `WatchedPod` refuses a repeated field), so such an object goes to the value
/// path, as before.
fn kind_and_version(text: &str) -> Option<(&str, &str)> {
    let found = Cell::new(KindAndVersion::default());
    let mut json = serde_json::Deserializer::from_str(text);
    // Stopped by an error once both are found; any other error leaves one missing.
    let _ = serde::Deserializer::deserialize_map(&mut json, KindVisitor { found: &found });
    match found.get() {
        KindAndVersion {
            kind: Some(kind),
            api_version: Some(api_version),
        } if !kind.is_empty() && !api_version.is_empty() => Some((kind, api_version)),
        _ => None,
    }
}

#[derive(Clone, Copy, Default)]
struct KindAndVersion<'a> {
    kind: Option<&'a str>,
    api_version: Option<&'a str>,
}

struct KindVisitor<'f, 'a> {
    found: &'f Cell<KindAndVersion<'a>>,
}

impl<'de> Visitor<'de> for KindVisitor<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut found = KindAndVersion::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "kind" => found.kind = map.next_value()?,
                "apiVersion" => found.api_version = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            self.found.set(found);
            if found.kind.is_some() && found.api_version.is_some() {
                return Err(serde::de::Error::custom("kind and apiVersion found"));
            }
        }
        Ok(())
    }
}

/// Decodes `text` as `T` and converts it; `None` on any error (the value path words it).
fn typed<T: DeserializeOwned, O>(
    text: &str,
    convert: fn(&T) -> Result<O, ConvertError>,
) -> Option<O> {
    convert(&serde_json::from_str(text).ok()?).ok()
}

impl Loader<'_> {
    fn push(&mut self, object: Decoded) {
        let objects = &mut self.out.objects;
        match object {
            Decoded::Service(o) => objects.services.push(o),
            Decoded::Pod(mut o) => {
                self.share_named_ports(&mut o);
                self.out.objects.pods.push(o);
            }
            Decoded::Node(o) => objects.nodes.push(o),
            Decoded::Namespace(o) => objects.namespaces.push(o),
            Decoded::Endpoints(o, given) => {
                self.keep_given(Kind::Endpoints, &o.meta, Some(given));
                self.out.objects.endpoints.push(o);
            }
            Decoded::EndpointSlice(o, given) => {
                self.keep_given(Kind::EndpointSlice, &o.meta, Some(given));
                self.out.objects.endpoint_slices.push(o);
            }
        }
    }

    /// The value path for one unit: warnings, nested Lists, and the words of any error.
    fn value_of_text(&mut self, unit: &Unit) -> Result<(), LoadError> {
        let at = unit.position();
        let value: Value = serde_json::from_str(unit.text).map_err(|e| LoadError::Syntax {
            file: self.file.to_owned(),
            at: at.clone(),
            format: "JSON",
            message: e.to_string(),
        })?;
        self.value(value, &at, unit.inherited)
    }
}

/// JSON is parsed as JSON for its better messages. Flow-style YAML also starts with `{` or `[`,
/// but its keys are usually unquoted, and a JSON key is always quoted.
pub(super) fn looks_like_json(text: &str) -> bool {
    let text = text.trim_start();
    if !text.starts_with(['{', '[']) {
        return false;
    }
    match text.find('{') {
        Some(i) => text[i + 1..].trim_start().starts_with(['"', '}']),
        None => true,
    }
}

/// A stream of JSON objects, or a YAML stream whose first document is JSON. kubectl reads JSON
/// until a document fails, then reads the rest as YAML if at most one object came before
/// (apimachinery's YAMLOrJSONDecoder): `{}` then `---` is YAML, since JSON is YAML. After two or
/// more, kubectl refuses a `---`, and so does this, in words.
pub(super) fn documents(file: &str, text: &str) -> Result<Vec<(usize, Value)>, LoadError> {
    let mut documents = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    while let Some(value) = stream.next() {
        let document = documents.len() + 1;
        let e = match value {
            Ok(value) => {
                documents.push((document, value));
                continue;
            }
            Err(e) => e,
        };
        let marker = separator_line(text, stream.byte_offset());
        let message = match marker {
            // Read the whole as YAML, so that documents and lines count from the start.
            Some(_) if documents.len() <= 1 => return super::yaml_documents(file, text),
            Some(line) => format!(
                "a `---` separator at line {line}, after {} JSON documents without one: \
                 separate every document with `---` (YAML), or none (JSON)",
                documents.len()
            ),
            None => e.to_string(),
        };
        return Err(LoadError::Syntax {
            file: file.to_owned(),
            at: Position {
                document,
                ..Position::default()
            },
            format: "JSON",
            message,
        });
    }
    Ok(documents)
}

/// The line (1-based) of a YAML document separator (`---` at the start of a line) that follows a
/// JSON value ending at byte `end`, after blank or comment lines; `None` when other text follows.
fn separator_line(text: &str, end: usize) -> Option<usize> {
    let (before, rest) = (text.get(..end)?, text.get(end..)?);
    let mut line = before.matches('\n').count() + 1;
    let mut lines = rest.split('\n');
    // The rest of the value's own line, unless the parser went past it.
    if !(before.is_empty() || before.ends_with('\n')) {
        if !lines.next()?.trim().is_empty() {
            return None;
        }
        line += 1;
    }
    for text in lines {
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            line += 1;
            continue;
        }
        let after = text.strip_prefix("---")?;
        return (after.is_empty() || after.starts_with([' ', '\t', '\r'])).then_some(line);
    }
    None
}
