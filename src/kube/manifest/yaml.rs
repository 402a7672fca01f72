//! YAML input, item by item. The usual dump (`kubectl get ... -o yaml`: a `List` whose items
//! are block sequence entries) is cut by line into its documents and, in a List, its items; each
//! piece is parsed on every core and handed to the value path of `mod.rs` in order. Read whole,
//! the parser holds every item's value tree at once (about 40 KB a pod) on one core.
//!
//! The cut is made only at lines where YAML allows nothing but a new document or a new entry of
//! the top-level `items` sequence, and only where no piece can depend on another (no anchors,
//! aliases or directives). A cut inside a quoted or flow value leaves a piece that does not parse,
//! and any piece that does not parse, or an odd `items` block, sends the whole file down the
//! whole-file path, so that its objects, warnings and errors are those the whole parse gives
//! (`tests/scenarios/manifest/yaml_items.rs` compares the two).

use std::borrow::Cow;

use rayon::prelude::*;
use serde_json::Value;

use super::{DocumentStarts, LoadError, Loader, Manifest, Position};

/// Pieces parsed at a time: bounds the value trees held at once.
const CHUNK: usize = 1024;

/// One piece of the text, parsed alone: a whole document, the List of a document without its
/// items, or one item of that List.
struct Piece<'a> {
    text: Cow<'a, str>,
    document: usize,
    /// For an item, its index and the List it is in (an index into the Lists' `lends`).
    item: Option<(usize, usize)>,
}

impl Piece<'_> {
    fn position(&self) -> Position {
        Position {
            document: self.document,
            items: self.item.map(|(i, _)| i + 1).into_iter().collect(),
            ..Position::default()
        }
    }
}

/// Parser options as the whole parse has them, for a text of `len` bytes: for a whole document,
/// and for an item parsed alone, which sits two levels higher (no List mapping, no `items`
/// sequence around it) and one lower (its own one-entry sequence), so its depth limit is one less.
#[derive(Clone, Copy)]
struct Options {
    len: usize,
}

impl Options {
    fn document(self) -> serde_saphyr::Options {
        crate::yaml::options_for(self.len)
    }

    fn item(self) -> serde_saphyr::Options {
        let mut options = self.document();
        if let Some(budget) = options.budget.as_mut() {
            budget.max_depth = budget.max_depth.saturating_sub(1);
        }
        options
    }
}

/// Loads a YAML stream piece by piece; `None` when it cannot be cut safely (the caller then
/// parses it whole). `read` is told how far into `text` nothing will be read again.
pub(super) fn load(
    source: &str,
    text: &str,
    read: &dyn Fn(usize),
) -> Result<Option<Manifest>, LoadError> {
    if has_anchors_or_directives(text) {
        return Ok(None);
    }
    let options = Options { len: text.len() };
    let mut pieces = Vec::new();
    // What each List lends to items without their own apiVersion and kind.
    let mut lends: Vec<Option<(String, String)>> = Vec::new();
    for (document, body) in DocumentStarts::new(text).documents(text) {
        if is_empty(body) {
            continue;
        }
        let whole = Piece {
            text: Cow::Borrowed(body),
            document,
            item: None,
        };
        let Some(cut) = cut_list(body) else {
            pieces.push(whole);
            continue;
        };
        let Ok(header) =
            serde_saphyr::from_str_with_options::<Value>(&cut.header, options.document())
        else {
            return Ok(None);
        };
        // Not a List after all: a document that merely has an `items` key.
        let Some(lent) = list_lends(&header) else {
            pieces.push(whole);
            continue;
        };
        let list = lends.len();
        lends.push(lent);
        pieces.push(Piece {
            text: Cow::Owned(cut.header),
            document,
            item: None,
        });
        pieces.extend(cut.items.into_iter().enumerate().map(|(i, text)| Piece {
            text: Cow::Borrowed(text),
            document,
            item: Some((i, list)),
        }));
    }
    let mut loader = Loader::new(source);
    for (n, chunk) in pieces.chunks(CHUNK).enumerate() {
        let parsed: Vec<Option<Value>> = chunk.par_iter().map(|p| parse(p, options)).collect();
        for (i, (piece, value)) in chunk.iter().zip(parsed).enumerate() {
            let Some(value) = value else {
                return Ok(None);
            };
            let lent = piece
                .item
                .and_then(|(_, list)| lends.get(list))
                .and_then(Option::as_ref)
                .map(|(v, k)| (v.as_str(), k.as_str()));
            if let Err(e) = loader.value(value, &piece.position(), lent) {
                // The whole parse words a later piece's syntax error first.
                let rest = pieces.get(n * CHUNK + i + 1..).unwrap_or_default();
                let parses = rest.par_iter().all(|p| parse(p, options).is_some());
                return if parses { Err(e) } else { Ok(None) };
            }
        }
        let last = chunk.iter().rev().find_map(|p| match &p.text {
            Cow::Borrowed(t) => Some(*t),
            Cow::Owned(_) => None,
        });
        if let Some(last) = last {
            read(end_of(text, last));
        }
    }
    Ok(Some(loader.out))
}

/// A piece's value: a document's, or the one entry of an item's one-entry sequence.
fn parse(piece: &Piece, options: Options) -> Option<Value> {
    if piece.item.is_none() {
        return serde_saphyr::from_str_with_options::<Value>(&piece.text, options.document()).ok();
    }
    let mut entries: Vec<Value> =
        serde_saphyr::from_str_with_options(&piece.text, options.item()).ok()?;
    (entries.len() == 1).then(|| entries.pop()).flatten()
}

/// A document of nothing but markers, comments and blank lines: the parser yields none.
fn is_empty(document: &str) -> bool {
    document.lines().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#') || line == "---" || line == "..."
    })
}

/// What a List document lends its items: `Some(None)` for a `List`, `Some(Some(..))` for a
/// typed list such as `PodList`, `None` for anything that is not a List.
fn list_lends(header: &Value) -> Option<Option<(String, String)>> {
    let kind = header.get("kind")?.as_str()?;
    let api_version = header.get("apiVersion").and_then(Value::as_str);
    match kind.strip_suffix("List")? {
        "" => Some(None),
        item_kind => Some(
            api_version
                .filter(|v| !v.is_empty())
                .map(|v| (v.to_owned(), item_kind.to_owned())),
        ),
    }
}

/// A List document cut by line: its text without the items (`items: []` in their place), and
/// each item's text, a one-entry block sequence.
struct Cut<'a> {
    header: String,
    items: Vec<&'a str>,
}

/// Cuts `document` when it has exactly one top-level `items:` key whose value is a block
/// sequence of entries that start at one column; `None` otherwise. One pass over the lines,
/// keeping only where each item starts.
fn cut_list(document: &str) -> Option<Cut<'_>> {
    // Offsets of the `items:` line and of the line after the sequence.
    let mut key: Option<usize> = None;
    let mut end: Option<usize> = None;
    // The entries' column: that of the first line after `items:` with content.
    let mut column = None;
    let mut starts = Vec::new();
    let mut offset = 0;
    for line in document.split_inclusive('\n') {
        let at = offset;
        offset += line.len();
        let line = line.trim_end_matches(['\n', '\r']);
        if is_items_key(line) {
            if key.is_some() {
                return None;
            }
            key = Some(at);
            continue;
        }
        if key.is_none() || end.is_some() {
            continue;
        }
        let content = line.trim_start_matches(' ');
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        if content.starts_with('\t') {
            return None;
        }
        let indent = line.len() - content.len();
        let entry = content.starts_with("- ") || content.trim_end() == "-";
        match column {
            None if entry => column = Some(indent),
            // `items:` with a value other than a block sequence.
            None => return None,
            Some(c) if indent == c && entry => {}
            Some(c) if indent > c => continue,
            // The next top-level key ends the sequence.
            Some(_) if indent == 0 => {
                end = Some(at);
                continue;
            }
            Some(_) => return None,
        }
        starts.push(at);
    }
    let key = key?;
    let end = end.unwrap_or(document.len());
    if starts.is_empty() {
        return None;
    }
    let ends = starts.iter().skip(1).copied().chain([end]);
    let items = starts
        .iter()
        .zip(ends)
        .map(|(&first, last)| document.get(first..last).unwrap_or_default())
        .collect();
    let mut header = String::with_capacity(key + document.len().saturating_sub(end) + 16);
    header.push_str(document.get(..key).unwrap_or_default());
    header.push_str("items: []\n");
    header.push_str(document.get(end..).unwrap_or_default());
    Some(Cut { header, items })
}

/// `items:` at the start of a line, with nothing after it but spaces and a comment.
fn is_items_key(line: &str) -> bool {
    line.strip_prefix("items:").is_some_and(|rest| {
        let rest = rest.trim_start_matches([' ', '\t']);
        rest.is_empty() || rest.starts_with('#')
    })
}

/// An anchor or alias (`&name`, `*name` where a node may start) ties pieces together; a
/// directive (`%YAML`, `%TAG`) applies to a whole document. Either sends the file down the
/// whole-file path. A `&` or `*` inside a plain value after a space counts too: that only costs
/// speed.
fn has_anchors_or_directives(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| match b {
        b'&' | b'*' => i
            .checked_sub(1)
            .and_then(|p| bytes.get(p))
            .is_none_or(|before| matches!(before, b' ' | b'\t' | b'\n' | b'[' | b'{' | b',')),
        b'%' => i
            .checked_sub(1)
            .and_then(|p| bytes.get(p))
            .is_none_or(|&before| before == b'\n'),
        _ => false,
    })
}

/// Where `part`, a slice of `text`, ends in it.
fn end_of(text: &str, part: &str) -> usize {
    (part.as_ptr() as usize + part.len()).saturating_sub(text.as_ptr() as usize)
}
