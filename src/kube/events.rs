//! Loading an events file for `sliced simulate --events`: a list of steps, each at a virtual time,
//! applying an object, deleting one, or making the next writes fail.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::manifest::{self, LoadError, Manifest};
use crate::change::Change;
use crate::model::{Name, intern};
use crate::replay::{Action, Step, duration_from_seconds, parse_duration};
use crate::sink::{Kind, Verb, WriteError};

/// A step that is not of the events file's form.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{file}: step {step}: {field}: {message}")]
    Step {
        file: String,
        step: usize,
        field: String,
        message: String,
    },
    #[error(transparent)]
    Object(#[from] LoadError),
}

pub fn load_events_file(path: impl AsRef<Path>) -> Result<Vec<Step>, EventsError> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| EventsError::File {
        file: file.clone(),
        message: e.to_string(),
    })?;
    load_events(&file, &text)
}

/// Parses the steps of an events file (YAML or JSON). Steps keep file order; the replay applies
/// steps of the same time in that order.
pub fn load_events(file: &str, text: &str) -> Result<Vec<Step>, EventsError> {
    let file_error = |message: String| EventsError::File {
        file: file.to_owned(),
        message,
    };
    let value: Value = if text.trim_start().starts_with(['{', '[']) {
        serde_json::from_str(text).or_else(|_| serde_saphyr::from_str(text))
    } else {
        serde_saphyr::from_str(text)
    }
    .map_err(|e| file_error(format!("not a list of steps: {e}")))?;
    let steps = match value {
        Value::Array(steps) => steps,
        Value::Null => Vec::new(),
        other => {
            return Err(file_error(format!(
                "expected a list of steps, found {}",
                kind_of(&other)
            )));
        }
    };
    steps
        .into_iter()
        .enumerate()
        .map(|(i, step)| parse_step(file, i + 1, step))
        .collect()
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn parse_step(file: &str, step: usize, value: Value) -> Result<Step, EventsError> {
    let err = |field: &str, message: String| EventsError::Step {
        file: file.to_owned(),
        step,
        field: field.to_owned(),
        message,
    };
    let Value::Object(mut map) = value else {
        return Err(err(
            "",
            format!("expected a mapping, found {}", kind_of(&value)),
        ));
    };
    let at = match map.remove("at") {
        Some(Value::String(s)) => parse_duration(&s).map_err(|e| err("at", e.to_string()))?,
        Some(Value::Number(n)) => {
            let seconds = n.as_f64().unwrap_or(f64::NAN);
            duration_from_seconds(seconds, &n.to_string()).map_err(|e| err("at", e.to_string()))?
        }
        Some(other) => {
            return Err(err(
                "at",
                format!("expected a duration, found {}", kind_of(&other)),
            ));
        }
        None => {
            return Err(err(
                "at",
                "missing: every step has a time, such as `at: 1.5s`".into(),
            ));
        }
    };
    let actions: Vec<&str> = ["apply", "delete", "fail"]
        .into_iter()
        .filter(|k| map.contains_key(*k))
        .collect();
    if actions.len() != 1 {
        return Err(err(
            "",
            "a step has exactly one of `apply`, `delete` or `fail`".into(),
        ));
    }
    let action = match actions[0] {
        "apply" => {
            let object = map.remove("apply").unwrap_or(Value::Null);
            let m = manifest::load_step_object(file, step, object)?;
            Action::Apply(single_change(m).ok_or_else(|| {
                err(
                    "apply",
                    "expected one Service, Pod, Node, Namespace, EndpointSlice or Endpoints".into(),
                )
            })?)
        }
        "delete" => {
            let target = map.remove("delete").unwrap_or(Value::Null);
            Action::Delete(delete_change(&target).map_err(|m| err("delete", m))?)
        }
        _ => {
            let spec = map.remove("fail").unwrap_or(Value::Null);
            parse_fail(&spec).map_err(|(f, m)| err(&format!("fail.{f}"), m))?
        }
    };
    Ok(Step { at, action })
}

fn single_change(m: Manifest) -> Option<Change> {
    let o = m.objects;
    let mut changes: Vec<Change> = Vec::new();
    changes.extend(o.services.into_iter().map(Change::Service));
    changes.extend(o.pods.into_iter().map(Change::Pod));
    changes.extend(o.nodes.into_iter().map(Change::Node));
    changes.extend(o.namespaces.into_iter().map(Change::Namespace));
    changes.extend(
        o.endpoint_slices
            .into_iter()
            .map(|s| Change::EndpointSlice(Arc::new(s))),
    );
    changes.extend(
        o.endpoints
            .into_iter()
            .map(|e| Change::Endpoints(Arc::new(e))),
    );
    (changes.len() == 1).then(|| changes.pop()).flatten()
}

fn delete_change(target: &Value) -> Result<Change, String> {
    let field = |k: &str| {
        target
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let kind = field("kind").ok_or("missing kind")?;
    let name = intern(field("name").ok_or("missing name")?);
    let namespace = || -> Name { intern(field("namespace").unwrap_or("default")) };
    Ok(match kind {
        "Service" => Change::ServiceDeleted {
            namespace: namespace(),
            name,
        },
        "Pod" => Change::PodDeleted {
            namespace: namespace(),
            name,
        },
        "Node" => Change::NodeDeleted { name },
        "Namespace" => Change::NamespaceDeleted { name },
        "EndpointSlice" => Change::EndpointSliceDeleted {
            namespace: namespace(),
            name,
        },
        "Endpoints" => Change::EndpointsDeleted {
            namespace: namespace(),
            name,
            uid: Name::default(),
        },
        other => return Err(format!("unknown kind {other:?}")),
    })
}

fn parse_fail(spec: &Value) -> Result<Action, (&'static str, String)> {
    let text = |k: &'static str| spec.get(k).and_then(Value::as_str);
    let verb = match text("verb") {
        Some("create") => Verb::Create,
        Some("update") => Verb::Update,
        Some("delete") => Verb::Delete,
        other => return Err(("verb", format!("{other:?}: want create, update or delete"))),
    };
    let kind = match text("kind") {
        Some("EndpointSlice") => Kind::EndpointSlice,
        Some("Endpoints") => Kind::Endpoints,
        other => {
            return Err((
                "kind",
                format!("{other:?}: want EndpointSlice or Endpoints"),
            ));
        }
    };
    let status = spec
        .get("status")
        .and_then(Value::as_u64)
        .filter(|s| [403, 409, 429, 500, 503].contains(s))
        .ok_or(("status", "want one of 403, 409, 429, 500, 503".to_string()))?;
    let times = match spec.get("times") {
        None => 1,
        Some(v) => v
            .as_u64()
            .and_then(|t| usize::try_from(t).ok())
            .ok_or(("times", "want a whole number".to_string()))?,
    };
    let reason = text("reason").unwrap_or(default_reason(status)).to_owned();
    let name = Name::new("");
    let error = match (status, reason.as_str()) {
        (403, "NamespaceTerminating") => WriteError::NamespaceTerminating {
            kind: kind.resource(),
            name,
            namespace: Name::new(""),
        },
        (409, "Conflict") => WriteError::Conflict {
            kind: kind.resource(),
            name,
        },
        _ => WriteError::Status {
            code: status as u16,
            message: format!("injected failure: {reason}"),
            reason,
        },
    };
    Ok(Action::Fail {
        verb,
        kind,
        error,
        times,
    })
}

fn default_reason(status: u64) -> &'static str {
    match status {
        403 => "Forbidden",
        409 => "Conflict",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    }
}
