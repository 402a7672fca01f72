//! Loading Kubernetes objects from YAML and JSON files.
//!
//! A file is a stream of YAML documents separated by `---` (the first may be JSON, as kubectl
//! reads it), or JSON (one object, several concatenated objects, or an array). Any object may be a
//! `List` (or a typed list such as `PodList`) whose items are loaded in turn.
//!
//! JSON, the form of large dumps, is read item by item (`json.rs`): each object straight from its
//! text into the model, in parallel. YAML is cut by line into documents and List items
//! (`yaml.rs`), each parsed alone, in parallel, then handed to the value path. The value path:
//! documents are read into JSON values, so that Lists can be unwrapped and kinds dispatched,
//! then deserialised into k8s-openapi types (pods into the watch's cut-down type) with
//! `serde_path_to_error`, then converted into the model. Every error names the file, the
//! document, the list item, the object and the field, and every path words it alike (the
//! item-by-item paths hand whatever they cannot take as it is to the whole-file value path).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::convert::{self, ConvertError};
use crate::model::{ContainerPort, Name, Pod, Protocol};
use crate::reconcile::load_balancer::pools::{self, Pool};
use crate::sink::Kind;
use crate::snapshot::Snapshot;

mod json;
mod json_cut;
mod yaml;

/// The objects of one or more files.
#[derive(Clone, Debug, Default)]
pub struct Manifest {
    pub objects: Snapshot,
    /// One line per skipped object, naming file, document and object.
    pub warnings: Vec<String>,
    /// The Endpoints and EndpointSlices exactly as the files gave them (with their kind and
    /// apiVersion), the later of two of one name: what `reconcile` prints of those it does not write.
    pub given: HashMap<GivenKey, Given>,
    /// MetalLB `IPAddressPool`s, for the built-in load-balancer provider.
    pub pools: Vec<Pool>,
}

/// An Endpoints or EndpointSlice as a file gave it, with its kind and apiVersion: its JSON text,
/// which is smaller than a value tree and printed without one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Given(Box<str>);

impl Given {
    fn from_json(text: &str) -> Given {
        Given(text.into())
    }

    /// The object's JSON text.
    pub fn json(&self) -> &str {
        &self.0
    }

    /// The object as a JSON value.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

/// Kind, namespace and name of an object sliced writes.
pub type GivenKey = (Kind, Name, Name);

impl Manifest {
    /// Appends the objects and warnings of `other`, as when several files are given.
    pub fn merge(&mut self, other: Manifest) {
        self.objects.merge(other.objects);
        self.warnings.extend(other.warnings);
        self.given.extend(other.given);
        self.pools.extend(other.pools);
    }

    /// The number of objects loaded, warnings aside.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

/// Where in a file: the document (1-based, counting `---` separated documents) and, inside Lists,
/// the item (1-based; one number per nesting level).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Position {
    pub document: usize,
    pub items: Vec<usize>,
    /// What `document` counts: documents of a manifest, or steps of an events file.
    pub unit: Unit,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unit {
    #[default]
    Document,
    Step,
}

impl Position {
    fn item(&self, index: usize) -> Position {
        let mut items = self.items.clone();
        items.push(index + 1);
        Position {
            document: self.document,
            items,
            unit: self.unit,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.unit {
            Unit::Document => "document",
            Unit::Step => "step",
        };
        write!(f, "{unit} {}", self.document)?;
        for item in &self.items {
            write!(f, ", item {item}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// The text does not parse; `message` has the line and column.
    #[error("{file}: {at}: invalid {format}: {message}")]
    Syntax {
        file: String,
        at: Position,
        format: &'static str,
        message: String,
    },
    /// An object is malformed.
    #[error(transparent)]
    Invalid(Box<InvalidObject>),
}

/// A malformed object: where, which, the field and the problem.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {at}{}: {}{message}", object_label(.object), path_label(.path))]
pub struct InvalidObject {
    pub file: String,
    pub at: Position,
    /// "Kind namespace/name" when known.
    pub object: Option<String>,
    /// The field, such as `spec.ports[0].port`; empty for the object as a whole.
    pub path: String,
    pub message: String,
}

fn object_label(object: &Option<String>) -> String {
    object
        .as_ref()
        .map(|o| format!(" ({o})"))
        .unwrap_or_default()
}

fn path_label(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

impl LoadError {
    pub fn file(&self) -> &str {
        match self {
            LoadError::Io { file, .. } | LoadError::Syntax { file, .. } => file,
            LoadError::Invalid(e) => &e.file,
        }
    }

    pub fn position(&self) -> Option<&Position> {
        match self {
            LoadError::Io { .. } => None,
            LoadError::Syntax { at, .. } => Some(at),
            LoadError::Invalid(e) => Some(&e.at),
        }
    }

    /// The field path of an invalid object, such as `spec.ports[0].port`.
    pub fn path(&self) -> Option<&str> {
        match self {
            LoadError::Invalid(e) if !e.path.is_empty() => Some(&e.path),
            _ => None,
        }
    }
}

/// Loads a file; `-` is not special here (the caller reads stdin with [`load_reader`]).
pub fn load_file(path: impl AsRef<Path>) -> Result<Manifest, LoadError> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let io = |source| LoadError::Io {
        file: file.clone(),
        source,
    };
    let opened = std::fs::File::open(path).map_err(io)?;
    let bytes = FileBytes::read(&opened).map_err(io)?;
    let text = std::str::from_utf8(bytes.as_slice()).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (at byte {})", e.valid_up_to()),
        ))
    })?;
    load_text(&file, text, &|read| bytes.release(read))
}

/// A file's bytes: a regular file mapped into memory (no copy, and none of the page faults a
/// fresh buffer of that size costs: a tenth of a second per 64 MB), anything else read.
enum FileBytes {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

/// Mapped pages are released in steps of this many bytes.
const RELEASE_STEP: usize = 1 << 24;

impl FileBytes {
    fn read(file: &std::fs::File) -> std::io::Result<FileBytes> {
        let metadata = file.metadata()?;
        if metadata.is_file() && metadata.len() > 0 {
            // SAFETY: mapped read-only and private. Were another process to truncate the file
            // while it is read, the read would fault, as for any program that maps its input.
            if let Ok(map) = unsafe { memmap2::Mmap::map(file) } {
                return Ok(FileBytes::Mapped(map));
            }
        }
        let mut bytes = Vec::new();
        let mut reader = file;
        reader.read_to_end(&mut bytes)?;
        Ok(FileBytes::Read(bytes))
    }

    /// The first `read` bytes are read: their pages leave the resident set (a gigabyte of dump
    /// need not be resident beside the objects decoded from it). Read again, they come back
    /// from the page cache.
    fn release(&self, read: usize) {
        if let FileBytes::Mapped(map) = self {
            let len = read.min(map.len()) / RELEASE_STEP * RELEASE_STEP;
            if len > 0 {
                // SAFETY: a private read-only mapping of a file: dropped pages are read back
                // from the file, unchanged, when next touched. A failure only keeps them.
                let _ = unsafe {
                    map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, 0, len)
                };
            }
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(map) => map,
            FileBytes::Read(bytes) => bytes,
        }
    }
}

/// Loads everything `reader` yields; `source` names it in messages (such as "<stdin>").
pub fn load_reader(source: &str, mut reader: impl Read) -> Result<Manifest, LoadError> {
    let mut text = String::new();
    reader
        .read_to_string(&mut text)
        .map_err(|e| LoadError::Io {
            file: source.to_owned(),
            source: e,
        })?;
    load_str(source, &text)
}

/// Loads YAML or JSON text; `source` names it in messages.
pub fn load_str(source: &str, text: &str) -> Result<Manifest, LoadError> {
    load_text(source, text, &|_| {})
}

/// [`load_str`] with every document read whole into a value tree first: the path that words
/// every error, against which the item-by-item paths (JSON and YAML) are tested. Slow and large
/// on big files; not for anything else.
#[doc(hidden)]
pub fn load_str_whole(source: &str, text: &str) -> Result<Manifest, LoadError> {
    load_whole(source, text.strip_prefix('\u{feff}').unwrap_or(text))
}

/// The YAML item-by-item path alone: `None` where it declines to cut the text (which
/// [`load_str`] then reads whole). For tests that must know which path ran.
#[doc(hidden)]
pub fn load_yaml_by_items(source: &str, text: &str) -> Result<Option<Manifest>, LoadError> {
    yaml::load(source, text, &|_| {})
}

/// [`load_str`], telling `read` how far into `text` nothing will be read again.
fn load_text(source: &str, text: &str, read: &dyn Fn(usize)) -> Result<Manifest, LoadError> {
    let whole = text;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let offset = whole.len() - text.len();
    let read_of_text = |n: usize| read(offset + n);
    let by_items = if json::looks_like_json(text) {
        json::load(source, text, &read_of_text)?
    } else {
        yaml::load(source, text, &read_of_text)?
    };
    match by_items {
        Some(manifest) => Ok(manifest),
        None => load_whole(source, text),
    }
}

/// Every document of `text` read whole into a value tree, then its objects.
fn load_whole(source: &str, text: &str) -> Result<Manifest, LoadError> {
    let documents = if json::looks_like_json(text) {
        json::documents(source, text)?
    } else {
        yaml_documents(source, text)?
    };
    load_documents(source, documents)
}

/// The objects of whole documents, read into value trees.
fn load_documents(source: &str, documents: Vec<(usize, Value)>) -> Result<Manifest, LoadError> {
    let mut loader = Loader::new(source);
    for (document, value) in documents {
        let at = Position {
            document,
            ..Position::default()
        };
        loader.value(value, &at, None)?;
    }
    Ok(loader.out)
}

/// Reads the one object of step `step` (1-based) of an events file, already parsed.
pub fn load_step_object(source: &str, step: usize, value: Value) -> Result<Manifest, LoadError> {
    let mut loader = Loader::new(source);
    let at = Position {
        document: step,
        items: Vec::new(),
        unit: Unit::Step,
    };
    loader.value(value, &at, None)?;
    Ok(loader.out)
}

fn yaml_documents(file: &str, text: &str) -> Result<Vec<(usize, Value)>, LoadError> {
    let starts = DocumentStarts::new(text);
    let options = crate::yaml::options(text);
    let budget = options.budget.clone().unwrap_or_default();
    match serde_saphyr::from_multiple_with_options::<serde_saphyr::Spanned<Value>>(text, options) {
        Ok(documents) => Ok(documents
            .into_iter()
            .map(|d| (starts.document_at(d.referenced.line()), d.value))
            .collect()),
        Err(e) => Err(LoadError::Syntax {
            file: file.to_owned(),
            at: Position {
                document: e.location().map_or(1, |l| starts.document_at(l.line())),
                ..Position::default()
            },
            format: "YAML",
            message: crate::yaml::message(&e, &budget),
        }),
    }
}

/// Maps a line to the number of the document it is in. The parser skips empty documents, so
/// positions in the text are the only reliable count.
struct DocumentStarts {
    /// (first line, document number), lines 1-based, in order.
    starts: Vec<(u64, usize)>,
    /// The byte offset of each first line.
    offsets: Vec<usize>,
}

impl DocumentStarts {
    fn new(text: &str) -> DocumentStarts {
        let mut starts = Vec::new();
        let mut offsets = Vec::new();
        let mut count = 0;
        let mut in_document = false;
        let mut offset = 0;
        for (i, line) in text.split('\n').enumerate() {
            let line_offset = offset;
            offset += line.len() + 1;
            let line = line.strip_suffix('\r').unwrap_or(line);
            let line_no = i as u64 + 1;
            let marker = |m: &str| {
                line.strip_prefix(m)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
            };
            if marker("---") {
                count += 1;
                in_document = true;
                starts.push((line_no, count));
                offsets.push(line_offset);
            } else if marker("...") {
                in_document = false;
            } else if !in_document {
                // Comments and directives before a document belong to none; content starts one
                // without a `---`.
                let trimmed = line.trim_start();
                if !(trimmed.is_empty() || trimmed.starts_with('#') || line.starts_with('%')) {
                    count += 1;
                    in_document = true;
                    starts.push((line_no, count));
                    offsets.push(line_offset);
                }
            }
        }
        DocumentStarts { starts, offsets }
    }

    /// Each document's number and text, from its first line to the next document's.
    fn documents<'a>(&self, text: &'a str) -> Vec<(usize, &'a str)> {
        let ends = self.offsets.iter().skip(1).copied().chain([text.len()]);
        self.starts
            .iter()
            .zip(self.offsets.iter().zip(ends))
            .map(|(&(_, number), (&start, end))| (number, text.get(start..end).unwrap_or_default()))
            .collect()
    }

    fn document_at(&self, line: u64) -> usize {
        let i = self.starts.partition_point(|&(start, _)| start <= line);
        match i.checked_sub(1) {
            Some(i) => self.starts[i].1,
            None => 1,
        }
    }
}

const READS: &str =
    "sliced reads Services, Pods, Nodes, Namespaces, EndpointSlices, Endpoints and IPAddressPools";

/// The kinds sliced reads, with the apiVersion each must have.
const KINDS: [(&str, &str); 7] = [
    ("Service", "v1"),
    ("Pod", "v1"),
    ("Node", "v1"),
    ("Namespace", "v1"),
    ("Endpoints", "v1"),
    ("EndpointSlice", "discovery.k8s.io/v1"),
    (pools::KIND, pools::API_VERSION),
];

struct Loader<'a> {
    file: &'a str,
    out: Manifest,
    /// Named-port lists seen so far: pods of one template share one allocation.
    port_lists: HashMap<PortsKey, Arc<[ContainerPort]>>,
}

impl<'a> Loader<'a> {
    fn new(file: &'a str) -> Self {
        Loader {
            file,
            out: Manifest::default(),
            port_lists: HashMap::new(),
        }
    }
}

/// A list of named ports as a hashable key.
type PortsKey = Vec<(Name, i32, Protocol, bool)>;

/// The apiVersion and kind that items of a typed list (such as `PodList`) have when they omit them.
type Inherited<'a> = Option<(&'a str, &'a str)>;

impl Loader<'_> {
    fn invalid(
        &self,
        at: &Position,
        object: Option<String>,
        path: &str,
        message: String,
    ) -> LoadError {
        LoadError::Invalid(Box::new(InvalidObject {
            file: self.file.to_owned(),
            at: at.clone(),
            object,
            path: path.to_owned(),
            message,
        }))
    }

    fn value(
        &mut self,
        value: Value,
        at: &Position,
        inherited: Inherited,
    ) -> Result<(), LoadError> {
        let mut map = match value {
            // An empty document or list item.
            Value::Null => return Ok(()),
            Value::Object(map) => map,
            // A JSON array at the top: a list without the wrapper.
            Value::Array(items) if at.items.is_empty() => return self.items(items, at, None),
            other => {
                return Err(self.invalid(
                    at,
                    None,
                    "",
                    format!(
                        "expected a Kubernetes object (a mapping), found {}",
                        type_name(&other)
                    ),
                ));
            }
        };
        let kind = self.type_field(&map, at, "kind", inherited.map(|i| i.1))?;
        let api_version = self.type_field(&map, at, "apiVersion", inherited.map(|i| i.0))?;

        let typed_list = kind
            .strip_suffix("List")
            .filter(|_| map.contains_key("items"));
        if kind == "List" || typed_list.is_some() {
            let items = match map.remove("items") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items,
                Some(other) => {
                    return Err(self.invalid(
                        at,
                        Some(kind),
                        "items",
                        format!("expected a list, found {}", type_name(&other)),
                    ));
                }
            };
            let inherited = typed_list
                .filter(|k| !k.is_empty())
                .map(|k| (api_version.as_str(), k));
            return self.items(items, at, inherited);
        }

        let Some(&(_, want_version)) = KINDS.iter().find(|(k, _)| *k == kind) else {
            let label = object_name(&map, &kind, None);
            self.out
                .warnings
                .push(format!("{}: {at}: skipping {label}: {READS}", self.file));
            return Ok(());
        };
        let namespaced = !matches!(kind.as_str(), "Node" | "Namespace" | pools::KIND);
        let label = object_name(&map, &kind, Some(namespaced));
        if api_version != want_version {
            self.out.warnings.push(format!(
                "{}: {at}: skipping {label}: apiVersion {api_version:?} is not supported (want {want_version})",
                self.file
            ));
            return Ok(());
        }
        // What `reconcile` echoes of an object it leaves alone: the document as given, typed.
        let given = matches!(kind.as_str(), "Endpoints" | "EndpointSlice").then(|| {
            let mut typed = map.clone();
            typed.insert("apiVersion".into(), Value::String(api_version.clone()));
            typed.insert("kind".into(), Value::String(kind.clone()));
            Given(Value::Object(typed).to_string().into())
        });
        let label = Some(label);
        // Decoded by reference: errors are worded from the document as given (null is not 0).
        let map = &map;
        match kind.as_str() {
            "Service" => {
                let o = self.decode::<core::Service>(map, at, &label)?;
                let o = convert::service_from_k8s(&o)
                    .map_err(|e| self.convert_error(at, label, e, map))?;
                self.out.objects.services.push(o);
            }
            "Pod" => {
                // Only the fields a controller reads, as the watch decodes a pod: a field no
                // controller reads is not checked, in a file as from the API server.
                let o = self.decode::<convert::WatchedPod>(map, at, &label)?;
                let mut o = convert::pod_from_watched(&o)
                    .map_err(|e| self.convert_error(at, label, e, map))?;
                self.share_named_ports(&mut o);
                self.out.objects.pods.push(o);
            }
            "Node" => {
                let o = self.decode::<core::Node>(map, at, &label)?;
                let o = convert::node_from_k8s(&o)
                    .map_err(|e| self.convert_error(at, label, e, map))?;
                self.out.objects.nodes.push(o);
            }
            "Namespace" => {
                let o = self.decode::<core::Namespace>(map, at, &label)?;
                let o = convert::namespace_from_k8s(&o)
                    .map_err(|e| self.convert_error(at, label, e, map))?;
                self.out.objects.namespaces.push(o);
            }
            pools::KIND => {
                let o = self.decode::<pools::IpAddressPoolObject>(map, at, &label)?;
                let pool = pools::pool_from_object(o).map_err(|e| {
                    let convert = ConvertError::new(e.path, e.problem.to_string());
                    self.convert_error(at, label, convert, map)
                })?;
                self.out.pools.push(pool);
            }
            "Endpoints" => {
                let o = self.decode::<core::Endpoints>(map, at, &label)?;
                let o = convert::endpoints_from_k8s(&o)
                    .map_err(|e| self.convert_error(at, label, e, map))?;
                self.keep_given(Kind::Endpoints, &o.meta, given);
                self.out.objects.endpoints.push(o);
            }
            _ => {
                let o = self.decode::<discovery::EndpointSlice>(map, at, &label)?;
                let o = convert::endpoint_slice_from_k8s(&o)
                    .map_err(|e| self.convert_error(at, label, e, map))?;
                self.keep_given(Kind::EndpointSlice, &o.meta, given);
                self.out.objects.endpoint_slices.push(o);
            }
        }
        Ok(())
    }

    /// Keeps the document of an object sliced writes, under the key its model object has.
    fn keep_given(&mut self, kind: Kind, meta: &crate::model::Meta, given: Option<Given>) {
        if let Some(given) = given {
            let key = (kind, meta.namespace.clone(), meta.name.clone());
            self.out.given.insert(key, given);
        }
    }

    fn items(
        &mut self,
        items: Vec<Value>,
        at: &Position,
        inherited: Inherited,
    ) -> Result<(), LoadError> {
        for (i, item) in items.into_iter().enumerate() {
            self.value(item, &at.item(i), inherited)?;
        }
        Ok(())
    }

    /// `kind` or `apiVersion`: a non-empty string, or the list's when the item has none.
    fn type_field(
        &self,
        map: &Map<String, Value>,
        at: &Position,
        field: &str,
        inherited: Option<&str>,
    ) -> Result<String, LoadError> {
        match (map.get(field), inherited) {
            (Some(Value::String(s)), _) if !s.is_empty() => Ok(s.clone()),
            (None | Some(Value::Null), Some(i)) => Ok(i.to_owned()),
            (None | Some(Value::Null), None) => {
                Err(self.object_error(at, None, field, "required field is missing".to_owned(), map))
            }
            (Some(Value::String(_)), _) => {
                Err(self.invalid(at, None, field, "must not be empty".to_owned()))
            }
            (Some(other), _) => Err(self.invalid(
                at,
                None,
                field,
                format!("expected a string, found {}", type_name(other)),
            )),
        }
    }

    fn decode<T: DeserializeOwned>(
        &self,
        object: &Map<String, Value>,
        at: &Position,
        label: &Option<String>,
    ) -> Result<T, LoadError> {
        serde_path_to_error::deserialize(object).map_err(|e| {
            let path = e.path().to_string();
            // The root path prints as ".".
            let path = if path == "." { String::new() } else { path };
            let message = time_message(object, &path, e.into_inner().to_string());
            self.object_error(at, label.clone(), &path, message, object)
        })
    }

    fn convert_error(
        &self,
        at: &Position,
        label: Option<String>,
        e: ConvertError,
        object: &Map<String, Value>,
    ) -> LoadError {
        self.object_error(at, label, &e.path, e.message, object)
    }

    /// An error at `path` of `object` (as the file gave it).
    fn object_error(
        &self,
        at: &Position,
        label: Option<String>,
        path: &str,
        message: String,
        object: &Map<String, Value>,
    ) -> LoadError {
        self.invalid(at, label, path, required_field(object, path, message))
    }

    fn share_named_ports(&mut self, pod: &mut Pod) {
        let key = pod
            .named_ports
            .iter()
            .map(|p| (p.name.clone(), p.port, p.protocol, p.sidecar))
            .collect();
        match self.port_lists.entry(key) {
            Entry::Occupied(e) => pod.named_ports = e.get().clone(),
            Entry::Vacant(e) => {
                e.insert(pod.named_ports.clone());
            }
        }
    }
}

/// "Kind namespace/name" from the raw metadata. `namespaced` is `None` for kinds whose scope is
/// unknown: the namespace shows only when given.
fn object_name(map: &Map<String, Value>, kind: &str, namespaced: Option<bool>) -> String {
    let metadata = map.get("metadata");
    let field = |f: &str| {
        metadata
            .and_then(|m| m.get(f))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let name = match (field("name"), field("generateName")) {
        (Some(name), _) => name.to_owned(),
        (None, Some(prefix)) => format!("{prefix}*"),
        (None, None) => "(no name)".to_owned(),
    };
    match (field("namespace"), namespaced) {
        (Some(ns), Some(true) | None) => format!("{kind} {ns}/{name}"),
        (None, Some(true)) => format!("{kind} default/{name}"),
        _ => format!("{kind} {name}"),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A field the decoder read as its zero value because it was null or missing (`port: null` is
/// not port 0): says so, instead of complaining about the zero. `object` is as the file gave it.
fn required_field(object: &Map<String, Value>, path: &str, message: String) -> String {
    // The decoder's zero values, as its complaints about them begin.
    let about_zero = ["0 is not", "\"\" is not"]
        .iter()
        .any(|z| message.starts_with(z));
    match (lookup(object, path), about_zero) {
        (Some(Found::Null), true) => "null, but a value is required".to_owned(),
        (Some(Found::Null), false) => format!("null: {message}"),
        (Some(Found::Missing), true) => "missing, but a value is required".to_owned(),
        _ => message,
    }
}

enum Found<'a> {
    Null,
    Missing,
    Value(&'a Value),
}

/// Follows a path such as `spec.ports[0].port` into `object`; `None` when the path leaves it
/// before its last field.
fn lookup<'a>(object: &'a Map<String, Value>, path: &str) -> Option<Found<'a>> {
    // `None` stands for `object` itself, the root the path starts from.
    let mut at: Option<&Value> = None;
    let mut segments = path.split('.').peekable();
    while let Some(segment) = segments.next() {
        let (key, indices) = match segment.find('[') {
            Some(i) => segment.split_at(i),
            None => (segment, ""),
        };
        let last = segments.peek().is_none() && indices.is_empty();
        let next = match (at, key) {
            (Some(value), "") => Some(value),
            (None, "") => return None,
            (Some(value), key) => value.get(key),
            (None, key) => object.get(key),
        };
        at = match next {
            Some(v) => Some(v),
            None if last => return Some(Found::Missing),
            None => return None,
        };
        for index in indices.split_terminator(']') {
            let index: usize = index.strip_prefix('[')?.parse().ok()?;
            at = Some(at?.get(index)?);
        }
    }
    Some(match at? {
        Value::Null => Found::Null,
        value => Found::Value(value),
    })
}

/// A time that does not parse: the reason alone names the part that failed ("year"), so this
/// quotes the value too. Any other message is returned as it is.
fn time_message(object: &Map<String, Value>, path: &str, message: String) -> String {
    let Some(Found::Value(Value::String(given))) = lookup(object, path) else {
        return message;
    };
    // The decoder's reason is the time parser's, word for word.
    match given.parse::<jiff::Timestamp>() {
        Err(e) if e.to_string() == message => {
            format!("{given:?} is not an RFC 3339 time: {message}")
        }
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every budget the parser enforces is worded plainly, with the limit set.
    #[test]
    fn document_numbers_follow_separators() {
        let text = "# comment\n---\na: 1\n---\n---\nb: 2\n...\n# between\nc: 3\n--- {d: 4}\n";
        let starts = DocumentStarts::new(text);
        let at: Vec<usize> = (1..=10).map(|l| starts.document_at(l)).collect();
        assert_eq!(at, [1, 1, 1, 2, 3, 3, 3, 3, 4, 5]);
        let bare = DocumentStarts::new("a: 1\n---\nb: 2\n");
        assert_eq!([bare.document_at(1), bare.document_at(3)], [1, 2]);
    }
}
