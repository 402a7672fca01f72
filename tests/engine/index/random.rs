//! Random event sequences against a brute-force oracle: after every event, each service's members
//! and each pod's services are what a scan of every pod and service finds.
//!
//! The oracle matches selectors itself, on plain maps, as upstream does (apimachinery's
//! `labels.Set(selector).AsSelectorPreValidated().Matches`: every pair of the selector is among the
//! pod's labels with the same value, so an empty selector matches every pod), and never calls
//! `Labels::matches`, which the index uses. A service without a selector matches no pod (upstream's
//! `GetPodServiceMemberships` skips a nil selector; the endpoints controllers give such a service
//! no endpoints), while one with a present but empty selector matches every pod of its namespace,
//! as the index documents (src/index/selector.rs).

use std::collections::BTreeMap;

use proptest::prelude::*;

use sliced::index::Index;
use sliced::model::Labels;

use super::common::{key, keys_of, names, pod, service};

const NAMESPACES: [&str; 2] = ["n1", "n2"];
const KEYS: [&str; 4] = ["app", "tier", "track", "zone"];
const VALUES: [&str; 3] = ["a", "b", "c"];

/// Label pairs as (key, value) indexes; a repeated key keeps its last value.
type Pairs = Vec<(usize, usize)>;

/// Labels or a selector as the oracle holds them.
type Map = BTreeMap<&'static str, &'static str>;

/// The oracle's own reading of `pairs`: a later duplicate key wins, as in a Go map literal built
/// pair by pair.
fn to_map(pairs: &[(usize, usize)]) -> Map {
    let mut map = Map::new();
    for &(k, v) in pairs {
        map.insert(KEYS[k], VALUES[v]);
    }
    map
}

/// What the index stored, as a plain map.
fn plain(labels: &Labels) -> BTreeMap<String, String> {
    labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn owned(map: &Map) -> BTreeMap<String, String> {
    map.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Equality-based selector matching. `None` (no selector) matches nothing.
fn selects(selector: &Option<Map>, labels: &Map) -> bool {
    match selector {
        None => false,
        Some(selector) => selector
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value)),
    }
}

fn label_set() -> impl Strategy<Value = Pairs> {
    prop::collection::vec((0..KEYS.len(), 0..VALUES.len()), 0..4)
}

fn to_labels(pairs: &[(usize, usize)]) -> Labels {
    Labels::from_pairs(pairs.iter().map(|&(k, v)| (KEYS[k], VALUES[v])))
}

/// A selector: none, present but empty, or one or two pairs.
fn selector() -> impl Strategy<Value = Option<Pairs>> {
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(Vec::new())),
        8 => prop::collection::vec((0..KEYS.len(), 0..VALUES.len()), 1..3).prop_map(Some),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    Pod {
        ns: usize,
        name: usize,
        labels: Pairs,
    },
    DeletePod {
        ns: usize,
        name: usize,
    },
    Service {
        ns: usize,
        name: usize,
        selector: Option<Pairs>,
    },
    DeleteService {
        ns: usize,
        name: usize,
    },
    /// A relist keeping every n-th pod.
    ResetPods {
        keep_every: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let ns = 0..NAMESPACES.len();
    prop_oneof![
        8 => (ns.clone(), 0..12usize, label_set())
            .prop_map(|(ns, name, labels)| Op::Pod { ns, name, labels }),
        2 => (ns.clone(), 0..12usize).prop_map(|(ns, name)| Op::DeletePod { ns, name }),
        4 => (ns.clone(), 0..6usize, selector())
            .prop_map(|(ns, name, selector)| Op::Service { ns, name, selector }),
        1 => (ns, 0..6usize).prop_map(|(ns, name)| Op::DeleteService { ns, name }),
        1 => (1..4usize).prop_map(|keep_every| Op::ResetPods { keep_every }),
    ]
}

/// The oracle: plain maps, scanned in full for every question.
#[derive(Default)]
struct Model {
    pods: BTreeMap<(usize, String), Map>,
    services: BTreeMap<(usize, String), Option<Map>>,
}

impl Model {
    fn services_for(&self, ns: usize, labels: &Map) -> Vec<String> {
        self.services
            .iter()
            .filter(|((n, _), selector)| *n == ns && selects(selector, labels))
            .map(|((n, name), _)| format!("{}/{name}", NAMESPACES[*n]))
            .collect()
    }

    fn members(&self, ns: usize, selector: &Option<Map>) -> Vec<String> {
        self.pods
            .iter()
            .filter(|((n, _), labels)| *n == ns && selects(selector, labels))
            .map(|((_, name), _)| name.clone())
            .collect()
    }
}

/// Applies `op` to both, checking that the index returns the previous version the model had.
fn apply(index: &Index, model: &mut Model, op: &Op) {
    match op {
        Op::Pod { ns, name, labels } => {
            let name = format!("pod-{name}");
            let mut p = pod(NAMESPACES[*ns], &name, &[]);
            p.meta.labels = to_labels(labels);
            let expected = model.pods.insert((*ns, name), to_map(labels));
            let old = index.pods().apply(p);
            assert_eq!(
                old.map(|p| plain(&p.meta.labels)),
                expected.as_ref().map(owned)
            );
        }
        Op::DeletePod { ns, name } => {
            let name = format!("pod-{name}");
            let old = index.pods().delete(NAMESPACES[*ns], &name);
            let expected = model.pods.remove(&(*ns, name));
            assert_eq!(
                old.map(|p| plain(&p.meta.labels)),
                expected.as_ref().map(owned)
            );
        }
        Op::Service { ns, name, selector } => {
            let name = format!("svc-{name}");
            let mut s = service(NAMESPACES[*ns], &name, None);
            s.selector = selector.as_deref().map(to_labels);
            let expected = model
                .services
                .insert((*ns, name), selector.as_deref().map(to_map));
            let old = index.services().apply(s);
            assert_eq!(
                old.map(|s| s.selector.as_ref().map(plain)),
                expected.map(|e| e.as_ref().map(owned))
            );
        }
        Op::DeleteService { ns, name } => {
            let name = format!("svc-{name}");
            let old = index.services().delete(NAMESPACES[*ns], &name);
            let expected = model.services.remove(&(*ns, name));
            assert_eq!(
                old.map(|s| s.selector.as_ref().map(plain)),
                expected.map(|e| e.as_ref().map(owned))
            );
        }
        Op::ResetPods { keep_every } => {
            let before = model.pods.len();
            model.pods = std::mem::take(&mut model.pods)
                .into_iter()
                .enumerate()
                .filter(|(i, _)| i % keep_every == 0)
                .map(|(_, entry)| entry)
                .collect();
            let relist = index
                .pods()
                .reset(model.pods.iter().map(|((ns, name), labels)| {
                    let mut p = pod(NAMESPACES[*ns], name, &[]);
                    p.meta.labels = Labels::from_pairs(labels.iter().map(|(k, v)| (*k, *v)));
                    p
                }));
            assert_eq!(relist.deleted.len(), before - model.pods.len());
            assert!(relist.applied.is_empty(), "equal pods are not reapplied");
        }
    }
}

fn check(index: &Index, model: &Model, probes: &[Pairs]) {
    assert_eq!(index.pods().len(), model.pods.len());
    assert_eq!(index.services().len(), model.services.len());
    for ((ns, name), selector) in &model.services {
        let members = index.members(&key(NAMESPACES[*ns], name));
        assert_eq!(
            names(&members),
            model.members(*ns, selector),
            "members of {name}"
        );
        for p in &members {
            let labels = model.pods.get(&(*ns, p.meta.name.to_string()));
            assert_eq!(
                labels.map(owned),
                Some(plain(&p.meta.labels)),
                "the stored version"
            );
        }
    }
    for ((ns, _), labels) in &model.pods {
        let pairs = Labels::from_pairs(labels.iter().map(|(k, v)| (*k, *v)));
        let found = index.services_for_pod(NAMESPACES[*ns], &pairs);
        assert_eq!(keys_of(&found), model.services_for(*ns, labels));
    }
    for (ns, namespace) in NAMESPACES.iter().enumerate() {
        for probe in probes {
            let found = index.services_for_pod(namespace, &to_labels(probe));
            assert_eq!(keys_of(&found), model.services_for(ns, &to_map(probe)));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The selector cache finds exactly what a scan of every service finds, through selector churn.
    #[test]
    fn services_for_pod_equals_a_scan(
        services in prop::collection::vec((0..NAMESPACES.len(), 0..10usize, selector()), 0..40),
        probes in prop::collection::vec(label_set(), 1..20),
    ) {
        let index = Index::new();
        let mut model = Model::default();
        for (i, (ns, name, selector)) in services.into_iter().enumerate() {
            apply(&index, &mut model, &Op::Service { ns, name, selector });
            if i % 5 == 4 {
                apply(&index, &mut model, &Op::DeleteService { ns, name: (name + 3) % 10 });
            }
            for probe in &probes {
                prop_assert_eq!(
                    keys_of(&index.services_for_pod(NAMESPACES[ns], &to_labels(probe))),
                    model.services_for(ns, &to_map(probe))
                );
            }
        }
    }

    /// Member sets and lookups equal brute force after every step of a random event sequence.
    #[test]
    fn members_equal_a_scan(
        ops in prop::collection::vec(op(), 1..80),
        probes in prop::collection::vec(label_set(), 1..6),
    ) {
        let index = Index::new();
        let mut model = Model::default();
        for op in &ops {
            apply(&index, &mut model, op);
            check(&index, &model, &probes);
        }
    }
}
