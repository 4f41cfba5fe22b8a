//! Which network addresses eg may send a request to
//! (behaviour.md#protecting-endpoints-and-the-system: eg must not be usable to attack the
//! networks it sits in).
//!
//! Anyone who can create a subscription chooses a URL that eg will POST to, from inside
//! the network eg runs in. Without a check that URL could be `http://127.0.0.1:6379/`
//! (the Redis eg itself uses), an internal service on `10.x`, or the cloud metadata
//! service that hands out the host's credentials. [`AddressPolicy::check`] is the one
//! place that decides; `eg-outbound` applies it to every address a connection is about
//! to use — IP literals in the URL before the request, and every resolved address of a
//! host name at every connection.
//!
//! # What is refused
//!
//! Unless an allow-list entry covers the address:
//!
//! | category | IPv4 | IPv6 |
//! |---|---|---|
//! | cloud metadata | 169.254.169.254, 169.254.169.123, 169.254.170.2, 169.254.170.23, 169.254.0.23, 168.63.129.16, 100.100.100.200, 192.0.0.192 | fd00:ec2::254, fd00:ec2::23, fd00:ec2::123, fd20:ce::254 |
//! | unspecified / "this network" | 0.0.0.0/8 | `::` |
//! | loopback | 127.0.0.0/8 | `::1` |
//! | private | 10/8, 172.16/12, 192.168/16 | fec0::/10 (deprecated site-local) |
//! | carrier-grade NAT (shared address space) | 100.64.0.0/10 | — |
//! | link-local | 169.254.0.0/16 | fe80::/10 |
//! | unique-local | — | fc00::/7 |
//! | multicast | 224.0.0.0/4 | ff00::/8 |
//! | broadcast | 255.255.255.255 | — |
//! | documentation | 192.0.2/24, 198.51.100/24, 203.0.113/24 | 2001:db8::/32, 3fff::/20 |
//! | benchmarking | 198.18.0.0/15 | 2001:2::/48 |
//! | reserved | 192.0.0.0/24, 192.88.99.0/24, 240.0.0.0/4 | 2001::/23, and everything outside 2000::/3 not listed above |
//!
//! Why the less obvious rows:
//!
//! - **Cloud metadata** addresses are named on their own so the refusal says so, and
//!   because two are otherwise *public* addresses: Azure's wire server 168.63.129.16
//!   and (inside 100.64/10, which some deployments allow for Tailscale-style overlays)
//!   Alibaba's 100.100.100.200. A metadata address is opened only by an allow-list
//!   entry naming exactly that address (`/32` or `/128`); a broad entry such as
//!   `100.64.0.0/10` or `169.254.0.0/16` does not open it.
//! - **Documentation and benchmarking** ranges are not routed on the internet, so no
//!   real endpoint lives there; where they *are* reachable it is because a network
//!   uses them internally (198.18/15 is a common lab and appliance range).
//! - **Reserved**: 192.0.0.0/24 holds IETF protocol assignments (DS-Lite, NAT64
//!   discovery, Oracle's metadata service at 192.0.0.192); 192.88.99.0/24 is the
//!   deprecated 6to4 relay anycast; 240/4 is reserved for future use (and some
//!   networks use it internally). In IPv6 every webhook lives in global unicast
//!   2000::/3; outside it (100::/64 discard, 64:ff9b:1::/48 local NAT64, 5f00::/16
//!   SRv6, unallocated space) nothing public is reachable, so it is refused as a
//!   whole, as is 2001::/23 (IETF protocol assignments, including Teredo, whose
//!   embedded client address is obfuscated and not checkable).
//!
//! IPv6 forms that carry an IPv4 address are judged by that address: IPv4-mapped
//! `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d` and 6to4
//! `2002:aabb:ccdd::/48`. So `[::ffff:127.0.0.1]` is loopback, and an allow-list entry
//! for `10.0.0.0/8` also covers `64:ff9b::10.1.2.3`.

use ipnet::IpNet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Why an address is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressCategory {
    /// A cloud provider's instance metadata or platform service.
    CloudMetadata,
    /// 0.0.0.0/8 or `::` — on Linux, connecting to 0.0.0.0 reaches the local host.
    Unspecified,
    Loopback,
    /// RFC 1918 ranges and the deprecated IPv6 site-local range.
    Private,
    /// 100.64.0.0/10, RFC 6598.
    CarrierGradeNat,
    LinkLocal,
    /// fc00::/7, RFC 4193.
    UniqueLocal,
    Multicast,
    Broadcast,
    Documentation,
    Benchmarking,
    /// Reserved or special-purpose space no public endpoint lives in.
    Reserved,
}

impl AddressCategory {
    /// A short stable name for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CloudMetadata => "cloud-metadata",
            Self::Unspecified => "unspecified",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::CarrierGradeNat => "carrier-grade-nat",
            Self::LinkLocal => "link-local",
            Self::UniqueLocal => "unique-local",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Documentation => "documentation",
            Self::Benchmarking => "benchmarking",
            Self::Reserved => "reserved",
        }
    }

    /// Words for a user: "a loopback address".
    fn describe(self) -> &'static str {
        match self {
            Self::CloudMetadata => "a cloud metadata service address",
            Self::Unspecified => "an unspecified (\"this network\") address",
            Self::Loopback => "a loopback address",
            Self::Private => "a private network address",
            Self::CarrierGradeNat => "a carrier-grade NAT (shared) address",
            Self::LinkLocal => "a link-local address",
            Self::UniqueLocal => "a unique-local IPv6 address",
            Self::Multicast => "a multicast address",
            Self::Broadcast => "the broadcast address",
            Self::Documentation => "a documentation-only address",
            Self::Benchmarking => "a benchmarking address",
            Self::Reserved => "a reserved or special-purpose address",
        }
    }
}

impl fmt::Display for AddressCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An address the policy refuses, and why.
///
/// `Display` names the category only ("is a loopback address, and no allow-list entry
/// covers it"), never the address: a host name's resolved address is information about
/// the network eg sits in, and the message may reach an API client. Logs may add
/// [`AddressRefusal::address`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the endpoint's address is {}, and no allow-list entry covers it", .category.describe())]
pub struct AddressRefusal {
    address: IpAddr,
    category: AddressCategory,
}

impl AddressRefusal {
    /// The refused address, as it was checked (an IPv6 form embedding IPv4 stays IPv6).
    pub fn address(&self) -> IpAddr {
        self.address
    }

    pub fn category(&self) -> AddressCategory {
        self.category
    }
}

/// The deployment's address policy: everything in the table of the module docs is
/// refused unless an `allow` entry covers it. The default allows none of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    allow: Vec<IpNet>,
}

/// An allow-list entry that is not an address or network.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("allow-list entry {entry:?} is not an IP address or CIDR network (such as 10.0.0.0/8, 127.0.0.1 or ::1/128)")]
pub struct AddressPolicyError {
    entry: String,
}

impl AddressPolicy {
    pub fn new(allow: Vec<IpNet>) -> Self {
        Self {
            allow: allow.into_iter().map(|net| net.trunc()).collect(),
        }
    }

    /// Parses allow-list entries: CIDR networks (`10.0.0.0/8`, `fd00::/8`) or single
    /// addresses (`127.0.0.1`, `::1`). Blank entries are skipped; host bits in a
    /// network (`10.1.2.3/8`) are ignored.
    pub fn parse<I, S>(entries: I) -> Result<Self, AddressPolicyError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut allow = Vec::new();
        for entry in entries {
            let entry = entry.as_ref().trim();
            if entry.is_empty() {
                continue;
            }
            let net = match (entry.parse::<IpNet>(), entry.parse::<IpAddr>()) {
                (Ok(net), _) => net,
                (_, Ok(ip)) => IpNet::from(ip),
                _ => {
                    return Err(AddressPolicyError {
                        entry: entry.to_owned(),
                    });
                }
            };
            allow.push(net);
        }
        Ok(Self::new(allow))
    }

    pub fn allow_list(&self) -> &[IpNet] {
        &self.allow
    }

    /// `Ok` when eg may connect to `ip`.
    pub fn check(&self, ip: IpAddr) -> Result<(), AddressRefusal> {
        match category(ip) {
            None => Ok(()),
            Some(category) if self.allows(ip, category) => Ok(()),
            Some(category) => Err(AddressRefusal { address: ip, category }),
        }
    }

    fn allows(&self, ip: IpAddr, category: AddressCategory) -> bool {
        // A metadata address is opened only by an entry naming exactly it.
        let exact_only = category == AddressCategory::CloudMetadata;
        let covers = |addr: IpAddr| {
            self.allow
                .iter()
                .any(|net| net.contains(&addr) && (!exact_only || net.prefix_len() == net.max_prefix_len()))
        };
        covers(ip) || embedded_ipv4(ip).is_some_and(|v4| covers(IpAddr::V4(v4)))
    }
}

impl FromStr for AddressPolicy {
    type Err = AddressPolicyError;

    /// A comma- or whitespace-separated list, as written in configuration:
    /// `127.0.0.1/32, 10.0.0.0/8 ::1`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s.split(|c: char| c == ',' || c.is_whitespace()))
    }
}

/// The category an address is refused for, or `None` for an ordinary public address.
pub fn category(ip: IpAddr) -> Option<AddressCategory> {
    match ip {
        IpAddr::V4(v4) => category_v4(v4),
        IpAddr::V6(v6) => category_v6(v6),
    }
}

/// The IPv4 address an IPv6 address carries, for the forms that route to it: mapped
/// `::ffff:a.b.c.d`, compatible `::a.b.c.d` (not `::` or `::1`), NAT64
/// `64:ff9b::a.b.c.d` and 6to4 `2002:aabb:ccdd::/48`.
pub(crate) fn embedded_ipv4(ip: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = ip else {
        return None;
    };
    let s = v6.segments();
    let from = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo] => Some(from(hi, lo)),
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, hi, lo] => Some(from(hi, lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(from(hi, lo)),
        [0x2002, hi, lo, ..] => Some(from(hi, lo)),
        _ => None,
    }
}

const METADATA_V4: [Ipv4Addr; 8] = [
    Ipv4Addr::new(169, 254, 169, 254), // AWS, Azure, GCP, OpenStack, DigitalOcean … IMDS
    Ipv4Addr::new(169, 254, 169, 123), // AWS time sync
    Ipv4Addr::new(169, 254, 170, 2),   // AWS ECS task credentials
    Ipv4Addr::new(169, 254, 170, 23),  // AWS EKS pod identity agent
    Ipv4Addr::new(169, 254, 0, 23),    // Tencent Cloud metadata
    Ipv4Addr::new(168, 63, 129, 16),   // Azure wire server (otherwise public)
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud metadata
    Ipv4Addr::new(192, 0, 0, 192),     // Oracle Cloud metadata
];

const METADATA_V6: [Ipv6Addr; 4] = [
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254), // AWS IMDS
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23),  // AWS EKS pod identity agent
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x123), // AWS time sync
    Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254),  // GCP metadata
];

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], prefix: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

fn category_v4(ip: Ipv4Addr) -> Option<AddressCategory> {
    use AddressCategory::*;
    let table: [([u8; 4], u32, AddressCategory); 16] = [
        ([0, 0, 0, 0], 8, Unspecified),
        ([127, 0, 0, 0], 8, Loopback),
        ([10, 0, 0, 0], 8, Private),
        ([172, 16, 0, 0], 12, Private),
        ([192, 168, 0, 0], 16, Private),
        ([100, 64, 0, 0], 10, CarrierGradeNat),
        ([169, 254, 0, 0], 16, LinkLocal),
        ([192, 0, 0, 0], 24, Reserved),
        ([192, 0, 2, 0], 24, Documentation),
        ([198, 51, 100, 0], 24, Documentation),
        ([203, 0, 113, 0], 24, Documentation),
        ([198, 18, 0, 0], 15, Benchmarking),
        ([192, 88, 99, 0], 24, Reserved),
        ([224, 0, 0, 0], 4, Multicast),
        // Before 240/4, which contains it.
        ([255, 255, 255, 255], 32, Broadcast),
        ([240, 0, 0, 0], 4, Reserved),
    ];
    if METADATA_V4.contains(&ip) {
        return Some(CloudMetadata);
    }
    table
        .iter()
        .find(|(net, prefix, _)| in_v4(ip, *net, *prefix))
        .map(|(_, _, category)| *category)
}

fn category_v6(ip: Ipv6Addr) -> Option<AddressCategory> {
    use AddressCategory::*;
    if ip.is_unspecified() {
        return Some(Unspecified);
    }
    if ip.is_loopback() {
        return Some(Loopback);
    }
    if let Some(v4) = embedded_ipv4(IpAddr::V6(ip)) {
        return category_v4(v4);
    }
    if METADATA_V6.contains(&ip) {
        return Some(CloudMetadata);
    }
    let table: [([u16; 8], u32, AddressCategory); 8] = [
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, Multicast),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, LinkLocal),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, Private),
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, UniqueLocal),
        ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, Documentation),
        ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, Documentation),
        ([0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48, Benchmarking),
        ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, Reserved),
    ];
    if let Some((_, _, category)) = table.iter().find(|(net, prefix, _)| in_v6(ip, *net, *prefix)) {
        return Some(*category);
    }
    // Global unicast 2000::/3 is where public endpoints live; nothing else is.
    if in_v6(ip, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        None
    } else {
        Some(Reserved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AddressCategory::*;
    use proptest::prelude::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn refused(policy: &AddressPolicy, s: &str) -> Option<AddressCategory> {
        policy.check(ip(s)).err().map(|r| r.category())
    }

    #[test]
    fn refuses_every_listed_range_without_an_allow_list() {
        let p = AddressPolicy::default();
        let cases = [
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", Unspecified),
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("10.0.0.1", Private),
            ("10.255.255.255", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("100.64.0.1", CarrierGradeNat),
            ("100.127.255.255", CarrierGradeNat),
            ("169.254.1.1", LinkLocal),
            ("169.254.169.254", CloudMetadata),
            ("169.254.170.2", CloudMetadata),
            ("168.63.129.16", CloudMetadata),
            ("100.100.100.200", CloudMetadata),
            ("192.0.0.192", CloudMetadata),
            ("192.0.0.8", Reserved),
            ("192.0.2.10", Documentation),
            ("198.51.100.10", Documentation),
            ("203.0.113.10", Documentation),
            ("198.18.0.1", Benchmarking),
            ("198.19.255.255", Benchmarking),
            ("192.88.99.1", Reserved),
            ("224.0.0.1", Multicast),
            ("239.255.255.250", Multicast),
            ("240.0.0.1", Reserved),
            ("255.255.255.255", Broadcast),
            ("::", Unspecified),
            ("::1", Loopback),
            ("fe80::1", LinkLocal),
            ("febf::1", LinkLocal),
            ("fec0::1", Private),
            ("fc00::1", UniqueLocal),
            ("fdff:ffff::1", UniqueLocal),
            ("fd00:ec2::254", CloudMetadata),
            ("fd20:ce::254", CloudMetadata),
            ("ff02::1", Multicast),
            ("2001:db8::1", Documentation),
            ("3fff::1", Documentation),
            ("2001:2::1", Benchmarking),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Reserved), // Teredo
            ("100::1", Reserved),
            ("64:ff9b:1::1", Reserved),
            ("5f00::1", Reserved),
            ("4000::1", Reserved),
        ];
        for (addr, category) in cases {
            assert_eq!(refused(&p, addr), Some(category), "{addr}");
        }
    }

    #[test]
    fn allows_public_addresses_and_edges_of_refused_ranges() {
        let p = AddressPolicy::default();
        for addr in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.167.255.255",
            "192.169.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "169.253.255.255",
            "168.63.129.17",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "126.255.255.255",
            "128.0.0.0",
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "2001:200::1", // first allocated block after 2001::/23
            "2001:db7:ffff::1",
            "3ffe::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(p.check(ip(addr)), Ok(()), "{addr}");
        }
    }

    #[test]
    fn ipv6_forms_carrying_ipv4_are_judged_by_the_ipv4_address() {
        let p = AddressPolicy::default();
        assert_eq!(refused(&p, "::ffff:127.0.0.1"), Some(Loopback));
        assert_eq!(refused(&p, "::ffff:7f00:1"), Some(Loopback));
        assert_eq!(refused(&p, "::127.0.0.1"), Some(Loopback));
        assert_eq!(refused(&p, "::ffff:169.254.169.254"), Some(CloudMetadata));
        assert_eq!(refused(&p, "::ffff:10.1.2.3"), Some(Private));
        assert_eq!(refused(&p, "64:ff9b::10.1.2.3"), Some(Private));
        assert_eq!(refused(&p, "64:ff9b::a9fe:a9fe"), Some(CloudMetadata));
        assert_eq!(refused(&p, "2002:7f00:1::1"), Some(Loopback));
        assert_eq!(refused(&p, "2002:c0a8:101::"), Some(Private));
        assert_eq!(refused(&p, "::2"), Some(Unspecified), "IPv4-compatible 0.0.0.2");
        // The refusal keeps the address as it was checked.
        let r = p.check(ip("::ffff:127.0.0.1")).unwrap_err();
        assert_eq!(r.address(), ip("::ffff:127.0.0.1"));
        assert_eq!(embedded_ipv4(ip("::1")), None);
        assert_eq!(embedded_ipv4(ip("2001:db8::1")), None);
        assert_eq!(embedded_ipv4(ip("10.0.0.1")), None);
    }

    #[test]
    fn an_allow_list_opens_what_it_covers_and_nothing_else() {
        let p = AddressPolicy::parse(["127.0.0.1/32", "10.0.0.0/8", "::1", " "]).unwrap();
        assert_eq!(p.check(ip("127.0.0.1")), Ok(()));
        assert_eq!(refused(&p, "127.0.0.2"), Some(Loopback));
        assert_eq!(p.check(ip("10.200.3.4")), Ok(()));
        assert_eq!(refused(&p, "192.168.0.1"), Some(Private));
        assert_eq!(p.check(ip("::1")), Ok(()));
        // Embedded forms are covered by the IPv4 entry …
        assert_eq!(p.check(ip("::ffff:127.0.0.1")), Ok(()));
        assert_eq!(p.check(ip("64:ff9b::10.1.2.3")), Ok(()));
        // … and an IPv6 entry covers its IPv6 addresses only.
        let p6 = AddressPolicy::parse(["fd00::/8"]).unwrap();
        assert_eq!(p6.check(ip("fd12::1")), Ok(()));
        assert_eq!(refused(&p6, "10.0.0.1"), Some(Private));
    }

    #[test]
    fn metadata_addresses_need_an_exact_entry() {
        let broad = AddressPolicy::parse(["169.254.0.0/16", "100.64.0.0/10", "fd00::/8", "0.0.0.0/0", "::/0"]).unwrap();
        assert_eq!(broad.check(ip("169.254.1.1")), Ok(()));
        assert_eq!(broad.check(ip("100.100.100.100")), Ok(()));
        assert_eq!(broad.check(ip("10.0.0.1")), Ok(()));
        for addr in [
            "169.254.169.254",
            "100.100.100.200",
            "168.63.129.16",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
        ] {
            assert_eq!(refused(&broad, addr), Some(CloudMetadata), "{addr}");
        }
        let exact = AddressPolicy::parse(["169.254.169.254", "fd00:ec2::254/128"]).unwrap();
        assert_eq!(exact.check(ip("169.254.169.254")), Ok(()));
        assert_eq!(exact.check(ip("fd00:ec2::254")), Ok(()));
        assert_eq!(exact.check(ip("::ffff:169.254.169.254")), Ok(()));
    }

    #[test]
    fn parse_reports_the_bad_entry() {
        for bad in ["10.0.0.0/33", "localhost", "10.0.0", "::1/129", "10.0.0.0/8/8"] {
            let err = AddressPolicy::parse([bad]).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
        let p = AddressPolicy::parse(["10.1.2.3/8"]).unwrap();
        assert_eq!(p.allow_list(), &["10.0.0.0/8".parse::<IpNet>().unwrap()]);
        let from_config: AddressPolicy = "127.0.0.1/32, 10.0.0.0/8 ::1".parse().unwrap();
        assert_eq!(from_config.allow_list().len(), 3);
        assert_eq!("".parse::<AddressPolicy>().unwrap(), AddressPolicy::default());
        assert!("10.0.0.0/8,nope".parse::<AddressPolicy>().is_err());
    }

    #[test]
    fn refusal_message_names_the_category_not_the_address() {
        let r = AddressPolicy::default().check(ip("10.9.8.7")).unwrap_err();
        let text = r.to_string();
        assert!(text.contains("private network"), "{text}");
        assert!(!text.contains("10.9.8.7"), "{text}");
        assert_eq!(r.category().as_str(), "private");
    }

    proptest! {
        #[test]
        fn every_address_in_10_8_is_refused_unless_allowed(low in 0u32..(1 << 24)) {
            let addr = IpAddr::V4(Ipv4Addr::from((10u32 << 24) | low));
            prop_assert_eq!(refused(&AddressPolicy::default(), &addr.to_string()), Some(Private));
            let allowed = AddressPolicy::parse(["10.0.0.0/8"]).unwrap();
            prop_assert_eq!(allowed.check(addr), Ok(()));
        }

        #[test]
        fn mapped_ipv6_agrees_with_ipv4(raw in any::<u32>()) {
            let v4 = Ipv4Addr::from(raw);
            let p = AddressPolicy::default();
            let direct = p.check(IpAddr::V4(v4)).map_err(|r| r.category());
            for v6 in [v4.to_ipv6_mapped(), Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, (raw >> 16) as u16, raw as u16)] {
                prop_assert_eq!(p.check(IpAddr::V6(v6)).map_err(|r| r.category()), direct);
            }
        }

        #[test]
        fn allowing_everything_opens_all_but_metadata(raw in any::<u128>(), raw4 in any::<u32>()) {
            let p = AddressPolicy::parse(["0.0.0.0/0", "::/0"]).unwrap();
            for addr in [IpAddr::V6(Ipv6Addr::from(raw)), IpAddr::V4(Ipv4Addr::from(raw4))] {
                match category(addr) {
                    Some(CloudMetadata) => prop_assert!(p.check(addr).is_err()),
                    _ => prop_assert_eq!(p.check(addr), Ok(())),
                }
            }
        }
    }
}
