//! Malformed objects: every error names the file, the document, the object and the field.

use sliced::kube::manifest::LoadError;

use super::load_err;

/// Malformed objects, each the second document of a file: (object, where, field, reason). The
/// message must be exactly `file: where: field: reason`: the reason quotes the bad value and, where
/// there is a closed set, the values allowed.
const MALFORMED: &[(&str, &str, &str, &str)] = &[
    (
        "{apiVersion: v1, kind: Pod, metadata: {name: p}, status: {podIPs: [{ip: 10.0.0.1}, {ip: 10.0.0.300}]}}",
        "document 2 (Pod default/p)",
        "status.podIPs[1].ip",
        "\"10.0.0.300\" is not a valid IP address",
    ),
    (
        "{apiVersion: v1, kind: Pod, metadata: {name: p}, status: {podIP: nope}}",
        "document 2 (Pod default/p)",
        "status.podIP",
        "\"nope\" is not a valid IP address",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web, namespace: ns}, spec: {clusterIP: 10.0.0}}",
        "document 2 (Service ns/web)",
        "spec.clusterIP",
        "\"10.0.0\" is not a valid IP address",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {clusterIPs: [10.0.0.1, x]}}",
        "document 2 (Service default/web)",
        "spec.clusterIPs[1]",
        "\"x\" is not a valid IP address",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{port: 80, nodePort: -1}]}}",
        "document 2 (Service default/web)",
        "spec.ports[0].nodePort",
        "-1 is not a valid port number (1-65535)",
    ),
    (
        "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, ports: [{containerPort: 0}]}]}}",
        "document 2 (Pod default/p)",
        "spec.containers[0].ports[0].containerPort",
        "0 is not a valid port number (1-65535)",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{port: 80, targetPort: 65536}]}}",
        "document 2 (Service default/web)",
        "spec.ports[0].targetPort",
        "65536 is not a valid port number (1-65535)",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{port: 80, targetPort: \"8080\"}]}}",
        "document 2 (Service default/web)",
        "spec.ports[0].targetPort",
        "\"8080\" is not a valid port name (a name has a letter; give numbers unquoted)",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ipFamilies: [IPv5]}}",
        "document 2 (Service default/web)",
        "spec.ipFamilies[0]",
        "unknown IP family \"IPv5\" (want IPv4 or IPv6)",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{port: 80, protocol: HTTP}]}}",
        "document 2 (Service default/web)",
        "spec.ports[0].protocol",
        "unknown protocol \"HTTP\" (want TCP, UDP or SCTP)",
    ),
    (
        "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {initContainers: [{name: c, ports: [{containerPort: 1, protocol: tcp}]}]}}",
        "document 2 (Pod default/p)",
        "spec.initContainers[0].ports[0].protocol",
        "unknown protocol \"tcp\" (want TCP, UDP or SCTP)",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {type: Internal}}",
        "document 2 (Service default/web)",
        "spec.type",
        "unknown service type \"Internal\" (want ClusterIP, NodePort, LoadBalancer or ExternalName)",
    ),
    (
        "{apiVersion: v1, kind: Pod, metadata: {name: p}, status: {phase: Sleeping}}",
        "document 2 (Pod default/p)",
        "status.phase",
        "unknown pod phase \"Sleeping\" (want Pending, Running, Succeeded, Failed or Unknown)",
    ),
    (
        "{apiVersion: v1, metadata: {name: x}}",
        "document 2",
        "kind",
        "required field is missing",
    ),
    (
        "{kind: Pod, metadata: {name: x}}",
        "document 2",
        "apiVersion",
        "required field is missing",
    ),
    (
        "{apiVersion: v1, kind: [Pod]}",
        "document 2",
        "kind",
        "expected a string, found a list",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {namespace: ns}}",
        "document 2 (Service ns/(no name))",
        "metadata.name",
        "name is required",
    ),
    (
        "{apiVersion: v1, kind: Node, metadata: {name: \"\"}}",
        "document 2 (Node (no name))",
        "metadata.name",
        "name is required",
    ),
    (
        "{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, addressType: IPv4, endpoints: []}",
        "document 2 (EndpointSlice default/(no name))",
        "metadata.name",
        "name or generateName is required",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{port: abc}]}}",
        "document 2 (Service default/web)",
        "spec.ports[0].port",
        "invalid type: string \"abc\", expected i32",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web, labels: {a: [1]}}}",
        "document 2 (Service default/web)",
        "metadata.labels.a",
        "invalid type: sequence, expected a string",
    ),
    (
        "{apiVersion: v1, kind: Pod, metadata: {name: p, creationTimestamp: yesterday}}",
        "document 2 (Pod default/p)",
        "metadata.creationTimestamp",
        // The value, then jiff's reason (the version is pinned), which names the part that failed.
        "\"yesterday\" is not an RFC 3339 time: failed to parse four digit integer as year: invalid digit, expected 0-9 but got y",
    ),
    (
        "{apiVersion: v1, kind: Node, metadata: {name: node-1}, status: {conditions: [{type: Ready, status: \"True\", lastTransitionTime: \"2024-13-01T00:00:00Z\"}]}}",
        "document 2 (Node node-1)",
        "status.conditions[0].lastTransitionTime",
        "\"2024-13-01T00:00:00Z\" is not an RFC 3339 time: failed to parse two digit integer as month: parameter 'month' is not in the required range of 1..=12",
    ),
    // A null or missing port is not port 0: the decoder reads both as 0.
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{port: 80}, {port: null}]}}",
        "document 2 (Service default/web)",
        "spec.ports[1].port",
        "null, but a value is required",
    ),
    (
        "{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{name: http}]}}",
        "document 2 (Service default/web)",
        "spec.ports[0].port",
        "missing, but a value is required",
    ),
    (
        "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, ports: [{containerPort: ~}]}]}}",
        "document 2 (Pod default/p)",
        "spec.containers[0].ports[0].containerPort",
        "null, but a value is required",
    ),
    (
        "{apiVersion: v1, kind: Endpoints, metadata: {name: e}, subsets: [{ports: [{port: null}]}]}",
        "document 2 (Endpoints default/e)",
        "subsets[0].ports[0].port",
        "null, but a value is required",
    ),
    (
        "{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: s}, addressType: IPv4, endpoints: [{addresses: [10.0.0.1]}, {addresses: [\"fd00::1\"]}]}",
        "document 2 (EndpointSlice default/s)",
        "endpoints[1].addresses[0]",
        "\"fd00::1\" is not an IPv4 address (addressType is IPv4)",
    ),
    (
        "{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: s}, addressType: IPv6, endpoints: [{addresses: [\"::ffff:10.0.0.1\"]}]}",
        "document 2 (EndpointSlice default/s)",
        "endpoints[0].addresses[0]",
        "\"::ffff:10.0.0.1\" is not an IPv6 address (addressType is IPv6)",
    ),
    (
        "{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: s}, addressType: IPv4, endpoints: [{addresses: [10.0.0.256]}]}",
        "document 2 (EndpointSlice default/s)",
        "endpoints[0].addresses[0]",
        "\"10.0.0.256\" is not a valid IP address",
    ),
    (
        "{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: s}, addressType: IPv4, ports: [{port: 65536}]}",
        "document 2 (EndpointSlice default/s)",
        "ports[0].port",
        "65536 is not a valid port number (0-65535)",
    ),
    (
        "{apiVersion: v1, kind: Endpoints, metadata: {name: e}, subsets: [{ports: [{port: 0}]}]}",
        "document 2 (Endpoints default/e)",
        "subsets[0].ports[0].port",
        "0 is not a valid port number (1-65535)",
    ),
];

#[test]
fn malformed_objects() {
    for (object, at, path, reason) in MALFORMED {
        assert!(
            !at.is_empty() && !path.is_empty() && !reason.is_empty(),
            "every case names where, the field and the reason: {object}"
        );
        let text = format!("apiVersion: v1\nkind: Node\nmetadata: {{name: ok}}\n---\n{object}\n");
        let (msg, err) = load_err("fixtures/bad.yaml", &text);
        assert_eq!(msg, format!("fixtures/bad.yaml: {at}: {path}: {reason}"));
        assert_eq!(err.file(), "fixtures/bad.yaml");
        assert_eq!(err.path(), Some(*path), "{msg}");
        let position = err.position().expect("a position");
        assert_eq!(
            (position.document, position.items.as_slice()),
            (2, &[][..]),
            "{msg}"
        );
        assert!(
            matches!(&err, LoadError::Invalid(invalid) if invalid.message == *reason),
            "{err:?}"
        );
    }
}

/// A malformed object as the second item of a List in the third document (the second is empty):
/// the position names both.
#[test]
fn malformed_list_items_name_the_document_and_item() {
    let text = "apiVersion: v1\nkind: Node\nmetadata: {name: ok}\n---\n---\n\
                apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: node-1}}\n\
                - {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ns}, status: {podIP: nope}}\n";
    let (msg, err) = load_err("dir/list.yaml", text);
    assert_eq!(
        msg,
        "dir/list.yaml: document 3, item 2 (Pod ns/p): status.podIP: \"nope\" is not a valid IP address"
    );
    let position = err.position().expect("a position");
    assert_eq!(
        (position.document, position.items.as_slice()),
        (3, &[2][..])
    );
}

/// A custom Endpoints address that is not an IP is the user's business: mirroring skips it with a
/// warning (issue 4), so loading keeps it as written.
#[test]
fn an_endpoints_address_that_is_not_an_ip_is_kept_as_text() {
    let text = "apiVersion: v1\nkind: Endpoints\nmetadata: {name: e}\nsubsets: [{notReadyAddresses: [{ip: 1.2.3}]}]\n";
    let manifest = sliced::kube::manifest::load_reader("e.yaml", text.as_bytes()).expect("loads");
    let address = &manifest.objects.endpoints[0].subsets[0].not_ready_addresses[0].ip;
    assert_eq!(
        *address,
        sliced::model::Address::Text(sliced::model::Name::new("1.2.3"))
    );
}
