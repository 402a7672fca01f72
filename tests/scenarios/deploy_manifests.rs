//! The manifests in `deploy/`: real Kubernetes objects, least-privilege RBAC, and Deployments whose
//! arguments are `sliced run`'s flags.
//!
//! Every YAML document is read as `src/kube/manifest.rs` reads one (serde-saphyr into JSON values,
//! Lists unwrapped), then deserialised into its k8s-openapi type and serialised back: a field the
//! type does not know (a typo that `kubectl apply` would reject) makes the two differ.
//!
//! Each check is a function returning the problems it finds. The `*_are_caught` tests feed the checks
//! altered copies of the manifests, so that a check that can no longer fail is noticed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodSpec, Probe, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const NAMESPACE: &str = "kube-system";
const SLICED: &str = "sliced";
const SLICED_ROLE: &str = "system:sliced";
const SHADOW: &str = "sliced-shadow";
const SHADOW_ROLE: &str = "system:sliced-shadow";
const METRICS_PORT: i32 = 10258;

// ---------------------------------------------------------------------------------------------
// Loading

/// One object of `deploy/`, typed.
#[derive(Clone, Debug)]
enum Object {
    ServiceAccount(ServiceAccount),
    ClusterRole(ClusterRole),
    ClusterRoleBinding(ClusterRoleBinding),
    Role(Role),
    RoleBinding(RoleBinding),
    Deployment(Box<Deployment>),
    PodDisruptionBudget(PodDisruptionBudget),
}

#[derive(Clone, Debug)]
struct Doc {
    /// "file, document N" (and ", item M" inside a List).
    at: String,
    object: Object,
}

#[derive(Clone, Debug, Default)]
struct Manifests {
    docs: Vec<Doc>,
}

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

/// Every `*.yaml` and `*.yml` file of `deploy/`, sorted.
fn yaml_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy_dir())
        .expect("read deploy/")
        .map(|e| e.expect("read deploy/").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    files
}

fn load_all() -> Manifests {
    let mut manifests = Manifests::default();
    let files = yaml_files();
    assert!(!files.is_empty(), "no YAML files in deploy/");
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).expect("read manifest");
        match load_str(&name, &text) {
            Ok(docs) => manifests.docs.extend(docs),
            Err(problems) => panic!("{}", problems.join("\n")),
        }
    }
    manifests
}

/// The typed objects of one file, or every problem found in it.
fn load_str(file: &str, text: &str) -> Result<Vec<Doc>, Vec<String>> {
    let values: Vec<Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| vec![format!("{file}: invalid YAML: {e}")])?;
    let mut docs = Vec::new();
    let mut problems = Vec::new();
    if values.is_empty() {
        problems.push(format!("{file}: no documents"));
    }
    for (i, value) in values.into_iter().enumerate() {
        object_or_list(
            format!("{file}, document {}", i + 1),
            value,
            &mut docs,
            &mut problems,
        );
    }
    if problems.is_empty() {
        Ok(docs)
    } else {
        Err(problems)
    }
}

fn object_or_list(at: String, value: Value, docs: &mut Vec<Doc>, problems: &mut Vec<String>) {
    let str_field = |v: &Value, f: &str| v.get(f).and_then(Value::as_str).map(str::to_owned);
    if !value.is_object() {
        problems.push(format!("{at}: not a mapping (an empty document?)"));
        return;
    }
    let (Some(api_version), Some(kind)) =
        (str_field(&value, "apiVersion"), str_field(&value, "kind"))
    else {
        problems.push(format!("{at}: apiVersion and kind are required"));
        return;
    };
    if api_version.is_empty() || kind.is_empty() {
        problems.push(format!("{at}: apiVersion and kind must not be empty"));
        return;
    }
    if kind == "List" {
        let Some(items) = value.get("items").and_then(Value::as_array) else {
            problems.push(format!("{at}: a List needs items"));
            return;
        };
        for (j, item) in items.iter().enumerate() {
            object_or_list(
                format!("{at}, item {}", j + 1),
                item.clone(),
                docs,
                problems,
            );
        }
        return;
    }
    let name = value
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        problems.push(format!("{at}: {kind}: metadata.name is required"));
        return;
    }
    let at = format!("{at} ({kind} {name})");
    let object = match (api_version.as_str(), kind.as_str()) {
        ("v1", "ServiceAccount") => typed(&at, &value).map(Object::ServiceAccount),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            typed(&at, &value).map(Object::ClusterRole)
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            typed(&at, &value).map(Object::ClusterRoleBinding)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => typed(&at, &value).map(Object::Role),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            typed(&at, &value).map(Object::RoleBinding)
        }
        ("apps/v1", "Deployment") => typed(&at, &value).map(|d| Object::Deployment(Box::new(d))),
        ("policy/v1", "PodDisruptionBudget") => typed(&at, &value).map(Object::PodDisruptionBudget),
        _ => Err(format!(
            "{at}: {api_version} {kind} is not a kind this test knows; teach it the kind and what to check"
        )),
    };
    match object {
        Ok(object) => docs.push(Doc { at, object }),
        Err(problem) => problems.push(problem),
    }
}

/// The value as `T`; it must serialise back to the same value, or some field is unknown to `T`.
fn typed<T: DeserializeOwned + Serialize>(at: &str, value: &Value) -> Result<T, String> {
    let object: T = serde_path_to_error::deserialize(value.clone())
        .map_err(|e| format!("{at}: {}: {}", e.path(), e.inner()))?;
    let back = serde_json::to_value(&object).map_err(|e| format!("{at}: {e}"))?;
    match first_difference("", value, &back) {
        None => Ok(object),
        Some(path) => Err(format!(
            "{at}: {path}: not a field of this kind (misspelt or misplaced?), or a value of the wrong type"
        )),
    }
}

/// The path of the first place where `written` differs from `typed`.
fn first_difference(path: &str, written: &Value, typed: &Value) -> Option<String> {
    match (written, typed) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    Some(w) => {
                        if let Some(d) = first_difference(&p, v, w) {
                            return Some(d);
                        }
                    }
                    None => return Some(p),
                }
            }
            b.keys()
                .find(|k| !a.contains_key(*k))
                .map(|k| format!("{path}.{k}"))
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (v, w))| first_difference(&format!("{path}[{i}]"), v, w)),
        _ if written == typed => None,
        _ => Some(if path.is_empty() {
            ".".to_owned()
        } else {
            path.to_owned()
        }),
    }
}

impl Manifests {
    fn cluster_role(&self, name: &str) -> &ClusterRole {
        self.docs
            .iter()
            .find_map(|d| match &d.object {
                Object::ClusterRole(r) if r.metadata.name.as_deref() == Some(name) => Some(r),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no ClusterRole {name} in deploy/"))
    }

    fn cluster_role_mut(&mut self, name: &str) -> &mut ClusterRole {
        self.docs
            .iter_mut()
            .find_map(|d| match &mut d.object {
                Object::ClusterRole(r) if r.metadata.name.as_deref() == Some(name) => Some(r),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no ClusterRole {name} in deploy/"))
    }

    fn roles(&self) -> impl Iterator<Item = &Role> {
        self.docs.iter().filter_map(|d| match &d.object {
            Object::Role(r) => Some(r),
            _ => None,
        })
    }

    fn deployment(&self, name: &str) -> &Deployment {
        self.docs
            .iter()
            .find_map(|d| match &d.object {
                Object::Deployment(o) if o.metadata.name.as_deref() == Some(name) => Some(&**o),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no Deployment {name} in deploy/"))
    }

    fn deployment_mut(&mut self, name: &str) -> &mut Deployment {
        self.docs
            .iter_mut()
            .find_map(|d| match &mut d.object {
                Object::Deployment(o) if o.metadata.name.as_deref() == Some(name) => Some(&mut **o),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no Deployment {name} in deploy/"))
    }

    /// Every rule, with the role it is in ("ClusterRole x" or "Role ns/x").
    fn all_rules(&self) -> Vec<(String, &PolicyRule)> {
        let mut out = Vec::new();
        for doc in &self.docs {
            let (label, rules) = match &doc.object {
                Object::ClusterRole(r) => (
                    format!("ClusterRole {}", name(&r.metadata.name)),
                    r.rules.as_deref(),
                ),
                Object::Role(r) => (
                    format!(
                        "Role {}/{}",
                        name(&r.metadata.namespace),
                        name(&r.metadata.name)
                    ),
                    r.rules.as_deref(),
                ),
                _ => continue,
            };
            out.extend(rules.unwrap_or_default().iter().map(|r| (label.clone(), r)));
        }
        out
    }
}

fn name(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("")
}

// ---------------------------------------------------------------------------------------------
// RBAC

const READ_VERBS: [&str; 3] = ["get", "list", "watch"];
/// Every verb RBAC knows for resources; anything else in a rule is a typo.
const KNOWN_VERBS: [&str; 12] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "escalate",
    "bind",
    "impersonate",
    "approve",
];

fn is_write(verb: &str) -> bool {
    !READ_VERBS.contains(&verb)
}

/// One permission: (API group, resource, verb), with the resourceNames it is limited to (empty:
/// every name).
type Grant = (String, String, String, Vec<String>);

fn grants(rules: &[PolicyRule]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for rule in rules {
        let mut names = rule.resource_names.clone().unwrap_or_default();
        names.sort();
        for group in rule.api_groups.as_deref().unwrap_or_default() {
            for resource in rule.resources.as_deref().unwrap_or_default() {
                for verb in &rule.verbs {
                    out.insert((group.clone(), resource.clone(), verb.clone(), names.clone()));
                }
            }
        }
    }
    out
}

fn grant_set(entries: &[(&str, &[&str], &[&str])]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for (group, resources, verbs) in entries {
        for resource in *resources {
            for verb in *verbs {
                out.insert((
                    group.to_string(),
                    resource.to_string(),
                    verb.to_string(),
                    Vec::new(),
                ));
            }
        }
    }
    out
}

/// What `sliced run` needs: the union of upstream's rules for the endpoint, endpointslice,
/// endpointslicemirroring and service controllers (kubernetes/kubernetes,
/// plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go), and `patch` on
/// services, which the service controller's code uses on a Service being deleted
/// (cloud-provider/service/helpers `PatchService`); and reading MetalLB's address pools, which
/// the built-in provider serves from, and the namespace labels their selectors read.
fn sliced_expected() -> BTreeSet<Grant> {
    const RW: &[&str] = &["get", "list", "watch", "create", "update", "delete"];
    grant_set(&[
        ("", &["services", "pods", "nodes"], &READ_VERBS),
        ("", &["services/status"], &["patch", "update"]),
        ("", &["services"], &["patch"]),
        ("metallb.io", &["ipaddresspools"], &READ_VERBS),
        ("", &["namespaces"], &READ_VERBS),
        ("", &["endpoints"], RW),
        ("", &["endpoints/restricted"], &["create"]),
        (
            "",
            &["services/finalizers", "endpoints/finalizers"],
            &["update"],
        ),
        ("discovery.k8s.io", &["endpointslices"], RW),
        ("", &["events"], &["create", "update", "patch"]),
        ("events.k8s.io", &["events"], &["create", "update", "patch"]),
    ])
}

/// What the shadow needs: reading its inputs and kube-controller-manager's outputs.
fn shadow_allowed() -> BTreeSet<Grant> {
    grant_set(&[
        ("", &["services", "pods", "nodes", "endpoints"], &READ_VERBS),
        ("discovery.k8s.io", &["endpointslices"], &READ_VERBS),
    ])
}

/// Rules anywhere: no wildcards, no non-resource URLs, only known verbs, groups and resources set.
fn rule_problems(m: &Manifests) -> Vec<String> {
    let mut problems = Vec::new();
    for (role, rule) in m.all_rules() {
        let lists = [
            ("verbs", Some(&rule.verbs)),
            ("apiGroups", rule.api_groups.as_ref()),
            ("resources", rule.resources.as_ref()),
            ("resourceNames", rule.resource_names.as_ref()),
        ];
        for (field, list) in lists {
            for v in list.into_iter().flatten() {
                if v.contains('*') {
                    problems.push(format!("{role}: wildcard {v:?} in {field}"));
                }
            }
        }
        if rule.non_resource_urls.is_some() {
            problems.push(format!("{role}: nonResourceURLs granted"));
        }
        if rule.api_groups.as_ref().is_none_or(Vec::is_empty)
            || rule.resources.as_ref().is_none_or(Vec::is_empty)
            || rule.verbs.is_empty()
        {
            problems.push(format!(
                "{role}: a rule without apiGroups, resources or verbs"
            ));
        }
        for verb in &rule.verbs {
            if !KNOWN_VERBS.contains(&verb.as_str()) && verb != "*" {
                problems.push(format!("{role}: unknown verb {verb:?}"));
            }
        }
    }
    problems
}

/// sliced's ClusterRole: no writes on its inputs but the service controller's patches, writes in
/// discovery.k8s.io only to endpointslices, and exactly upstream's rules.
fn sliced_role_problems(m: &Manifests) -> Vec<String> {
    let mut problems = Vec::new();
    let role = m.cluster_role(SLICED_ROLE);
    let granted = grants(role.rules.as_deref().unwrap_or_default());
    for (group, resource, verb, _) in &granted {
        if !is_write(verb) {
            continue;
        }
        // The service controller's patches are the one write on an input.
        let service_patch = resource == "services" && verb == "patch";
        if ["pods", "services", "nodes"].contains(&resource.as_str()) && !service_patch {
            problems.push(format!(
                "ClusterRole {SLICED_ROLE}: {verb} on {resource}: sliced never writes its inputs"
            ));
        }
        if group == "discovery.k8s.io" && resource != "endpointslices" {
            problems.push(format!(
                "ClusterRole {SLICED_ROLE}: {verb} on discovery.k8s.io {resource}: only endpointslices are written"
            ));
        }
    }
    let expected = sliced_expected();
    for extra in granted.difference(&expected) {
        problems.push(format!(
            "ClusterRole {SLICED_ROLE}: grants {extra:?}, which upstream's four controllers do not have"
        ));
    }
    for missing in expected.difference(&granted) {
        problems.push(format!("ClusterRole {SLICED_ROLE}: lacks {missing:?}"));
    }
    problems
}

/// The shadow's ClusterRole: reads only (Events at most), and nothing it does not watch.
fn shadow_role_problems(m: &Manifests) -> Vec<String> {
    let mut problems = Vec::new();
    let role = m.cluster_role(SHADOW_ROLE);
    let granted = grants(role.rules.as_deref().unwrap_or_default());
    for (group, resource, verb, _) in &granted {
        if is_write(verb) && resource != "events" {
            problems.push(format!(
                "ClusterRole {SHADOW_ROLE}: {verb} on {group:?} {resource}: the shadow writes nothing"
            ));
        } else if !is_write(verb)
            && !shadow_allowed().contains(&(
                group.clone(),
                resource.clone(),
                verb.clone(),
                Vec::new(),
            ))
        {
            problems.push(format!(
                "ClusterRole {SHADOW_ROLE}: {verb} on {group:?} {resource}: the shadow does not read it"
            ));
        }
    }
    for missing in shadow_allowed().difference(&granted) {
        problems.push(format!("ClusterRole {SHADOW_ROLE}: lacks {missing:?}"));
    }
    problems
}

/// The leader-election Role: in the Lease's namespace, leases only, get/update/patch limited to
/// the Lease's name, create unlimited (Kubernetes cannot limit it), nothing else.
fn lease_role_problems(m: &Manifests, lease_namespace: &str, lease_name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let roles: Vec<&Role> = m.roles().collect();
    if roles.len() != 1 {
        problems.push(format!(
            "expected one Role (leader election), found {}",
            roles.len()
        ));
        return problems;
    }
    let role = roles[0];
    let label = format!("Role {}", name(&role.metadata.name));
    if name(&role.metadata.namespace) != lease_namespace {
        problems.push(format!(
            "{label}: in namespace {:?}, the Lease is in {lease_namespace:?}",
            name(&role.metadata.namespace)
        ));
    }
    let named = vec![lease_name.to_owned()];
    let mut verbs = BTreeSet::new();
    for (group, resource, verb, names) in grants(role.rules.as_deref().unwrap_or_default()) {
        if group != "coordination.k8s.io" || resource != "leases" {
            problems.push(format!("{label}: grants {verb} on {group:?} {resource}"));
        }
        match verb.as_str() {
            // A create rule with resourceNames never matches: the Lease could not be created.
            "create" if !names.is_empty() => problems.push(format!(
                "{label}: create limited by resourceNames {names:?}, which Kubernetes cannot enforce: creating the Lease would be refused"
            )),
            "create" => {}
            "get" | "update" | "patch" if names != named => problems.push(format!(
                "{label}: {verb} on leases limited to {names:?}, not [{lease_name:?}]"
            )),
            "get" | "update" | "patch" => {}
            _ => problems.push(format!("{label}: {verb} on leases is not needed")),
        }
        verbs.insert(verb);
    }
    for verb in ["get", "update", "create"] {
        if !verbs.contains(verb) {
            problems.push(format!("{label}: lacks {verb} on leases"));
        }
    }
    problems
}

/// Who is bound to what: each binding refers to a role and ServiceAccounts defined in deploy/;
/// sliced's account holds its ClusterRole and the leader-election Role, the shadow's only its
/// read-only ClusterRole.
fn binding_problems(m: &Manifests) -> Vec<String> {
    let mut problems = Vec::new();
    let accounts: BTreeSet<(String, String)> = m
        .docs
        .iter()
        .filter_map(|d| match &d.object {
            Object::ServiceAccount(sa) => Some((
                name(&sa.metadata.namespace).to_owned(),
                name(&sa.metadata.name).to_owned(),
            )),
            _ => None,
        })
        .collect();
    let cluster_roles: BTreeSet<&str> = m
        .docs
        .iter()
        .filter_map(|d| match &d.object {
            Object::ClusterRole(r) => Some(name(&r.metadata.name)),
            _ => None,
        })
        .collect();
    let roles: BTreeSet<(&str, &str)> = m
        .roles()
        .map(|r| (name(&r.metadata.namespace), name(&r.metadata.name)))
        .collect();
    // account -> roles bound to it, as "ClusterRole x" / "Role ns/x"
    let mut held: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for doc in &m.docs {
        let (namespace, role_ref, subjects) = match &doc.object {
            Object::ClusterRoleBinding(b) => (None, &b.role_ref, b.subjects.as_deref()),
            Object::RoleBinding(b) => (
                Some(name(&b.metadata.namespace)),
                &b.role_ref,
                b.subjects.as_deref(),
            ),
            _ => continue,
        };
        let target = match (role_ref.kind.as_str(), namespace) {
            ("ClusterRole", _) if cluster_roles.contains(role_ref.name.as_str()) => {
                format!("ClusterRole {}", role_ref.name)
            }
            ("Role", Some(ns)) if roles.contains(&(ns, role_ref.name.as_str())) => {
                format!("Role {ns}/{}", role_ref.name)
            }
            _ => {
                problems.push(format!(
                    "{}: roleRef {} {} is not defined in deploy/",
                    doc.at, role_ref.kind, role_ref.name
                ));
                continue;
            }
        };
        if role_ref.api_group != "rbac.authorization.k8s.io" {
            problems.push(format!(
                "{}: roleRef.apiGroup {:?}",
                doc.at, role_ref.api_group
            ));
        }
        let subjects = subjects.unwrap_or_default();
        if subjects.is_empty() {
            problems.push(format!("{}: no subjects", doc.at));
        }
        for s in subjects {
            let account = (name(&s.namespace).to_owned(), s.name.clone());
            if s.kind != "ServiceAccount" || !accounts.contains(&account) {
                problems.push(format!(
                    "{}: subject {} {}/{} is not a ServiceAccount of deploy/",
                    doc.at,
                    s.kind,
                    name(&s.namespace),
                    s.name
                ));
                continue;
            }
            held.entry(account).or_default().insert(target.clone());
        }
    }
    let expect = [
        (
            SLICED,
            vec![
                format!("ClusterRole {SLICED_ROLE}"),
                format!("Role {NAMESPACE}/sliced:leader-election"),
            ],
        ),
        (SHADOW, vec![format!("ClusterRole {SHADOW_ROLE}")]),
    ];
    for (account, want) in expect {
        let key = (NAMESPACE.to_owned(), account.to_owned());
        let got: Vec<String> = held.remove(&key).unwrap_or_default().into_iter().collect();
        let mut want = want;
        want.sort();
        if got != want {
            problems.push(format!(
                "ServiceAccount {NAMESPACE}/{account} holds {got:?}, expected {want:?}"
            ));
        }
    }
    for (account, roles) in held {
        problems.push(format!(
            "ServiceAccount {account:?} holds {roles:?} and is not expected to"
        ));
    }
    problems
}

// ---------------------------------------------------------------------------------------------
// Deployments and `sliced run`'s flags

#[derive(Clone, Copy, PartialEq, Eq)]
enum Takes {
    /// `--flag VALUE` or `--flag=VALUE`.
    Value,
    /// `--flag` or `--flag=true|false`.
    Bool,
    /// `--flag` alone.
    Switch,
}

/// `sliced run`'s flags.
const RUN_FLAGS: [(&str, Takes); 19] = [
    ("kubeconfig", Takes::Value),
    ("controllers", Takes::Value),
    ("concurrent-service-endpoint-syncs", Takes::Value),
    ("max-endpoints-per-slice", Takes::Value),
    ("mirroring-max-endpoints-per-subset", Takes::Value),
    ("endpointslice-updates-batch-period", Takes::Value),
    ("endpoint-updates-batch-period", Takes::Value),
    ("mirroring-endpointslice-updates-batch-period", Takes::Value),
    ("kube-api-qps", Takes::Value),
    ("kube-api-burst", Takes::Value),
    ("leader-elect", Takes::Bool),
    ("leader-elect-lease-duration", Takes::Value),
    ("leader-elect-renew-deadline", Takes::Value),
    ("leader-elect-retry-period", Takes::Value),
    ("leader-elect-resource-name", Takes::Value),
    ("leader-elect-resource-namespace", Takes::Value),
    ("metrics-bind-address", Takes::Value),
    ("dry-run", Takes::Switch),
    ("dry-run-summary-interval", Takes::Value),
];

/// A container's command line, parsed.
#[derive(Debug, Default)]
struct RunArgs {
    /// Flags given, by name, with their value (`true` for a bare boolean or switch).
    flags: BTreeMap<String, String>,
}

impl RunArgs {
    fn get<'a>(&'a self, flag: &str, default: &'a str) -> &'a str {
        self.flags.get(flag).map_or(default, String::as_str)
    }
}

/// `args` as `sliced run` would read them (`run` first, then known flags only), and the problems
/// found; flags read before and after a problem are kept.
fn parse_run_args(args: &[String]) -> (RunArgs, Vec<String>) {
    let mut problems = Vec::new();
    let mut out = RunArgs::default();
    let mut rest = args.iter();
    match rest.next() {
        Some(first) if first == "run" => {}
        other => problems.push(format!("the first argument is {other:?}, not \"run\"")),
    }
    while let Some(arg) = rest.next() {
        let Some(flag) = arg.strip_prefix("--") else {
            problems.push(format!(
                "{arg:?}: not a flag (`run` takes no other arguments)"
            ));
            continue;
        };
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) => (f, Some(v.to_owned())),
            None => (flag, None),
        };
        let Some(&(_, takes)) = RUN_FLAGS.iter().find(|(f, _)| *f == flag) else {
            problems.push(format!("--{flag}: not a flag of `sliced run`"));
            continue;
        };
        let value = match (takes, inline) {
            (Takes::Value, Some(v)) => v,
            (Takes::Value, None) => match rest.next() {
                Some(v) if !v.starts_with("--") => v.clone(),
                _ => {
                    problems.push(format!("--{flag}: needs a value"));
                    continue;
                }
            },
            (Takes::Bool, Some(v)) if v == "true" || v == "false" => v,
            (Takes::Bool, Some(v)) => {
                problems.push(format!("--{flag}={v}: true or false"));
                continue;
            }
            (Takes::Bool | Takes::Switch, None) => "true".to_owned(),
            (Takes::Switch, Some(v)) => {
                problems.push(format!("--{flag}={v}: takes no value"));
                continue;
            }
        };
        if let Err(why) = check_value(flag, &value) {
            problems.push(format!("--{flag}={value}: {why}"));
        }
        if out.flags.insert(flag.to_owned(), value).is_some() {
            problems.push(format!("--{flag}: given twice"));
        }
    }
    (out, problems)
}

/// The value of a flag as `sliced run` would parse it: Go-style durations, positive numbers,
/// socket addresses.
fn check_value(flag: &str, value: &str) -> Result<(), &'static str> {
    let ok = match flag {
        f if f.ends_with("-period")
            || f.ends_with("-duration")
            || f.ends_with("-deadline")
            || f.ends_with("-interval") =>
        {
            is_go_duration(value)
        }
        "concurrent-service-endpoint-syncs"
        | "max-endpoints-per-slice"
        | "mirroring-max-endpoints-per-subset"
        | "kube-api-burst" => value.parse::<u32>().is_ok_and(|n| n > 0),
        "kube-api-qps" => value.parse::<f64>().is_ok_and(|q| q > 0.0),
        "metrics-bind-address" => value.parse::<std::net::SocketAddr>().is_ok(),
        _ => !value.is_empty(),
    };
    if ok { Ok(()) } else { Err("not a valid value") }
}

/// `0`, or number-unit pairs such as `500ms`, `1m30s`.
fn is_go_duration(s: &str) -> bool {
    if s == "0" {
        return true;
    }
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let Some(unit) = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .into_iter()
            .find(|u| rest.starts_with(u) && !(*u == "m" && rest.starts_with("ms")))
        else {
            return false;
        };
        rest = &rest[unit.len()..];
    }
    !s.is_empty()
}

fn pod_spec(d: &Deployment) -> Option<&PodSpec> {
    d.spec.as_ref()?.template.spec.as_ref()
}

/// The only container, or a problem.
fn the_container<'a>(label: &str, d: &'a Deployment) -> Result<&'a Container, String> {
    match pod_spec(d).map(|s| s.containers.as_slice()) {
        Some([c]) => Ok(c),
        _ => Err(format!("{label}: expected exactly one container")),
    }
}

/// An HTTP GET probe on `path`, on the metrics port by number or by the name of a container port.
fn probe_problems(
    label: &str,
    c: &Container,
    probe: Option<&Probe>,
    kind: &str,
    path: &str,
) -> Vec<String> {
    let Some(get) = probe.and_then(|p| p.http_get.as_ref()) else {
        return vec![format!("{label}: no HTTP {kind} probe")];
    };
    let mut problems = Vec::new();
    if get.path.as_deref() != Some(path) {
        problems.push(format!(
            "{label}: {kind} probe path {:?}, expected {path}",
            get.path
        ));
    }
    let port = match &get.port {
        IntOrString::Int(p) => Some(*p),
        IntOrString::String(n) => c
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(n.as_str()))
            .map(|p| p.container_port),
    };
    if port != Some(METRICS_PORT) {
        problems.push(format!(
            "{label}: {kind} probe on port {:?}, expected {METRICS_PORT}",
            get.port
        ));
    }
    if get.scheme.as_deref().is_some_and(|s| s != "HTTP") {
        problems.push(format!(
            "{label}: {kind} probe scheme {:?}: sliced serves plain HTTP",
            get.scheme
        ));
    }
    problems
}

/// What both Deployments share: the command line, the probes, POD_NAME, the metrics port and a
/// locked-down security context. Returns the parsed arguments for the caller's own checks.
fn common_deployment_problems(
    label: &str,
    d: &Deployment,
    account: &str,
) -> (Vec<String>, RunArgs) {
    let mut problems = Vec::new();
    if name(&d.metadata.namespace) != NAMESPACE {
        problems.push(format!("{label}: not in {NAMESPACE}"));
    }
    let Some(pod) = pod_spec(d) else {
        return (
            vec![format!("{label}: no pod template spec")],
            RunArgs::default(),
        );
    };
    if pod.service_account_name.as_deref() != Some(account) {
        problems.push(format!(
            "{label}: serviceAccountName {:?}, expected {account}",
            pod.service_account_name
        ));
    }
    if pod.automount_service_account_token == Some(false)
        && !pod.volumes.iter().flatten().any(|v| v.projected.is_some())
    {
        problems.push(format!(
            "{label}: no service account token: in-cluster config needs one"
        ));
    }
    let c = match the_container(label, d) {
        Ok(c) => c,
        Err(p) => return (vec![p], RunArgs::default()),
    };
    if c.command.is_some() {
        problems.push(format!(
            "{label}: command overrides the image's entrypoint; use args"
        ));
    }
    let (args, arg_problems) = parse_run_args(c.args.as_deref().unwrap_or_default());
    problems.extend(
        arg_problems
            .into_iter()
            .map(|p| format!("{label}: args: {p}")),
    );
    let bind = args.get("metrics-bind-address", "127.0.0.1:10258");
    if bind != format!("0.0.0.0:{METRICS_PORT}") {
        problems.push(format!(
            "{label}: --metrics-bind-address={bind}: the kubelet probes the pod's IP, so 0.0.0.0:{METRICS_PORT}"
        ));
    }
    if !c
        .ports
        .iter()
        .flatten()
        .any(|p| p.container_port == METRICS_PORT)
    {
        problems.push(format!("{label}: no containerPort {METRICS_PORT}"));
    }
    problems.extend(probe_problems(
        label,
        c,
        c.liveness_probe.as_ref(),
        "liveness",
        "/healthz",
    ));
    problems.extend(probe_problems(
        label,
        c,
        c.readiness_probe.as_ref(),
        "readiness",
        "/readyz",
    ));
    if c.startup_probe.is_some() {
        problems.extend(probe_problems(
            label,
            c,
            c.startup_probe.as_ref(),
            "startup",
            "/healthz",
        ));
    }
    let pod_name = c.env.iter().flatten().find(|e| e.name == "POD_NAME");
    let field = pod_name
        .and_then(|e| e.value_from.as_ref())
        .and_then(|v| v.field_ref.as_ref())
        .map(|f| f.field_path.as_str());
    if field != Some("metadata.name") {
        problems.push(format!(
            "{label}: env POD_NAME must come from fieldRef metadata.name"
        ));
    }
    // Security: non-root, no privilege escalation, read-only root, no capabilities, seccomp.
    let pod_sc = pod.security_context.as_ref();
    let sc = c.security_context.as_ref();
    let non_root = sc
        .and_then(|s| s.run_as_non_root)
        .or(pod_sc.and_then(|s| s.run_as_non_root));
    if non_root != Some(true) {
        problems.push(format!("{label}: runAsNonRoot is not set"));
    }
    if sc.and_then(|s| s.read_only_root_filesystem) != Some(true) {
        problems.push(format!("{label}: readOnlyRootFilesystem is not set"));
    }
    if sc.and_then(|s| s.allow_privilege_escalation) != Some(false) {
        problems.push(format!("{label}: allowPrivilegeEscalation is not false"));
    }
    let drop = sc
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|c| c.drop.as_ref());
    if drop.is_none_or(|d| !d.iter().any(|c| c == "ALL")) {
        problems.push(format!("{label}: capabilities do not drop ALL"));
    }
    if sc
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|c| c.add.as_ref())
        .is_some_and(|a| !a.is_empty())
    {
        problems.push(format!("{label}: capabilities added"));
    }
    if sc.and_then(|s| s.privileged) == Some(true) {
        problems.push(format!("{label}: privileged"));
    }
    let seccomp = sc
        .and_then(|s| s.seccomp_profile.as_ref())
        .or(pod_sc.and_then(|s| s.seccomp_profile.as_ref()))
        .map(|p| p.type_.as_str());
    if seccomp != Some("RuntimeDefault") {
        problems.push(format!(
            "{label}: seccomp profile {seccomp:?}, expected RuntimeDefault"
        ));
    }
    if pod.host_network == Some(true) || pod.host_pid == Some(true) || pod.host_ipc == Some(true) {
        problems.push(format!("{label}: uses a host namespace"));
    }
    let resources = c.resources.as_ref();
    for (kind, list) in [
        ("requests", resources.and_then(|r| r.requests.as_ref())),
        ("limits", resources.and_then(|r| r.limits.as_ref())),
    ] {
        for r in ["cpu", "memory"] {
            if !list.is_some_and(|l| l.contains_key(r)) {
                problems.push(format!("{label}: no {r} in resources.{kind}"));
            }
        }
    }
    (problems, args)
}

/// The controller: two replicas on different nodes, leader election on the Lease the Role grants,
/// critical priority.
fn sliced_deployment_problems(m: &Manifests) -> Vec<String> {
    let d = m.deployment(SLICED);
    let label = format!("Deployment {SLICED}");
    let (mut problems, args) = common_deployment_problems(&label, d, SLICED);
    let spec = d.spec.as_ref();
    if spec.and_then(|s| s.replicas) != Some(2) {
        problems.push(format!(
            "{label}: replicas {:?}, expected 2",
            spec.and_then(|s| s.replicas)
        ));
    }
    if args.get("leader-elect", "true") != "true" {
        problems.push(format!("{label}: two replicas need --leader-elect=true"));
    }
    if args.flags.contains_key("dry-run") {
        problems.push(format!("{label}: --dry-run belongs in the shadow"));
    }
    let lease_ns = args.get("leader-elect-resource-namespace", NAMESPACE);
    let lease_name = args.get("leader-elect-resource-name", SLICED);
    problems.extend(lease_role_problems(m, lease_ns, lease_name));
    let Some(pod) = pod_spec(d) else {
        return problems;
    };
    if pod.priority_class_name.as_deref() != Some("system-cluster-critical") {
        problems.push(format!(
            "{label}: priorityClassName is not system-cluster-critical"
        ));
    }
    let selects_self = |labels: Option<&BTreeMap<String, String>>| {
        labels.is_some_and(|l| l.get("app.kubernetes.io/name").map(String::as_str) == Some(SLICED))
    };
    let anti_affinity = pod
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_some_and(|terms| {
            terms.iter().any(|t| {
                t.topology_key == "kubernetes.io/hostname"
                    && selects_self(
                        t.label_selector
                            .as_ref()
                            .and_then(|s| s.match_labels.as_ref()),
                    )
            })
        });
    let spread = pod.topology_spread_constraints.iter().flatten().any(|t| {
        t.topology_key == "kubernetes.io/hostname"
            && t.when_unsatisfiable == "DoNotSchedule"
            && selects_self(
                t.label_selector
                    .as_ref()
                    .and_then(|s| s.match_labels.as_ref()),
            )
    });
    if !(anti_affinity || spread) {
        problems.push(format!(
            "{label}: nothing keeps the two replicas off the same node (required podAntiAffinity or a DoNotSchedule spread on kubernetes.io/hostname)"
        ));
    }
    problems
}

/// The shadow: one replica, dry run, no leader election, its own read-only account.
fn shadow_deployment_problems(m: &Manifests) -> Vec<String> {
    let d = m.deployment(SHADOW);
    let label = format!("Deployment {SHADOW}");
    let (mut problems, args) = common_deployment_problems(&label, d, SHADOW);
    let replicas = d.spec.as_ref().and_then(|s| s.replicas);
    if replicas != Some(1) {
        problems.push(format!("{label}: replicas {replicas:?}, expected 1"));
    }
    if args.get("dry-run", "false") != "true" {
        problems.push(format!("{label}: no --dry-run"));
    }
    if args.get("leader-elect", "true") != "false" {
        problems.push(format!(
            "{label}: needs --leader-elect=false (it has no Lease rights)"
        ));
    }
    problems
}

/// Namespaced objects name their namespace (kube-system), cluster-scoped ones none.
fn namespace_problems(m: &Manifests) -> Vec<String> {
    let mut problems = Vec::new();
    for doc in &m.docs {
        let (namespace, namespaced) = match &doc.object {
            Object::ServiceAccount(o) => (&o.metadata.namespace, true),
            Object::Role(o) => (&o.metadata.namespace, true),
            Object::RoleBinding(o) => (&o.metadata.namespace, true),
            Object::Deployment(o) => (&o.metadata.namespace, true),
            Object::PodDisruptionBudget(o) => (&o.metadata.namespace, true),
            Object::ClusterRole(o) => (&o.metadata.namespace, false),
            Object::ClusterRoleBinding(o) => (&o.metadata.namespace, false),
        };
        match (namespace.as_deref(), namespaced) {
            (Some(NAMESPACE), true) | (None, false) => {}
            (ns, true) => problems.push(format!(
                "{}: namespace {ns:?}: give {NAMESPACE} explicitly, or kubectl uses the context's",
                doc.at
            )),
            (Some(ns), false) => {
                problems.push(format!("{}: cluster-scoped, but namespace {ns:?}", doc.at))
            }
        }
    }
    problems
}

fn all_problems(m: &Manifests) -> Vec<String> {
    let mut problems = Vec::new();
    problems.extend(namespace_problems(m));
    problems.extend(rule_problems(m));
    problems.extend(sliced_role_problems(m));
    problems.extend(shadow_role_problems(m));
    problems.extend(binding_problems(m));
    problems.extend(sliced_deployment_problems(m));
    problems.extend(shadow_deployment_problems(m));
    problems
}

fn assert_none(problems: Vec<String>) {
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// Asserts that some problem contains `needle`.
fn assert_caught(problems: &[String], needle: &str) {
    assert!(
        problems.iter().any(|p| p.contains(needle)),
        "expected a problem mentioning {needle:?}, got {problems:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Tests of the manifests

#[test]
fn every_document_is_a_typed_kubernetes_object() {
    let m = load_all();
    let files: BTreeSet<&str> = m
        .docs
        .iter()
        .map(|d| d.at.split(',').next().unwrap())
        .collect();
    for want in [
        "rbac.yaml",
        "rbac-shadow.yaml",
        "deployment.yaml",
        "shadow.yaml",
    ] {
        assert!(files.contains(want), "deploy/{want} has no objects");
    }
    assert_none(namespace_problems(&m));
}

#[test]
fn rules_have_no_wildcards_and_known_verbs() {
    assert_none(rule_problems(&load_all()));
}

#[test]
fn sliced_cluster_role_is_upstreams_and_no_more() {
    assert_none(sliced_role_problems(&load_all()));
}

#[test]
fn shadow_cluster_role_reads_only() {
    assert_none(shadow_role_problems(&load_all()));
}

#[test]
fn bindings_tie_each_account_to_its_roles() {
    assert_none(binding_problems(&load_all()));
}

#[test]
fn sliced_deployment_runs_two_leader_elected_replicas() {
    assert_none(sliced_deployment_problems(&load_all()));
}

#[test]
fn shadow_deployment_is_a_dry_run() {
    assert_none(shadow_deployment_problems(&load_all()));
}

// ---------------------------------------------------------------------------------------------
// The checks can fail

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let strings = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..PolicyRule::default()
    }
}

fn container_mut<'a>(m: &'a mut Manifests, deployment: &str) -> &'a mut Container {
    let d = m.deployment_mut(deployment);
    let spec = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    &mut spec.containers[0]
}

fn args_mut<'a>(m: &'a mut Manifests, deployment: &str) -> &'a mut Vec<String> {
    container_mut(m, deployment).args.as_mut().unwrap()
}

#[test]
fn the_manifests_pass_every_check() {
    assert_none(all_problems(&load_all()));
}

#[test]
fn writes_on_inputs_are_caught() {
    for (resource, verb) in [
        ("pods", "patch"),
        ("services", "update"),
        ("nodes", "delete"),
    ] {
        let mut m = load_all();
        let role = m.cluster_role_mut(SLICED_ROLE);
        role.rules
            .as_mut()
            .unwrap()
            .push(rule(&[""], &[resource], &[verb]));
        let problems = sliced_role_problems(&m);
        assert_caught(
            &problems,
            &format!("{verb} on {resource}: sliced never writes its inputs"),
        );
    }
}

#[test]
fn extra_and_missing_rules_are_caught() {
    let mut m = load_all();
    let role = m.cluster_role_mut(SLICED_ROLE);
    role.rules
        .as_mut()
        .unwrap()
        .push(rule(&[""], &["configmaps"], &["get", "list", "watch"]));
    role.rules.as_mut().unwrap().push(rule(
        &["discovery.k8s.io"],
        &["endpointslices/status"],
        &["update"],
    ));
    let problems = sliced_role_problems(&m);
    assert_caught(&problems, "\"configmaps\", \"list\"");
    assert_caught(
        &problems,
        "update on discovery.k8s.io endpointslices/status",
    );

    let mut m = load_all();
    let role = m.cluster_role_mut(SLICED_ROLE);
    role.rules.as_mut().unwrap().retain(|r| {
        !r.resources
            .as_ref()
            .unwrap()
            .contains(&"services/finalizers".to_owned())
    });
    assert_caught(
        &sliced_role_problems(&m),
        "lacks (\"\", \"services/finalizers\", \"update\"",
    );
}

#[test]
fn wildcards_and_unknown_verbs_are_caught() {
    let mut m = load_all();
    let role = m.cluster_role_mut(SHADOW_ROLE);
    role.rules
        .as_mut()
        .unwrap()
        .push(rule(&["*"], &["endpointslices"], &["get"]));
    role.rules
        .as_mut()
        .unwrap()
        .push(rule(&[""], &["*"], &["list"]));
    role.rules
        .as_mut()
        .unwrap()
        .push(rule(&[""], &["pods"], &["*", "lsit"]));
    let problems = rule_problems(&m);
    assert_caught(&problems, "wildcard \"*\" in apiGroups");
    assert_caught(&problems, "wildcard \"*\" in resources");
    assert_caught(&problems, "wildcard \"*\" in verbs");
    assert_caught(&problems, "unknown verb \"lsit\"");
}

#[test]
fn shadow_writes_are_caught() {
    let mut m = load_all();
    let role = m.cluster_role_mut(SHADOW_ROLE);
    role.rules.as_mut().unwrap().push(rule(
        &["discovery.k8s.io"],
        &["endpointslices"],
        &["create"],
    ));
    role.rules
        .as_mut()
        .unwrap()
        .push(rule(&["events.k8s.io"], &["events"], &["create"]));
    let problems = shadow_role_problems(&m);
    assert_caught(
        &problems,
        "create on \"discovery.k8s.io\" endpointslices: the shadow writes nothing",
    );
    assert!(
        !problems.iter().any(|p| p.contains("events")),
        "{problems:#?}"
    );
}

#[test]
fn lease_rules_are_checked() {
    let m = load_all();
    // A Lease name or namespace the Role does not grant.
    assert_caught(
        &lease_role_problems(&m, NAMESPACE, "other"),
        "not [\"other\"]",
    );
    assert_caught(
        &lease_role_problems(&m, "default", SLICED),
        "the Lease is in \"default\"",
    );

    let mut m = load_all();
    for doc in &mut m.docs {
        if let Object::Role(role) = &mut doc.object {
            for r in role.rules.as_mut().unwrap() {
                // create limited by name, and get unlimited.
                r.resource_names = if r.verbs.contains(&"create".to_owned()) {
                    Some(vec![SLICED.to_owned()])
                } else {
                    None
                };
            }
            role.rules.as_mut().unwrap().push(rule(
                &["coordination.k8s.io"],
                &["leases"],
                &["delete"],
            ));
        }
    }
    let problems = lease_role_problems(&m, NAMESPACE, SLICED);
    assert_caught(&problems, "create limited by resourceNames");
    assert_caught(&problems, "get on leases limited to []");
    assert_caught(&problems, "delete on leases is not needed");
}

#[test]
fn bad_args_are_caught() {
    let mut m = load_all();
    let args = args_mut(&mut m, SLICED);
    args.push("--leader-elect-namespace=kube-system".to_owned());
    args.push("--dry-run=true".to_owned());
    args.push("--leader-elect=yes".to_owned());
    args.push("--kube-api-qps".to_owned());
    let problems = sliced_deployment_problems(&m);
    assert_caught(
        &problems,
        "--leader-elect-namespace: not a flag of `sliced run`",
    );
    assert_caught(&problems, "--dry-run=true: takes no value");
    assert_caught(&problems, "--leader-elect=yes: true or false");
    assert_caught(&problems, "--kube-api-qps: needs a value");

    let mut m = load_all();
    args_mut(&mut m, SLICED).retain(|a| a != "run");
    assert_caught(&sliced_deployment_problems(&m), "not \"run\"");

    let mut m = load_all();
    args_mut(&mut m, SLICED).push("--leader-elect=false".to_owned());
    let problems = sliced_deployment_problems(&m);
    assert_caught(&problems, "--leader-elect: given twice");

    let mut m = load_all();
    args_mut(&mut m, SHADOW).retain(|a| a != "--dry-run");
    assert_caught(&shadow_deployment_problems(&m), "no --dry-run");
}

#[test]
fn values_given_separately_are_parsed() {
    let args: Vec<String> = ["run", "--kube-api-qps", "50", "--leader-elect", "--dry-run"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (parsed, problems) = parse_run_args(&args);
    assert_none(problems);
    for good in ["0", "0s", "500ms", "1m30s", "1.5h", "2s"] {
        assert!(is_go_duration(good), "{good}");
    }
    for bad in ["", "5", "1 s", "s", "10sec", "-1s"] {
        assert!(!is_go_duration(bad), "{bad}");
    }
    let bad: Vec<String> = [
        "run",
        "--leader-elect-lease-duration=15",
        "--kube-api-burst=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let problems = parse_run_args(&bad).1;
    assert_caught(
        &problems,
        "--leader-elect-lease-duration=15: not a valid value",
    );
    assert_caught(&problems, "--kube-api-burst=0: not a valid value");
    assert_eq!(parsed.get("kube-api-qps", ""), "50");
    assert_eq!(parsed.get("leader-elect", ""), "true");
    assert_eq!(parsed.get("dry-run", ""), "true");
}

#[test]
fn replicas_and_probes_are_caught() {
    let mut m = load_all();
    m.deployment_mut(SLICED).spec.as_mut().unwrap().replicas = Some(3);
    let c = container_mut(&mut m, SLICED);
    c.liveness_probe
        .as_mut()
        .unwrap()
        .http_get
        .as_mut()
        .unwrap()
        .path = Some("/livez".to_owned());
    c.readiness_probe
        .as_mut()
        .unwrap()
        .http_get
        .as_mut()
        .unwrap()
        .port = IntOrString::Int(8080);
    let problems = sliced_deployment_problems(&m);
    assert_caught(&problems, "replicas Some(3), expected 2");
    assert_caught(
        &problems,
        "liveness probe path Some(\"/livez\"), expected /healthz",
    );
    assert_caught(&problems, "readiness probe on port Int(8080)");

    let mut m = load_all();
    container_mut(&mut m, SLICED)
        .security_context
        .as_mut()
        .unwrap()
        .read_only_root_filesystem = None;
    container_mut(&mut m, SHADOW).env = None;
    let problems = all_problems(&m);
    assert_caught(
        &problems,
        "Deployment sliced: readOnlyRootFilesystem is not set",
    );
    assert_caught(&problems, "Deployment sliced-shadow: env POD_NAME");
}

#[test]
fn unknown_fields_and_missing_names_are_caught() {
    let misspelt = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x, namespace: kube-system}\n\
                    spec:\n  replicas: 1\n  selector: {matchLabels: {a: b}}\n  template:\n    \
                    metadata: {labels: {a: b}}\n    spec:\n      serviceAcountName: sliced\n      \
                    containers: [{name: c, image: i}]\n";
    let problems = load_str("x.yaml", misspelt).unwrap_err();
    assert_caught(
        &problems,
        ".spec.template.spec.serviceAcountName: not a field",
    );

    let wrong_type = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: x, namespace: kube-system}\n\
                      automountServiceAccountToken: \"yes\"\n";
    assert_caught(
        &load_str("x.yaml", wrong_type).unwrap_err(),
        "automountServiceAccountToken",
    );

    let nameless = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {namespace: kube-system}\n---\nkind: Role\n";
    let problems = load_str("x.yaml", nameless).unwrap_err();
    assert_caught(
        &problems,
        "document 1: ServiceAccount: metadata.name is required",
    );
    assert_caught(&problems, "document 2: apiVersion and kind are required");

    let unknown = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";
    assert_caught(
        &load_str("x.yaml", unknown).unwrap_err(),
        "not a kind this test knows",
    );

    // A List's items are checked like documents.
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ServiceAccount\n  \
                metadata: {name: a, namespace: kube-system}\n- apiVersion: v1\n  kind: ServiceAccount\n  \
                metadata: {namespace: kube-system}\n";
    assert_caught(
        &load_str("x.yaml", list).unwrap_err(),
        "document 1, item 2: ServiceAccount",
    );
}

#[test]
fn bindings_to_unknown_roles_or_accounts_are_caught() {
    let mut m = load_all();
    for doc in &mut m.docs {
        if let Object::ClusterRoleBinding(b) = &mut doc.object
            && b.role_ref.name == SHADOW_ROLE
        {
            b.role_ref.name = SLICED_ROLE.to_owned();
        }
    }
    assert_caught(
        &binding_problems(&m),
        "ServiceAccount kube-system/sliced-shadow holds [\"ClusterRole system:sliced\"]",
    );

    let mut m = load_all();
    for doc in &mut m.docs {
        if let Object::RoleBinding(b) = &mut doc.object {
            b.subjects.as_mut().unwrap()[0].name = "default".to_owned();
        }
    }
    assert_caught(
        &binding_problems(&m),
        "subject ServiceAccount kube-system/default is not a ServiceAccount of deploy/",
    );
}

// ---------------------------------------------------------------------------------------------
// The page

/// kube-controller-manager's names for the controllers the page turns off (old names, which newer
/// versions keep as aliases, and new names), and the two kubeadm adds. kcm refuses to start when
/// `--controllers` names anything else, even after `-`.
const KCM_NAMES: [&str; 9] = [
    "*",
    "endpoint",
    "endpointslice",
    "endpointslicemirroring",
    "endpoints-controller",
    "endpointslice-controller",
    "endpointslice-mirroring-controller",
    "bootstrapsigner",
    "tokencleaner",
];

/// Every `--controllers=` value and kubeadm `controllers` value the page gives for kcm.
fn kcm_controller_lists(page: &str) -> Vec<String> {
    let mut lists = Vec::new();
    for line in page.lines() {
        let line = line.trim();
        let value = if let Some(i) = line.find("--controllers=") {
            &line[i + "--controllers=".len()..]
        } else if let Some(rest) = line.strip_prefix("value: ").or_else(|| {
            line.trim_start_matches(['#', ' '])
                .strip_prefix("controllers: ")
        }) {
            rest
        } else {
            continue;
        };
        let value = value.trim_start_matches('"');
        let end = value
            .find(|c: char| c.is_whitespace() || c == '"' || c == '`')
            .unwrap_or(value.len());
        lists.push(value[..end].to_owned());
    }
    lists
}

fn kcm_list_problems(page: &str) -> Vec<String> {
    let lists = kcm_controller_lists(page);
    let mut problems = Vec::new();
    if lists.is_empty() {
        problems.push("the page gives no --controllers value for kcm".to_owned());
    }
    for list in lists {
        let names: Vec<&str> = list.split(',').collect();
        for name in &names {
            if !KCM_NAMES.contains(&name.trim_start_matches('-')) {
                problems.push(format!(
                    "--controllers={list}: {name:?} is not a kube-controller-manager name"
                ));
            }
        }
        // A list that turns anything off is one of ours: it turns off all three.
        let ours = names.iter().any(|n| n.starts_with('-'));
        for off in ["-endpoint", "-endpointslice", "-endpointslicemirroring"] {
            if ours && !names.contains(&off) {
                problems.push(format!("--controllers={list}: lacks {off}"));
            }
        }
    }
    problems
}

#[test]
fn the_page_gives_kcm_only_names_it_knows() {
    let page = std::fs::read_to_string(deploy_dir().join("README.md")).expect("deploy/README.md");
    // The bare list, kubeadm's default and its extension, and the two kubeadm configurations.
    assert_eq!(kcm_controller_lists(&page).len(), 5);
    assert_none(kcm_list_problems(&page));
    let wrong = "--controllers=*,-endpointslice,-endpoint,-endpointslice-mirroring\n";
    assert_caught(
        &kcm_list_problems(wrong),
        "\"-endpointslice-mirroring\" is not a kube-controller-manager name",
    );
}
