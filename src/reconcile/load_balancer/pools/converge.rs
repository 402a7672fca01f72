//! MetalLB's convergence of one LoadBalancer Service: keep, top up, clear or allocate its
//! addresses, and the events it would record on the way.

use std::fmt;
use std::net::IpAddr;

use super::allocator::{Allocator, Claim, FamilyPolicy, check_shape};
use super::error::{AllocationError, Wanted};
use super::range::family_of;
use super::state::{ShareKey, fam};
use crate::model::IpFamily;

/// The reason of an event, as MetalLB records it on the Service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoteReason {
    /// Addresses were given (Normal).
    IpAllocated,
    /// The current addresses are no longer allowed and were dropped (Normal).
    ClearAssignment,
    /// PreferDualStack could not add the missing family (Normal).
    AdditionalAssignFailed,
    /// No address could be given (Warning).
    AllocationFailed,
}

impl NoteReason {
    /// The event reason string.
    pub fn as_str(self) -> &'static str {
        match self {
            NoteReason::IpAllocated => "IPAllocated",
            NoteReason::ClearAssignment => "ClearAssignment",
            NoteReason::AdditionalAssignFailed => "AdditionalAssignFailed",
            NoteReason::AllocationFailed => "AllocationFailed",
        }
    }

    /// Whether the event is of type Warning (else Normal).
    pub fn is_warning(self) -> bool {
        self == NoteReason::AllocationFailed
    }
}

/// One event to record on the Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The event reason.
    pub reason: NoteReason,
    /// The event message.
    pub message: String,
}

/// The outcome of converging a Service that ends up holding addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Converged {
    /// The addresses for `status.loadBalancer.ingress`, in order: kept ones first, then an added
    /// family; IPv4 first for a fresh dual pair.
    pub addresses: Vec<IpAddr>,
    /// Their pool, for annotation `metallb.io/ip-allocated-from-pool`.
    pub pool: String,
    /// Events, in the order they happened.
    pub notes: Vec<Note>,
}

/// A convergence that left the Service without addresses. Unlike the other operations this one
/// has changed state: the Service holds nothing afterwards, as MetalLB clears it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct ConvergeError {
    /// Events, in order; ends with `AllocationFailed` unless no pool is configured.
    pub notes: Vec<Note>,
    /// Why no address could be given.
    pub error: Box<AllocationError>,
}

struct Ips<'a>(&'a [IpAddr]);

impl fmt::Display for Ips<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(IpAddr::to_string).collect();
        write!(f, "[{}]", parts.join(", "))
    }
}

fn note(reason: NoteReason, message: String) -> Note {
    Note { reason, message }
}

impl Allocator {
    /// MetalLB's convergence of one Service. `current` holds the addresses of its status now,
    /// `desired` the addresses it requests (`metallb.io/loadBalancerIPs` or
    /// `spec.loadBalancerIP`, empty if none). In order:
    /// 1. current addresses that do not fit the families are dropped;
    /// 2. the rest are assigned again; if refused (`ClearAssignment`) they are dropped, as they
    ///    are when the pool annotation names another pool or `desired` differs from them;
    /// 3. PreferDual with one address tries to add the other family from the same pool
    ///    (`IPAllocated` or `AdditionalAssignFailed`);
    /// 4. with nothing left: the desired addresses (families must match the Service's exactly,
    ///    and the pool annotation, if set, must name their pool), else an allocation
    ///    (`IPAllocated`, or `AllocationFailed` and an error).
    ///
    /// Unlike MetalLB, step 3 runs only for [`FamilyPolicy::PreferDual`] (two cluster IPs): a
    /// PreferDualStack Service with one cluster IP is `Single`, and topping it up would make the
    /// next convergence drop the pair again. A caller whose status write is not visible yet
    /// should pass [`Allocator::addresses_of`] as `current`, or the Service may change address
    /// (MetalLB #2723).
    pub fn converge(
        &mut self,
        claim: &Claim<'_>,
        current: &[IpAddr],
        desired: &[IpAddr],
    ) -> Result<Converged, ConvergeError> {
        let service = claim.service;
        if self.pools.is_empty() {
            self.release(service);
            let error = Box::new(AllocationError::NoPools);
            return Err(ConvergeError {
                notes: Vec::new(),
                error,
            });
        }
        let mut notes = Vec::new();
        let mut ips = current.to_vec();
        if !claim.families.fits(&ips) {
            ips.clear();
        }
        if !ips.is_empty() {
            match self.validate(claim, &ips, false) {
                Ok(pool) => self.commit(claim, &ips, pool),
                Err(e) => {
                    let message = format!(
                        "current IPs {} of {service:?} are not allowed by the configuration, \
                         dropping them to allocate anew: {e}",
                        Ips(&ips)
                    );
                    notes.push(note(NoteReason::ClearAssignment, message));
                    ips.clear();
                }
            }
        }
        if !ips.is_empty()
            && let Some(wanted) = claim.pool_name()
            && self.pool_of_service(service) != Some(wanted)
        {
            ips.clear();
        }
        if !ips.is_empty() && !desired.is_empty() && !same_addresses(&ips, desired) {
            ips.clear();
        }
        if ips.is_empty() {
            self.release(service);
        }

        if let ([existing], FamilyPolicy::PreferDual(_)) = (ips.as_slice(), claim.families) {
            match self.add_other_family(claim, *existing) {
                Ok(added) => {
                    ips.push(added);
                    let message = format!("Assigned additional IP {added}");
                    notes.push(note(NoteReason::IpAllocated, message));
                }
                Err(e) => {
                    let message = format!("cannot assign additional IP in PreferDualStack: {e}");
                    notes.push(note(NoteReason::AdditionalAssignFailed, message));
                }
            }
        }

        if ips.is_empty() {
            let taken = if desired.is_empty() {
                self.allocate(claim)
            } else {
                self.take_desired(claim, desired).map(|()| desired.to_vec())
            };
            match taken {
                Ok(v) => {
                    let message = format!("Assigned IP {}", Ips(&v));
                    notes.push(note(NoteReason::IpAllocated, message));
                    ips = v;
                }
                Err(error) => {
                    let message = format!("Failed to allocate IP for {service:?}: {error}");
                    notes.push(note(NoteReason::AllocationFailed, message));
                    let error = Box::new(error);
                    return Err(ConvergeError { notes, error });
                }
            }
        }
        let pool = self
            .pool_of_service(service)
            .unwrap_or_default()
            .to_string();
        Ok(Converged {
            addresses: ips,
            pool,
            notes,
        })
    }

    /// Takes the requested addresses: their families must be exactly the Service's (one for a
    /// single family, one of each for either dual policy) and the pool annotation must agree.
    fn take_desired(
        &mut self,
        claim: &Claim<'_>,
        desired: &[IpAddr],
    ) -> Result<(), AllocationError> {
        check_shape(desired)?;
        let families: Vec<IpFamily> = desired.iter().map(|&ip| family_of(ip)).collect();
        let exact = match (claim.families, families.as_slice()) {
            (FamilyPolicy::Single(f), [g]) => f == *g,
            (FamilyPolicy::Single(_), _) => false,
            (_, [a, b]) => a != b,
            _ => false,
        };
        if !exact {
            let wanted = match claim.families {
                FamilyPolicy::Single(f) => Wanted::One(f),
                _ => Wanted::Both,
            };
            let ips = desired.to_vec();
            return Err(AllocationError::FamilyMismatch { ips, wanted });
        }
        let pool = self.validate(claim, desired, true)?;
        self.commit(claim, desired, pool);
        Ok(())
    }

    /// Adds an address of the family `existing` lacks, from the pool of the claim's holding.
    fn add_other_family(
        &mut self,
        claim: &Claim<'_>,
        existing: IpAddr,
    ) -> Result<IpAddr, AllocationError> {
        let other = match family_of(existing) {
            IpFamily::V4 => IpFamily::V6,
            IpFamily::V6 => IpFamily::V4,
        };
        let Some(p) = self.holdings.get(claim.service).map(|h| h.pool) else {
            return Err(AllocationError::NoAddresses);
        };
        let key = ShareKey::of(claim);
        let Some(added) = self.lowest_usable(p, other, claim, &key) else {
            return Err(self.shortage(p, other, FamilyPolicy::Single(other)));
        };
        debug_assert_eq!(fam(family_of(added)), fam(other));
        let ips = [existing, added];
        let pool = self.validate(claim, &ips, false)?;
        self.commit(claim, &ips, pool);
        Ok(added)
    }
}

/// Whether the two lists hold the same addresses (order aside).
fn same_addresses(a: &[IpAddr], b: &[IpAddr]) -> bool {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    a == b
}
