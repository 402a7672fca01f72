//! Writes as the generic registry store performs them: admission
//! (NamespaceLifecycle), strategy (defaults, generation, status reset),
//! optimistic concurrency, no-op detection, finalizers and graceful deletion.

use std::sync::Arc;

use serde_json::{Value, json};

use super::gc::{FOREGROUND, ORPHAN};
use super::json::{
    canonicalize, later_rfc3339, merge_patch, meta_str, name_suffix, new_uid, now_rfc3339, set_meta,
};
use super::resources::{
    KINDS, NAMESPACES, ResId, apply_defaults, keep_allocated, next_generation,
    reset_status_on_create, set_initial_generation, validate,
};
use super::status::{ApiError, Cause, delete_success};
use super::store::{NsState, State, Stored, key};

/// Who is writing: HTTP clients get the registry's status rules; the
/// test's direct store calls act as user plus kubelet/controllers: a body
/// with a `status` sets it, one without is treated as HTTP would treat it,
/// and a missing namespace is auto-created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Http,
    Direct,
}

#[derive(Clone, Copy, Debug)]
pub struct WriteCtx {
    pub origin: Origin,
    pub dry_run: bool,
}

#[derive(Debug)]
pub enum Reply {
    Object(Arc<Stored>),
    Json(Value),
}

#[derive(Debug)]
pub struct Outcome {
    pub code: u16,
    pub reply: Reply,
}

impl Outcome {
    fn object(code: u16, obj: Arc<Stored>) -> Self {
        Outcome {
            code,
            reply: Reply::Object(obj),
        }
    }
}

/// Rejects a body whose apiVersion/kind name another type, then strips them.
fn take_type(res: ResId, obj: &mut Value) -> Result<(), ApiError> {
    let k = &KINDS[res];
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the body of the request is not a JSON object",
        ));
    };
    let api_version = map.remove("apiVersion");
    let kind = map.remove("kind");
    if let Some(v) = api_version.as_ref().and_then(Value::as_str)
        && !v.is_empty()
        && v != k.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({})",
            k.api_version()
        )));
    }
    if let Some(v) = kind.as_ref().and_then(Value::as_str)
        && !v.is_empty()
        && v != k.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({v}) does not match the expected kind ({})",
            k.kind
        )));
    }
    Ok(())
}

/// Fills or checks metadata.namespace against the request path.
fn settle_namespace(res: ResId, obj: &mut Value, path_ns: &str) -> Result<String, ApiError> {
    if !KINDS[res].namespaced {
        set_meta(obj, "namespace", None);
        return Ok(String::new());
    }
    let body_ns = meta_str(obj, "namespace").to_owned();
    let ns = match (path_ns.is_empty(), body_ns.is_empty()) {
        (true, true) => "default".to_owned(),
        (true, false) => body_ns,
        (false, true) => path_ns.to_owned(),
        (false, false) if body_ns == path_ns => body_ns,
        (false, false) => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    };
    set_meta(obj, "namespace", Some(json!(ns)));
    Ok(ns)
}

fn rv_of(obj: &Value) -> &str {
    meta_str(obj, "resourceVersion")
}

impl State {
    pub fn create(
        &mut self,
        res: ResId,
        path_ns: &str,
        mut obj: Value,
        ctx: WriteCtx,
    ) -> Result<Outcome, ApiError> {
        let k = &KINDS[res];
        take_type(res, &mut obj)?;
        let ns = settle_namespace(res, &mut obj, path_ns)?;
        let mut name = meta_str(&obj, "name").to_owned();
        if k.namespaced {
            match self.namespace_state(&ns) {
                NsState::Active => {}
                NsState::Missing if ctx.origin == Origin::Direct && self.auto_namespaces => {
                    self.ensure_namespace(&ns);
                }
                NsState::Missing => return Err(ApiError::namespace_not_found(&ns)),
                NsState::Terminating => {
                    return Err(ApiError::namespace_terminating(res, &name, &ns));
                }
            }
        }
        let generate = meta_str(&obj, "generateName").to_owned();
        if name.is_empty() && !generate.is_empty() {
            // The registry retries a few times when a generated name collides.
            for _ in 0..8 {
                name = format!("{generate}{}", name_suffix());
                if self.get(res, &ns, &name).is_none() {
                    break;
                }
            }
            set_meta(&mut obj, "name", Some(json!(name)));
        }
        if name.is_empty() {
            let cause = Cause::invalid(
                "metadata.name",
                "Required value: name or generateName is required",
            );
            return Err(ApiError::invalid(res, "", vec![cause]));
        }
        // etcd's create refuses a set rv before it looks for the key; the
        // registry passes that error through as a 500.
        let rv_set = !meta_str(&obj, "resourceVersion").is_empty();
        let given_uid = meta_str(&obj, "uid").to_owned();
        for f in [
            "uid",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            set_meta(&mut obj, f, None);
        }
        let uid = if self.keep_uids && !given_uid.is_empty() {
            given_uid
        } else {
            new_uid()
        };
        set_meta(&mut obj, "uid", Some(json!(uid)));
        set_meta(&mut obj, "creationTimestamp", Some(json!(now_rfc3339())));
        set_initial_generation(res, &mut obj);
        if k.status_subresource && (ctx.origin == Origin::Http || obj.get("status").is_none()) {
            reset_status_on_create(res, &mut obj);
        }
        apply_defaults(res, &mut obj, &mut self.alloc);
        validate(res, &obj, None)?;
        if rv_set {
            return Err(ApiError::unknown(
                500,
                "resourceVersion should not be set on objects to be created",
            ));
        }
        if self.get(res, &ns, &name).is_some() {
            return Err(ApiError::already_exists(res, &name));
        }
        canonicalize(&mut obj);
        let rv = if ctx.dry_run { self.rv } else { self.next_rv() };
        set_meta(&mut obj, "resourceVersion", Some(json!(rv.to_string())));
        let stored = Stored::new(res, &obj, rv);
        if !ctx.dry_run {
            self.put(res, key(&ns, &name), stored.clone());
        }
        Ok(Outcome::object(201, stored))
    }

    /// PUT; `status` selects the /status subresource.
    pub fn update(
        &mut self,
        res: ResId,
        path_ns: &str,
        name: &str,
        mut obj: Value,
        status: bool,
        ctx: WriteCtx,
    ) -> Result<Outcome, ApiError> {
        let k = &KINDS[res];
        take_type(res, &mut obj)?;
        let ns = settle_namespace(res, &mut obj, path_ns)?;
        let body_name = meta_str(&obj, "name");
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let Some(old) = self.get(res, &ns, name) else {
            if k.create_on_update && !status && rv_of(&obj).is_empty() {
                return self.create(res, &ns, obj, ctx);
            }
            return Err(ApiError::not_found(res, name));
        };
        let want_rv = rv_of(&obj);
        if !want_rv.is_empty() && want_rv != old.rv.to_string() {
            return Err(ApiError::modified(res, name));
        }
        if want_rv.is_empty() && !k.unconditional_update && ctx.origin == Origin::Http {
            let cause = Cause::invalid(
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            );
            return Err(ApiError::invalid(res, name, vec![cause]));
        }
        let old_v = old.value();
        let (uid, old_uid) = (meta_str(&obj, "uid"), meta_str(&old_v, "uid"));
        if !uid.is_empty() && uid != old_uid {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}"
            );
            return Err(ApiError::conflict(res, name, &why));
        }
        let mut new = if status {
            let mut n = old_v.clone();
            match obj.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    n.as_object_mut().expect("map").remove("status");
                }
            }
            // A Service's status strategy resets the spec alone: finalizers sent through
            // `status` are kept, as the service controller relies on.
            if k.plural == "services" {
                n["metadata"]["finalizers"] = obj["metadata"]["finalizers"].clone();
            }
            n
        } else {
            obj
        };
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            set_meta(
                &mut new,
                f,
                old_v.get("metadata").and_then(|m| m.get(f)).cloned(),
            );
        }
        let keep_status = ctx.origin == Origin::Http || new.get("status").is_none();
        if !status && k.status_subresource && keep_status {
            match old_v.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    new.as_object_mut().expect("map").remove("status");
                }
            }
        }
        keep_allocated(res, &mut new, &old_v);
        apply_defaults(res, &mut new, &mut self.alloc);
        validate(res, &new, Some(&old_v))?;
        let generation = next_generation(res, &new, &old_v).map(|g| json!(g));
        set_meta(&mut new, "generation", generation);
        canonicalize(&mut new);
        set_meta(&mut new, "resourceVersion", Some(json!(old.rv.to_string())));
        if new == old_v {
            // The real store compares bytes and skips the write: same rv, no event.
            return Ok(Outcome::object(200, old));
        }
        let finalized = new
            .get("metadata")
            .and_then(|m| m.get("deletionTimestamp"))
            .is_some()
            && new["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty)
            && new["metadata"]["deletionGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(0)
                == 0;
        if ctx.dry_run {
            return Ok(Outcome::object(200, Stored::new(res, &new, old.rv)));
        }
        let rv = self.next_rv();
        set_meta(&mut new, "resourceVersion", Some(json!(rv.to_string())));
        let stored = Stored::new(res, &new, rv);
        if finalized {
            // Removing the last finalizer of an object being deleted deletes it.
            self.remove(res, &key(&ns, name), stored.clone());
        } else {
            self.put(res, key(&ns, name), stored.clone());
        }
        Ok(Outcome::object(200, stored))
    }

    /// PATCH: merge and strategic merge (treated as merge, but for the finalizers, whose list
    /// strategic merge joins and `$deleteFromPrimitiveList` shortens), plus apply (as
    /// create-or-merge).
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        res: ResId,
        ns: &str,
        name: &str,
        patch: &Value,
        (apply, strategic): (bool, bool),
        status: bool,
        ctx: WriteCtx,
    ) -> Result<Outcome, ApiError> {
        let ns = if KINDS[res].namespaced { ns } else { "" };
        let Some(old) = self.get(res, ns, name) else {
            if apply && !status {
                let mut obj = patch.clone();
                set_meta(&mut obj, "name", Some(json!(name)));
                return self.create(res, ns, obj, ctx);
            }
            return Err(ApiError::not_found(res, name));
        };
        let mut merged = old.value();
        let mut patch = patch.clone();
        if let Some(map) = patch.as_object_mut() {
            map.remove("apiVersion");
            map.remove("kind");
        }
        if strategic {
            strategic_finalizers(&mut merged, &mut patch);
        }
        merge_patch(&mut merged, &patch);
        self.update(res, ns, name, merged, status, ctx)
    }

    pub fn delete(
        &mut self,
        res: ResId,
        ns: &str,
        name: &str,
        opts: &Value,
        ctx: WriteCtx,
    ) -> Result<Outcome, ApiError> {
        let k = &KINDS[res];
        let ns = if k.namespaced { ns } else { "" };
        let policy = propagation_policy(opts)?;
        let Some(old) = self.get(res, ns, name) else {
            return Err(ApiError::not_found(res, name));
        };
        let mut v = old.value();
        let pre = opts.get("preconditions");
        if let Some(uid) = pre.and_then(|p| p.get("uid")).and_then(Value::as_str) {
            let have = meta_str(&v, "uid");
            if uid != have {
                let why = format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
                );
                return Err(ApiError::conflict(res, name, &why));
            }
        }
        if let Some(rv) = pre
            .and_then(|p| p.get("resourceVersion"))
            .and_then(Value::as_str)
        {
            let have = old.rv.to_string();
            if rv != have {
                let why = format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"
                );
                return Err(ApiError::conflict(res, name, &why));
            }
        }
        let has_ts = v["metadata"].get("deletionTimestamp").is_some();
        if res == NAMESPACES {
            // Namespaces go Terminating; the namespace controller (finish_namespace) empties them.
            if has_ts {
                return Ok(Outcome::object(200, old));
            }
            set_meta(&mut v, "deletionTimestamp", Some(json!(now_rfc3339())));
            v["status"] = json!({"phase": "Terminating"});
            return Ok(Outcome::object(200, self.rewrite(res, ns, name, v, ctx)));
        }
        let grace = if k.plural == "pods" {
            let scheduled = !v["spec"]["nodeName"].as_str().unwrap_or("").is_empty();
            let done = matches!(v["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
            let asked = opts.get("gracePeriodSeconds").and_then(Value::as_i64);
            let default = v["spec"]["terminationGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(30);
            if scheduled && !done {
                asked.unwrap_or(default).max(0)
            } else {
                0
            }
        } else {
            0
        };
        let cur = v["metadata"]["deletionGracePeriodSeconds"].as_i64();
        // A pending graceful deletion is only ever shortened; its finalizers stay as they are.
        let pending = has_ts && cur.is_some_and(|c| c > 0);
        let fin_changed = !pending && gc_finalizers(&mut v, policy);
        let finalizers = v["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if grace > 0 || finalizers {
            if has_ts && cur.is_some_and(|c| c <= grace) && !fin_changed {
                return Ok(Outcome::object(200, old));
            }
            if !has_ts || cur.is_some_and(|c| c > grace) {
                set_meta(
                    &mut v,
                    "deletionTimestamp",
                    Some(json!(later_rfc3339(grace))),
                );
            }
            set_meta(&mut v, "deletionGracePeriodSeconds", Some(json!(grace)));
            return Ok(Outcome::object(200, self.rewrite(res, ns, name, v, ctx)));
        }
        let uid = meta_str(&v, "uid").to_owned();
        let last = if ctx.dry_run {
            old
        } else {
            // Deleted as stored: a finalizer change that left none is never written.
            let stored = old.value();
            let last = self.purge(res, ns, name, stored);
            if k.plural == "services" && self.services_take_endpoints {
                // kube-apiserver's Service storage deletes the Endpoints of the same name with it.
                if let Some(endpoints) = super::resources::by_name("endpoints")
                    && let Some(held) = self.get(endpoints, ns, name)
                {
                    self.purge(endpoints, ns, name, held.value());
                }
            }
            last
        };
        let reply = if k.return_deleted {
            Reply::Object(last)
        } else {
            Reply::Json(delete_success(res, name, &uid))
        };
        Ok(Outcome { code: 200, reply })
    }

    /// Stores a server-side change to an existing object under a new rv.
    fn rewrite(
        &mut self,
        res: ResId,
        ns: &str,
        name: &str,
        mut v: Value,
        ctx: WriteCtx,
    ) -> Arc<Stored> {
        let rv = if ctx.dry_run { self.rv } else { self.next_rv() };
        set_meta(&mut v, "resourceVersion", Some(json!(rv.to_string())));
        let stored = Stored::new(res, &v, rv);
        if !ctx.dry_run {
            self.put(res, key(ns, name), stored.clone());
        }
        stored
    }

    /// Removes an object now; the DELETED event carries it at the deletion's rv.
    pub fn purge(&mut self, res: ResId, ns: &str, name: &str, mut last: Value) -> Arc<Stored> {
        let rv = self.next_rv();
        set_meta(&mut last, "resourceVersion", Some(json!(rv.to_string())));
        let stored = Stored::new(res, &last, rv);
        self.remove(res, &key(ns, name), stored.clone());
        stored
    }

    pub fn ensure_namespace(&mut self, ns: &str) {
        if self.namespace_state(ns) == NsState::Missing {
            let ctx = WriteCtx {
                origin: Origin::Direct,
                dry_run: false,
            };
            let obj = json!({"metadata": {"name": ns}});
            self.create(NAMESPACES, "", obj, ctx)
                .expect("creating a missing namespace succeeds");
        }
    }

    /// The namespace controller's job: delete everything in `ns`, then `ns`.
    pub fn finish_namespace(&mut self, ns: &str) {
        // The collector waits: the purge would remove what it collects anyway.
        self.gc_hold(true);
        for (res, kind) in KINDS.iter().enumerate() {
            if !kind.namespaced {
                continue;
            }
            for obj in self.all(res, ns) {
                let v = obj.value();
                self.purge(res, ns, &obj.name, v);
            }
        }
        self.gc_hold(false);
        if let Some(obj) = self.get(NAMESPACES, "", ns) {
            let mut v = obj.value();
            if v["metadata"].get("deletionTimestamp").is_none() {
                set_meta(&mut v, "deletionTimestamp", Some(json!(now_rfc3339())));
            }
            v["status"] = json!({"phase": "Terminating"});
            v["spec"]["finalizers"] = json!([]);
            self.purge(NAMESPACES, "", ns, v);
        }
        self.gc_run();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Propagation {
    Orphan,
    Background,
    Foreground,
}

/// DeleteOptions' propagationPolicy (or the older orphanDependents), validated as upstream
/// validates it; None when neither is given.
fn propagation_policy(opts: &Value) -> Result<Option<Propagation>, ApiError> {
    let policy = opts.get("propagationPolicy").and_then(Value::as_str);
    let orphan = opts.get("orphanDependents").and_then(Value::as_bool);
    let invalid = ApiError::invalid_delete_options;
    match (policy, orphan) {
        (Some(p), Some(_)) => Err(invalid(Cause::invalid(
            "propagationPolicy",
            &format!(
                "Invalid value: {p:?}: orphanDependents and deletionPropagation cannot be both set"
            ),
        ))),
        (Some("Orphan"), None) | (None, Some(true)) => Ok(Some(Propagation::Orphan)),
        (Some("Background"), None) | (None, Some(false)) => Ok(Some(Propagation::Background)),
        (Some("Foreground"), None) => Ok(Some(Propagation::Foreground)),
        (Some(p), None) => Err(invalid(Cause::not_supported(
            "propagationPolicy",
            p,
            &["Foreground", "Background", "Orphan", "nil"],
        ))),
        (None, None) => Ok(None),
    }
}

/// The registry's deletionFinalizersForGarbageCollection: the policy given (else the GC
/// finalizer already there, else Background) decides the orphan / foregroundDeletion
/// finalizer. Returns whether the finalizers changed.
fn gc_finalizers(v: &mut Value, policy: Option<Propagation>) -> bool {
    let before: Vec<Value> = v["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let has = |f: &str| before.iter().any(|x| x == f);
    let policy = policy.unwrap_or(if has(ORPHAN) {
        Propagation::Orphan
    } else if has(FOREGROUND) {
        Propagation::Foreground
    } else {
        Propagation::Background
    });
    let mut after: Vec<Value> = before
        .iter()
        .filter(|f| *f != ORPHAN && *f != FOREGROUND)
        .cloned()
        .collect();
    match policy {
        Propagation::Orphan => after.push(json!(ORPHAN)),
        Propagation::Foreground => after.push(json!(FOREGROUND)),
        Propagation::Background => {}
    }
    let sorted = |l: &[Value]| {
        let mut l: Vec<String> = l.iter().map(Value::to_string).collect();
        l.sort();
        l
    };
    if sorted(&after) == sorted(&before) {
        return false;
    }
    set_meta(v, "finalizers", (!after.is_empty()).then(|| json!(after)));
    true
}

/// Strategic merge of `metadata.finalizers` (patch strategy "merge"): the patch's finalizers are
/// added to the object's, and those under `$deleteFromPrimitiveList/finalizers` removed. Both are
/// taken out of `patch`, which is then merged as a merge patch.
fn strategic_finalizers(object: &mut Value, patch: &mut Value) {
    let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let added = meta.remove("finalizers");
    let deleted = meta.remove("$deleteFromPrimitiveList/finalizers");
    meta.remove("$setElementOrder/finalizers");
    if added.is_none() && deleted.is_none() {
        return;
    }
    let mut list: Vec<Value> = object["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for f in added.iter().filter_map(Value::as_array).flatten() {
        if !list.contains(f) {
            list.push(f.clone());
        }
    }
    for f in deleted.iter().filter_map(Value::as_array).flatten() {
        list.retain(|x| x != f);
    }
    object["metadata"]["finalizers"] = Value::Array(list);
}
