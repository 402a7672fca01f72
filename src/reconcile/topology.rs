//! Topology-aware hints and traffic distribution. (Placeholder until the topology module lands.)

use super::{Event, Options, TopologyChange};
use crate::model::{AddressType, EndpointSlice, Service};

#[derive(Debug, Default)]
pub struct TopologyCache {}

impl TopologyCache {
    pub fn set_nodes<'a>(&mut self, _nodes: impl IntoIterator<Item = &'a crate::model::Node>) {}
    pub fn apply(&mut self, _service_key: &str, _changes: &[TopologyChange]) {}
}

pub struct TopologyInput<'a> {
    pub service: &'a Service,
    pub service_key: &'a str,
    pub address_type: &'a AddressType,
    pub options: &'a Options,
    pub cache: &'a TopologyCache,
}

#[derive(Debug, Default)]
pub struct TopologyOutput {
    pub events: Vec<Event>,
    pub change: Option<TopologyChange>,
}

pub fn apply_hints(
    _input: &TopologyInput,
    _creates: &mut Vec<EndpointSlice>,
    _updates: &mut Vec<EndpointSlice>,
    _unchanged: &[&EndpointSlice],
) -> TopologyOutput {
    TopologyOutput::default()
}
