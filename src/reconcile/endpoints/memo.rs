//! The hashes that ordered a service's subsets at its last sync, with the state of each subset's
//! print after every address. Upstream orders subsets by hashing each one's whole print, hundreds
//! of bytes an address; a sync where a few pods changed resumes each subset's hash after the
//! longest run of first addresses it shares with a subset remembered, and a subset unchanged is
//! not printed at all.

use std::net::IpAddr;
use std::sync::Arc;

use crate::model::{EndpointsPort, Pod};
use crate::reconcile::hash_order::{HashKey, Resume};

/// One address as the print sees it: the pod behind it (by identity: a pod held in an `Arc` is
/// never changed, and [`SubsetMemo`] keeps it alive so that no other pod can take its place in
/// memory) and the IP taken from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AddressKey {
    pub pod: usize,
    pub ip: IpAddr,
}

impl AddressKey {
    pub fn of(pod: &Pod, ip: IpAddr) -> AddressKey {
        AddressKey {
            pod: std::ptr::from_ref(pod) as usize,
            ip,
        }
    }
}

/// A subset's addresses and ports, with the state of its print's hash after each address (ready
/// ones, then not-ready ones) and the whole print's hash.
#[derive(Debug)]
pub(crate) struct Remembered {
    pub ready: Vec<AddressKey>,
    pub not_ready: Vec<AddressKey>,
    pub ports: Vec<EndpointsPort>,
    pub states: Vec<HashKey>,
    pub hash: HashKey,
}

/// Where a subset's hash resumes from a remembered one.
pub(crate) struct Start<'m> {
    pub from: Resume,
    /// The state to resume from, meaningless at [`Resume::Start`].
    pub state: HashKey,
    /// The states of the addresses skipped.
    pub states: &'m [HashKey],
    /// The whole hash, when the subset is one remembered: then nothing is resumed, and `states`
    /// are all its states.
    pub hash: Option<HashKey>,
}

/// The subsets of one service's last sync of several subsets. Held only while the service has
/// several, and only by a service whose addresses are kept between syncs.
#[derive(Debug, Default)]
pub(crate) struct SubsetMemo {
    subsets: Vec<Remembered>,
    /// The pods the remembered addresses point at.
    alive: Vec<Arc<Pod>>,
}

fn common_prefix(a: &[AddressKey], b: &[AddressKey]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl SubsetMemo {
    /// Where the hash of the subset of these addresses and ports resumes: after the most
    /// addresses any remembered subset shares with it from its first.
    pub(crate) fn start(
        &self,
        ready: &[AddressKey],
        not_ready: &[AddressKey],
        ports: &[EndpointsPort],
    ) -> Start<'_> {
        let mut best = Start {
            from: Resume::Start,
            state: 0,
            states: &[],
            hash: None,
        };
        for r in &self.subsets {
            let shared_ready = common_prefix(&r.ready, ready);
            let all_ready = shared_ready == ready.len() && shared_ready == r.ready.len();
            let shared_not_ready = if all_ready {
                common_prefix(&r.not_ready, not_ready)
            } else {
                0
            };
            let skipped = shared_ready + shared_not_ready;
            if all_ready
                && shared_not_ready == not_ready.len()
                && shared_not_ready == r.not_ready.len()
                && r.ports == ports
            {
                return Start {
                    from: Resume::Start,
                    state: 0,
                    states: &r.states,
                    hash: Some(r.hash),
                };
            }
            if skipped <= best.states.len() {
                continue;
            }
            best = Start {
                from: if shared_not_ready > 0 {
                    Resume::NotReady(shared_not_ready)
                } else {
                    Resume::Ready(shared_ready)
                },
                state: r.states[skipped - 1],
                states: &r.states[..skipped],
                hash: None,
            };
        }
        best
    }

    /// Replaces what is remembered with `subsets`, whose pods are among `alive`.
    pub(crate) fn remember(&mut self, subsets: Vec<Remembered>, alive: Vec<Arc<Pod>>) {
        self.subsets = subsets;
        self.alive = alive;
    }

    /// Forgets every subset, and lets their pods go.
    pub(crate) fn clear(&mut self) {
        if !self.subsets.is_empty() || !self.alive.is_empty() {
            *self = SubsetMemo::default();
        }
    }
}
