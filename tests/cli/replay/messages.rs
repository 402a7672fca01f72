//! What a malformed trace is told: every message names the file, the step and the field, in plain
//! words (no `Some("Pod")`, no empty field, no port 0 for a null port, no unsupported apiVersion
//! hidden behind "expected one Service"). Each case failed before, and each line is asserted
//! whole.

use std::process::Command;

use super::trace_file;

/// Runs `simulate --events` on `text` from a file of that name; its exit code and the first line
/// of its standard error, with the file's path written as `FILE`.
fn refused(name: &str, text: &str) -> (Option<i32>, String) {
    let file = trace_file("messages", name, text);
    let out = Command::new(env!("CARGO_BIN_EXE_sliced"))
        .args(["simulate", "-o", "json", "--events"])
        .arg(&file)
        .output()
        .expect("run sliced");
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.lines().next().unwrap_or_default();
    let path = file.display().to_string();
    (out.status.code(), line.replace(&path, "FILE"))
}

const NAMESPACE: &str = "{apiVersion: v1, kind: Namespace, metadata: {name: a}}";

#[test]
fn every_message_names_the_file_the_step_and_the_field() {
    let service = |port: &str| {
        format!(
            "- at: 0s\n  apply: {{apiVersion: v1, kind: Service, metadata: {{name: a, namespace: default}}, spec: {{selector: {{app: a}}, ports: [{port}]}}}}\n"
        )
    };
    let ok = format!("- at: 0s\n  apply: {NAMESPACE}\n");
    let cases: Vec<(String, &str)> = vec![
        // Debug formatting of the value.
        (
            "- at: 0s\n  fail: {verb: update, kind: Pod, status: 409}\n".into(),
            "FILE: step 1: fail.kind: \"Pod\" is not a kind sliced writes: want EndpointSlice or Endpoints",
        ),
        (
            format!("{ok}- at: 1s\n  fail: {{verb: patch, kind: EndpointSlice, status: 409}}\n"),
            "FILE: step 2: fail.verb: \"patch\" is not a verb sliced writes: want create, update or delete",
        ),
        (
            "- at: 0s\n  fail: {kind: EndpointSlice, status: 409}\n".into(),
            "FILE: step 1: fail.verb: missing: want create, update or delete",
        ),
        (
            "- at: 0s\n  fail: {verb: update, kind: Endpoints, status: 404}\n".into(),
            "FILE: step 1: fail.status: 404 is not a status sliced can fail writes with: want one of 403, 409, 429, 500, 503",
        ),
        (
            "- at: 0s\n  fail: {verb: update, kind: Endpoints, status: 409, times: -1}\n".into(),
            "FILE: step 1: fail.times: -1 is not a whole number of writes",
        ),
        (
            "- at: 0s\n  fail: {verb: update, kind: Endpoints, status: 409, time: 2}\n".into(),
            "FILE: step 1: fail.time: unknown field: want verb, kind, status, reason, times",
        ),
        (
            "- at: 0s\n  fail: 3\n".into(),
            "FILE: step 1: fail: expected a mapping of verb, kind, status, reason and times, found a number",
        ),
        // An empty field name.
        (
            "- 5\n".into(),
            "FILE: step 1: expected a mapping of `at` and one of `apply`, `delete` or `fail`, found a number",
        ),
        (
            format!("- at: 0s\n  delete: {{kind: Pod, name: a}}\n  apply: {NAMESPACE}\n"),
            "FILE: step 1: apply, delete: a step has exactly one of `apply`, `delete` or `fail`, not two",
        ),
        (
            "- at: 0s\n".into(),
            "FILE: step 1: apply, delete or fail: missing: a step has exactly one of them",
        ),
        (
            format!("- at: 0s\n  aply: {NAMESPACE}\n"),
            "FILE: step 1: aply: unknown field: a step has `at` and one of `apply`, `delete` or `fail`",
        ),
        (
            "- at:\n  delete: {kind: Pod, name: a}\n".into(),
            "FILE: step 1: at: missing: every step has a time, such as `at: 1.5s`",
        ),
        // A null (or missing) port is not port 0.
        (
            service("{port: null}"),
            "FILE: step 1 (Service default/a): spec.ports[0].port: null, but a value is required",
        ),
        (
            service("{name: http}"),
            "FILE: step 1 (Service default/a): spec.ports[0].port: missing, but a value is required",
        ),
        (
            service("{port: 0}"),
            "FILE: step 1 (Service default/a): spec.ports[0].port: 0 is not a valid port number (1-65535)",
        ),
        // An unsupported apiVersion or kind, not "expected one Service ...".
        (
            "- at: 0s\n  apply: {apiVersion: v2, kind: Service, metadata: {name: a}}\n".into(),
            "FILE: step 1: apply.apiVersion: \"v2\" is not supported for kind Service (want v1)",
        ),
        (
            "- at: 0s\n  apply: {apiVersion: v1, kind: EndpointSlice, metadata: {name: a}}\n"
                .into(),
            "FILE: step 1: apply.apiVersion: \"v1\" is not supported for kind EndpointSlice (want discovery.k8s.io/v1)",
        ),
        (
            "- at: 0s\n  apply: {apiVersion: apps/v1, kind: Deployment, metadata: {name: a}}\n"
                .into(),
            "FILE: step 1: apply.kind: \"Deployment\" is not a kind sliced reads: want Service, Pod, Node, Namespace, EndpointSlice or Endpoints",
        ),
        (
            format!(
                "- at: 0s\n  apply: {{apiVersion: v1, kind: List, items: [{NAMESPACE}, {NAMESPACE}]}}\n"
            ),
            "FILE: step 1: apply: expected one object, found 2",
        ),
        (
            "- at: 0s\n  apply:\n".into(),
            "FILE: step 1: apply: missing: the object to create or update",
        ),
        (
            "- at: 0s\n  delete: {kind: Deployment, name: a}\n".into(),
            "FILE: step 1: delete.kind: \"Deployment\" is not a kind sliced reads: want Service, Pod, Node, Namespace, EndpointSlice or Endpoints",
        ),
        (
            "- at: 0s\n  delete: {kind: Pod, name: 5}\n".into(),
            "FILE: step 1: delete.name: expected a string, found a number",
        ),
        (
            "- at: 0s\n  delete: {kind: Pod}\n".into(),
            "FILE: step 1: delete.name: missing: want a name",
        ),
        // The parser's snippet named `<input>`, not the file.
        (
            "- at: 0s\n  apply: {apiVersion: v1, kind: Namespace, metadata: {name: a}\n".into(),
            "FILE: invalid YAML: unclosed bracket '{' at line 2, column 10",
        ),
    ];
    let mut wrong = Vec::new();
    for (text, want) in &cases {
        let (code, line) = refused("trace.yaml", text);
        if code != Some(2) || line != format!("error: {want}") {
            wrong.push(format!(
                "{text}  exit {code:?}\n  got:  {line}\n  want: error: {want}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
