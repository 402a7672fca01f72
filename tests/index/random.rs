//! Random event sequences against a brute-force oracle: after every event, each service's members
//! and each pod's services are what a scan of every pod and service finds.

use std::collections::BTreeMap;

use proptest::prelude::*;

use sliced::index::Index;
use sliced::model::Labels;

use crate::common::{key, keys_of, names, pod, service};

const NAMESPACES: [&str; 2] = ["n1", "n2"];
const KEYS: [&str; 4] = ["app", "tier", "track", "zone"];
const VALUES: [&str; 3] = ["a", "b", "c"];

/// Label pairs as (key, value) indexes; a repeated key keeps its last value.
type Pairs = Vec<(usize, usize)>;

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
    pods: BTreeMap<(usize, String), Labels>,
    services: BTreeMap<(usize, String), Option<Labels>>,
}

impl Model {
    fn services_for(&self, ns: usize, labels: &Labels) -> Vec<String> {
        self.services
            .iter()
            .filter(|((n, _), sel)| *n == ns && sel.as_ref().is_some_and(|s| labels.matches(s)))
            .map(|((n, name), _)| format!("{}/{name}", NAMESPACES[*n]))
            .collect()
    }

    fn members(&self, ns: usize, selector: &Option<Labels>) -> Vec<String> {
        let Some(selector) = selector else {
            return Vec::new();
        };
        self.pods
            .iter()
            .filter(|((n, _), labels)| *n == ns && labels.matches(selector))
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
            let expected = model.pods.insert((*ns, name), p.meta.labels.clone());
            let old = index.pods().apply(p);
            assert_eq!(old.map(|p| p.meta.labels.clone()), expected);
        }
        Op::DeletePod { ns, name } => {
            let name = format!("pod-{name}");
            let old = index.pods().delete(NAMESPACES[*ns], &name);
            let expected = model.pods.remove(&(*ns, name));
            assert_eq!(old.map(|p| p.meta.labels.clone()), expected);
        }
        Op::Service { ns, name, selector } => {
            let name = format!("svc-{name}");
            let mut s = service(NAMESPACES[*ns], &name, None);
            s.selector = selector.as_deref().map(to_labels);
            let expected = model.services.insert((*ns, name), s.selector.clone());
            let old = index.services().apply(s);
            assert_eq!(old.map(|s| s.selector.clone()), expected);
        }
        Op::DeleteService { ns, name } => {
            let name = format!("svc-{name}");
            let old = index.services().delete(NAMESPACES[*ns], &name);
            let expected = model.services.remove(&(*ns, name));
            assert_eq!(old.map(|s| s.selector.clone()), expected);
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
                    p.meta.labels = labels.clone();
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
            assert_eq!(labels, Some(&p.meta.labels), "the stored version");
        }
    }
    for ((ns, _), labels) in &model.pods {
        let found = index.services_for_pod(NAMESPACES[*ns], labels);
        assert_eq!(keys_of(&found), model.services_for(*ns, labels));
    }
    for (ns, namespace) in NAMESPACES.iter().enumerate() {
        for probe in probes {
            let labels = to_labels(probe);
            let found = index.services_for_pod(namespace, &labels);
            assert_eq!(keys_of(&found), model.services_for(ns, &labels));
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
                let labels = to_labels(probe);
                prop_assert_eq!(
                    keys_of(&index.services_for_pod(NAMESPACES[ns], &labels)),
                    model.services_for(ns, &labels)
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
