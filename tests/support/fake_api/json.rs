//! Small JSON helpers: metadata access, merge patch, canonical form, ids, time.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

/// `obj.metadata.<field>` as a string, "" when absent.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Mutable `obj.metadata`, created when missing.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let root = obj.as_object_mut().expect("objects are JSON maps");
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("just made a map")
}

/// Sets or (for `None`) removes `obj.metadata.<field>`.
pub fn set_meta(obj: &mut Value, field: &str, value: Option<Value>) {
    let meta = meta_mut(obj);
    match value {
        Some(v) => {
            meta.insert(field.to_owned(), v);
        }
        None => {
            meta.remove(field);
        }
    }
}

/// The value at a dotted path such as `spec.nodeName`.
pub fn path<'a>(obj: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(obj, |v, seg| v.get(seg))
}

/// String form of a field for field selectors (bools and numbers too).
pub fn field_string(obj: &Value, dotted: &str) -> String {
    match path(obj, dotted) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// RFC 7386 JSON merge patch: maps merge, `null` deletes, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let target_map = target.as_object_mut().expect("just made a map");
    for (key, value) in patch_map {
        if value.is_null() {
            target_map.remove(key);
        } else {
            merge_patch(target_map.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// Drops `null` members everywhere and empty maps/lists from metadata, as the
/// server's typed decode and `omitempty` encode do, so that structurally equal
/// objects compare equal (the no-op update check relies on it).
pub fn canonicalize(obj: &mut Value) {
    drop_nulls(obj);
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|_, v| match v {
            Value::Object(m) => !m.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::String(s) => !s.is_empty(),
            _ => true,
        });
    }
}

fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Labels of an object as owned pairs.
pub fn labels(obj: &Value) -> Vec<(Box<str>, Box<str>)> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str().into(), v.as_str().unwrap_or("").into()))
                .collect()
        })
        .unwrap_or_default()
}

/// Current time in the API's RFC 3339 second precision.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// RFC 3339 time `secs` seconds from now.
pub fn later_rfc3339(secs: i64) -> String {
    let ts = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(secs))
        .unwrap_or_else(|_| jiff::Timestamp::now());
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// SplitMix64 over a process-wide counter seeded from the clock: unique
/// enough for uids and generated names, no extra dependency.
pub fn random_u64() -> u64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let seed = STATE.load(Ordering::Relaxed);
    if seed == 0 {
        let t = jiff::Timestamp::now().as_nanosecond() as u64;
        let _ = STATE.compare_exchange(0, t | 1, Ordering::Relaxed, Ordering::Relaxed);
    }
    let mut z = STATE
        .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A version-4-shaped UUID string.
pub fn new_uid() -> String {
    let (a, b) = (random_u64(), random_u64());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        ((b >> 48) & 0x3fff) | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// Suffix for `generateName`: 5 characters from the apiserver's alphabet.
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut r = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(r % ALPHABET.len() as u64) as usize];
            r /= ALPHABET.len() as u64;
            c as char
        })
        .collect()
}

/// Lower-case hex, for opaque continue tokens.
pub fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Percent-decoding for query strings (`+` is a space there).
pub fn url_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                match s
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
