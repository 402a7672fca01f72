//! Failure `Status` objects worded as apimachinery's errors package words them,
//! so `kube::Error::Api` carries the same reason, code and message.

use serde_json::{Map, Value, json};

use super::resources::{KINDS, ResId};

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

/// One `details.causes` entry of an Invalid error.
#[derive(Debug, Clone)]
pub struct Cause {
    reason: &'static str,
    field: String,
    message: String,
}

impl Cause {
    pub fn required_or_invalid(field: &str, value: &str) -> Self {
        if value.is_empty() {
            Cause {
                reason: "FieldValueRequired",
                field: field.into(),
                message: "Required value".into(),
            }
        } else {
            Self::invalid(
                field,
                &format!("Invalid value: {value:?}: unsupported value"),
            )
        }
    }

    pub fn invalid(field: &str, message: &str) -> Self {
        Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Cause {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message: format!(
                "Unsupported value: {value:?}: supported values: {}",
                supported.join(", ")
            ),
        }
    }

    pub fn immutable(field: &str, value: &str) -> Self {
        Self::invalid(
            field,
            &format!("Invalid value: {value:?}: field is immutable"),
        )
    }

    pub fn too_many(field: &str, max: usize) -> Self {
        Cause {
            reason: "FieldValueTooMany",
            field: field.into(),
            message: format!("Too many: must have at most {max} items"),
        }
    }
}

fn details(res: ResId, name: &str) -> Value {
    let k = &KINDS[res];
    let mut d = Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !k.group.is_empty() {
        d.insert("group".into(), json!(k.group));
    }
    d.insert("kind".into(), json!(k.plural));
    Value::Object(d)
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String, details: Option<Value>) -> Self {
        ApiError {
            code,
            reason,
            message,
            details,
        }
    }

    pub fn not_found(res: ResId, name: &str) -> Self {
        let msg = format!("{} {:?} not found", KINDS[res].qualified(), name);
        Self::new(404, "NotFound", msg, Some(details(res, name)))
    }

    pub fn already_exists(res: ResId, name: &str) -> Self {
        let msg = format!("{} {:?} already exists", KINDS[res].qualified(), name);
        Self::new(409, "AlreadyExists", msg, Some(details(res, name)))
    }

    pub fn conflict(res: ResId, name: &str, why: &str) -> Self {
        let msg = format!(
            "Operation cannot be fulfilled on {} {:?}: {why}",
            KINDS[res].qualified(),
            name
        );
        Self::new(409, "Conflict", msg, Some(details(res, name)))
    }

    pub fn modified(res: ResId, name: &str) -> Self {
        Self::conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn invalid(res: ResId, name: &str, causes: Vec<Cause>) -> Self {
        let k = &KINDS[res];
        let texts: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let joined = if texts.len() == 1 {
            texts[0].clone()
        } else {
            format!("[{}]", texts.join(", "))
        };
        let msg = format!("{} {:?} is invalid: {joined}", k.qualified_kind(), name);
        let mut d = details(res, name);
        d["kind"] = json!(k.kind);
        d["causes"] = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        Self::new(422, "Invalid", msg, Some(d))
    }

    /// DeleteOptions that fail validation (before the object is looked up).
    pub fn invalid_delete_options(cause: Cause) -> Self {
        let msg = format!(
            "DeleteOptions.meta.k8s.io \"\" is invalid: {}: {}",
            cause.field, cause.message
        );
        let causes =
            json!([{"reason": cause.reason, "message": cause.message, "field": cause.field}]);
        let d = json!({"group": "meta.k8s.io", "kind": "DeleteOptions", "causes": causes});
        Self::new(422, "Invalid", msg, Some(d))
    }

    /// What the handler makes of a storage error that is not a Status.
    pub fn unknown(code: u16, message: impl Into<String>) -> Self {
        Self::new(code, "Unknown", message.into(), None)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into(), None)
    }

    pub fn namespace_not_found(ns: &str) -> Self {
        Self::not_found(super::resources::NAMESPACES, ns)
    }

    /// NamespaceLifecycle admission's refusal; `name` may be "" for generateName.
    pub fn namespace_terminating(res: ResId, name: &str, ns: &str) -> Self {
        let err = format!(
            "unable to create new content in namespace {ns} because it is being terminated"
        );
        let q = KINDS[res].qualified();
        let msg = if name.is_empty() {
            format!("{q} is forbidden: {err}")
        } else {
            format!("{q} {name:?} is forbidden: {err}")
        };
        let mut d = details(res, name);
        // Go's StatusCause.Type goes on the wire as "reason".
        d["causes"] = json!([{
            "reason": "NamespaceTerminating",
            "message": format!("namespace {ns} is being terminated"),
            "field": "metadata.namespace",
        }]);
        Self::new(403, "Forbidden", msg, Some(d))
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message.into(), None)
    }

    pub fn too_large_rv(requested: u64, current: u64) -> Self {
        let msg = format!("Too large resource version: {requested}, current: {current}");
        let d = json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1});
        Self::new(504, "Timeout", msg, Some(d))
    }

    pub fn unknown_path() -> Self {
        let d = json!({"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]});
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
            Some(d),
        )
    }

    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
            None,
        )
    }

    pub fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct})"
            ),
            None,
        )
    }

    /// A fault injected by a test: the reason and wording the server would
    /// use for that code.
    pub fn injected(code: u16, res: ResId, name: &str) -> Self {
        match code {
            404 => Self::not_found(res, name),
            409 => Self::modified(res, name),
            410 => Self::expired("too old resource version: 1 (2)"),
            422 => Self::invalid(res, name, vec![Cause::invalid("metadata", "injected")]),
            403 => Self::new(
                403,
                "Forbidden",
                format!("{} {name:?} is forbidden: injected", KINDS[res].qualified()),
                Some(details(res, name)),
            ),
            429 => Self::new(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later"
                    .into(),
                Some(json!({"retryAfterSeconds": 1})),
            ),
            503 => Self::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request".into(),
                None,
            ),
            504 => Self::new(
                504,
                "Timeout",
                "the server was unable to return a response in the time allotted".into(),
                None,
            ),
            _ => Self::new(
                code,
                "InternalError",
                "Internal error occurred: injected fault".into(),
                Some(json!({"causes": [{"message": "injected fault"}]})),
            ),
        }
    }

    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// The success Status a DELETE answers with for kinds that do not return the object.
pub fn delete_success(res: ResId, name: &str, uid: &str) -> Value {
    let mut d = details(res, name);
    d["uid"] = json!(uid);
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}
