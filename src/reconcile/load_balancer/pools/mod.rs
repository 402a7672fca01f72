//! Bare-metal LoadBalancer address pools, compatible with MetalLB's configuration
//! (`IPAddressPool` objects) and allocation rules, so MetalLB users can switch without their
//! Services changing address.
//!
//! [`pool_from_object`] and [`check_pools`] turn `IPAddressPool` objects into [`Pool`]s;
//! an [`Allocator`] tracks which Service holds which address and gives new ones
//! ([`Allocator::allocate`]), takes known ones ([`Allocator::assign`], for a restart reloading
//! status or requested addresses), and runs MetalLB's per-Service convergence
//! ([`Allocator::converge`]). Everything is pure: no I/O, no threads, no clock.
//!
//! Where this differs from MetalLB on purpose, the item's documentation says so.

mod allocator;
mod config;
mod converge;
mod error;
mod occupancy;
mod range;
mod search;
mod selector;
mod state;

#[cfg(test)]
mod tests;

pub use allocator::{Allocator, Claim, FamilyPolicy, PoolUsage};
pub use config::{
    API_VERSION, IpAddressPoolObject, IpAddressPoolSpec, KIND, Overlap, Pool, PoolError,
    PoolMetadata, PoolProblem, ServiceAllocation, check_pools, pool_from_object,
};
pub use converge::{ConvergeError, Converged, Note, NoteReason};
pub use error::{AllocationError, SharingRefusal, Wanted};
pub use range::{AddrRange, RangeError};
pub use selector::{LabelSelector, LabelSelectorRequirement, LabelSource, NoLabels, Operator};
