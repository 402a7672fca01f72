//! Address ranges of one family, and the integer arithmetic behind them.
//!
//! An address is handled as a `u128` (an IPv4 address uses the low 32 bits) together with its
//! family, so one set of range operations serves both families. Every step that could leave the
//! address space uses checked arithmetic: a range may be the whole IPv6 space.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::model::IpFamily;

/// What is wrong with the text of one `spec.addresses` entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// Neither a CIDR (`addr/len`) nor a range (`first-last`).
    #[error("neither a CIDR (\"192.168.10.0/24\") nor a range (\"192.168.9.1-192.168.9.5\")")]
    Unrecognised,
    /// The address part does not parse.
    #[error("{0:?} is not an IP address")]
    BadAddress(String),
    /// The prefix length is not a number within the family's width.
    #[error("prefix length {0:?} is not a number from 0 to {1}")]
    BadPrefix(String, u8),
    /// The range starts after it ends.
    #[error("the first address is after the last")]
    FirstAfterLast,
    /// One end is IPv4, the other IPv6.
    #[error("the first and the last address are of different families")]
    MixedFamilies,
}

/// An inclusive range of addresses of one family: a CIDR or an explicit `first-last` range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AddrRange {
    first: IpAddr,
    last: IpAddr,
}

impl AddrRange {
    /// The range `first..=last`; both ends of one family, `first <= last`.
    pub fn new(first: IpAddr, last: IpAddr) -> Result<Self, RangeError> {
        if family_of(first) != family_of(last) {
            return Err(RangeError::MixedFamilies);
        }
        if to_u128(first) > to_u128(last) {
            return Err(RangeError::FirstAfterLast);
        }
        Ok(AddrRange { first, last })
    }

    /// Parses a MetalLB address entry: a CIDR (host bits are cleared, as Go's `net.ParseCIDR`
    /// does) or a `first-last` range (spaces around either end are allowed).
    pub fn parse(text: &str) -> Result<Self, RangeError> {
        if let Some((first, last)) = text.split_once('-') {
            let first = parse_addr(first.trim())?;
            let last = parse_addr(last.trim())?;
            return AddrRange::new(first, last);
        }
        let Some((addr, len)) = text.split_once('/') else {
            return Err(RangeError::Unrecognised);
        };
        let addr = parse_addr(addr)?;
        let width = width(family_of(addr));
        let len = match len.parse::<u8>() {
            Ok(n) if n <= width && len.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => return Err(RangeError::BadPrefix(len.to_string(), width)),
        };
        let host = host_mask(width, len);
        let family = family_of(addr);
        let value = to_u128(addr);
        let first = from_u128(family, value & !host);
        let last = from_u128(family, value | host);
        match (first, last) {
            (Some(first), Some(last)) => Ok(AddrRange { first, last }),
            _ => Err(RangeError::Unrecognised),
        }
    }

    /// The lowest address.
    pub fn first(&self) -> IpAddr {
        self.first
    }

    /// The highest address.
    pub fn last(&self) -> IpAddr {
        self.last
    }

    /// The family of both ends.
    pub fn family(&self) -> IpFamily {
        family_of(self.first)
    }

    /// Whether `ip` lies in the range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        family_of(ip) == self.family() && (self.lo()..=self.hi()).contains(&to_u128(ip))
    }

    /// Whether the two ranges share an address.
    pub fn overlaps(&self, other: &AddrRange) -> bool {
        self.family() == other.family() && self.lo() <= other.hi() && other.lo() <= self.hi()
    }

    /// The number of addresses, saturating at `u128::MAX` for the whole IPv6 space.
    pub fn size(&self) -> u128 {
        (self.hi() - self.lo()).saturating_add(1)
    }

    /// The number of IPv4 addresses ending in `.0` or `.255` (none for IPv6).
    pub fn buggy_count(&self) -> u128 {
        if self.family() == IpFamily::V6 {
            return 0;
        }
        // Buggy addresses in 0..=n: those with low byte 0 (n/256 + 1) and 255 ((n+1)/256).
        let upto = |n: u128| n / 256 + 1 + (n + 1) / 256;
        let below = match self.lo().checked_sub(1) {
            Some(n) => upto(n),
            None => 0,
        };
        upto(self.hi()) - below
    }

    pub(crate) fn lo(&self) -> u128 {
        to_u128(self.first)
    }

    pub(crate) fn hi(&self) -> u128 {
        to_u128(self.last)
    }

    /// The prefix length when the range is exactly one CIDR block.
    fn prefix_len(&self) -> Option<u8> {
        let width = width(self.family());
        let span = self.hi() - self.lo();
        let host_bits = if span == u128::MAX {
            128
        } else {
            let count = span + 1;
            if !count.is_power_of_two() {
                return None;
            }
            count.trailing_zeros()
        };
        let len = u32::from(width).checked_sub(host_bits)?;
        let len = u8::try_from(len).ok()?;
        (self.lo() & host_mask(width, len) == 0).then_some(len)
    }
}

impl fmt::Display for AddrRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.prefix_len() {
            Some(len) => write!(f, "{}/{}", self.first, len),
            None => write!(f, "{}-{}", self.first, self.last),
        }
    }
}

fn parse_addr(text: &str) -> Result<IpAddr, RangeError> {
    text.parse::<IpAddr>()
        .map_err(|_| RangeError::BadAddress(text.to_string()))
}

/// Bits in an address of `family`.
pub(crate) fn width(family: IpFamily) -> u8 {
    match family {
        IpFamily::V4 => 32,
        IpFamily::V6 => 128,
    }
}

/// The host bits of a `len`-bit prefix in a `width`-bit address.
fn host_mask(width: u8, len: u8) -> u128 {
    let host_bits = u32::from(width.saturating_sub(len));
    match 1u128.checked_shl(host_bits) {
        Some(v) => v - 1,
        None => u128::MAX,
    }
}

/// The family of an address.
pub(crate) fn family_of(ip: IpAddr) -> IpFamily {
    match ip {
        IpAddr::V4(_) => IpFamily::V4,
        IpAddr::V6(_) => IpFamily::V6,
    }
}

/// The address as an integer.
pub(crate) fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The address of `family` with value `v`, if it fits.
pub(crate) fn from_u128(family: IpFamily, v: u128) -> Option<IpAddr> {
    match family {
        IpFamily::V4 => u32::try_from(v).ok().map(|v| IpAddr::V4(Ipv4Addr::from(v))),
        IpFamily::V6 => Some(IpAddr::V6(Ipv6Addr::from(v))),
    }
}

/// An IPv4 address ending in `.0` or `.255`, which some consumer firmware drops (MetalLB's
/// `avoidBuggyIPs`). Never true of IPv6.
pub(crate) fn is_buggy(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => matches!(v4.octets()[3], 0 | 255),
        IpAddr::V6(_) => false,
    }
}

/// The name a person reads for a family.
pub(crate) fn family_name(family: IpFamily) -> &'static str {
    match family {
        IpFamily::V4 => "IPv4",
        IpFamily::V6 => "IPv6",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn parses_cidrs_and_ranges() {
        let r = AddrRange::parse("192.168.10.0/24").unwrap();
        assert_eq!(
            (r.first(), r.last()),
            (ip("192.168.10.0"), ip("192.168.10.255"))
        );
        assert_eq!(r.size(), 256);
        // Host bits are cleared, as net.ParseCIDR does.
        let r = AddrRange::parse("192.168.10.77/30").unwrap();
        assert_eq!(
            (r.first(), r.last()),
            (ip("192.168.10.76"), ip("192.168.10.79"))
        );
        let r = AddrRange::parse("192.168.9.1 - 192.168.9.5").unwrap();
        assert_eq!(
            (r.first(), r.last()),
            (ip("192.168.9.1"), ip("192.168.9.5"))
        );
        assert_eq!(r.to_string(), "192.168.9.1-192.168.9.5");
        let r = AddrRange::parse("fc00::/120").unwrap();
        assert_eq!(r.last(), ip("fc00::ff"));
        assert_eq!(r.to_string(), "fc00::/120");
        let r = AddrRange::parse("fc00::10-fc00::1:0").unwrap();
        assert_eq!(r.size(), 0x1_0000 - 0x10 + 1);
        let all = AddrRange::parse("::/0").unwrap();
        assert_eq!(all.size(), u128::MAX);
        assert_eq!(all.to_string(), "::/0");
        assert_eq!(AddrRange::parse("0.0.0.0/0").unwrap().size(), 1 << 32);
        assert_eq!(AddrRange::parse("10.0.0.1/32").unwrap().size(), 1);
    }

    #[test]
    fn rejects_bad_entries() {
        use RangeError::*;
        let err = |s: &str| AddrRange::parse(s).unwrap_err();
        assert_eq!(err("10.0.0.5-10.0.0.1"), FirstAfterLast);
        assert_eq!(err("10.0.0.1-fc00::1"), MixedFamilies);
        assert_eq!(err("10.0.0.1"), Unrecognised);
        assert_eq!(err("10.0.0.0/33"), BadPrefix("33".into(), 32));
        assert_eq!(err("fc00::/129"), BadPrefix("129".into(), 128));
        assert_eq!(err("10.0.0.0/+8"), BadPrefix("+8".into(), 32));
        assert_eq!(err("10.0.0/8"), BadAddress("10.0.0".into()));
        assert_eq!(err("10.0.0.1-x"), BadAddress("x".into()));
    }

    #[test]
    fn overlap_and_contains() {
        let a = AddrRange::parse("10.0.0.0/24").unwrap();
        let b = AddrRange::parse("10.0.0.255-10.0.1.3").unwrap();
        let c = AddrRange::parse("10.0.1.0/24").unwrap();
        let v6 = AddrRange::parse("::/0").unwrap();
        assert!(a.overlaps(&b) && b.overlaps(&c) && !a.overlaps(&c));
        assert!(!a.overlaps(&v6));
        assert!(a.contains(ip("10.0.0.255")) && !a.contains(ip("10.0.1.0")));
        assert!(!v6.contains(ip("10.0.0.1")) && v6.contains(ip("ffff::1")));
    }

    #[test]
    fn counts_buggy_addresses() {
        let n = |s: &str| AddrRange::parse(s).unwrap().buggy_count();
        assert_eq!(n("10.0.0.0/24"), 2);
        assert_eq!(n("10.0.0.0/16"), 512);
        assert_eq!(n("10.0.0.1-10.0.0.254"), 0);
        assert_eq!(n("10.0.0.255-10.0.1.0"), 2);
        assert_eq!(n("0.0.0.0/0"), 2 << 24);
        assert_eq!(n("fc00::/120"), 0);
        assert!(is_buggy(ip("10.1.2.0")) && is_buggy(ip("10.1.2.255")));
        assert!(!is_buggy(ip("10.1.2.1")) && !is_buggy(ip("fc00::ff")));
    }
}
