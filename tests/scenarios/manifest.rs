//! Loading manifests: formats, Lists, skipped kinds, error messages and the slice round trip.

use std::net::IpAddr;
use std::process::Command;

use sliced::kube::convert::object_to_json;
use sliced::kube::manifest::{LoadError, Manifest, load_reader, load_str};
use sliced::model::{
    Address, AddressType, ClusterIp, IpFamily, PodPhase, Protocol, ServiceType, TargetPort,
};
use sliced::sink::Object;

mod json_items;
mod malformed;
mod yaml_items;

/// The objects kube-controller-manager 1.36 wrote and read (`fixtures/upstream-1.36/cluster.json`).
pub(crate) fn upstream_items() -> Vec<serde_json::Value> {
    const CLUSTER: &str = include_str!("../../fixtures/upstream-1.36/cluster.json");
    let list: serde_json::Value = serde_json::from_str(CLUSTER).unwrap();
    list["items"].as_array().unwrap().clone()
}

/// A List of `copies` copies of the upstream objects, each copy's namespaced ones in a namespace
/// of their own: a large file of real objects.
pub(crate) fn upstream_copies(copies: usize) -> serde_json::Value {
    let items: Vec<serde_json::Value> = (0..copies)
        .flat_map(|n| {
            upstream_items().into_iter().map(move |mut item| {
                if item["metadata"]["namespace"].is_string() {
                    item["metadata"]["namespace"] = format!("copy-{n}").into();
                }
                item
            })
        })
        .collect();
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// Loads `text` written to a file (mapped, its pages let go behind the decoding once past
/// 16 MB), and checks it loads what `from_text` (the same text, loaded from memory) holds.
pub(crate) fn assert_file_loads_as_text(text: &str, extension: &str, from_text: &Manifest) {
    assert!(text.len() > 20 << 20, "{} bytes", text.len());
    let path =
        std::env::temp_dir().join(format!("sliced-large-{}.{extension}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let from_file = sliced::kube::manifest::load_file(&path);
    let _ = std::fs::remove_file(&path);
    let from_file = from_file.unwrap();
    assert_eq!(from_file.objects.pods, from_text.objects.pods);
    assert_eq!(
        from_file.objects.endpoint_slices,
        from_text.objects.endpoint_slices
    );
    assert_eq!(from_file.given.len(), from_text.given.len());
}

/// `a` and `b` load the same objects, warnings and objects as given, or fail with the same words.
pub(crate) fn assert_alike(
    case: &str,
    a: Result<Manifest, LoadError>,
    b: Result<Manifest, LoadError>,
) {
    match (a, b) {
        (Ok(a), Ok(b)) => {
            let (f, v) = (&a.objects, &b.objects);
            assert_eq!(f.services, v.services, "{case}: services");
            assert_eq!(f.pods, v.pods, "{case}: pods");
            assert_eq!(f.nodes, v.nodes, "{case}: nodes");
            assert_eq!(f.namespaces, v.namespaces, "{case}: namespaces");
            assert_eq!(f.endpoint_slices, v.endpoint_slices, "{case}: slices");
            assert_eq!(f.endpoints, v.endpoints, "{case}: endpoints");
            assert_eq!(a.warnings, b.warnings, "{case}: warnings");
            let mut keys: Vec<_> = a.given.keys().collect();
            keys.sort();
            let mut other_keys: Vec<_> = b.given.keys().collect();
            other_keys.sort();
            assert_eq!(keys, other_keys, "{case}: objects as given");
            for (key, given) in &a.given {
                assert_eq!(
                    given.to_value().unwrap(),
                    b.given[key].to_value().unwrap(),
                    "{case}: {key:?} as given"
                );
            }
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{case}: error"),
        (a, b) => panic!(
            "{case}: one path gave {:?}, the other {:?}",
            a.map(|m| m.len()),
            b.map(|m| m.len())
        ),
    }
}

fn load(text: &str) -> Manifest {
    match load_str("test.yaml", text) {
        Ok(m) => m,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

pub(crate) fn load_err(file: &str, text: &str) -> (String, LoadError) {
    match load_str(file, text) {
        Ok(m) => panic!("expected an error, loaded {m:?}"),
        Err(e) => (e.to_string(), e),
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const CLUSTER: &str = r#"
# A comment before the first document.
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  labels: {app: web}
spec:
  selector:
    app: web
  clusterIP: 10.96.0.10
  ipFamilies: [IPv4]
  trafficDistribution: PreferClose
  ports:
  - name: http
    port: 80
    targetPort: http-port
  - port: 53
    protocol: UDP
  - port: 8443
    targetPort: 443
    nodePort: 30443
---
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: shop
  labels: {app: web}
spec:
  nodeName: node-a
  hostname: ""
  containers:
  - name: app
    ports:
    - {name: http-port, containerPort: 8080}
    - {containerPort: 9090}
  initContainers:
  - name: proxy
    restartPolicy: Always
    ports:
    - {name: proxy, containerPort: 15001, protocol: TCP}
  - name: setup
    ports:
    - {name: setup, containerPort: 1}
status:
  phase: Running
  podIP: 10.0.0.5
  podIPs:
  - ip: 10.0.0.5
  - ip: fd00::5
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2024-05-01T10:00:00Z"
---
apiVersion: v1
kind: Pod
metadata: {name: web-2, namespace: shop}
spec:
  containers:
  - name: app
    ports:
    - {name: http-port, containerPort: 8080}
status:
  podIP: 010.000.000.006
---
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {topology.kubernetes.io/zone: zone-a}
status:
  allocatable: {cpu: 3500m}
  conditions:
  - {type: Ready, status: "True"}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
status: {phase: Terminating}
---
apiVersion: v1
kind: Service
metadata: {name: headless}
spec:
  clusterIP: None
  selector: {}
"#;

#[test]
fn multi_document_yaml() {
    let m = load(CLUSTER);
    assert_eq!(m.objects.services.len(), 2);
    assert_eq!(m.objects.pods.len(), 2);
    assert_eq!((m.objects.nodes.len(), m.objects.namespaces.len()), (1, 1));
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);

    let web = &m.objects.services[0];
    assert_eq!(web.meta.key(), "shop/web");
    assert_eq!(web.service_type, ServiceType::ClusterIp);
    assert_eq!(web.cluster_ip, ClusterIp::Ip(ip("10.96.0.10")));
    assert_eq!(web.ip_families.as_slice(), [IpFamily::V4]);
    assert_eq!(web.traffic_distribution.as_deref(), Some("PreferClose"));
    assert_eq!(web.selector.as_ref().map(|s| s.len()), Some(1));
    let ports = &web.ports;
    assert_eq!(ports[0].target_port, TargetPort::Name("http-port".into()));
    assert_eq!(
        (ports[1].name.as_str(), ports[1].protocol),
        ("", Protocol::Udp)
    );
    assert_eq!(ports[1].target_port, TargetPort::Number(53));
    assert_eq!(ports[2].target_port, TargetPort::Number(443));
    assert_eq!(ports[2].node_port, Some(30443));

    let headless = &m.objects.services[1];
    assert_eq!(headless.meta.key(), "default/headless");
    assert_eq!(headless.cluster_ip, ClusterIp::Headless);
    // The API server stores `selector: {}` as no selector.
    assert_eq!(headless.selector, None);

    let pod = &m.objects.pods[0];
    assert_eq!(pod.phase, PodPhase::Running);
    assert_eq!(pod.ips(), [ip("10.0.0.5"), ip("fd00::5")]);
    assert!(pod.has_pod_ip && pod.ready);
    assert_eq!(
        pod.ready_transition().map(|t| t.to_string()).as_deref(),
        Some("2024-05-01T10:00:00Z")
    );
    assert_eq!(pod.node_name.as_deref(), Some("node-a"));
    assert_eq!(pod.hostname(), None);
    let named: Vec<_> = pod
        .named_ports
        .iter()
        .map(|p| (p.name.as_str(), p.port, p.sidecar))
        .collect();
    assert_eq!(named, [("http-port", 8080, false), ("proxy", 15001, true)]);

    // Only podIP given: podIPs follows it, as the API server fills it. Leading zeros are decimal.
    let pod2 = &m.objects.pods[1];
    assert_eq!(pod2.phase, PodPhase::Pending);
    assert_eq!(pod2.ips(), [ip("10.0.0.6")]);
    assert!(!pod2.ready);

    let node = &m.objects.nodes[0];
    assert_eq!(
        (node.name.as_str(), node.ready, node.allocatable_cpu_millis),
        ("node-a", true, 3500)
    );
    assert_eq!(node.zone().map(|z| z.as_str()), Some("zone-a"));
    assert!(m.objects.namespaces[0].terminating);
}

#[test]
fn pods_of_a_template_share_named_ports() {
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: c\n    ports: [{{name: http, containerPort: 80}}]\n"
        )
    };
    let m = load(&format!("{}---\n{}", pod("a"), pod("b")));
    assert!(std::sync::Arc::ptr_eq(
        &m.objects.pods[0].named_ports,
        &m.objects.pods[1].named_ports
    ));
}

#[test]
fn lists_and_nested_lists() {
    let text = r#"
apiVersion: v1
kind: Node
metadata: {name: n0}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
- apiVersion: v1
  kind: List
  items:
  - {apiVersion: v1, kind: Namespace, metadata: {name: ns1}}
  - apiVersion: v1
    kind: List
    items:
    - {apiVersion: v1, kind: Namespace, metadata: {name: ns2}}
- apiVersion: v1
  kind: PodList
  items:
  - metadata: {name: p1}
  - metadata: {name: p2, namespace: other}
"#;
    let m = load(text);
    let nodes: Vec<_> = m.objects.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(nodes, ["n0", "n1"]);
    let namespaces: Vec<_> = m
        .objects
        .namespaces
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(namespaces, ["ns1", "ns2"]);
    let pods: Vec<_> = m.objects.pods.iter().map(|p| p.meta.key()).collect();
    assert_eq!(pods, ["default/p1", "other/p2"]);

    // Errors inside lists name the item, one number per level.
    let bad = text.replace("{name: ns2}", "{namespace: x}");
    let (msg, err) = load_err("l.yaml", &bad);
    assert_eq!(
        msg,
        "l.yaml: document 2, item 2, item 2, item 1 (Namespace (no name)): metadata.name: name is required"
    );
    assert_eq!(
        err.position().map(|p| p.items.as_slice()),
        Some(&[2, 2, 1][..])
    );
}

#[test]
fn json_input() {
    let single = r#"{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}"#;
    let m = load(single);
    assert_eq!(
        m.objects.services[0].ports[0].target_port,
        TargetPort::Number(8080)
    );

    let list = r#"{"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b"}}]}"#;
    assert_eq!(load(list).objects.nodes.len(), 2);

    let array = r#"[{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}}]"#;
    assert_eq!(load(array).objects.nodes.len(), 1);

    let stream = "{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"a\"}}\n\
                  {\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": 5}}";
    // A name that is not a string is no name: the object is labelled "(no name)", not "5".
    let (msg, err) = load_err("x.json", stream);
    assert_eq!(
        msg,
        "x.json: document 2 (Node (no name)): metadata.name: invalid type: integer `5`, expected a string"
    );
    assert_eq!(err.path(), Some("metadata.name"));

    let (msg, err) = load_err("x.json", "{\"apiVersion\": \"v1\",\n \"kind\": }");
    assert_eq!(
        msg,
        "x.json: document 1: invalid JSON: expected value at line 2 column 10"
    );
    assert!(
        matches!(err, LoadError::Syntax { format: "JSON", .. }),
        "{err:?}"
    );

    // Flow-style YAML is YAML.
    let flow = "{apiVersion: v1, kind: Node, metadata: {name: a}}\n---\n[{apiVersion: v1, kind: Node, metadata: {name: b}}]";
    assert_eq!(load(flow).objects.nodes.len(), 2);

    let m = load_reader("<stdin>", single.as_bytes()).unwrap();
    assert_eq!(m.objects.services.len(), 1);
}

#[test]
fn unknown_kinds_are_skipped_with_a_warning() {
    let text = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\n---\n\
                apiVersion: v1\nkind: ConfigMap\nmetadata: {name: foo, namespace: default}\n---\n\
                apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: s}\n";
    let m = load_str("fixtures/x.yaml", text).unwrap();
    assert_eq!(m.objects.nodes.len(), 1);
    assert_eq!(
        m.warnings,
        [
            "fixtures/x.yaml: document 3: skipping ConfigMap default/foo: sliced reads Services, Pods, Nodes, Namespaces, EndpointSlices, Endpoints and IPAddressPools",
            "fixtures/x.yaml: document 4: skipping EndpointSlice default/s: apiVersion \"discovery.k8s.io/v1beta1\" is not supported (want discovery.k8s.io/v1)",
        ]
    );
}

#[test]
fn merging_manifests() {
    let mut m = load("apiVersion: v1\nkind: Node\nmetadata: {name: a}\n");
    m.merge(load("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: b}\n"));
    assert_eq!(m.objects.nodes.len(), 2);
    assert_eq!(m.warnings.len(), 1);
    assert_eq!(m.len(), 2);
}

#[test]
fn port_out_of_range() {
    let text = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\n\
                apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports:\n  - port: 80\n  - port: 70000\n";
    let (msg, _) = load_err("fixtures/bad.yaml", text);
    assert_eq!(
        msg,
        "fixtures/bad.yaml: document 2 (Service default/web): spec.ports[1].port: 70000 is not a valid port number (1-65535)"
    );
}

#[test]
fn bad_yaml_syntax() {
    let text = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\nkind: Service\nmetadata: {name: web\n";
    let (msg, err) = load_err("fixtures/bad.yaml", text);
    assert_eq!(
        msg,
        "fixtures/bad.yaml: document 2: invalid YAML: unclosed bracket '{' at line 6, column 11"
    );
    assert!(
        matches!(err, LoadError::Syntax { format: "YAML", .. }),
        "{err:?}"
    );
    assert_eq!(err.position().map(|p| p.document), Some(2));
    let (msg, _) = load_err("f.yaml", "a: 1\n---\nb: 2\n  c: 3\n");
    assert_eq!(
        msg,
        "f.yaml: document 2: invalid YAML: mapping values are not allowed in this context at line 4, column 4"
    );
    let (msg, _) = load_err("f.yaml", "a: 1\na: 2\n");
    assert_eq!(
        msg,
        "f.yaml: document 1: invalid YAML: duplicate mapping key: a at line 2, column 1"
    );
}

#[test]
fn not_an_object() {
    let (msg, _) = load_err("s.yaml", "just a string\n");
    assert_eq!(
        msg,
        "s.yaml: document 1: expected a Kubernetes object (a mapping), found a string"
    );
    let (msg, _) = load_err("s.yaml", "apiVersion: v1\nkind: List\nitems: 3\n");
    assert_eq!(
        msg,
        "s.yaml: document 1 (List): items: expected a list, found a number"
    );
}

#[test]
fn slice_address_types() {
    let m = load(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {generateName: web-}\n\
         addressType: FQDN\nendpoints: [{addresses: [example.com]}]\n",
    );
    let slice = &m.objects.endpoint_slices[0];
    assert_eq!(slice.generate_name.as_deref(), Some("web-"));
    assert_eq!(slice.address_type, AddressType::Fqdn);
    let address = &slice.endpoints[0].addresses[0];
    assert_eq!(*address, Address::Text("example.com".into()));
    // IPv4-mapped IPv6 counts as IPv4, as in Go.
    let m = load(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s}\n\
         addressType: IPv4\nendpoints: [{addresses: [\"::ffff:10.0.0.1\", 010.0.0.2]}]\n",
    );
    let addresses = &m.objects.endpoint_slices[0].endpoints[0].addresses;
    let want = [Address::Ip(ip("10.0.0.1")), Address::Ip(ip("10.0.0.2"))];
    assert_eq!(addresses.as_slice(), want);
}

/// Every field the model keeps, in the form the API server serves.
const FULL_SLICE: &str = r#"{
  "apiVersion": "discovery.k8s.io/v1",
  "kind": "EndpointSlice",
  "metadata": {
    "name": "web-abc12",
    "generateName": "web-",
    "namespace": "shop",
    "uid": "0b5c5d3e-1111-2222-3333-444455556666",
    "resourceVersion": "12345",
    "generation": 3,
    "creationTimestamp": "2024-05-01T10:00:00Z",
    "deletionTimestamp": "2024-05-02T11:30:00Z",
    "labels": {
      "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
      "kubernetes.io/service-name": "web"
    },
    "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2024-05-01T09:59:59Z"},
    "ownerReferences": [{
      "apiVersion": "v1", "kind": "Service", "name": "web",
      "uid": "aaaa-bbbb", "controller": true, "blockOwnerDeletion": true
    }]
  },
  "addressType": "IPv6",
  "ports": [
    {"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"},
    {"name": "", "port": 53, "protocol": "UDP"},
    {}
  ],
  "endpoints": [
    {
      "addresses": ["fd00::1", "fd00::2"],
      "conditions": {"ready": true, "serving": true, "terminating": false},
      "hostname": "web-1",
      "nodeName": "node-a",
      "zone": "zone-a",
      "hints": {"forZones": [{"name": "zone-a"}], "forNodes": [{"name": "node-a"}]},
      "targetRef": {
        "apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "web-1",
        "uid": "pod-uid-1", "resourceVersion": "999"
      }
    },
    {"addresses": ["fd00::3"], "conditions": {}},
    {"addresses": ["fd00::4"], "conditions": {"ready": false}, "hints": {}}
  ]
}"#;

#[test]
fn endpoint_slice_round_trip() {
    let m = load(FULL_SLICE);
    let slice = &m.objects.endpoint_slices[0];
    assert_eq!(slice.endpoints[0].addresses[1], Address::Ip(ip("fd00::2")));
    assert!(slice.is_owned_by("aaaa-bbbb"));
    let want: serde_json::Value = serde_json::from_str(FULL_SLICE).unwrap();
    let got = object_to_json(&Object::from(slice.clone())).unwrap();
    assert_eq!(
        got,
        want,
        "\n{}",
        serde_json::to_string_pretty(&got).unwrap()
    );

    // And once more through YAML: what sliced writes reads back the same.
    let yaml = serde_saphyr::to_string(&got).unwrap();
    let again = load(&yaml);
    assert_eq!(&again.objects.endpoint_slices[0], slice);
}

#[test]
fn new_slice_has_generate_name_and_empty_lists() {
    let m = load(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {generateName: web-, namespace: ns}\naddressType: IPv4\nendpoints:\n",
    );
    let got = object_to_json(&Object::from(m.objects.endpoint_slices[0].clone())).unwrap();
    let want = serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"generateName": "web-", "namespace": "ns"},
        "addressType": "IPv4",
        "ports": [],
        "endpoints": [],
    });
    assert_eq!(got, want);
}

#[test]
fn endpoints_round_trip() {
    let text = r#"{
      "apiVersion": "v1", "kind": "Endpoints",
      "metadata": {"name": "web", "namespace": "shop", "labels": {"a": "b"}, "resourceVersion": "7"},
      "subsets": [{
        "addresses": [{"ip": "10.0.0.1", "hostname": "h", "nodeName": "n",
                       "targetRef": {"kind": "Pod", "namespace": "shop", "name": "p", "uid": "u"}}],
        "notReadyAddresses": [{"ip": "fd00::1"}],
        "ports": [{"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "http"}]
      }]
    }"#;
    let m = load(text);
    let got = object_to_json(&Object::from(m.objects.endpoints[0].clone())).unwrap();
    assert_eq!(
        got,
        serde_json::from_str::<serde_json::Value>(text).unwrap()
    );
}

/// Truncations and byte substitutions of a valid manifest give errors or objects, never panics.
#[test]
fn nothing_panics() {
    let texts = [CLUSTER, FULL_SLICE];
    for text in texts {
        let bytes = text.as_bytes();
        for cut in (0..bytes.len()).step_by(7) {
            if let Ok(prefix) = std::str::from_utf8(&bytes[..cut]) {
                let _ = load_str("t", prefix);
            }
        }
        for (i, replacement) in (0..bytes.len()).step_by(5).zip(
            [b'0', b'-', b':', b'"', b' ', b'x', b'9', b'[', b'.']
                .iter()
                .cycle(),
        ) {
            let mut mutated = bytes.to_vec();
            mutated[i] = *replacement;
            if let Ok(s) = std::str::from_utf8(&mutated) {
                let _ = load_str("t", s);
            }
        }
    }
    for odd in [
        "",
        "---",
        "- 1\n- 2\n",
        "[]",
        "{}",
        "null",
        "[1]",
        "~\n---\n~",
        "&a [*a]",
        "kind: List\napiVersion: v1\nitems: 3\n",
        "\u{feff}{}",
        "{apiVersion: v1, kind: Node, metadata: {name: flow}}",
        "[{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": 1}}]",
    ] {
        let _ = load_str("t", odd);
    }
}

/// Deep nesting is refused with a syntax error that names the document, the limit hit and where,
/// and never overflows the stack: JSON past serde_json's recursion limit (128), YAML past the
/// parser's depth budget (64) or its recursion limit. Shallower nesting is read as usual: a deep
/// value under a field sliced does not read is skipped (in JSON at any depth), one where an object
/// is expected is a type error.
#[test]
fn deep_nesting_is_refused() {
    let pod = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"#;
    let shapes = |depth: usize| {
        let flow = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let block: String = (0..depth.min(2000))
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        [
            ("json list", flow.clone()),
            ("yaml flow", format!("a: {flow}")),
            ("unread field", format!("{pod}\"x\": {flow}}}}}")),
            ("containers", format!("{pod}\"containers\": {flow}}}}}")),
            ("yaml block", block),
            (
                "yaml flow map",
                format!("{}{}", "{a: ".repeat(depth), "}".repeat(depth)),
            ),
        ]
    };
    // The 64-deep budget, in plain words (the parser's own are "Depth { depth: 65 }").
    let depth_budget =
        |at: &str| format!("t: document 1: invalid YAML: nested deeper than 64 levels at {at}");
    let json_limit = |column: u32| {
        format!("t: document 1: invalid JSON: recursion limit exceeded at line 1 column {column}")
    };
    let yaml_limit = |column: u32| {
        format!("t: document 1: invalid YAML: recursion limit exceeded at line 1, column {column}")
    };
    let shallow: [Option<String>; 6] = [
        Some("t: document 1, item 1: expected a Kubernetes object (a mapping), found a list".into()),
        Some(depth_budget("line 1, column 67")),
        None,
        Some("t: document 1 (Pod default/p): spec.containers[0]: invalid type: sequence, expected Container".into()),
        Some(depth_budget("line 65, column 65")),
        Some(depth_budget("line 1, column 257")),
    ];
    // JSON skips a field sliced does not read without recursing (as the watch does), so depth
    // there is harmless and is not refused; Go's decoder, kubectl's, allows 10,000 levels.
    let deep: [Option<String>; 6] = [
        Some(json_limit(128)),
        Some(yaml_limit(259)),
        None,
        Some(json_limit(212)),
        Some(depth_budget("line 65, column 65")),
        Some(yaml_limit(1021)),
    ];
    for (depth, want) in [(100, &shallow), (1000, &deep), (100_000, &deep)] {
        for ((shape, text), want) in shapes(depth).iter().zip(want) {
            match (load_str("t", text), want) {
                (Ok(m), None) => assert_eq!(m.len(), 1, "{shape} at depth {depth}"),
                (Ok(m), Some(want)) => {
                    panic!("{shape} at depth {depth}: loaded {m:?}, want {want:?}")
                }
                (Err(e), None) => panic!("{shape} at depth {depth}: {e}"),
                (Err(e), Some(want)) => {
                    assert_eq!(&e.to_string(), want, "{shape} at depth {depth}");
                    let refused_for_depth =
                        want.contains("recursion limit") || want.contains("nested deeper");
                    assert_eq!(
                        matches!(e, LoadError::Syntax { .. }),
                        refused_for_depth,
                        "{shape} at depth {depth}: {e:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn zero_or_empty_target_port_defaults_to_the_port() {
    // As the API server defaults them when it stores the Service.
    let m = load(
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{name: a, port: 80, targetPort: 0}, {name: b, port: 81, targetPort: \"\"}]}}",
    );
    let ports = &m.objects.services[0].ports;
    assert_eq!(ports[0].target_port, TargetPort::Number(80));
    assert_eq!(ports[1].target_port, TargetPort::Number(81));
}

/// Runs `sliced reconcile -f` on `text` in a file named `name`: the exit code and the first line
/// of standard error, with the file's path written as `FILE`.
fn reconcile(name: &str, text: &str) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("sliced-manifest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join(name);
    std::fs::write(&file, text).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_sliced"))
        .args(["reconcile", "-o", "json", "-f"])
        .arg(&file)
        .output()
        .expect("run sliced");
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.lines().next().unwrap_or_default();
    (
        out.status.code(),
        line.replace(&file.display().to_string(), "FILE"),
    )
}

/// A null or missing port is reported as such, not as port 0 (which the decoder reads it as), and
/// `reconcile` refuses the file with exit 2.
#[test]
fn a_null_or_missing_port_is_not_port_zero() {
    let service = |port: &str| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: web}}\nspec:\n  ports:\n  - {port}\n"
        )
    };
    for (port, want) in [
        ("port: null", "null, but a value is required"),
        ("port: ~", "null, but a value is required"),
        ("name: http", "missing, but a value is required"),
        ("port: 0", "0 is not a valid port number (1-65535)"),
    ] {
        let (code, line) = reconcile("null-port.yaml", &service(port));
        assert_eq!(
            (code, line.as_str()),
            (
                Some(2),
                format!(
                    "error: FILE: document 1 (Service default/web): spec.ports[0].port: {want}"
                )
                .as_str()
            ),
            "{port}"
        );
    }
    // In an EndpointSlice a port may be null: all ports.
    let m = load(
        "{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: s}, addressType: IPv4, ports: [{name: all, port: null}]}",
    );
    assert_eq!(m.objects.endpoint_slices[0].ports[0].port, None);
}

/// A bad time quotes the value given, not only the part of it that failed.
#[test]
fn a_bad_time_quotes_the_value() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, creationTimestamp: yesterday}\n";
    assert_eq!(
        reconcile("time.yaml", text),
        (
            Some(2),
            "error: FILE: document 1 (Pod default/p): metadata.creationTimestamp: \"yesterday\" is not an RFC 3339 time: failed to parse four digit integer as year: invalid digit, expected 0-9 but got y".to_owned()
        )
    );
}

/// The parser's other budgets are worded plainly too: aliases that repeat one anchor (a "billion
/// laughs") are refused in words, not as "AliasAnchorRatio { aliases: 200, anchors: 1 }".
#[test]
fn budget_breaches_are_in_plain_words() {
    let aliases = vec!["*x"; 200].join(", ");
    let text = format!("a: &x 1\nb: [{aliases}]\n");
    let (msg, err) = load_err("t", &text);
    assert_eq!(
        msg,
        "t: document 1: invalid YAML: too many aliases (`*name`): 200 of 1 anchor (`&name`), more than 10 per anchor at line 3, column 1"
    );
    assert!(
        matches!(err, LoadError::Syntax { format: "YAML", .. }),
        "{err:?}"
    );
    let (code, line) = reconcile(
        "deep.yaml",
        &format!("a: {}{}\n", "[".repeat(100), "]".repeat(100)),
    );
    assert_eq!(
        (code, line.as_str()),
        (
            Some(2),
            "error: FILE: document 1: invalid YAML: nested deeper than 64 levels at line 1, column 67"
        )
    );
}

/// A JSON document followed by `---` and more documents is a YAML stream (JSON is YAML), as
/// kubectl reads it: it reads JSON, and on failure after at most one object reads on as YAML.
/// After two JSON documents without separators, a `---` is refused, as kubectl does, in words.
#[test]
fn json_then_yaml_documents() {
    let node = |name: &str| {
        format!(
            "{{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {{\"name\": \"{name}\"}}}}"
        )
    };
    let text = format!(
        "{}\n---\n[{}]\n---\napiVersion: v1\nkind: Node\nmetadata: {{name: c}}\n",
        node("a"),
        node("b")
    );
    let m = load(&text);
    let names: Vec<String> = m.objects.nodes.iter().map(|n| n.name.to_string()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(reconcile("mixed.json", &text).0, Some(0));

    // Errors name the document as a YAML stream counts it.
    let (msg, _) = load_err(
        "x.json",
        &format!(
            "{}\n# the pods\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nstatus: {{podIP: nope}}\n",
            node("a")
        ),
    );
    assert_eq!(
        msg,
        "x.json: document 2 (Pod default/p): status.podIP: \"nope\" is not a valid IP address"
    );
    let (msg, err) = load_err("x.json", &format!("{}\n---\nfoo: [\n", node("a")));
    assert_eq!(
        msg,
        "x.json: document 2: invalid YAML: unclosed bracket '[' at line 3, column 6"
    );
    assert!(
        matches!(err, LoadError::Syntax { format: "YAML", .. }),
        "{err:?}"
    );
    // The file issue 12 gives: read as YAML, its first document is an object without a kind.
    let (msg, _) = load_err("x.json", &format!("{{}}\n---\n[{}]\n", node("b")));
    assert_eq!(msg, "x.json: document 1: kind: required field is missing");

    let two = format!("{}\n{}\n---\n{}\n", node("a"), node("b"), node("c"));
    let want = "document 3: invalid JSON: a `---` separator at line 3, after 2 JSON documents without one: separate every document with `---` (YAML), or none (JSON)";
    let (msg, err) = load_err("x.json", &two);
    assert_eq!(msg, format!("x.json: {want}"));
    assert!(
        matches!(err, LoadError::Syntax { format: "JSON", .. }),
        "{err:?}"
    );
    assert_eq!(
        reconcile("two.json", &two),
        (Some(2), format!("error: FILE: {want}"))
    );
    // Other text after a JSON document is still a JSON error.
    let (msg, _) = load_err("x.json", &format!("{}\n--x\n", node("a")));
    assert_eq!(
        msg,
        "x.json: document 2: invalid JSON: invalid number at line 2 column 2"
    );
}
