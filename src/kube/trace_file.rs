//! Loading a trace file (`sliced simulate --events FILE`): a list of steps, each at a virtual time,
//! applying an object, deleting one, or making the next writes fail.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::manifest::{self, LoadError, Manifest};
use crate::change::Change;
use crate::change::{Fault, Happening, Step};
use crate::duration::{duration_from_seconds, parse_duration};
use crate::model::{Name, intern};
use crate::sink::{Kind, Verb, WriteError};

/// A step that is not of the events file's form.
#[derive(Debug, thiserror::Error)]
pub enum TraceFileError {
    #[error("{file}: {message}")]
    File { file: String, message: String },
    /// A step, or one of its fields (`at`, `fail.status`); `field` is empty for the step as a
    /// whole.
    #[error("{file}: step {step}: {}{message}", field_label(.field))]
    Step {
        file: String,
        step: usize,
        field: String,
        message: String,
    },
    #[error(transparent)]
    Object(#[from] LoadError),
}

fn field_label(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("{field}: ")
    }
}

/// What a step may hold, besides its time.
const ACTIONS: [&str; 3] = ["apply", "delete", "fail"];

/// The kinds a step applies or deletes, with the apiVersion each must have (as the manifest
/// loader reads them; a test keeps the two in step).
const KINDS: [(&str, &str); 6] = [
    ("Service", "v1"),
    ("Pod", "v1"),
    ("Node", "v1"),
    ("Namespace", "v1"),
    ("EndpointSlice", "discovery.k8s.io/v1"),
    ("Endpoints", "v1"),
];

const KIND_NAMES: &str = "Service, Pod, Node, Namespace, EndpointSlice or Endpoints";

/// The steps of a trace file, in file order.
#[derive(Debug)]
pub struct Trace {
    pub steps: Vec<Step>,
    /// The last line of a recording that a crash cut off mid-write (counted from 1): left out,
    /// every whole line before it kept.
    pub cut_off_line: Option<usize>,
}

pub fn load_trace_file(path: impl AsRef<Path>) -> Result<Trace, TraceFileError> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| TraceFileError::File {
        file: file.clone(),
        message: e.to_string(),
    })?;
    load_trace(&file, &text)
}

/// Parses the steps of an events file (YAML or JSON). Steps keep file order; the replay applies
/// steps of the same time in that order.
pub fn load_trace(file: &str, text: &str) -> Result<Trace, TraceFileError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // A recorded trace (`sliced run --record-trace`) is read line by line, several times faster
    // than as YAML; the steps and their errors are the same.
    if let Some(lines) = json_lines(text) {
        let steps = (lines.steps.into_iter().enumerate())
            .map(|(i, step)| parse_step(file, i + 1, step))
            .collect::<Result<_, _>>()?;
        return Ok(Trace {
            steps,
            cut_off_line: lines.cut_off_line,
        });
    }
    Ok(Trace {
        steps: load_yaml_trace(file, text)?,
        cut_off_line: None,
    })
}

struct JsonLines {
    steps: Vec<Value>,
    cut_off_line: Option<usize>,
}

/// The steps of a file whose every line that is not blank is `- {...}`, one JSON object each, as
/// the recorder writes them; `None` for any other file, or a line that is not JSON (which the
/// YAML path then words as it would). The recorder ends every line it writes: a last line that
/// is not JSON and not ended is one a crash cut off, and is left out.
fn json_lines(text: &str) -> Option<JsonLines> {
    let mut steps = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        let body = line.strip_prefix("- ")?;
        if !body.starts_with('{') {
            return None;
        }
        match serde_json::from_str(body) {
            Ok(step) => steps.push(step),
            Err(_) if lines.peek().is_none() && !text.ends_with('\n') && !steps.is_empty() => {
                return Some(JsonLines {
                    steps,
                    cut_off_line: Some(i + 1),
                });
            }
            Err(_) => return None,
        }
    }
    Some(JsonLines {
        steps,
        cut_off_line: None,
    })
}

/// The YAML (or JSON) path of [`load_trace`].
fn load_yaml_trace(file: &str, text: &str) -> Result<Vec<Step>, TraceFileError> {
    let file_error = |message: String| TraceFileError::File {
        file: file.to_owned(),
        message,
    };
    let json = text.trim_start().starts_with(['{', '[']);
    let value: Value = match json.then(|| serde_json::from_str(text)) {
        Some(Ok(value)) => value,
        // Flow-style YAML starts as JSON does.
        _ => crate::yaml::from_str(text).map_err(|e| file_error(format!("invalid YAML: {e}")))?,
    };
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

fn parse_step(file: &str, step: usize, value: Value) -> Result<Step, TraceFileError> {
    let err = |field: &str, message: String| TraceFileError::Step {
        file: file.to_owned(),
        step,
        field: field.to_owned(),
        message,
    };
    let Value::Object(mut map) = value else {
        return Err(err(
            "",
            format!(
                "expected a mapping of `at` and one of `apply`, `delete` or `fail`, found {}",
                kind_of(&value)
            ),
        ));
    };
    if let Some(key) = map
        .keys()
        .find(|k| *k != "at" && !ACTIONS.contains(&k.as_str()))
    {
        return Err(err(
            key,
            "unknown field: a step has `at` and one of `apply`, `delete` or `fail`".into(),
        ));
    }
    let at = match map.remove("at") {
        Some(Value::String(s)) => parse_duration(&s).map_err(|e| err("at", e.to_string()))?,
        Some(Value::Number(n)) => {
            let seconds = n.as_f64().unwrap_or(f64::NAN);
            duration_from_seconds(seconds, &n.to_string()).map_err(|e| err("at", e.to_string()))?
        }
        None | Some(Value::Null) => {
            return Err(err(
                "at",
                "missing: every step has a time, such as `at: 1.5s`".into(),
            ));
        }
        Some(other) => {
            return Err(err(
                "at",
                format!("expected a duration, found {}", kind_of(&other)),
            ));
        }
    };
    let mut actions = ACTIONS.into_iter().filter_map(|k| map.remove_entry(k));
    let (action, value) = match (actions.next(), actions.next()) {
        (Some(one), None) => one,
        (None, _) => {
            return Err(err(
                "apply, delete or fail",
                "missing: a step has exactly one of them".into(),
            ));
        }
        (Some((first, _)), Some((second, _))) => {
            return Err(err(
                &format!("{first}, {second}"),
                "a step has exactly one of `apply`, `delete` or `fail`, not two".into(),
            ));
        }
    };
    let happening = match action.as_str() {
        "apply" => Happening::Change(apply_change(file, step, value).map_err(|e| match e {
            Refused::Field(field, message) => err(&field, message),
            Refused::Object(e) => TraceFileError::Object(e),
        })?),
        "delete" => Happening::Change(
            delete_change(&value).map_err(|(f, m)| err(&format!("delete{f}"), m))?,
        ),
        _ => Happening::Fault(parse_fail(&value).map_err(|(f, m)| err(&format!("fail{f}"), m))?),
    };
    Ok(Step { at, happening })
}

/// Why an `apply` was refused: a field of the step, or the object as the manifest loader says.
enum Refused {
    Field(String, String),
    Object(LoadError),
}

fn apply_change(file: &str, step: usize, object: Value) -> Result<Change, Refused> {
    let field = |f: &str, m: String| Refused::Field(f.to_owned(), m);
    let text = |k: &str| object.get(k).and_then(Value::as_str).map(str::to_owned);
    let (kind, api_version) = (text("kind"), text("apiVersion"));
    if let (Some(kind), Some(version)) = (&kind, &api_version)
        && let Some((_, want)) = KINDS.iter().find(|(k, _)| k == kind)
        && version != want
    {
        return Err(field(
            "apply.apiVersion",
            format!("{version:?} is not supported for kind {kind} (want {want})"),
        ));
    }
    if object.is_null() {
        return Err(field(
            "apply",
            "missing: the object to create or update".into(),
        ));
    }
    // The loader words a null or missing field as such (`port: null` is not port 0).
    let m = manifest::load_step_object(file, step, object).map_err(Refused::Object)?;
    let skipped = m.warnings.len();
    let mut changes = changes_of(m);
    match (changes.pop(), changes.len()) {
        (Some(change), 0) => Ok(change),
        (Some(_), more) => Err(field(
            "apply",
            format!("expected one object, found {}", more + 1),
        )),
        (None, _) if skipped > 0 && kind.as_deref().is_some_and(|k| !k.ends_with("List")) => {
            Err(field(
                "apply.kind",
                format!(
                    "{:?} is not a kind sliced reads: want {KIND_NAMES}",
                    kind.unwrap_or_default()
                ),
            ))
        }
        (None, _) => Err(field(
            "apply",
            format!("expected one {KIND_NAMES}, found none"),
        )),
    }
}

fn changes_of(m: Manifest) -> Vec<Change> {
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
    changes
}

/// A field of a step's mapping (`.kind` of `delete`), and what is wrong with it.
type FieldError = (String, String);

/// The fields of `spec` (`fail` or `delete`): a mapping holding only `allowed`.
fn fields<'a>(
    spec: &'a Value,
    allowed: &[&str],
    what: &str,
) -> Result<&'a serde_json::Map<String, Value>, FieldError> {
    let Value::Object(map) = spec else {
        return Err((
            String::new(),
            format!("expected a mapping of {what}, found {}", kind_of(spec)),
        ));
    };
    if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err((
            format!(".{key}"),
            format!("unknown field: want {}", allowed.join(", ")),
        ));
    }
    Ok(map)
}

/// A string field: `None` when absent or null.
fn string_field<'a>(
    map: &'a serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, FieldError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err((
            format!(".{key}"),
            format!("expected a string, found {}", kind_of(other)),
        )),
    }
}

fn required<'a>(value: Option<&'a str>, key: &str, want: &str) -> Result<&'a str, FieldError> {
    value
        .filter(|s| !s.is_empty())
        .ok_or_else(|| (format!(".{key}"), format!("missing: want {want}")))
}

fn delete_change(target: &Value) -> Result<Change, FieldError> {
    let map = fields(
        target,
        &["kind", "namespace", "name"],
        "kind, namespace and name",
    )?;
    let kind = required(string_field(map, "kind")?, "kind", KIND_NAMES)?;
    let name = intern(required(string_field(map, "name")?, "name", "a name")?);
    let given_namespace = string_field(map, "namespace")?;
    let namespace = || -> Name {
        intern(
            given_namespace
                .filter(|s| !s.is_empty())
                .unwrap_or("default"),
        )
    };
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
        other => {
            return Err((
                ".kind".into(),
                format!("{other:?} is not a kind sliced reads: want {KIND_NAMES}"),
            ));
        }
    })
}

const STATUSES: [u64; 5] = [403, 409, 429, 500, 503];

fn parse_fail(spec: &Value) -> Result<Fault, FieldError> {
    let map = fields(
        spec,
        &["verb", "kind", "status", "reason", "times"],
        "verb, kind, status, reason and times",
    )?;
    let verb = match required(
        string_field(map, "verb")?,
        "verb",
        "create, update or delete",
    )? {
        "create" => Verb::Create,
        "update" => Verb::Update,
        "delete" => Verb::Delete,
        other => {
            return Err((
                ".verb".into(),
                format!("{other:?} is not a verb sliced writes: want create, update or delete"),
            ));
        }
    };
    let kind = match required(
        string_field(map, "kind")?,
        "kind",
        "EndpointSlice or Endpoints",
    )? {
        "EndpointSlice" => Kind::EndpointSlice,
        "Endpoints" => Kind::Endpoints,
        other => {
            return Err((
                ".kind".into(),
                format!("{other:?} is not a kind sliced writes: want EndpointSlice or Endpoints"),
            ));
        }
    };
    let want_status = "want one of 403, 409, 429, 500, 503";
    let status = match map.get("status") {
        None | Some(Value::Null) => {
            return Err((".status".into(), format!("missing: {want_status}")));
        }
        Some(v) => v.as_u64().filter(|s| STATUSES.contains(s)).ok_or_else(|| {
            (
                ".status".to_owned(),
                format!("{v} is not a status sliced can fail writes with: {want_status}"),
            )
        })?,
    };
    let times = match map.get("times") {
        None | Some(Value::Null) => 1,
        Some(v) => v
            .as_u64()
            .and_then(|t| usize::try_from(t).ok())
            .ok_or_else(|| {
                (
                    ".times".to_owned(),
                    format!("{v} is not a whole number of writes"),
                )
            })?,
    };
    let reason = string_field(map, "reason")?
        .filter(|r| !r.is_empty())
        .unwrap_or(default_reason(status))
        .to_owned();
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
            code: u16::try_from(status).unwrap_or(500),
            message: format!("injected failure: {reason}"),
            reason,
        },
    };
    Ok(Fault {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn both_paths(text: &str) -> (String, String) {
        assert!(json_lines(text).is_some(), "not read line by line: {text}");
        let show = |r: Result<Vec<Step>, TraceFileError>| match r {
            Ok(steps) => format!("{steps:?}"),
            Err(e) => format!("error: {e}"),
        };
        (
            show(load_trace("t.yaml", text).map(|t| t.steps)),
            show(load_yaml_trace("t.yaml", text)),
        )
    }

    /// A recorded trace reads the same line by line as through the YAML parser, errors included.
    #[test]
    fn recorded_lines_read_as_yaml_reads_them() {
        use crate::kube::convert::{NodeJson, PodJson, ServiceJson};
        let cluster = crate::sim::generate(&crate::sim::ClusterSpec {
            pods: 300,
            services: 20,
            ..crate::sim::ClusterSpec::default()
        });
        let mut text = String::new();
        let mut line = |at: &str, action: &str, json: String| {
            text.push_str(&format!("- {{\"at\":\"{at}\",\"{action}\":{json}}}\n"));
        };
        let json = |o: &dyn erased_serde_like::Json| o.json();
        for n in &cluster.snapshot.nodes {
            line("0s", "apply", json(&NodeJson(n)));
        }
        for s in &cluster.snapshot.services {
            line("0s", "apply", json(&ServiceJson(s)));
        }
        for (i, p) in cluster.snapshot.pods.iter().enumerate() {
            line(&format!("{i}.000001s"), "apply", json(&PodJson(p)));
        }
        line(
            "9.5s",
            "delete",
            r#"{"kind":"Pod","namespace":"ns-0","name":"x"}"#.into(),
        );
        line(
            "10s",
            "fail",
            r#"{"verb":"create","kind":"EndpointSlice","status":500}"#.into(),
        );
        let (fast, yaml) = both_paths(&text);
        assert!(!fast.starts_with("error"), "{fast}");
        assert_eq!(fast, yaml);
        assert_eq!(
            load_trace("t", &text).map(|t| t.steps.len()).ok(),
            Some(
                cluster.snapshot.nodes.len()
                    + cluster.snapshot.services.len()
                    + cluster.snapshot.pods.len()
                    + 2
            )
        );

        // Steps that parse but are wrong: the same step number and field either way.
        for bad in [
            r#"- {"at":"1x","delete":{"kind":"Pod","name":"p"}}"#,
            r#"- {"at":"1s","delete":{"kind":"Pod"}}"#,
            r#"- {"at":"1s","apply":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"status":{"podIP":"nope"}}}"#,
            r#"- {"at":"1s","apply":{},"delete":{}}"#,
        ] {
            let text = format!("{}{bad}\n", &text[..text.find("\n").unwrap_or(0) + 1]);
            let (fast, yaml) = both_paths(&text);
            assert!(fast.starts_with("error: t.yaml"), "{fast}");
            assert_eq!(fast, yaml);
        }
        // The last line of a recording cut short by a crash (not ended, not JSON) is left out,
        // and said to be; the whole lines before it load.
        let first = &text[..text.find('\n').map_or(0, |i| i + 1)];
        let cut = format!("{first}- {{\"at\":\"1s\",\"apply\":{{\"ki");
        let loaded = load_trace("t.yaml", &cut);
        assert!(
            matches!(&loaded, Ok(t) if t.steps.len() == 1 && t.cut_off_line == Some(2)),
            "{loaded:?}"
        );
        assert_eq!(
            format!("{:?}", loaded.map(|t| t.steps).ok()),
            format!("{:?}", load_trace("t.yaml", first).map(|t| t.steps).ok())
        );
        // The same line ended, or with a line after it, was written so: an error, worded by the
        // YAML parser.
        for broken in [format!("{cut}\n"), format!("{cut}\n{first}")] {
            assert!(json_lines(&broken).is_none());
            assert!(load_trace("t.yaml", &broken).is_err(), "{broken}");
        }
        // A file of one cut-off line holds no whole step: an error too.
        assert!(load_trace("t.yaml", "- {\"at\":\"1s\",\"apply\":{\"ki").is_err());
    }

    /// Serialises anything to a JSON string (the recorder's objects).
    mod erased_serde_like {
        pub trait Json {
            fn json(&self) -> String;
        }
        impl<T: serde::Serialize> Json for T {
            fn json(&self) -> String {
                serde_json::to_string(self).unwrap_or_default()
            }
        }
    }

    /// The kinds and apiVersions a step is checked against are the ones the manifest loader reads.
    #[test]
    fn step_kinds_are_the_manifest_loaders() {
        let skipped = |kind: &str, version: &str| {
            let object = serde_json::json!({"apiVersion": version, "kind": kind,
                "metadata": {"name": "a", "namespace": "default"}});
            matches!(manifest::load_step_object("f", 1, object), Ok(m) if !m.warnings.is_empty())
        };
        for (kind, version) in KINDS {
            assert!(!skipped(kind, version), "{kind} {version}");
            assert!(skipped(kind, "v0"), "{kind}");
        }
        assert!(skipped("Deployment", "apps/v1"));
    }
}
