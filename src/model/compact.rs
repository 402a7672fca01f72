//! Compact forms of pod fields that are strings or wide values on the wire: the UID (16 bytes when
//! it is a UUID), the resourceVersion (a `u64` when numeric) and optional timestamps (12 bytes).
//! Each round-trips exactly: a value that has no compact form is kept as text.

use std::borrow::Cow;
use std::fmt;
use std::net::IpAddr;
use std::ops::Deref;

use super::{Name, Timestamp};

/// An object's UID. Kept as 16 bytes when it is a UUID in canonical (lowercase, hyphenated) form,
/// as the API server writes them; any other text is kept as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Uid(UidRepr);

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
enum UidRepr {
    #[default]
    Empty,
    Uuid([u8; 16]),
    Text(Name),
}

/// Where the hyphens of a canonical UUID are.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

impl Uid {
    /// The empty UID.
    pub const EMPTY: Uid = Uid(UidRepr::Empty);

    pub fn new(s: &str) -> Uid {
        if s.is_empty() {
            return Uid(UidRepr::Empty);
        }
        match parse_uuid(s) {
            Some(bytes) => Uid(UidRepr::Uuid(bytes)),
            None => Uid(UidRepr::Text(Name::new(s))),
        }
    }

    pub fn is_empty(&self) -> bool {
        matches!(self.0, UidRepr::Empty)
    }

    /// The UID as written.
    pub fn as_str(&self) -> Cow<'_, str> {
        match &self.0 {
            UidRepr::Empty => Cow::Borrowed(""),
            UidRepr::Uuid(b) => Cow::Owned(format_uuid(b, &mut [0; 36]).to_owned()),
            UidRepr::Text(t) => Cow::Borrowed(t.as_str()),
        }
    }

    /// True when it is held as 16 bytes.
    pub fn is_compact(&self) -> bool {
        matches!(self.0, UidRepr::Uuid(_))
    }

    /// The 16 bytes of a UUID, when it is held as one.
    pub(crate) fn uuid(&self) -> Option<[u8; 16]> {
        match self.0 {
            UidRepr::Uuid(b) => Some(b),
            _ => None,
        }
    }

    /// The UID whose [`Uid::uuid`] is `bytes`.
    pub(crate) fn from_uuid(bytes: [u8; 16]) -> Uid {
        Uid(UidRepr::Uuid(bytes))
    }
}

/// Ordered as the text is.
impl Ord for Uid {
    fn cmp(&self, other: &Uid) -> std::cmp::Ordering {
        match (&self.0, &other.0) {
            // Hex digits sort as their values and the hyphens are in the same places.
            (UidRepr::Uuid(a), UidRepr::Uuid(b)) => a.cmp(b),
            _ => self.as_str().cmp(&other.as_str()),
        }
    }
}

impl PartialOrd for Uid {
    fn partial_cmp(&self, other: &Uid) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            UidRepr::Uuid(b) => f.write_str(format_uuid(b, &mut [0; 36])),
            _ => f.write_str(&self.as_str()),
        }
    }
}

impl From<&str> for Uid {
    fn from(s: &str) -> Uid {
        Uid::new(s)
    }
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// The 16 bytes of a lowercase, hyphenated UUID; `None` for anything else.
fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let s = s.as_bytes();
    if s.len() != 36 || HYPHENS.iter().any(|&i| s[i] != b'-') {
        return None;
    }
    let mut digits = s
        .iter()
        .enumerate()
        .filter(|(i, _)| !HYPHENS.contains(i))
        .map(|(_, &c)| hex_value(c));
    let mut out = [0u8; 16];
    for byte in &mut out {
        let hi = digits.next()??;
        let lo = digits.next()??;
        *byte = hi << 4 | lo;
    }
    Some(out)
}

/// The canonical text of a UUID, written into `out`.
fn format_uuid<'a>(b: &[u8; 16], out: &'a mut [u8; 36]) -> &'a str {
    *out = uuid_ascii(b);
    // Only ASCII hex digits and hyphens were written.
    std::str::from_utf8(out).unwrap_or_default()
}

/// The canonical text of a UUID as bytes: lowercase hex digits and four hyphens.
pub(crate) fn uuid_ascii(b: &[u8; 16]) -> [u8; 36] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0; 36];
    let mut at = 0;
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out[at] = b'-';
            at += 1;
        }
        out[at] = HEX[usize::from(byte >> 4)];
        out[at + 1] = HEX[usize::from(byte & 0xf)];
        at += 2;
    }
    out
}

/// The order of two resourceVersions of one resource, as apimachinery's `resourceversion` package
/// defines it (Kubernetes 1.35, KEP-5504): both must be decimal integers without sign or leading
/// zero, of any length. `None` when either is not, and then only equality means anything.
pub fn compare_resource_versions(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    let well_formed =
        |s: &str| !s.is_empty() && !s.starts_with('0') && s.bytes().all(|c| c.is_ascii_digit());
    (well_formed(a) && well_formed(b)).then(|| a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
}

/// A resourceVersion. Kept for equality, so a decimal number in canonical form (no sign, no
/// leading zero) is kept as a `u64`; any other text as it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ResourceVersion {
    Number(u64),
    Text(Name),
}

impl Default for ResourceVersion {
    fn default() -> Self {
        ResourceVersion::Text(Name::default())
    }
}

impl ResourceVersion {
    pub fn new(s: &str) -> ResourceVersion {
        let canonical = !s.is_empty()
            && s.bytes().all(|c| c.is_ascii_digit())
            && (s == "0" || !s.starts_with('0'));
        match s.parse::<u64>() {
            Ok(n) if canonical => ResourceVersion::Number(n),
            _ => ResourceVersion::Text(Name::new(s)),
        }
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, ResourceVersion::Text(t) if t.is_empty())
    }

    /// The resourceVersion as written.
    pub fn as_str(&self) -> Cow<'_, str> {
        match self {
            ResourceVersion::Number(n) => Cow::Owned(n.to_string()),
            ResourceVersion::Text(t) => Cow::Borrowed(t.as_str()),
        }
    }
}

impl fmt::Display for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl From<&str> for ResourceVersion {
    fn from(s: &str) -> ResourceVersion {
        ResourceVersion::new(s)
    }
}

/// An optional timestamp in 12 bytes (4-byte aligned), to the nanosecond: the seconds split in two
/// words, and the nanoseconds, `i32::MIN` for none.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct PackedTime {
    seconds_low: u32,
    seconds_high: i32,
    nanos: i32,
}

impl PackedTime {
    pub const NONE: PackedTime = PackedTime {
        seconds_low: 0,
        seconds_high: 0,
        nanos: i32::MIN,
    };

    pub fn new(t: Option<Timestamp>) -> PackedTime {
        match t {
            None => PackedTime::NONE,
            Some(t) => {
                let s = t.as_second();
                PackedTime {
                    seconds_low: s as u32,
                    seconds_high: (s >> 32) as i32,
                    nanos: t.subsec_nanosecond(),
                }
            }
        }
    }

    pub fn get(self) -> Option<Timestamp> {
        if self.nanos == i32::MIN {
            return None;
        }
        let seconds = (i64::from(self.seconds_high) << 32) | i64::from(self.seconds_low);
        // Built only from a valid timestamp, so always valid.
        Timestamp::new(seconds, self.nanos).ok()
    }
}

impl Default for PackedTime {
    fn default() -> Self {
        PackedTime::NONE
    }
}

impl fmt::Debug for PackedTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.get(), f)
    }
}

/// A pod's IPs in 24 bytes: one inline (most pods have a single address), more on the heap.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum PodIps {
    #[default]
    None,
    One(IpAddr),
    Many(Box<[IpAddr]>),
}

impl PodIps {
    pub fn as_slice(&self) -> &[IpAddr] {
        match self {
            PodIps::None => &[],
            PodIps::One(ip) => std::slice::from_ref(ip),
            PodIps::Many(ips) => ips,
        }
    }
}

impl Deref for PodIps {
    type Target = [IpAddr];
    fn deref(&self) -> &[IpAddr] {
        self.as_slice()
    }
}

impl<'a> IntoIterator for &'a PodIps {
    type Item = &'a IpAddr;
    type IntoIter = std::slice::Iter<'a, IpAddr>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl FromIterator<IpAddr> for PodIps {
    fn from_iter<I: IntoIterator<Item = IpAddr>>(iter: I) -> Self {
        let mut iter = iter.into_iter();
        let Some(first) = iter.next() else {
            return PodIps::None;
        };
        let Some(second) = iter.next() else {
            return PodIps::One(first);
        };
        PodIps::Many([first, second].into_iter().chain(iter).collect())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn resource_versions_order_as_apimachinery_orders_them() {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let table = [
            ("9", "10", Some(Less)),
            ("10", "9", Some(Greater)),
            ("123", "123", Some(Equal)),
            ("123", "124", Some(Less)),
            // Longer than a u64, still ordered.
            (
                "99999999999999999999999",
                "100000000000000000000000",
                Some(Less),
            ),
            ("0", "1", None),
            ("01", "1", None),
            ("", "1", None),
            ("1", "-1", None),
            ("1a", "2", None),
            ("12", " 12", None),
        ];
        for (a, b, want) in table {
            assert_eq!(
                super::compare_resource_versions(a, b),
                want,
                "{a:?} vs {b:?}"
            );
        }
    }

    use super::*;

    #[test]
    fn uids_round_trip_compact_or_as_text() {
        for (s, compact) in [
            ("6f1c3c1e-4d2a-4b8e-9f00-0123456789ab", true),
            ("00000000-0000-4000-8000-000000000000", true),
            ("ffffffff-ffff-ffff-ffff-ffffffffffff", true),
            // Not canonical: kept as written.
            ("6F1C3C1E-4D2A-4B8E-9F00-0123456789AB", false),
            ("6f1c3c1e4d2a4b8e9f000123456789ab", false),
            ("6f1c3c1e-4d2a-4b8e-9f00-0123456789a", false),
            ("6f1c3c1e-4d2a-4b8e-9f00-0123456789abc", false),
            ("6f1c3c1e+4d2a-4b8e-9f00-0123456789ab", false),
            ("6f1c3c1e-4d2a-4b8e-9f00-0123456789ag", false),
            ("pod-uid-7", false),
            ("é1c3c1e-4d2a-4b8e-9f00-0123456789ab", false),
        ] {
            let uid = Uid::new(s);
            assert_eq!(uid.as_str(), s);
            assert_eq!(uid.to_string(), s);
            assert_eq!(uid.is_compact(), compact, "{s}");
            assert!(!uid.is_empty());
            assert_eq!(uid, Uid::from(s));
        }
        assert!(Uid::new("").is_empty());
        assert_eq!(Uid::new("").as_str(), "");
        assert_eq!(Uid::new(""), Uid::default());
        assert_ne!(
            Uid::new("00000000-0000-4000-8000-000000000001"),
            Uid::new("00000000-0000-4000-8000-000000000002")
        );
    }

    #[test]
    fn uids_order_as_their_text() {
        let texts = [
            "",
            "00000000-0000-4000-8000-000000000000",
            "0000000a-0000-4000-8000-000000000000",
            "0000000f-0000-4000-8000-000000000000",
            "0000000g",
            "00000010-0000-4000-8000-000000000000",
            "9fffffff-ffff-ffff-ffff-ffffffffffff",
            "A",
            "a0000000-0000-4000-8000-000000000000",
            "uid-1",
        ];
        for a in texts {
            for b in texts {
                assert_eq!(Uid::new(a).cmp(&Uid::new(b)), a.cmp(b), "{a} {b}");
            }
        }
    }

    #[test]
    fn resource_versions_round_trip_as_numbers_or_text() {
        for (s, number) in [
            ("0", Some(0)),
            ("1", Some(1)),
            ("1000042", Some(1_000_042)),
            ("18446744073709551615", Some(u64::MAX)),
            // Not canonical decimals: kept as written.
            ("18446744073709551616", None),
            ("007", None),
            ("+7", None),
            ("-1", None),
            ("12a", None),
            ("", None),
        ] {
            let rv = ResourceVersion::new(s);
            assert_eq!(rv.as_str(), s);
            assert_eq!(rv.to_string(), s);
            assert_eq!(
                matches!(rv, ResourceVersion::Number(n) if Some(n) == number),
                number.is_some(),
                "{s}"
            );
            assert_eq!(rv, ResourceVersion::from(s));
        }
        assert!(ResourceVersion::new("").is_empty());
        assert_eq!(ResourceVersion::new(""), ResourceVersion::default());
        assert!(!ResourceVersion::new("0").is_empty());
        assert_ne!(ResourceVersion::new("7"), ResourceVersion::new("007"));
    }

    #[test]
    fn pod_ips_round_trip_in_order() {
        assert_eq!(size_of::<PodIps>(), 24);
        let v4: IpAddr = [10, 0, 0, 1].into();
        let v6: IpAddr = [0xfd00, 0, 0, 0, 0, 0, 0, 1].into();
        for ips in [
            vec![],
            vec![v4],
            vec![v6],
            vec![v4, v6],
            vec![v6, v4],
            vec![v4, v4, v6],
        ] {
            let packed: PodIps = ips.iter().copied().collect();
            assert_eq!(packed.as_slice(), ips.as_slice());
            assert_eq!(&*packed, ips.as_slice());
            assert_eq!(packed.len(), ips.len());
            assert_eq!(packed.first(), ips.first());
        }
        assert_eq!(std::iter::empty().collect::<PodIps>(), PodIps::default());
        assert_eq!([v4].into_iter().collect::<PodIps>(), PodIps::One(v4));
        assert_ne!(
            [v4, v6].into_iter().collect::<PodIps>(),
            [v6, v4].into_iter().collect::<PodIps>()
        );
    }

    #[test]
    fn packed_times_round_trip_to_the_nanosecond() {
        assert_eq!(size_of::<PackedTime>(), 12);
        assert_eq!(PackedTime::new(None).get(), None);
        assert_eq!(PackedTime::default().get(), None);
        let times = [
            Some(Timestamp::UNIX_EPOCH),
            Some(Timestamp::MIN),
            Some(Timestamp::MAX),
            Timestamp::new(1_700_000_000, 0).ok(),
            Timestamp::new(1_700_000_000, 123_456_789).ok(),
            Timestamp::new(-1, -1).ok(),
            Timestamp::new(-86_400 * 365 * 100, -999_999_999).ok(),
            Timestamp::new(i64::from(u32::MAX) + 1, 1).ok(),
        ];
        assert!(times.iter().all(Option::is_some));
        for t in times.into_iter().flatten() {
            let packed = PackedTime::new(Some(t));
            assert_eq!(packed.get(), Some(t), "{t}");
            assert_eq!(format!("{packed:?}"), format!("{:?}", Some(t)));
        }
    }
}
