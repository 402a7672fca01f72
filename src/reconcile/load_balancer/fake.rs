//! A provider for tests: it records every call, hands each Service one address from
//! `203.0.113.0/24` in the order of their first ensure, and fails on demand.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};

use parking_lot::Mutex;

use super::provider::{Ensured, LoadBalancerProvider, ProviderError};
use super::rules::HostSet;
use crate::model::{LoadBalancerIngress, Service};

/// Which operation a call was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    Get,
    Ensure,
    UpdateHosts,
    EnsureDeleted,
}

/// One call the fake provider answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeCall {
    pub operation: Operation,
    /// `namespace/name`.
    pub service: String,
    /// The backends passed, by node name.
    pub hosts: Vec<String>,
}

#[derive(Default)]
struct State {
    calls: Vec<FakeCall>,
    /// Load balancers that exist, by `namespace/name`, with their address.
    balancers: HashMap<String, IpAddr>,
    next: u8,
    failures: HashMap<(Operation, String), VecDeque<ProviderError>>,
}

#[derive(Default)]
pub struct FakeProvider {
    state: Mutex<State>,
}

impl FakeProvider {
    pub fn new() -> Self {
        FakeProvider::default()
    }

    /// The next `operation` on `service` (`namespace/name`) answers `error`; queued errors are
    /// answered in order, one per call.
    pub fn fail_next(&self, operation: Operation, service: &str, error: ProviderError) {
        self.state
            .lock()
            .failures
            .entry((operation, service.to_owned()))
            .or_default()
            .push_back(error);
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<FakeCall> {
        self.state.lock().calls.clone()
    }

    /// Whether a load balancer exists for `service`.
    pub fn exists(&self, service: &str) -> bool {
        self.state.lock().balancers.contains_key(service)
    }

    fn call(
        &self,
        operation: Operation,
        service: &Service,
        hosts: Option<&HostSet>,
    ) -> Result<(String, parking_lot::MutexGuard<'_, State>), ProviderError> {
        let key = service.meta.key();
        let mut st = self.state.lock();
        st.calls.push(FakeCall {
            operation,
            service: key.clone(),
            hosts: hosts
                .into_iter()
                .flat_map(|h| h.keys().map(|n| n.to_string()))
                .collect(),
        });
        if let Some(error) = st
            .failures
            .get_mut(&(operation, key.clone()))
            .and_then(VecDeque::pop_front)
        {
            return Err(error);
        }
        Ok((key, st))
    }
}

impl LoadBalancerProvider for FakeProvider {
    fn provider_name(&self) -> &'static str {
        "fake"
    }

    fn get(&self, service: &Service) -> Result<Option<Vec<LoadBalancerIngress>>, ProviderError> {
        let (key, st) = self.call(Operation::Get, service, None)?;
        Ok(st
            .balancers
            .get(&key)
            .map(|ip| vec![LoadBalancerIngress::ip(*ip)]))
    }

    fn ensure(&self, service: &Service, hosts: &HostSet) -> Result<Ensured, ProviderError> {
        let (key, mut st) = self.call(Operation::Ensure, service, Some(hosts))?;
        let ip = match st.balancers.get(&key) {
            Some(ip) => *ip,
            None => {
                st.next = st.next.checked_add(1).ok_or_else(|| {
                    ProviderError::failed("the fake provider has no addresses left")
                })?;
                let ip = IpAddr::V4(Ipv4Addr::new(203, 0, 113, st.next));
                st.balancers.insert(key, ip);
                ip
            }
        };
        Ok(Ensured {
            ingress: vec![LoadBalancerIngress::ip(ip)],
            events: Vec::new(),
        })
    }

    fn update_hosts(&self, service: &Service, hosts: &HostSet) -> Result<(), ProviderError> {
        self.call(Operation::UpdateHosts, service, Some(hosts))
            .map(|_| ())
    }

    fn ensure_deleted(&self, service: &Service) -> Result<(), ProviderError> {
        let (key, mut st) = self.call(Operation::EnsureDeleted, service, None)?;
        st.balancers.remove(&key);
        Ok(())
    }
}
