//! The resources served, and the per-kind strategy rules the real registry
//! applies (generation, defaults, status reset, minimal validation).

use serde_json::{Value, json};

use super::json::{path, set_meta};
use super::status::{ApiError, Cause};

/// When `metadata.generation` moves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Generation {
    None,
    /// Bumped when `spec` changes (services, pods).
    Spec,
    /// Bumped when anything outside metadata, or the labels, change
    /// (EndpointSlice's PrepareForUpdate).
    NonMetaOrLabels,
}

#[derive(Debug)]
pub struct Kind {
    pub plural: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub generation: Generation,
    /// Has a /status subresource: main-resource writes keep the old status.
    pub status_subresource: bool,
    pub create_on_update: bool,
    pub unconditional_update: bool,
    /// DELETE answers with the object rather than a success Status.
    pub return_deleted: bool,
    /// Field selector keys beyond metadata.name and metadata.namespace.
    pub fields: &'static [&'static str],
}

pub type ResId = usize;

const fn kind(plural: &'static str, group: &'static str, kind: &'static str) -> Kind {
    Kind {
        plural,
        group,
        version: "v1",
        kind,
        namespaced: true,
        generation: Generation::None,
        status_subresource: false,
        create_on_update: false,
        unconditional_update: true,
        return_deleted: false,
        fields: &[],
    }
}

pub static KINDS: &[Kind] = &[
    Kind {
        namespaced: false,
        status_subresource: true,
        return_deleted: true,
        fields: &["status.phase"],
        ..kind("namespaces", "", "Namespace")
    },
    Kind {
        namespaced: false,
        status_subresource: true,
        fields: &["spec.unschedulable"],
        ..kind("nodes", "", "Node")
    },
    Kind {
        generation: Generation::Spec,
        status_subresource: true,
        return_deleted: true,
        fields: &["spec.clusterIP", "spec.type"],
        ..kind("services", "", "Service")
    },
    Kind {
        generation: Generation::Spec,
        status_subresource: true,
        return_deleted: true,
        fields: &["spec.nodeName", "status.phase", "status.podIP"],
        ..kind("pods", "", "Pod")
    },
    Kind {
        create_on_update: true,
        ..kind("endpoints", "", "Endpoints")
    },
    Kind {
        create_on_update: true,
        fields: &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "reason",
            "type",
        ],
        ..kind("events", "", "Event")
    },
    Kind {
        generation: Generation::NonMetaOrLabels,
        ..kind("endpointslices", "discovery.k8s.io", "EndpointSlice")
    },
    Kind {
        create_on_update: true,
        unconditional_update: false,
        ..kind("leases", "coordination.k8s.io", "Lease")
    },
    Kind {
        create_on_update: true,
        fields: &["regarding.kind", "regarding.name", "reason", "type"],
        ..kind("events", "events.k8s.io", "Event")
    },
    // MetalLB's custom resource, as its CRD serves it.
    Kind {
        version: "v1beta1",
        generation: Generation::Spec,
        ..kind("ipaddresspools", "metallb.io", "IPAddressPool")
    },
];

pub const NAMESPACES: ResId = 0;

impl Kind {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `endpointslices.discovery.k8s.io`, as errors spell it.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `Pod` or `EndpointSlice.discovery.k8s.io`, as Invalid errors spell it.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_owned()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// `{"kind":"Pod","apiVersion":"v1",` — spliced in front of stored bytes.
    pub fn type_prefix(&self) -> String {
        format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",",
            self.kind,
            self.api_version()
        )
    }
}

pub fn by_path(group: &str, version: &str, plural: &str) -> Option<ResId> {
    KINDS
        .iter()
        .position(|k| k.group == group && k.version == version && k.plural == plural)
}

/// Accepts `pods`, `endpointslices`, `endpointslices.discovery.k8s.io`;
/// bare `events` means the core one.
pub fn by_name(name: &str) -> Option<ResId> {
    KINDS
        .iter()
        .position(|k| k.qualified() == name)
        .or_else(|| KINDS.iter().position(|k| k.plural == name))
}

pub fn by_type(api_version: &str, kind: &str) -> Option<ResId> {
    KINDS
        .iter()
        .position(|k| k.api_version() == api_version && k.kind == kind)
}

/// Registry-side defaults (API defaulting plus allocation) on every write.
pub fn apply_defaults(res: ResId, obj: &mut Value, alloc: &mut Allocator) {
    match KINDS[res].plural {
        "services" => default_service(obj, alloc),
        "pods" => default_pod(obj),
        "endpointslices" => default_ports(obj.get_mut("ports")),
        "endpoints" => {
            if let Some(subsets) = obj.get_mut("subsets").and_then(Value::as_array_mut) {
                for s in subsets {
                    default_ports(s.get_mut("ports"));
                }
            }
        }
        "namespaces" => {
            let spec = ensure_map(obj, "spec");
            spec.entry("finalizers")
                .or_insert_with(|| json!(["kubernetes"]));
            let status = ensure_map(obj, "status");
            status.entry("phase").or_insert_with(|| json!("Active"));
        }
        _ => {}
    }
}

fn ensure_map<'a>(obj: &'a mut Value, key: &str) -> &'a mut serde_json::Map<String, Value> {
    let root = obj.as_object_mut().expect("objects are maps");
    let v = root.entry(key).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    v.as_object_mut().expect("just made a map")
}

fn default_ports(ports: Option<&mut Value>) {
    for p in ports.and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(p) = p.as_object_mut() {
            p.entry("protocol").or_insert_with(|| json!("TCP"));
        }
    }
}

fn default_pod(obj: &mut Value) {
    let spec = ensure_map(obj, "spec");
    spec.entry("restartPolicy")
        .or_insert_with(|| json!("Always"));
    spec.entry("dnsPolicy")
        .or_insert_with(|| json!("ClusterFirst"));
    spec.entry("schedulerName")
        .or_insert_with(|| json!("default-scheduler"));
    spec.entry("terminationGracePeriodSeconds")
        .or_insert_with(|| json!(30));
    for c in spec
        .get_mut("containers")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        default_ports(c.get_mut("ports"));
    }
}

/// Hands out ClusterIPs (10.96.0.0/12) and node ports (30000-32767).
#[derive(Debug, Default)]
pub struct Allocator {
    next_ip: u32,
    next_node_port: u32,
}

impl Allocator {
    fn cluster_ip(&mut self) -> String {
        self.next_ip += 1;
        let n = self.next_ip;
        format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff)
    }

    fn node_port(&mut self) -> u32 {
        let p = 30000 + self.next_node_port % 2768;
        self.next_node_port += 1;
        p
    }
}

fn default_service(obj: &mut Value, alloc: &mut Allocator) {
    let spec = ensure_map(obj, "spec");
    let ty = spec
        .entry("type")
        .or_insert_with(|| json!("ClusterIP"))
        .as_str()
        .unwrap_or("ClusterIP")
        .to_owned();
    spec.entry("sessionAffinity")
        .or_insert_with(|| json!("None"));
    for p in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let Some(p) = p.as_object_mut() else { continue };
        p.entry("protocol").or_insert_with(|| json!("TCP"));
        if let Some(port) = p.get("port").cloned() {
            p.entry("targetPort").or_insert(port);
        }
        if (ty == "NodePort" || ty == "LoadBalancer") && !p.contains_key("nodePort") {
            p.insert("nodePort".into(), json!(alloc.node_port()));
        }
    }
    if ty == "ExternalName" {
        return;
    }
    let ip = match spec.get("clusterIP").and_then(Value::as_str) {
        Some(ip) if !ip.is_empty() => ip.to_owned(),
        _ => {
            let ip = alloc.cluster_ip();
            spec.insert("clusterIP".into(), json!(ip));
            ip
        }
    };
    spec.entry("clusterIPs").or_insert_with(|| json!([ip]));
    spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
    spec.entry("ipFamilyPolicy")
        .or_insert_with(|| json!("SingleStack"));
    spec.entry("internalTrafficPolicy")
        .or_insert_with(|| json!("Cluster"));
    if ty == "NodePort" || ty == "LoadBalancer" {
        spec.entry("externalTrafficPolicy")
            .or_insert_with(|| json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        spec.entry("allocateLoadBalancerNodePorts")
            .or_insert_with(|| json!(true));
    }
}

/// Service updates that omit allocated values keep the old ones, as the
/// service REST's patchAllocatedValues does for clients that do not round-trip.
pub fn keep_allocated(res: ResId, new: &mut Value, old: &Value) {
    if KINDS[res].plural != "services" {
        return;
    }
    let old_spec = old.get("spec").cloned().unwrap_or_default();
    let spec = ensure_map(new, "spec");
    for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        let unset = match spec.get(key) {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if let (true, Some(v)) = (unset, old_spec.get(key)) {
            spec.insert(key.into(), v.clone());
        }
    }
}

/// Status as the create strategy leaves it for writes through HTTP.
pub fn reset_status_on_create(res: ResId, obj: &mut Value) {
    let root = obj.as_object_mut().expect("objects are maps");
    match KINDS[res].plural {
        "pods" => {
            root.insert("status".into(), json!({"phase": "Pending"}));
        }
        "services" => {
            root.insert("status".into(), json!({"loadBalancer": {}}));
        }
        "namespaces" => {
            root.insert("status".into(), json!({"phase": "Active"}));
        }
        _ => {}
    }
}

/// New generation for an update, per the kind's strategy.
pub fn next_generation(res: ResId, new: &Value, old: &Value) -> Option<i64> {
    let old_gen = path(old, "metadata.generation").and_then(Value::as_i64);
    let changed = match KINDS[res].generation {
        Generation::None => return old_gen,
        Generation::Spec => new.get("spec") != old.get("spec"),
        Generation::NonMetaOrLabels => {
            let strip = |v: &Value| {
                let mut m = v.as_object().cloned().unwrap_or_default();
                for k in ["metadata", "kind", "apiVersion"] {
                    m.remove(k);
                }
                m
            };
            strip(new) != strip(old) || path(new, "metadata.labels") != path(old, "metadata.labels")
        }
    };
    let g = old_gen.unwrap_or(1);
    Some(if changed { g + 1 } else { g })
}

pub fn set_initial_generation(res: ResId, obj: &mut Value) {
    if KINDS[res].generation != Generation::None {
        set_meta(obj, "generation", Some(json!(1)));
    }
}

/// The validation this fake enforces (a small, high-value subset).
pub fn validate(res: ResId, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let k = &KINDS[res];
    let name = super::json::meta_str(obj, "name");
    let mut causes = Vec::new();
    if k.plural == "endpointslices" {
        let at = obj.get("addressType").and_then(Value::as_str).unwrap_or("");
        if !["IPv4", "IPv6", "FQDN"].contains(&at) {
            causes.push(Cause::required_or_invalid("addressType", at));
        }
        if let Some(old) = old {
            let old_at = old.get("addressType").and_then(Value::as_str).unwrap_or("");
            if old_at != at {
                causes.push(Cause::immutable("addressType", at));
            }
        }
        let endpoints = obj.get("endpoints").and_then(Value::as_array);
        if endpoints.map_or(0, Vec::len) > 1000 {
            causes.push(Cause::too_many("endpoints", 1000));
        }
        for (i, ep) in endpoints.into_iter().flatten().enumerate() {
            let n = ep
                .get("addresses")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if n == 0 || n > 100 {
                causes.push(Cause::invalid(
                    &format!("endpoints[{i}].addresses"),
                    "must contain at least 1 and at most 100 addresses",
                ));
            }
        }
        if obj
            .get("ports")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
            > 100
        {
            causes.push(Cause::too_many("ports", 100));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(res, name, causes))
    }
}
