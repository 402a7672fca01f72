//! Kubernetes label selectors (`matchLabels` and `matchExpressions`), as the pools'
//! `serviceAllocation` uses them.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

use serde::{Deserialize, Serialize};

/// An object's labels, looked up by key.
pub trait LabelSource {
    /// The value of label `key`, if the object has it.
    fn label(&self, key: &str) -> Option<&str>;
}

/// An object without labels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoLabels;

impl LabelSource for NoLabels {
    fn label(&self, _key: &str) -> Option<&str> {
        None
    }
}

impl LabelSource for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<S: BuildHasher> LabelSource for HashMap<String, String, S> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<const N: usize> LabelSource for [(&str, &str); N] {
    fn label(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

/// A Kubernetes `LabelSelector`. Every `matchLabels` pair and every expression must hold; the
/// empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    #[serde(default, deserialize_with = "super::config::null_as_default")]
    pub match_labels: BTreeMap<String, String>,
    /// Further requirements.
    #[serde(default, deserialize_with = "super::config::null_as_default")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One `matchExpressions` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// How the label is compared.
    pub operator: Operator,
    /// The values for `In` and `NotIn`; empty for `Exists` and `DoesNotExist`.
    #[serde(default, deserialize_with = "super::config::null_as_default")]
    pub values: Vec<String>,
}

/// A `matchExpressions` operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Operator {
    /// The label is present and its value is one of `values`.
    In,
    /// The label is absent, or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// Any other text: rejected by validation, matches nothing.
    Other(String),
}

impl From<String> for Operator {
    fn from(s: String) -> Self {
        match s.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            _ => Operator::Other(s),
        }
    }
}

impl From<Operator> for String {
    fn from(op: Operator) -> Self {
        match op {
            Operator::In => "In".into(),
            Operator::NotIn => "NotIn".into(),
            Operator::Exists => "Exists".into(),
            Operator::DoesNotExist => "DoesNotExist".into(),
            Operator::Other(s) => s,
        }
    }
}

/// A selector field that Kubernetes would refuse: the path below the selector and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SelectorFault {
    pub(crate) path: String,
    pub(crate) reason: String,
}

impl LabelSelector {
    /// Whether the labels satisfy the selector.
    pub fn matches(&self, labels: &dyn LabelSource) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.label(k) == Some(v.as_str()))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// The first part Kubernetes' `LabelSelectorAsSelector` would refuse.
    pub(crate) fn fault(&self) -> Option<SelectorFault> {
        for (k, v) in &self.match_labels {
            if let Some(reason) = key_fault(k) {
                let path = format!("matchLabels[{k:?}]");
                return Some(SelectorFault { path, reason });
            }
            if let Some(reason) = value_fault(v) {
                let path = format!("matchLabels[{k:?}]");
                return Some(SelectorFault { path, reason });
            }
        }
        for (i, r) in self.match_expressions.iter().enumerate() {
            let at = |field: &str| format!("matchExpressions[{i}].{field}");
            if let Some(reason) = key_fault(&r.key) {
                return Some(SelectorFault {
                    path: at("key"),
                    reason,
                });
            }
            let reason = match &r.operator {
                Operator::In | Operator::NotIn if r.values.is_empty() => {
                    Some("must be non-empty for operator In or NotIn".to_string())
                }
                Operator::Exists | Operator::DoesNotExist if !r.values.is_empty() => {
                    Some("must be empty for operator Exists or DoesNotExist".to_string())
                }
                Operator::Other(op) => {
                    let reason =
                        format!("{op:?} is not a valid operator (In, NotIn, Exists, DoesNotExist)");
                    return Some(SelectorFault {
                        path: at("operator"),
                        reason,
                    });
                }
                _ => r.values.iter().find_map(|v| value_fault(v)),
            };
            if let Some(reason) = reason {
                return Some(SelectorFault {
                    path: at("values"),
                    reason,
                });
            }
        }
        None
    }
}

impl LabelSelectorRequirement {
    fn matches(&self, labels: &dyn LabelSource) -> bool {
        let value = labels.label(&self.key);
        let listed = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::In => value.is_some_and(listed),
            Operator::NotIn => !value.is_some_and(listed),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Other(_) => false,
        }
    }
}

/// Why `key` is not a qualified label key (`[prefix/]name`), if it is not.
fn key_fault(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let ok = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= 63
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            });
        if !ok {
            return Some(format!("{key:?}: the prefix must be a DNS subdomain"));
        }
    }
    if name.is_empty() {
        return Some(format!("{key:?}: the name part must not be empty"));
    }
    name_fault(name).map(|r| format!("{key:?}: {r}"))
}

/// Why `value` is not a label value, if it is not.
fn value_fault(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    name_fault(value).map(|r| format!("{value:?}: {r}"))
}

fn name_fault(name: &str) -> Option<String> {
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let bytes = name.as_bytes();
    if name.len() > 63 {
        return Some("must be at most 63 characters".into());
    }
    let inner_ok = bytes
        .iter()
        .all(|&b| alnum(b) || matches!(b, b'-' | b'_' | b'.'));
    let ends_ok =
        bytes.first().is_some_and(|&b| alnum(b)) && bytes.last().is_some_and(|&b| alnum(b));
    if !(inner_ok && ends_ok) {
        return Some(
            "must be alphanumeric, '-', '_' or '.', and start and end with an alphanumeric".into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(json: &str) -> LabelSelector {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn matches_labels_and_expressions() {
        let s = sel(r#"{"matchLabels":{"tier":"gold"},"matchExpressions":[
            {"key":"env","operator":"In","values":["prod","staging"]},
            {"key":"legacy","operator":"DoesNotExist"}]}"#);
        assert!(s.matches(&[("tier", "gold"), ("env", "prod")]));
        assert!(!s.matches(&[("tier", "gold"), ("env", "dev")]));
        assert!(!s.matches(&[("tier", "gold")]));
        assert!(!s.matches(&[("tier", "gold"), ("env", "prod"), ("legacy", "")]));
        assert!(!s.matches(&[("tier", "silver"), ("env", "prod")]));

        let s = sel(
            r#"{"matchExpressions":[{"key":"env","operator":"NotIn","values":["prod"]},
            {"key":"team","operator":"Exists"}]}"#,
        );
        assert!(s.matches(&[("team", "a")]));
        assert!(s.matches(&[("team", "a"), ("env", "dev")]));
        assert!(!s.matches(&[("team", "a"), ("env", "prod")]));
        assert!(!s.matches(&[("env", "dev")]));

        assert!(sel("{}").matches(&NoLabels));
        assert!(sel(r#"{"matchLabels":null}"#).matches(&[("a", "b")]));
    }

    #[test]
    fn finds_what_kubernetes_refuses() {
        let fault = |json: &str| sel(json).fault().map(|f| f.path);
        assert_eq!(
            fault(r#"{"matchLabels":{"app.kubernetes.io/name":"x"}}"#),
            None
        );
        assert_eq!(
            fault(r#"{"matchLabels":{"bad key":"x"}}"#).as_deref(),
            Some(r#"matchLabels["bad key"]"#)
        );
        assert_eq!(
            fault(r#"{"matchLabels":{"k":"-x"}}"#).as_deref(),
            Some(r#"matchLabels["k"]"#)
        );
        assert_eq!(
            fault(r#"{"matchExpressions":[{"key":"k","operator":"In","values":[]}]}"#).as_deref(),
            Some("matchExpressions[0].values")
        );
        assert_eq!(
            fault(r#"{"matchExpressions":[{"key":"k","operator":"Exists","values":["a"]}]}"#)
                .as_deref(),
            Some("matchExpressions[0].values")
        );
        assert_eq!(
            fault(r#"{"matchExpressions":[{"key":"k","operator":"Gt","values":["1"]}]}"#)
                .as_deref(),
            Some("matchExpressions[0].operator")
        );
        assert_eq!(
            fault(r#"{"matchExpressions":[{"key":"/k","operator":"Exists"}]}"#).as_deref(),
            Some("matchExpressions[0].key")
        );
        let s = sel(r#"{"matchExpressions":[{"key":"k","operator":"Gt","values":["1"]}]}"#);
        assert!(!s.matches(&[("k", "2")]));
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"matchLabels":{},"matchExpressions":[{"key":"k","operator":"Gt","values":["1"]}]}"#
        );
    }
}
