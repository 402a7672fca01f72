//! The service (LoadBalancer) controller's pure side: upstream's rules for which Services want a
//! load balancer and when, which nodes back one, and the provider it asks; with a fake provider
//! for tests and the built-in address-pool provider.

pub mod fake;
pub mod pool_provider;
pub mod pools;
pub mod provider;
pub mod rules;

pub use pool_provider::PoolProvider;
pub use provider::{Ensured, LoadBalancerProvider, ProviderError};
pub use rules::{
    ClassFilter, HostSet, backs_load_balancers, host_set, needs_cleanup, needs_update,
    node_change_matters, wants_load_balancer,
};
