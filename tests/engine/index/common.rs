//! Builders shared by the index tests.

use std::sync::Arc;

use sliced::index::ServiceKey;
use sliced::model::{Labels, Meta, Name, Pod, PodBuilder, Service, intern};

pub fn meta(ns: &str, name: &str) -> Meta {
    Meta {
        namespace: intern(ns),
        name: Name::new(name),
        ..Meta::default()
    }
}

pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    Labels::from_pairs(pairs.iter().copied())
}

pub fn pod(ns: &str, name: &str, pairs: &[(&str, &str)]) -> Pod {
    Pod::from(PodBuilder {
        meta: Meta {
            labels: labels(pairs),
            ..meta(ns, name)
        },
        ..PodBuilder::default()
    })
}

/// A service; `None` for no selector.
pub fn service(ns: &str, name: &str, selector: Option<&[(&str, &str)]>) -> Service {
    Service {
        meta: Meta {
            name: intern(name),
            ..meta(ns, name)
        },
        selector: selector.map(labels),
        ..Service::default()
    }
}

pub fn key(ns: &str, name: &str) -> ServiceKey {
    ServiceKey::new(ns, name)
}

pub fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
    pods.iter().map(|p| p.meta.name.as_str()).collect()
}

pub fn keys_of(keys: &[ServiceKey]) -> Vec<String> {
    keys.iter().map(|k| k.to_string()).collect()
}
