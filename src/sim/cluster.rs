//! The deterministic cluster generator: a `ClusterSpec` in, a snapshot plus the bookkeeping churn
//! traces need out.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use smallvec::{SmallVec, smallvec};

use super::rng::{Rng, fnv, pod_suffix};
use super::spec::{ClusterSpec, MAX_NAMESPACES, MAX_NODES, MAX_PODS, MAX_SERVICES};
use crate::model::{
    ClusterIp, ContainerPort, IpFamily, Labels, Meta, Name, Namespace, Node, Pod, PodIps, PodMeta,
    PodPhase, Protocol, ResourceVersion, Service, ServiceLoadBalancer, ServicePort, ServiceType,
    TargetPort, Timestamp, Uid, intern, keys,
};
use crate::snapshot::Snapshot;

/// Unix second of virtual time zero: generated objects are older, trace steps happen after it.
pub const EPOCH_SECOND: i64 = 1_700_000_000;

/// The pod label naming the template a pod was made from, as Deployments set it.
pub const LABEL_TEMPLATE_HASH: &str = "pod-template-hash";

const TIERS: [&str; 4] = ["frontend", "backend", "cache", "worker"];
/// Container port numbers a named target port resolves to, so resolution is not a constant.
const NAMED_PORT_NUMBERS: [i32; 5] = [8080, 8443, 9000, 9376, 3000];

// Independent random streams, so that e.g. more pods do not reshuffle which services are dual-stack.
const STREAM_SIZES: u64 = 1;
const STREAM_SERVICES: u64 = 2;
const STREAM_PODS: u64 = 3;
/// Its own stream, so that adding LoadBalancer Services moved nothing else of a cluster.
const STREAM_LOAD_BALANCERS: u64 = 4;

/// A generated cluster: the objects, and what traces need to change them consistently.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// The spec it was built from, clamped into range.
    pub spec: ClusterSpec,
    pub snapshot: Snapshot,
    /// One per service, in service order: `deployments[i].service == i`.
    pub deployments: Vec<Deployment>,
    pub zones: Vec<Zone>,
    /// Offset of the next free pod address in the pod IPv4 and IPv6 ranges.
    pub next_pod_ip: u32,
    /// The next resourceVersion an API server would hand out.
    pub next_resource_version: u64,
}

/// The owner of one service's pods; its template gives every pod's labels and container ports.
#[derive(Clone, Debug)]
pub struct Deployment {
    pub namespace: Name,
    /// Also the service's name and the `app` label value.
    pub name: Name,
    /// Index of the service in `snapshot.services`.
    pub service: usize,
    pub template_hash: Name,
    pub tier: Name,
    /// Pods get an IPv6 address after their IPv4 one.
    pub dual_stack: bool,
    /// Shared by every pod of the template, as the manifest loader shares identical lists.
    pub named_ports: Arc<[ContainerPort]>,
    /// Indices of its pods in `snapshot.pods`.
    pub pods: Vec<usize>,
    /// The ordinal the next pod name is made from; names never repeat within a deployment.
    pub next_ordinal: u64,
}

#[derive(Clone, Debug)]
pub struct Zone {
    pub name: Name,
    /// Indices of its nodes in `snapshot.nodes`.
    pub nodes: Vec<usize>,
}

impl Deployment {
    /// `app=<name>`: what its service selects.
    pub fn selector(&self) -> Labels {
        Labels::from_pairs([("app", self.name.as_str())])
    }

    /// The labels of a pod of the current template.
    pub fn pod_labels(&self) -> Labels {
        Labels::from_pairs([
            ("app", self.name.as_str()),
            (LABEL_TEMPLATE_HASH, self.template_hash.as_str()),
            ("tier", self.tier.as_str()),
        ])
    }

    /// A just-created pod of the current template: Pending, on no node, without an IP.
    pub(crate) fn new_pod(&self, labels: &Labels, rng: &mut Rng, rv: u64, created: i64) -> Pod {
        let name = format!(
            "{}-{}-{}",
            self.name,
            self.template_hash,
            pod_suffix(self.next_ordinal, fnv(&self.template_hash))
        );
        let mut meta = PodMeta::new(self.namespace.clone(), Name::new(&name), labels.clone());
        meta.set_uid(Uid::new(&rng.uuid()));
        meta.set_resource_version(ResourceVersion::Number(rv));
        meta.set_creation_timestamp(timestamp(created));
        let mut pod = Pod::new(meta);
        pod.named_ports = Arc::clone(&self.named_ports);
        pod
    }
}

/// A resourceVersion as an API server writes it: an opaque decimal string, unique per write.
pub(crate) fn resource_version(rv: u64) -> Name {
    Name::new(&rv.to_string())
}

pub(crate) fn timestamp(second: i64) -> Option<Timestamp> {
    Timestamp::from_second(second).ok()
}

/// The addresses of the pod address at `offset`: 10.0.0.0/8 and fd00:10:244::/64.
pub(crate) fn pod_ips(offset: u32, dual_stack: bool) -> PodIps {
    let v4 = IpAddr::V4(Ipv4Addr::from(
        0x0a00_0000 | (offset.wrapping_add(1) & 0x00ff_ffff),
    ));
    if !dual_stack {
        return PodIps::One(v4);
    }
    let prefix = 0xfd00_0010_0244_0000u128 << 64;
    [
        v4,
        IpAddr::V6(Ipv6Addr::from(prefix | (u128::from(offset) + 1))),
    ]
    .into_iter()
    .collect()
}

/// `a`..`z`, then `aa`, `ab`, ...: zone and node name parts.
pub(crate) fn letters(i: usize) -> String {
    let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
    if i < 26 {
        letter(i).to_string()
    } else {
        format!("{}{}", letter(i / 26 - 1), letter(i))
    }
}

/// Builds the cluster `spec` describes. Reproducible: the same spec gives the same cluster. A spec
/// that `validate` rejects is clamped into range, not refused.
pub fn generate(spec: &ClusterSpec) -> Cluster {
    let spec = clamp(spec);
    let mut rv = 1u64;
    let mut next_rv = || {
        rv += 1;
        rv - 1
    };

    let per_zone = spec.node_count_per_zone();
    let mut zones = Vec::with_capacity(spec.zones);
    let mut nodes = Vec::with_capacity(spec.zones * per_zone);
    for z in 0..spec.zones {
        let zone = intern(&format!("zone-{}", letters(z)));
        let mut members = Vec::with_capacity(per_zone);
        for j in 0..per_zone {
            let name = format!("node-{}-{j:04}", letters(z));
            members.push(nodes.len());
            nodes.push(Node {
                labels: Labels::from_pairs([
                    (keys::LABEL_ZONE, zone.as_str()),
                    ("kubernetes.io/hostname", name.as_str()),
                ]),
                name: intern(&name),
                ready: true,
                allocatable_cpu_millis: spec.node_cpu_millis,
                ..Node::default()
            });
        }
        zones.push(Zone {
            name: zone,
            nodes: members,
        });
    }

    let namespaces: Vec<Name> = (0..spec.namespaces)
        .map(|i| intern(&format!("ns-{i}")))
        .collect();
    let sizes = service_sizes(&spec, &mut Rng::stream(spec.seed, STREAM_SIZES));
    let mut rng = Rng::stream(spec.seed, STREAM_SERVICES);
    let n = sizes.len();
    let fraction = |f: f64| ((n as f64) * f).round() as usize;
    let dual = rng.choose(n, fraction(spec.dual_stack_fraction));
    let named = rng.choose(n, fraction(spec.named_port_fraction));
    let headless = rng.choose(n, fraction(spec.headless_fraction));
    let load_balancer = Rng::stream(spec.seed, STREAM_LOAD_BALANCERS)
        .choose(n, fraction(spec.load_balancer_fraction));

    let no_ports: Arc<[ContainerPort]> = Arc::from(Vec::new());
    let mut services = Vec::with_capacity(n);
    let mut deployments = Vec::with_capacity(n);
    for (i, &size) in sizes.iter().enumerate() {
        let namespace = namespaces[i % namespaces.len()].clone();
        let name = intern(&format!("svc-{i}"));
        let container_port = NAMED_PORT_NUMBERS[rng.below(NAMED_PORT_NUMBERS.len())];
        let mut svc = service(
            &namespace,
            &name,
            i,
            [dual[i], named[i], headless[i]],
            &mut rng,
            next_rv(),
        );
        if load_balancer[i] && !headless[i] {
            make_load_balancer(&mut svc, i);
        }
        services.push(svc);
        deployments.push(Deployment {
            namespace,
            name,
            service: i,
            template_hash: intern(&rng.safe_string(10)),
            tier: intern(TIERS[rng.below(TIERS.len())]),
            dual_stack: dual[i],
            named_ports: if named[i] {
                Arc::from(vec![
                    container(intern("http"), container_port, false),
                    // From a sidecar, so the lookup order regular-then-sidecar is exercised.
                    container(intern("metrics"), 9090, true),
                ])
            } else {
                Arc::clone(&no_ports)
            },
            pods: Vec::with_capacity(size),
            next_ordinal: 0,
        });
    }

    let total: usize = sizes.iter().sum();
    let mut rng = Rng::stream(spec.seed, STREAM_PODS);
    let not_ready = rng.choose(
        total,
        ((total as f64) * spec.not_ready_fraction).round() as usize,
    );
    let mut pods = Vec::with_capacity(total);
    let mut next_pod_ip = 0u32;
    for (d, &size) in deployments.iter_mut().zip(&sizes) {
        let labels = d.pod_labels();
        for _ in 0..size {
            let created = EPOCH_SECOND - rng.between(3_600, 30 * 86_400) as i64;
            let mut pod = d.new_pod(&labels, &mut rng, next_rv(), created);
            d.next_ordinal += 1;
            let node = &nodes[rng.below(nodes.len())];
            let ready = !not_ready[pods.len()];
            pod.node_name = Some(node.name.clone());
            pod.phase = PodPhase::Running;
            pod.has_pod_ip = true;
            pod.set_ips(pod_ips(next_pod_ip, d.dual_stack).iter().copied());
            next_pod_ip += 1;
            pod.ready = ready;
            pod.set_ready_transition(if ready {
                timestamp(created + rng.between(5, 60) as i64)
            } else {
                timestamp(EPOCH_SECOND - rng.between(1, 600) as i64)
            });
            d.pods.push(pods.len());
            pods.push(pod);
        }
    }

    let snapshot = Snapshot {
        services,
        pods,
        nodes,
        namespaces: namespaces
            .into_iter()
            .map(|name| Namespace {
                name,
                ..Namespace::default()
            })
            .collect(),
        ..Snapshot::default()
    };
    Cluster {
        spec,
        snapshot,
        deployments,
        zones,
        next_pod_ip,
        next_resource_version: rv,
    }
}

fn container(name: Name, port: i32, sidecar: bool) -> ContainerPort {
    ContainerPort {
        name,
        port,
        protocol: Protocol::Tcp,
        sidecar,
    }
}

/// Service `index`: port 80 (and 9090 with named ports), selecting `app=<name>`.
fn service(
    namespace: &Name,
    name: &Name,
    index: usize,
    [dual, named, headless]: [bool; 3],
    rng: &mut Rng,
    rv: u64,
) -> Service {
    let selector = Labels::from_pairs([("app", name.as_str())]);
    let port = |name: &str, port: i32, target: TargetPort| ServicePort {
        name: intern(name),
        port,
        target_port: target,
        protocol: Protocol::Tcp,
        app_protocol: None,
        node_port: None,
    };
    let ports = if named {
        vec![
            port("http", 80, TargetPort::Name(intern("http"))),
            port("metrics", 9090, TargetPort::Name(intern("metrics"))),
        ]
    } else {
        vec![port("http", 80, TargetPort::Number(8080))]
    };
    Service {
        meta: Meta {
            namespace: namespace.clone(),
            name: name.clone(),
            uid: Name::new(&rng.uuid()),
            resource_version: resource_version(rv),
            creation_timestamp: timestamp(
                EPOCH_SECOND - 30 * 86_400 - rng.between(0, 86_400) as i64,
            ),
            labels: selector.clone(),
            ..Meta::default()
        },
        selector: Some(selector),
        cluster_ip: if headless {
            ClusterIp::Headless
        } else {
            // 10.96.0.0/12, as kubeadm's default service range.
            ClusterIp::Ip(IpAddr::V4(Ipv4Addr::from(
                0x0a60_0000 | ((index as u32 + 1) & 0x000f_ffff),
            )))
        },
        ip_families: if dual {
            smallvec![IpFamily::V4, IpFamily::V6]
        } else {
            smallvec![IpFamily::V4]
        },
        ports,
        ..Service::default()
    }
}

/// Service `index` made a LoadBalancer: node ports from 30000 up, its cluster IP kept.
fn make_load_balancer(service: &mut Service, index: usize) {
    service.service_type = ServiceType::LoadBalancer;
    for (j, port) in service.ports.iter_mut().enumerate() {
        // 2,767 node ports in the range: a cluster this generator builds has fewer LB ports.
        port.node_port = Some(30_000 + ((index * 2 + j) % 2_767) as i32);
    }
    let cluster_ips = match &service.cluster_ip {
        ClusterIp::Ip(ip) => smallvec![*ip],
        _ => SmallVec::new(),
    };
    service.load_balancer = Some(Box::new(ServiceLoadBalancer {
        cluster_ips,
        ..ServiceLoadBalancer::default()
    }));
}

/// `spec` with every field in a range `generate` can build.
fn clamp(spec: &ClusterSpec) -> ClusterSpec {
    let fraction = |f: f64| if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
    let mut s = spec.clone();
    s.dual_stack_fraction = fraction(s.dual_stack_fraction);
    s.named_port_fraction = fraction(s.named_port_fraction);
    s.headless_fraction = fraction(s.headless_fraction);
    s.load_balancer_fraction = fraction(s.load_balancer_fraction);
    s.not_ready_fraction = fraction(s.not_ready_fraction);
    if !(s.tail_shape.is_finite() && s.tail_shape > 0.0) {
        s.tail_shape = ClusterSpec::default().tail_shape;
    }
    s.zones = s.zones.clamp(1, 26 * 26);
    // Sizes beyond what memory holds are cut to the most `validate` allows.
    s.pods = s.pods.min(MAX_PODS);
    s.services = s.services.min(MAX_SERVICES);
    s.huge_service_pods = s.huge_service_pods.min(MAX_PODS);
    s.nodes_per_zone = s.nodes_per_zone.min(MAX_NODES / s.zones);
    s.namespaces = s.namespaces.clamp(1, MAX_NAMESPACES);
    s.pods_per_node = s.pods_per_node.max(1);
    s.node_cpu_millis = s.node_cpu_millis.max(1);
    if s.pods > 0 {
        s.services = s.services.max(1);
    }
    s.huge_services = s.huge_services.min(s.services);
    if let Some(fit) = s.pods.checked_div(s.huge_service_pods) {
        s.huge_services = s.huge_services.min(fit);
    }
    let huge = s.huge_services * s.huge_service_pods;
    if s.huge_services == s.services && huge != s.pods {
        // Leave one service to take the pods the huge ones do not.
        s.huge_services = s.services.saturating_sub(1);
    }
    let tail = s.services - s.huge_services;
    let rest = s.pods - s.huge_services * s.huge_service_pods;
    if let Some(even) = rest.checked_div(tail) {
        s.min_service_pods = s.min_service_pods.min(even);
        s.max_service_pods = s
            .max_service_pods
            .max(s.min_service_pods)
            .max(rest.div_ceil(tail));
    }
    s
}

/// Pods per service, in service order: the huge services, then a heavy tail (Lomax), shuffled.
fn service_sizes(spec: &ClusterSpec, rng: &mut Rng) -> Vec<usize> {
    let huge = spec.huge_services;
    let tail = spec.services - huge;
    let rest = spec.pods - huge * spec.huge_service_pods;
    // Lomax (Pareto type II, starting at 0): U^(-1/shape) - 1, U uniform in (0, 1]. Unlike a plain
    // Pareto it makes most services small, as in real clusters, with a few very large ones.
    let weights: Vec<f64> = (0..tail)
        .map(|_| (1.0 - rng.unit()).powf(-1.0 / spec.tail_shape) - 1.0)
        .collect();
    let mut sizes = vec![spec.huge_service_pods; huge];
    sizes.extend(apportion(
        rest,
        &weights,
        spec.min_service_pods,
        spec.max_service_pods,
    ));
    rng.shuffle(&mut sizes);
    sizes
}

/// Splits `total` into parts proportional to `weights`, each within `min..=max`, summing to `total`
/// exactly: parts that would pass `max` are fixed there and the rest re-split (water filling), then
/// the rounding remainder goes to the largest fractions. Needs `len * min <= total <= len * max`.
pub(crate) fn apportion(total: usize, weights: &[f64], min: usize, max: usize) -> Vec<usize> {
    let n = weights.len();
    if n == 0 {
        return Vec::new();
    }
    let mut sizes = vec![min; n];
    let mut rest = total.saturating_sub(n * min);
    let room = max.saturating_sub(min);
    let mut free: Vec<usize> = (0..n).collect();
    loop {
        let sum: f64 = free.iter().map(|&i| weights[i]).sum();
        let share = |i: usize| {
            if sum > 0.0 {
                rest as f64 * weights[i] / sum
            } else {
                rest as f64 / free.len() as f64
            }
        };
        let full: Vec<usize> = free
            .iter()
            .copied()
            .filter(|&i| share(i) >= room as f64)
            .collect();
        if full.is_empty() {
            break;
        }
        for &i in &full {
            sizes[i] += room;
            rest = rest.saturating_sub(room);
        }
        free.retain(|i| !full.contains(i));
        if free.is_empty() {
            return sizes;
        }
    }
    let sum: f64 = free.iter().map(|&i| weights[i]).sum();
    let mut fractions = Vec::with_capacity(free.len());
    let mut given = 0;
    for &i in &free {
        let exact = if sum > 0.0 {
            rest as f64 * weights[i] / sum
        } else {
            rest as f64 / free.len() as f64
        };
        let whole = (exact.floor() as usize).min(room);
        sizes[i] += whole;
        given += whole;
        fractions.push((exact - whole as f64, i));
    }
    // Largest fraction first; ties by index, for determinism.
    fractions.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut left = rest.saturating_sub(given);
    for &(_, i) in fractions.iter().cycle().take(fractions.len() * 2) {
        if left == 0 {
            break;
        }
        if sizes[i] < max {
            sizes[i] += 1;
            left -= 1;
        }
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apportion_sums_and_respects_bounds() {
        let w = [100.0, 1.0, 1.0, 1.0, 0.5];
        let s = apportion(1000, &w, 10, 400);
        assert_eq!(s.iter().sum::<usize>(), 1000);
        assert!(s.iter().all(|&x| (10..=400).contains(&x)), "{s:?}");
        assert_eq!(s[0], 400);
        assert_eq!(
            apportion(7, &[1.0, 1.0, 1.0], 0, 7).iter().sum::<usize>(),
            7
        );
        assert_eq!(apportion(0, &[1.0, 2.0], 0, 5), vec![0, 0]);
    }

    #[test]
    fn zone_letters() {
        assert_eq!(letters(0), "a");
        assert_eq!(letters(25), "z");
        assert_eq!(letters(26), "aa");
        assert_eq!(letters(27 * 26 - 1), "zz");
    }
}
