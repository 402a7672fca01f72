//! DNS names as CoreDNS writes and reads them: dashed addresses, reverse names, case and the
//! trailing dot.

use std::fmt::Write;
use std::net::IpAddr;

/// An address as one DNS label: IPv4 dots and IPv6 colons become dashes (the compressed form, as
/// the API server stores it). A trailing dash gets a `0`, as CoreDNS writes it since #7431, so
/// that the label does not end in `-`.
pub fn dashed(ip: IpAddr) -> String {
    let mut label = match ip {
        IpAddr::V4(v4) => v4.to_string().replace('.', "-"),
        IpAddr::V6(v6) => v6.to_string().replace(':', "-"),
    };
    if label.ends_with('-') {
        label.push('0');
    }
    label
}

/// The address a pod label names (`10-244-1-5`, `fd00--1`): exactly three dashes and no pair is
/// IPv4, anything else IPv6, as CoreDNS decodes it.
pub fn undashed(label: &str) -> Option<IpAddr> {
    let text = if label.matches('-').count() == 3 && !label.contains("--") {
        label.replace('-', ".")
    } else {
        label.replace('-', ":")
    };
    text.parse().ok()
}

/// The PTR name of `ip`: reversed octets under `in-addr.arpa.`, or reversed nibbles under
/// `ip6.arpa.`.
pub fn reverse_name(ip: IpAddr) -> String {
    let mut name = String::with_capacity(74);
    match ip {
        IpAddr::V4(v4) => {
            for octet in v4.octets().iter().rev() {
                let _ = write!(name, "{octet}.");
            }
            name.push_str("in-addr.arpa.");
        }
        IpAddr::V6(v6) => {
            for byte in v6.octets().iter().rev() {
                let _ = write!(name, "{:x}.{:x}.", byte & 0xf, byte >> 4);
            }
            name.push_str("ip6.arpa.");
        }
    }
    name
}

/// The address a PTR name stands for, when it is one.
pub fn unreversed(name: &str) -> Option<IpAddr> {
    if let Some(rest) = name.strip_suffix(".in-addr.arpa.") {
        let octets: Vec<u8> = rest
            .split('.')
            .map(|o| o.parse().ok())
            .collect::<Option<_>>()?;
        let [d, c, b, a]: [u8; 4] = octets.try_into().ok()?;
        return Some(IpAddr::from([a, b, c, d]));
    }
    let rest = name.strip_suffix(".ip6.arpa.")?;
    let nibbles: Vec<u8> = rest
        .split('.')
        .map(|n| u8::from_str_radix(n, 16).ok().filter(|_| n.len() == 1))
        .collect::<Option<_>>()?;
    if nibbles.len() != 32 {
        return None;
    }
    let mut octets = [0u8; 16];
    for (i, pair) in nibbles.chunks(2).enumerate() {
        octets[15 - i] = pair[0] | (pair[1] << 4);
    }
    Some(IpAddr::from(octets))
}

/// What a query name is about, and so which objects answer it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryScope<'n> {
    /// `[<endpoint>.|_<port>._<proto>.]<service>.<namespace>.svc.<zone>.`
    Service {
        namespace: &'n str,
        service: &'n str,
    },
    /// `<dashed address>.<namespace>.pod.<zone>.`
    Pod { namespace: &'n str, label: &'n str },
    /// `....in-addr.arpa.` or `....ip6.arpa.`
    Reverse(IpAddr),
    /// Nothing CoreDNS's `kubernetes` plugin answers.
    Outside,
}

/// The scope of `name` (canonical: lowercased, with its trailing dot) in `zone`.
pub fn scope<'n>(name: &'n str, zone: &str) -> QueryScope<'n> {
    if let Some(ip) = unreversed(name) {
        return QueryScope::Reverse(ip);
    }
    let Some(rest) = name
        .strip_suffix('.')
        .and_then(|n| n.strip_suffix(zone))
        .and_then(|n| n.strip_suffix('.'))
    else {
        return QueryScope::Outside;
    };
    let labels: Vec<&str> = rest.split('.').collect();
    match labels.as_slice() {
        [.., service, namespace, "svc"] => QueryScope::Service { namespace, service },
        [label, namespace, "pod"] => QueryScope::Pod { namespace, label },
        _ => QueryScope::Outside,
    }
}

/// `name` lowercased and fully qualified, as a query is compared.
pub fn canonical(name: &str) -> String {
    let mut name = name.trim().to_ascii_lowercase();
    if !name.ends_with('.') {
        name.push('.');
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn addresses_are_dashed_and_read_back() {
        assert_eq!(dashed(ip("10.244.1.5")), "10-244-1-5");
        assert_eq!(dashed(ip("fd00:10:244::5")), "fd00-10-244--5");
        assert_eq!(dashed(ip("fd00::")), "fd00--0");
        assert_eq!(dashed(ip("::1")), "--1");
        for text in ["10.244.1.5", "fd00:10:244::5", "fd00::", "::1"] {
            assert_eq!(undashed(&dashed(ip(text))), Some(ip(text)), "{text}");
        }
        assert_eq!(undashed("not-an-address"), None);
    }

    #[test]
    fn query_names_are_scoped() {
        let zone = "cluster.local";
        assert_eq!(
            scope("_http._tcp.web.shop.svc.cluster.local.", zone),
            QueryScope::Service {
                namespace: "shop",
                service: "web"
            }
        );
        assert_eq!(
            scope("web-0.web.shop.svc.cluster.local.", zone),
            QueryScope::Service {
                namespace: "shop",
                service: "web"
            }
        );
        assert_eq!(
            scope("10-1-2-3.shop.pod.cluster.local.", zone),
            QueryScope::Pod {
                namespace: "shop",
                label: "10-1-2-3"
            }
        );
        assert_eq!(
            scope("3.2.1.10.in-addr.arpa.", zone),
            QueryScope::Reverse(ip("10.1.2.3"))
        );
        for outside in [
            "example.com.",
            "svc.cluster.local.",
            "shop.svc.cluster.local.",
            "web.shop.svc.cluster.localx.",
            "web.shop.svc.xcluster.local.",
        ] {
            assert_eq!(scope(outside, zone), QueryScope::Outside, "{outside}");
        }
    }

    #[test]
    fn reverse_names_of_both_families() {
        assert_eq!(reverse_name(ip("10.96.0.10")), "10.0.96.10.in-addr.arpa.");
        assert_eq!(
            reverse_name(ip("fd00::1")),
            "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa."
        );
        for text in ["10.96.0.10", "fd00::1", "2001:db8::abcd:12"] {
            assert_eq!(unreversed(&reverse_name(ip(text))), Some(ip(text)));
        }
        assert_eq!(unreversed("1.2.3.in-addr.arpa."), None);
    }
}
