//! Why an address could not be given to a Service.

use std::fmt;
use std::net::IpAddr;

use super::range::family_name;
use crate::model::{IpFamily, Protocol};

/// What a claim asks for, as error messages name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// One address of this family.
    One(IpFamily),
    /// One address of each family, from one pool (RequireDualStack).
    Both,
    /// Both families if one pool has them, else either (PreferDualStack).
    Either,
}

impl fmt::Display for Wanted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wanted::One(family) => write!(f, "an {} address", family_name(*family)),
            Wanted::Both => f.write_str("an IPv4 and an IPv6 address from one pool"),
            Wanted::Either => f.write_str("an IPv4 or IPv6 address"),
        }
    }
}

/// Why an address already held could not be shared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SharingRefusal {
    /// The holder has no `metallb.io/allow-shared-ip` annotation.
    HolderDoesNotShare,
    /// The claim has no `metallb.io/allow-shared-ip` annotation.
    ClaimDoesNotShare,
    /// The sharing keys differ.
    KeyDiffers {
        /// The claim's key.
        ours: String,
        /// The holder's key.
        theirs: String,
    },
    /// Both use `externalTrafficPolicy: Local` with different selectors, or only one does.
    BackendDiffers {
        /// The claim's backend key (its selector), empty for Cluster.
        ours: String,
        /// The holder's.
        theirs: String,
    },
    /// The holder already uses this port.
    PortInUse(Protocol, i32),
}

impl fmt::Display for SharingRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SharingRefusal::HolderDoesNotShare => {
                f.write_str("it does not allow sharing (no metallb.io/allow-shared-ip)")
            }
            SharingRefusal::ClaimDoesNotShare => {
                f.write_str("this service does not allow sharing (no metallb.io/allow-shared-ip)")
            }
            SharingRefusal::KeyDiffers { ours, theirs } => {
                write!(
                    f,
                    "sharing key {ours:?} differs from its sharing key {theirs:?}"
                )
            }
            SharingRefusal::BackendDiffers { ours, theirs } => write!(
                f,
                "externalTrafficPolicy Local needs the same pod selector: {ours:?} differs from {theirs:?}"
            ),
            SharingRefusal::PortInUse(proto, port) => {
                write!(f, "it already uses port {proto:?}/{port}")
            }
        }
    }
}

/// Why an allocation, assignment or convergence failed. Nothing changed when one is returned,
/// except where `converge` says otherwise.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocationError {
    /// No pool is configured.
    #[error("no address pools are configured")]
    NoPools,
    /// An assignment of no address.
    #[error("no address to assign")]
    NoAddresses,
    /// More than two addresses.
    #[error("more than two addresses: {0:?}")]
    TooManyAddresses(Vec<IpAddr>),
    /// Two addresses of one family.
    #[error("{0} and {1} are of the same family; a service takes at most one per family")]
    SameFamily(IpAddr, IpAddr),
    /// The addresses do not fit the Service's IP families.
    #[error("{ips:?} do not match the service's IP families: it needs {wanted}")]
    FamilyMismatch {
        /// The addresses.
        ips: Vec<IpAddr>,
        /// What the Service's families call for.
        wanted: Wanted,
    },
    /// The address is in no pool.
    #[error("{0} is not in any address pool")]
    NotInAnyPool(IpAddr),
    /// The address is in a range of a pool that avoids `.0` and `.255`.
    #[error("{ip} ends in .0 or .255, which pool {pool:?} leaves out (avoidBuggyIPs)")]
    AvoidedAddress {
        /// The address.
        ip: IpAddr,
        /// The pool whose range holds it.
        pool: String,
    },
    /// The addresses are in different pools.
    #[error("{0} is in pool {1:?} but {2} is in pool {3:?}: both must come from one pool")]
    SplitAcrossPools(IpAddr, String, IpAddr, String),
    /// The pool's `serviceAllocation` excludes the Service.
    #[error("pool {pool:?} may not be used by {service}: {why}")]
    PoolNotAllowed {
        /// The pool.
        pool: String,
        /// The Service, `namespace/name`.
        service: String,
        /// Which rule excludes it.
        why: String,
    },
    /// The `metallb.io/address-pool` annotation names no pool.
    #[error("unknown pool {0:?} (annotation metallb.io/address-pool)")]
    UnknownPool(String),
    /// The requested addresses are not in the pool the annotation names.
    #[error(
        "requested addresses {ips:?} are in pool {actual:?}, not in pool {requested:?} that metallb.io/address-pool names"
    )]
    PoolMismatch {
        /// The requested addresses.
        ips: Vec<IpAddr>,
        /// Their pool.
        actual: String,
        /// The annotation's pool.
        requested: String,
    },
    /// The address is held by a Service it cannot be shared with.
    #[error("{ip} is already in use by {holder}: {why}")]
    InUse {
        /// The address.
        ip: IpAddr,
        /// The holder refusing it, `namespace/name`.
        holder: String,
        /// Why sharing was refused.
        why: SharingRefusal,
    },
    /// The pool has no range of a family the claim needs.
    #[error("no available IPs in pool {pool:?}: it has no {} range, and the service needs {wanted}", family_name(*.family))]
    PoolLacksFamily {
        /// The pool.
        pool: String,
        /// The missing family.
        family: IpFamily,
        /// What the claim needed.
        wanted: Wanted,
    },
    /// Every usable address of the pool is taken.
    #[error("no available IPs in pool {pool:?} for {wanted}")]
    PoolExhausted {
        /// The pool.
        pool: String,
        /// What the claim needed.
        wanted: Wanted,
    },
    /// No pool that may serve the claim without an annotation had what it needs.
    #[error("no available IPs for {wanted}{}", tried_text(.tried))]
    NoAvailableIps {
        /// What the claim needed.
        wanted: Wanted,
        /// The pools tried, in order.
        tried: Vec<String>,
    },
}

fn tried_text(tried: &[String]) -> String {
    if tried.is_empty() {
        return ": no pool with autoAssign may be used by this service".into();
    }
    let names: Vec<String> = tried.iter().map(|n| format!("{n:?}")).collect();
    format!(" (pools tried: {})", names.join(", "))
}
