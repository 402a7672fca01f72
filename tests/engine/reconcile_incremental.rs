//! The incremental reconcile against the full one: for random services and pods, after a full sync
//! whose writes are applied, a few pods change; whenever the incremental reconcile answers, its plan
//! must be the full reconcile's, write for write. And it must answer in the common cases.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use smallvec::SmallVec;

use sliced::model::{
    AddressType, ClusterIp, ContainerPort, Hints, IpFamily, Labels, Meta, Name, Node, Pod,
    PodBuilder, PodPhase, Protocol, Service, ServicePort, TargetPort, Timestamp, intern, keys,
};
use sliced::reconcile::slices::{IncrementalInput, SyncInput, reconcile, reconcile_incremental};
use sliced::reconcile::topology::TopologyCache;
use sliced::reconcile::{Options, Plan, TopologyChange};

type Nodes = HashMap<Name, Node, ahash::RandomState>;

#[derive(Clone, Debug)]
struct ServiceSpec {
    /// 0: IPv4, 1: IPv6, 2: IPv4+IPv6, 3: IPv6+IPv4, 4: legacy headless (both), 5: legacy IPv6.
    families: u8,
    ports: usize,
    headless: bool,
    publish_not_ready: bool,
    max: usize,
    extra_label: bool,
    /// The first port targets the container port named `http`, which pods of different
    /// templates number differently: a port group per template.
    named: bool,
}

#[derive(Clone, Debug)]
struct PodSpec {
    ready: bool,
    terminating: bool,
    terminal: bool,
    v4: bool,
    v6: bool,
    node: usize,
    hostname: bool,
    /// The first letter of its name, so that new pods sort anywhere.
    letter: u8,
    /// Its containers' named ports: see [`template_ports`].
    template: u8,
}

#[derive(Clone, Debug)]
enum Change {
    Ready(usize),
    Terminate(usize),
    Ip(usize),
    Add(PodSpec),
    Delete(usize),
    Leave(usize),
    Node(usize, usize),
    Fail(usize),
    Template(usize, u8),
}

fn service_spec() -> impl Strategy<Value = ServiceSpec> {
    (
        0u8..6,
        0usize..=2,
        any::<bool>(),
        any::<bool>(),
        1usize..=10,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(families, ports, headless, publish_not_ready, max, extra_label, named)| ServiceSpec {
                families,
                ports,
                headless,
                publish_not_ready,
                max,
                extra_label,
                named,
            },
        )
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.05),
        prop::bool::weighted(0.9),
        any::<bool>(),
        // node-3 does not exist.
        prop_oneof![9 => 0usize..3, 1 => Just(3usize)],
        prop::bool::weighted(0.1),
        b'a'..b'e',
        0u8..3,
    )
        .prop_map(
            |(ready, terminating, terminal, v4, v6, node, hostname, letter, template)| PodSpec {
                ready,
                terminating,
                terminal,
                v4,
                v6,
                node,
                hostname,
                letter,
                template,
            },
        )
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => any::<usize>().prop_map(Change::Ready),
        1 => any::<usize>().prop_map(Change::Terminate),
        1 => any::<usize>().prop_map(Change::Ip),
        2 => pod_spec().prop_map(Change::Add),
        1 => any::<usize>().prop_map(Change::Delete),
        1 => any::<usize>().prop_map(Change::Leave),
        1 => (any::<usize>(), 0usize..4).prop_map(|(i, n)| Change::Node(i, n)),
        1 => any::<usize>().prop_map(Change::Fail),
        1 => (any::<usize>(), 0u8..3).prop_map(|(i, t)| Change::Template(i, t)),
    ]
}

/// The named ports of a pod template: `http` as 8080 or 9090, or none (the pod then serves only
/// the service's numeric ports).
fn template_ports(template: u8) -> Arc<[ContainerPort]> {
    let http = |port| ContainerPort {
        name: intern("http"),
        port,
        protocol: Protocol::Tcp,
        sidecar: false,
    };
    match template {
        0 => Arc::from(vec![http(8080)]),
        1 => Arc::from(vec![http(9090)]),
        _ => Arc::from(Vec::new()),
    }
}

fn timestamp(s: i64) -> Option<Timestamp> {
    Timestamp::from_second(1_700_000_000 + s).ok()
}

/// One service, its member pods (by name, so in the order the full reconcile gets them), the nodes,
/// and its slices as the last sync left them (in name order, as the index gives them).
struct World {
    service: Service,
    nodes: Nodes,
    pods: BTreeMap<Name, Pod>,
    slices: Vec<EndpointSliceObj>,
    options: Options,
    topology: TopologyCache,
    next_ip: u32,
    next_pod: u32,
    next_slice: u32,
    /// The pods the last sync left out for a missing node: the next looks at them again.
    left_out: BTreeSet<Name>,
}

type EndpointSliceObj = sliced::model::EndpointSlice;

fn make_service(spec: &ServiceSpec) -> Service {
    let (families, cluster_ip): (SmallVec<[IpFamily; 2]>, ClusterIp) = match spec.families {
        0 => (smallvec(&[IpFamily::V4]), v4_cluster_ip()),
        1 => (smallvec(&[IpFamily::V6]), v6_cluster_ip()),
        2 => (smallvec(&[IpFamily::V4, IpFamily::V6]), v4_cluster_ip()),
        3 => (smallvec(&[IpFamily::V6, IpFamily::V4]), v6_cluster_ip()),
        4 => (SmallVec::new(), ClusterIp::Headless),
        _ => (SmallVec::new(), v6_cluster_ip()),
    };
    let cluster_ip = if spec.headless && spec.families < 4 {
        ClusterIp::Headless
    } else {
        cluster_ip
    };
    let mut labels = vec![("app", "web")];
    if spec.extra_label {
        labels.push(("tier", "front"));
    }
    Service {
        meta: Meta {
            namespace: intern("default"),
            name: intern("web"),
            uid: Name::new("svc-uid"),
            resource_version: intern("1"),
            creation_timestamp: timestamp(0),
            labels: Labels::from_pairs(labels),
            ..Meta::default()
        },
        selector: Some(Labels::from_pairs([("app", "web")])),
        cluster_ip,
        ip_families: families,
        ports: (0..spec.ports)
            .map(|p| ServicePort {
                name: intern(["http", "metrics"][p]),
                port: 80 + p as i32,
                target_port: if spec.named && p == 0 {
                    TargetPort::Name(intern("http"))
                } else {
                    TargetPort::Number(8080 + p as i32)
                },
                protocol: Protocol::Tcp,
                app_protocol: None,
                node_port: None,
            })
            .collect(),
        publish_not_ready_addresses: spec.publish_not_ready,
        ..Service::default()
    }
}

fn smallvec(f: &[IpFamily]) -> SmallVec<[IpFamily; 2]> {
    f.iter().copied().collect()
}

fn v4_cluster_ip() -> ClusterIp {
    ClusterIp::Ip(IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1)))
}

fn v6_cluster_ip() -> ClusterIp {
    ClusterIp::Ip(IpAddr::V6(Ipv6Addr::new(0xfd00, 0x96, 0, 0, 0, 0, 0, 1)))
}

/// node-0 and node-1 in zones, node-2 without one.
fn make_nodes() -> Nodes {
    (0..3)
        .map(|i| {
            let labels = match i {
                0 => Labels::from_pairs([(keys::LABEL_ZONE, "zone-a")]),
                1 => Labels::from_pairs([(keys::LABEL_ZONE, "zone-b")]),
                _ => Labels::new(),
            };
            let name = intern(&format!("node-{i}"));
            let node = Node {
                name: name.clone(),
                labels,
                ready: true,
                allocatable_cpu_millis: 4000,
                ..Node::default()
            };
            (name, node)
        })
        .collect()
}

fn ips(index: u32, v4: bool, v6: bool) -> SmallVec<[IpAddr; 2]> {
    let mut out = SmallVec::new();
    if v4 {
        out.push(IpAddr::V4(Ipv4Addr::from(0x0a01_0000 + index)));
    }
    if v6 {
        out.push(IpAddr::V6(Ipv6Addr::new(
            0xfd00,
            1,
            0,
            0,
            0,
            0,
            0,
            index as u16,
        )));
    }
    out
}

impl World {
    fn new(spec: &ServiceSpec, pods: &[PodSpec]) -> World {
        let mut world = World {
            service: make_service(spec),
            nodes: make_nodes(),
            pods: BTreeMap::new(),
            slices: Vec::new(),
            options: Options {
                max_endpoints_per_slice: spec.max,
                ..Options::default()
            },
            topology: TopologyCache::default(),
            next_ip: 1,
            next_pod: 0,
            next_slice: 0,
            left_out: BTreeSet::new(),
        };
        for p in pods {
            world.add_pod(p);
        }
        world
    }

    fn add_pod(&mut self, spec: &PodSpec) -> Name {
        let n = self.next_pod;
        self.next_pod += 1;
        let name = Name::new(&format!("{}{n:04}", spec.letter as char));
        let ip = self.next_ip;
        self.next_ip += 1;
        let ips = ips(ip, spec.v4, spec.v6);
        let pod = Pod::from(PodBuilder {
            meta: Meta {
                namespace: intern("default"),
                name: name.clone(),
                uid: Name::new(&format!("pod-uid-{n}")),
                resource_version: intern("1"),
                deletion_timestamp: if spec.terminating { timestamp(5) } else { None },
                labels: Labels::from_pairs([("app", "web")]),
                ..Meta::default()
            },
            node_name: Some(intern(&format!("node-{}", spec.node))),
            hostname: spec.hostname.then(|| intern("host")),
            subdomain: spec.hostname.then(|| intern("web")),
            phase: if spec.terminal {
                PodPhase::Failed
            } else {
                PodPhase::Running
            },
            has_pod_ip: !ips.is_empty(),
            ips: ips.into_iter().collect(),
            ready: spec.ready,
            named_ports: template_ports(spec.template),
            ..PodBuilder::default()
        });
        self.pods.insert(name.clone(), pod);
        name
    }

    fn nth(&self, i: usize) -> Option<Name> {
        if self.pods.is_empty() {
            return None;
        }
        self.pods.keys().nth(i % self.pods.len()).cloned()
    }

    /// Applies the changes; returns the names of the pods they touched.
    fn change(&mut self, changes: &[Change]) -> BTreeSet<Name> {
        let mut touched = BTreeSet::new();
        for c in changes {
            let target = match c {
                Change::Add(spec) => {
                    touched.insert(self.add_pod(spec));
                    continue;
                }
                Change::Ready(i)
                | Change::Terminate(i)
                | Change::Ip(i)
                | Change::Delete(i)
                | Change::Leave(i)
                | Change::Node(i, _)
                | Change::Fail(i)
                | Change::Template(i, _) => self.nth(*i),
            };
            let Some(name) = target else { continue };
            touched.insert(name.clone());
            let next_ip = self.next_ip;
            let Some(pod) = self.pods.get_mut(&name) else {
                continue;
            };
            match c {
                Change::Ready(_) => pod.ready = !pod.ready,
                Change::Terminate(_) => pod.meta.set_deletion_timestamp(timestamp(9)),
                Change::Ip(_) => {
                    let v4 = pod.ips().iter().any(|ip| ip.is_ipv4());
                    let v6 = pod.ips().iter().any(|ip| ip.is_ipv6());
                    pod.set_ips(ips(next_ip, v4, v6));
                    self.next_ip += 1;
                }
                Change::Node(_, n) => pod.node_name = Some(intern(&format!("node-{n}"))),
                Change::Fail(_) => pod.phase = PodPhase::Failed,
                Change::Template(_, t) => pod.named_ports = template_ports(*t),
                Change::Delete(_) | Change::Leave(_) => {
                    self.pods.remove(&name);
                }
                Change::Add(_) => {}
            }
        }
        touched
    }

    fn full(&self, trigger_time: Option<Timestamp>) -> Plan {
        let pods: Vec<&Pod> = self.pods.values().collect();
        let slices: Vec<&EndpointSliceObj> = self.slices.iter().collect();
        reconcile(&SyncInput {
            service: &self.service,
            pods: &pods,
            nodes: &self.nodes,
            slices: &slices,
            trigger_time,
            topology: &self.topology,
            options: &self.options,
        })
    }

    /// Where each pod's endpoint is, by address type.
    fn locations(&self) -> HashMap<AddressType, HashMap<String, usize>> {
        let mut out: HashMap<AddressType, HashMap<String, usize>> = HashMap::new();
        for (i, slice) in self.slices.iter().enumerate() {
            for ep in &slice.endpoints {
                if let Some(name) = ep.target_ref.as_ref().and_then(|t| t.name.as_ref()) {
                    out.entry(slice.address_type.clone())
                        .or_default()
                        .insert(name.to_string(), i);
                }
            }
        }
        out
    }

    fn incremental(
        &self,
        changed: &[(Name, Option<&Pod>)],
        locations: &HashMap<AddressType, HashMap<String, usize>>,
        trigger_time: Option<Timestamp>,
    ) -> Option<Plan> {
        let slices: Vec<&EndpointSliceObj> = self.slices.iter().collect();
        let locate = |name: &str, t: &AddressType| locations.get(t)?.get(name).copied();
        // Those the last sync left out that did not change, as the engine gives them.
        let left_out: Vec<&Pod> = (self.left_out.iter())
            .filter(|name| !changed.iter().any(|(n, _)| n == *name))
            .filter_map(|name| self.pods.get(name))
            .collect();
        reconcile_incremental(&IncrementalInput {
            service: &self.service,
            changed,
            left_out: &left_out,
            nodes: &self.nodes,
            slices: &slices,
            locate: &locate,
            trigger_time,
            topology: &self.topology,
            options: &self.options,
        })
    }

    fn changed_list(&self, names: &BTreeSet<Name>) -> Vec<(Name, Option<&Pod>)> {
        names
            .iter()
            .map(|n| (n.clone(), self.pods.get(n)))
            .collect()
    }

    /// Writes the plan as the API server would: creates named, updates and deletes by name.
    fn apply(&mut self, plan: &Plan) {
        for t in &plan.per_type {
            for create in &t.creates {
                let mut slice = create.clone();
                slice.meta.name = Name::new(&format!("web-{:05}", self.next_slice));
                slice.meta.uid = Name::new(&format!("slice-uid-{}", self.next_slice));
                slice.meta.resource_version = intern("1");
                self.next_slice += 1;
                self.slices.push(slice);
            }
            for update in &t.updates {
                let at = self
                    .slices
                    .iter()
                    .position(|s| s.meta.name == update.meta.name)
                    .expect("an update of an existing slice");
                let mut slice = update.clone();
                slice.meta.resource_version = Name::new(&format!("{}", self.next_slice + 100));
                self.slices[at] = slice;
            }
            for delete in &t.deletes {
                self.slices.retain(|s| s.meta.name != delete.meta.name);
            }
        }
        for delete in &plan.unsupported_deletes {
            self.slices.retain(|s| s.meta.name != delete.meta.name);
        }
        self.slices.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
    }

    /// A full sync, applied; it must leave a fixed point, as the contract asks (pods on a missing
    /// node aside, which it reports).
    fn settle(&mut self) {
        let plan = self.full(timestamp(1));
        assert_eq!(
            plan.errors.len(),
            plan.pods_on_missing_nodes.len() * plan.per_type.len()
        );
        self.apply(&plan);
        self.left_out = plan.pods_on_missing_nodes.iter().cloned().collect();
        assert_eq!(
            self.full(timestamp(2)).write_count(),
            0,
            "not a fixed point"
        );
    }

    /// One round: the changes, then both reconciles. Returns whether the incremental one answered.
    fn round(&mut self, changes: &[Change], trigger: bool) -> bool {
        let locations = self.locations();
        let names = self.change(changes);
        let trigger_time = if trigger { timestamp(3) } else { None };
        let full = self.full(trigger_time);
        let changed = self.changed_list(&names);
        let incremental = self.incremental(&changed, &locations, trigger_time);
        let answered = incremental.is_some();
        if let Some(plan) = incremental {
            assert_eq!(describe(&plan), describe(&full), "changed: {names:?}");
        }
        self.apply(&full);
        self.left_out = full.pods_on_missing_nodes.iter().cloned().collect();
        answered
    }
}

fn describe(plan: &Plan) -> String {
    let mut out = format!("key {}\n", plan.service_key);
    for t in &plan.per_type {
        out += &format!(
            "type {:?} added {} removed {}\n  creates {:?}\n  updates {:?}\n  deletes {:?}\n",
            t.address_type, t.endpoints_added, t.endpoints_removed, t.creates, t.updates, t.deletes
        );
    }
    out += &format!(
        "unsupported {:?}\nerrors {:?}\nleft out {:?}\nevents {:?}\ntopology {:?}\n",
        plan.unsupported_deletes,
        plan.errors,
        plan.pods_on_missing_nodes,
        plan.events,
        plan.topology_changes
    );
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Several rounds of changes, each compared with the full reconcile and then applied.
    #[test]
    fn incremental_equals_full(
        service in service_spec(),
        pods in prop::collection::vec(pod_spec(), 0..60),
        rounds in prop::collection::vec(
            (prop::collection::vec(change(), 1..5), any::<bool>()),
            1..5,
        ),
    ) {
        let mut world = World::new(&service, &pods);
        world.settle();
        for (changes, trigger) in &rounds {
            world.round(changes, *trigger);
        }
    }
}

/// Ready flips alone must nearly always be answered incrementally (the few exceptions: no pod has
/// an endpoint at all).
#[test]
fn ready_flips_are_incremental() {
    let strategy = (
        service_spec(),
        prop::collection::vec(pod_spec(), 1..60),
        prop::collection::vec(
            prop::collection::vec(any::<usize>().prop_map(Change::Ready), 1..4),
            1..4,
        ),
    );
    let (answered, total) = rounds_answered(strategy, |_| {});
    assert!(
        answered * 10 >= total * 8,
        "only {answered} of {total} ready-flip rounds answered"
    );
}

/// Settles 300 generated worlds and plays their rounds of changes, each compared with the full
/// reconcile; `before` sees each world before each round. Returns how many rounds the incremental
/// reconcile answered, of how many.
fn rounds_answered(
    strategy: impl Strategy<Value = (ServiceSpec, Vec<PodSpec>, Vec<Vec<Change>>)>,
    mut before: impl FnMut(&World),
) -> (usize, usize) {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let (mut answered, mut total) = (0, 0);
    for _ in 0..300 {
        let (service, pods, rounds) = strategy
            .new_tree(&mut runner)
            .expect("a generated case")
            .current();
        let mut world = World::new(&service, &pods);
        world.settle();
        for changes in &rounds {
            before(&world);
            total += 1;
            answered += usize::from(world.round(changes, true));
        }
    }
    (answered, total)
}

/// The same where the first port is named and the pods are of two templates that number it
/// differently: two port groups, and a flip changes one of them only.
#[test]
fn ready_flips_in_one_of_several_port_groups_are_incremental() {
    let strategy = (
        service_spec().prop_map(|s| ServiceSpec {
            named: true,
            ports: s.ports.max(1),
            ..s
        }),
        prop::collection::vec(
            (pod_spec(), 0u8..2).prop_map(|(p, template)| PodSpec { template, ..p }),
            1..60,
        ),
        // One flip a round: flips in two groups at once are placed in full, by design.
        prop::collection::vec(
            prop::collection::vec(any::<usize>().prop_map(Change::Ready), 1),
            1..4,
        ),
    );
    let mut several = 0;
    let (answered, total) = rounds_answered(strategy, |world| {
        let groups: BTreeSet<_> = world.slices.iter().map(|s| s.ports.clone()).collect();
        several += usize::from(groups.len() > 1);
    });
    assert!(
        several * 2 >= total,
        "only {several} of {total} rounds over several groups"
    );
    assert!(
        answered * 10 >= total * 8,
        "only {answered} of {total} ready-flip rounds answered"
    );
}

// Preconditions, one by one, on a settled world of 10 ready pods in slices of 3.

fn base_spec() -> ServiceSpec {
    ServiceSpec {
        families: 0,
        ports: 1,
        headless: false,
        publish_not_ready: false,
        max: 3,
        extra_label: false,
        named: false,
    }
}

fn ready_pod(letter: u8, node: usize) -> PodSpec {
    PodSpec {
        ready: true,
        terminating: false,
        terminal: false,
        v4: true,
        v6: true,
        node,
        hostname: false,
        letter,
        template: 2,
    }
}

fn base_world(spec: &ServiceSpec) -> World {
    let pods: Vec<PodSpec> = (0..10).map(|i| ready_pod(b'a', i % 3)).collect();
    let mut world = World::new(spec, &pods);
    world.settle();
    world
}

/// The incremental answer for these changes, checked against the full one when there is one.
fn try_changes(world: &mut World, changes: &[Change]) -> Option<Plan> {
    let locations = world.locations();
    let names = world.change(changes);
    let changed = world.changed_list(&names);
    let plan = world.incremental(&changed, &locations, timestamp(3));
    if let Some(plan) = &plan {
        assert_eq!(describe(plan), describe(&world.full(timestamp(3))));
    }
    plan
}

fn flip_first(world: &mut World) -> Option<Plan> {
    try_changes(world, &[Change::Ready(0)])
}

#[test]
fn base_case_is_incremental() {
    let mut world = base_world(&base_spec());
    let plan = flip_first(&mut world).expect("answered");
    assert_eq!(plan.write_count(), 1);
    // A new pod, an IP change and a deletion at once.
    let mut world = base_world(&base_spec());
    let changes = [
        Change::Add(ready_pod(b'b', 1)),
        Change::Ip(3),
        Change::Delete(7),
    ];
    assert!(try_changes(&mut world, &changes).is_some());
}

#[test]
fn hints_annotation_is_not_incremental() {
    let mut world = base_world(&base_spec());
    world.service.meta.annotations = Labels::from_pairs([(keys::ANNOTATION_TOPOLOGY_MODE, "Auto")]);
    assert!(flip_first(&mut world).is_none());
}

#[test]
fn traffic_distribution_is_not_incremental() {
    let mut world = base_world(&base_spec());
    world.service.traffic_distribution = Some(intern("PreferClose"));
    assert!(flip_first(&mut world).is_none());
}

#[test]
fn topology_cache_state_is_not_incremental() {
    let mut world = base_world(&base_spec());
    world.topology.apply(
        "default/web",
        &[TopologyChange::Populated {
            address_type: AddressType::IPv4,
            zone_counts: vec![(intern("zone-a"), 1)],
        }],
    );
    assert!(flip_first(&mut world).is_none());
}

#[test]
fn named_target_port_is_not_incremental() {
    let mut world = base_world(&base_spec());
    world.service.ports[0].target_port = TargetPort::Name(intern("http"));
    assert!(flip_first(&mut world).is_none());
}

/// Pods of two templates numbering the named port differently: a pod of either group changed or
/// deleted is placed alone, one moving between the groups is not.
#[test]
fn one_of_two_port_groups_is_incremental_a_move_between_them_is_not() {
    let spec = ServiceSpec {
        named: true,
        ..base_spec()
    };
    let pods: Vec<PodSpec> = (0..10)
        .map(|i| PodSpec {
            template: (i % 2) as u8,
            ..ready_pod(b'a', i % 3)
        })
        .collect();
    let mut world = World::new(&spec, &pods);
    world.settle();
    let groups: BTreeSet<_> = world.slices.iter().map(|s| s.ports.clone()).collect();
    assert_eq!(groups.len(), 2);
    assert!(flip_first(&mut world).is_some());
    world.settle();
    assert!(try_changes(&mut world, &[Change::Ready(1)]).is_some());
    world.settle();
    // A pod gone has no endpoint to name its group: the slice it was in does.
    assert!(try_changes(&mut world, &[Change::Delete(2)]).is_some());
    world.settle();
    assert!(try_changes(&mut world, &[Change::Template(0, 1)]).is_none());
}

#[test]
fn service_being_deleted_is_not_incremental() {
    let mut world = base_world(&base_spec());
    world.service.meta.deletion_timestamp = timestamp(7);
    assert!(flip_first(&mut world).is_none());
}

#[test]
fn unowned_slice_is_not_incremental() {
    let mut world = base_world(&base_spec());
    world.slices[1].owner_references[0].uid = Name::new("older-service");
    assert!(flip_first(&mut world).is_none());
}

#[test]
fn slice_labels_not_desired_is_not_incremental() {
    let mut world = base_world(&base_spec());
    world.slices[2].meta.labels = world.slices[2].meta.labels.with("extra", "1");
    assert!(flip_first(&mut world).is_none());
}

#[test]
fn slice_of_another_port_group_is_not_incremental() {
    let mut world = base_world(&base_spec());
    if let Some(port) = world.slices[2].ports[0].port.as_mut() {
        *port = 9999;
    }
    assert!(flip_first(&mut world).is_none());
}

#[test]
fn unsupported_address_type_is_not_incremental() {
    let mut world = base_world(&base_spec());
    let mut extra = world.slices[0].clone();
    extra.meta.name = Name::new("web-zzzzz");
    extra.address_type = AddressType::IPv6;
    extra.endpoints.clear();
    world.slices.push(extra);
    assert!(flip_first(&mut world).is_none());
}

#[test]
fn hints_in_a_rewritten_slice_are_not_incremental() {
    let mut world = base_world(&base_spec());
    // Pod 0's endpoint is in the first slice.
    std::sync::Arc::make_mut(&mut world.slices[0].endpoints[1]).hints =
        Some(Box::new(Hints::default()));
    assert!(flip_first(&mut world).is_none());
}

#[test]
fn unsorted_changes_are_not_incremental() {
    let mut world = base_world(&base_spec());
    let locations = world.locations();
    let names = world.change(&[Change::Ready(0), Change::Ready(1)]);
    let mut changed = world.changed_list(&names);
    changed.reverse();
    assert!(world.incremental(&changed, &locations, None).is_none());
}

/// A changed pod on a missing node is left out with the full reconcile's error; the next sync
/// answers as the full one only when it looks at that pod again, changed or not.
#[test]
fn changed_pod_on_a_missing_node() {
    let mut world = base_world(&base_spec());
    let name = world.nth(0).expect("a pod");
    let locations = world.locations();
    if let Some(pod) = world.pods.get_mut(&name) {
        pod.node_name = Some(intern("node-gone"));
    }
    let changed = vec![(name.clone(), world.pods.get(&name))];
    let plan = world
        .incremental(&changed, &locations, None)
        .expect("answered");
    let full = world.full(None);
    assert_eq!(describe(&plan), describe(&full));
    assert_eq!(plan.pods_on_missing_nodes, std::slice::from_ref(&name));
    assert_eq!(
        plan.errors,
        [format!(
            "skipping Pod {name} for Service default/web: Node node-gone Not Found"
        )]
    );
    world.apply(&full);
    world.left_out = BTreeSet::from([name.clone()]);

    // Another pod flips; the one left out is as it was, and is reported again.
    let other = world.nth(1).expect("a second pod");
    let locations = world.locations();
    if let Some(pod) = world.pods.get_mut(&other) {
        pod.ready = !pod.ready;
    }
    let full = world.full(None);
    assert_eq!(full.pods_on_missing_nodes, std::slice::from_ref(&name));
    for changed in [vec![other.clone()], vec![name.clone(), other.clone()]] {
        let changed = world.changed_list(&changed.into_iter().collect());
        let plan = world
            .incremental(&changed, &locations, None)
            .expect("answered");
        assert_eq!(describe(&plan), describe(&full));
    }
    // Not told of it, the sync would drop the error.
    world.left_out.clear();
    let alone = world.changed_list(&BTreeSet::from([other.clone()]));
    let plan = world
        .incremental(&alone, &locations, None)
        .expect("answered");
    assert!(plan.errors.is_empty());
    // A pod said left out that is back on a node is a broken contract: the full reconcile runs.
    world.left_out = BTreeSet::from([world.nth(2).expect("a third pod")]);
    let alone = world.changed_list(&BTreeSet::from([other.clone()]));
    assert!(world.incremental(&alone, &locations, None).is_none());

    // Publishing not-ready addresses keeps the pod, without a zone: no error, so answered.
    let mut world = base_world(&ServiceSpec {
        publish_not_ready: true,
        ..base_spec()
    });
    let locations = world.locations();
    if let Some(pod) = world.pods.get_mut(&name) {
        pod.node_name = Some(intern("node-gone"));
    }
    let changed = vec![(name.clone(), world.pods.get(&name))];
    let plan = world
        .incremental(&changed, &locations, None)
        .expect("answered");
    assert_eq!(describe(&plan), describe(&world.full(None)));
    assert!(plan.errors.is_empty());
}

#[test]
fn stale_locate_is_not_incremental() {
    let mut world = base_world(&base_spec());
    let mut locations = world.locations();
    let name = world.nth(0).expect("a pod");
    // Says the pod is in the second slice; it is in the first.
    if let Some(m) = locations.get_mut(&AddressType::IPv4) {
        m.insert(name.to_string(), 1);
    }
    let names = world.change(&[Change::Ready(0)]);
    let changed = world.changed_list(&names);
    assert!(world.incremental(&changed, &locations, None).is_none());

    // Says nothing, while the pod is in a slice rewritten for another pod.
    let mut world = base_world(&base_spec());
    let mut locations = world.locations();
    if let Some(m) = locations.get_mut(&AddressType::IPv4) {
        m.remove(name.as_str());
    }
    world.change(&[Change::Ready(0)]);
    let second = world.nth(1).expect("a pod");
    if let Some(pod) = world.pods.get_mut(&second) {
        pod.ready = false;
    }
    let changed = vec![
        (name.clone(), world.pods.get(&name)),
        (second.clone(), world.pods.get(&second)),
    ];
    assert!(world.incremental(&changed, &locations, None).is_none());
}

#[test]
fn no_pod_left_is_not_incremental() {
    let mut world = base_world(&base_spec());
    let changes: Vec<Change> = (0..10).map(|_| Change::Delete(0)).collect();
    assert!(try_changes(&mut world, &changes).is_none());
}

#[test]
fn placeholders_are_handled_exactly() {
    // Dual stack with pods of IPv4 only: the IPv6 type keeps a placeholder.
    let spec = ServiceSpec {
        families: 2,
        ..base_spec()
    };
    let pods: Vec<PodSpec> = (0..5)
        .map(|i| PodSpec {
            v6: false,
            ..ready_pod(b'a', i % 3)
        })
        .collect();
    let mut world = World::new(&spec, &pods);
    world.settle();
    assert!(
        world
            .slices
            .iter()
            .any(|s| s.address_type == AddressType::IPv6)
    );
    assert!(flip_first(&mut world).is_some());
    world.settle();

    // The first pod with an IPv6 address replaces the placeholder.
    assert!(try_changes(&mut world, &[Change::Add(ready_pod(b'c', 0))]).is_some());
    world.settle();

    // And when it goes, the placeholder comes back.
    let last = world.pods.len() - 1;
    assert!(try_changes(&mut world, &[Change::Delete(last)]).is_some());
}

/// With a named target port, a pod that resolves none of the service's ports keeps the group of
/// no ports wanted even without an endpoint of the type (its IP of the other family, or its node
/// missing): the full reconcile then keeps the empty slice of that group beside a new one, where
/// the placeholder would be reused. Only reading every pod tells it, so this is not incremental.
#[test]
fn an_empty_slice_of_a_group_a_pod_still_resolves_to_is_kept() {
    let spec = ServiceSpec {
        families: 1,
        named: true,
        ..base_spec()
    };
    // IPv6 service; pods without the named port: one of IPv4 only, one on the missing node-3.
    let pods = [
        PodSpec {
            v6: false,
            ..ready_pod(b'a', 0)
        },
        ready_pod(b'b', 3),
    ];
    for pod in pods {
        let mut world = World::new(&spec, &[pod]);
        world.settle();
        assert!(world.slices.len() == 1 && world.slices[0].endpoints.is_empty());
        let first = PodSpec {
            template: 0,
            ..ready_pod(b'c', 0)
        };
        assert!(try_changes(&mut world, &[Change::Add(first)]).is_none());
        let full = world.full(timestamp(3));
        let [of_type] = &full.per_type[..] else {
            panic!("one address type");
        };
        assert_eq!(
            (
                of_type.creates.len(),
                of_type.updates.len(),
                of_type.deletes.len()
            ),
            (1, 0, 0)
        );
    }
}
