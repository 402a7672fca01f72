//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`) and field
//! selectors (`=`, `==`, `!=`) as the apiserver parses and matches them.

use super::resources::Kind;
use super::status::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<(String, Op)>);

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 316
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn parse_err(what: &str) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {what}"))
}

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Result<Vec<&str>, ApiError> {
    let (mut depth, mut start, mut parts) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(parse_err(s));
        }
    }
    if depth != 0 {
        return Err(parse_err(s));
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| parse_err(whole))?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
    if values.iter().any(|v| !valid_value(v)) {
        return Err(parse_err(whole));
    }
    Ok(values)
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for part in split_top(s)? {
            let p = part.trim();
            let req = if let Some(key) = p.strip_prefix('!') {
                (key.trim().to_owned(), Op::NotExists)
            } else if let Some((k, v)) = p.split_once("!=") {
                (k.trim().to_owned(), Op::NotEq(v.trim().to_owned()))
            } else if let Some((k, v)) = p.split_once("==") {
                (k.trim().to_owned(), Op::Eq(v.trim().to_owned()))
            } else if let Some((k, v)) = p.split_once('=') {
                (k.trim().to_owned(), Op::Eq(v.trim().to_owned()))
            } else if let Some(idx) = p.find(|c: char| c.is_whitespace() || c == '(') {
                let (key, rest) = (p[..idx].trim(), p[idx..].trim_start());
                if let Some(r) = rest.strip_prefix("notin") {
                    (key.to_owned(), Op::NotIn(parse_set(r, p)?))
                } else if let Some(r) = rest.strip_prefix("in") {
                    (key.to_owned(), Op::In(parse_set(r, p)?))
                } else {
                    return Err(parse_err(p));
                }
            } else {
                (p.to_owned(), Op::Exists)
            };
            let value_ok = match &req.1 {
                Op::Eq(v) | Op::NotEq(v) => valid_value(v),
                _ => true,
            };
            if !valid_key(&req.0) || !value_ok {
                return Err(parse_err(p));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, labels: &[(Box<str>, Box<str>)]) -> bool {
        let get = |k: &str| labels.iter().find(|(lk, _)| &**lk == k).map(|(_, v)| &**v);
        self.0.iter().all(|(key, op)| match (op, get(key)) {
            (Op::Exists, v) => v.is_some(),
            (Op::NotExists, v) => v.is_none(),
            (Op::Eq(want), v) => v == Some(want.as_str()),
            (Op::NotEq(want), v) => v != Some(want.as_str()),
            (Op::In(set), Some(v)) => set.iter().any(|s| s == v),
            (Op::In(_), None) => false,
            (Op::NotIn(set), Some(v)) => !set.iter().any(|s| s == v),
            (Op::NotIn(_), None) => true,
        })
    }
}

/// Which field a requirement looks at.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    Name,
    Namespace,
    /// Index into the kind's `fields`.
    Extra(usize),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(Field, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str, kind: &Kind) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, eq, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = match key.trim() {
                "metadata.name" => Field::Name,
                "metadata.namespace" => Field::Namespace,
                other => match kind.fields.iter().position(|f| *f == other) {
                    Some(i) => Field::Extra(i),
                    None => {
                        return Err(ApiError::bad_request(format!(
                            "field label not supported: {other}"
                        )));
                    }
                },
            };
            reqs.push((field, eq, value.trim().to_owned()));
        }
        Ok(FieldSelector(reqs))
    }

    pub fn matches(&self, namespace: &str, name: &str, extra: &[Box<str>]) -> bool {
        self.0.iter().all(|(field, eq, want)| {
            let have = match field {
                Field::Name => name,
                Field::Namespace => namespace,
                Field::Extra(i) => extra.get(*i).map_or("", |v| &**v),
            };
            (have == want) == *eq
        })
    }
}
