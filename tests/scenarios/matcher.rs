//! Partial matching of expected objects against actual ones.
//!
//! An expected value matches when: an object's every key matches (keys it omits are not checked; a
//! `null` means "absent"); a string ending in `*` matches any string with that prefix (generated
//! names); `endpoints` lists match as multisets, because upstream appends endpoints in no fixed order;
//! other lists match element by element; anything else must be equal.

use serde_json::Value;

pub fn matches(expected: &Value, actual: &Value, key: &str) -> bool {
    match (expected, actual) {
        (Value::Null, a) => a.is_null(),
        (Value::Object(e), Value::Object(a)) => e.iter().all(|(k, ev)| match a.get(k) {
            Some(av) => matches(ev, av, k),
            None => ev.is_null(),
        }),
        (Value::String(e), Value::String(a)) => match e.strip_suffix('*') {
            Some(prefix) => a.starts_with(prefix),
            None => e == a,
        },
        (Value::Array(e), Value::Array(a)) if key == "endpoints" => {
            e.len() == a.len() && assign(e, a, &mut vec![false; a.len()], 0, "")
        }
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(x, y)| matches(x, y, ""))
        }
        (Value::Number(e), Value::Number(a)) => e.as_f64() == a.as_f64(),
        (e, a) => e == a,
    }
}

/// Finds a one-to-one assignment of expected items to actual items, by backtracking.
fn assign(expected: &[Value], actual: &[Value], used: &mut Vec<bool>, i: usize, key: &str) -> bool {
    if i == expected.len() {
        return true;
    }
    for j in 0..actual.len() {
        if !used[j] && matches(&expected[i], &actual[j], key) {
            used[j] = true;
            if assign(expected, actual, used, i + 1, key) {
                return true;
            }
            used[j] = false;
        }
    }
    false
}

/// The actual objects match the expected ones one to one.
pub fn match_all(expected: &[Value], actual: &[Value]) -> Result<(), String> {
    if expected.len() != actual.len() {
        return Err(format!(
            "expected {} objects, found {}",
            expected.len(),
            actual.len()
        ));
    }
    if assign(expected, actual, &mut vec![false; actual.len()], 0, "") {
        return Ok(());
    }
    // Name the first expected object that matches nothing, to make the failure readable.
    for (i, e) in expected.iter().enumerate() {
        if !actual.iter().any(|a| matches(e, a, "")) {
            return Err(format!("expected object #{i} matches none: {e}"));
        }
    }
    Err("no one-to-one assignment of expected to actual objects".into())
}
