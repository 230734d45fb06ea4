//! The address table: which IP addresses count as public.
//!
//! This is airlock's own table (docs/rules.md EGRESS-2, EGRESS-13 to EGRESS-16), never a
//! platform helper such as `is_global`.
//! Guarantees: an IPv4 is public only outside every IPv4 block below; an IPv6 only inside
//! `2000::/3` and outside every IPv6 block; IPv4-mapped (`::ffff:0:0/96`) and NAT64
//! (`64:ff9b::/96`) addresses are judged by the IPv4 they embed. The table knows nothing about
//! the operator's allow and deny lists; [`crate::EgressPolicy`] applies those on top.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What the table says about one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classification {
    /// A public address; `dial` is where to connect (the embedded IPv4 for a mapped address).
    Public {
        /// The address to connect to.
        dial: IpAddr,
    },
    /// An address inside a special-purpose block.
    Special(SpecialRange),
}

impl Classification {
    /// True for [`Classification::Public`].
    #[must_use]
    pub fn is_public(&self) -> bool {
        matches!(self, Self::Public { .. })
    }
}

/// The special-purpose block an address falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialRange {
    /// The block, e.g. `"127.0.0.0/8"`.
    pub range: &'static str,
    /// What the block is, e.g. `"loopback"`.
    pub what: &'static str,
    /// For a mapped or NAT64 address, the IPv4 that was judged.
    pub embedded: Option<Ipv4Addr>,
}

impl fmt::Display for SpecialRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(v4) = self.embedded {
            write!(f, "embeds {v4}, ")?;
        }
        write!(f, "{} ({})", self.what, self.range)
    }
}

/// One IPv4 block: network as a number, prefix length, and its names.
struct V4Block(u32, u32, &'static str, &'static str);
/// One IPv6 block.
struct V6Block(u128, u32, &'static str, &'static str);

const fn v4(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

// Ordered roughly by how often real traffic hits them; every entry is checked anyway.
const V4_BLOCKS: &[V4Block] = &[
    V4Block(v4(127, 0, 0, 0), 8, "127.0.0.0/8", "loopback"),
    V4Block(v4(10, 0, 0, 0), 8, "10.0.0.0/8", "private"),
    V4Block(v4(172, 16, 0, 0), 12, "172.16.0.0/12", "private"),
    V4Block(v4(192, 168, 0, 0), 16, "192.168.0.0/16", "private"),
    V4Block(
        v4(169, 254, 0, 0),
        16,
        "169.254.0.0/16",
        "link-local (cloud metadata)",
    ),
    V4Block(
        v4(100, 64, 0, 0),
        10,
        "100.64.0.0/10",
        "shared address space (CGNAT)",
    ),
    V4Block(v4(0, 0, 0, 0), 8, "0.0.0.0/8", "this network"),
    V4Block(
        v4(192, 0, 0, 0),
        24,
        "192.0.0.0/24",
        "IETF protocol assignments",
    ),
    V4Block(v4(192, 0, 2, 0), 24, "192.0.2.0/24", "documentation"),
    V4Block(v4(198, 51, 100, 0), 24, "198.51.100.0/24", "documentation"),
    V4Block(v4(203, 0, 113, 0), 24, "203.0.113.0/24", "documentation"),
    V4Block(v4(192, 31, 196, 0), 24, "192.31.196.0/24", "AS112"),
    V4Block(v4(192, 175, 48, 0), 24, "192.175.48.0/24", "AS112"),
    V4Block(v4(192, 52, 193, 0), 24, "192.52.193.0/24", "AMT"),
    V4Block(
        v4(192, 88, 99, 0),
        24,
        "192.88.99.0/24",
        "deprecated 6to4 relay anycast",
    ),
    V4Block(v4(198, 18, 0, 0), 15, "198.18.0.0/15", "benchmarking"),
    V4Block(v4(224, 0, 0, 0), 4, "224.0.0.0/4", "multicast"),
    V4Block(v4(240, 0, 0, 0), 4, "240.0.0.0/4", "reserved"),
    V4Block(
        v4(168, 63, 129, 16),
        32,
        "168.63.129.16/32",
        "Azure host services",
    ),
];

const fn v6(segments: [u16; 8]) -> u128 {
    let mut out = 0u128;
    let mut i = 0;
    while i < 8 {
        out = (out << 16) | segments[i] as u128;
        i += 1;
    }
    out
}

const V6_BLOCKS: &[V6Block] = &[
    V6Block(0, 128, "::/128", "unspecified"),
    V6Block(1, 128, "::1/128", "loopback"),
    V6Block(0, 96, "::/96", "deprecated IPv4-compatible"),
    V6Block(
        v6([0, 0, 0, 0, 0xffff, 0, 0, 0]),
        96,
        "::ffff:0:0:0/96",
        "IPv4-translated (SIIT)",
    ),
    V6Block(
        v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0]),
        48,
        "64:ff9b:1::/48",
        "local-use NAT64",
    ),
    V6Block(
        v6([0x100, 0, 0, 0, 0, 0, 0, 0]),
        64,
        "100::/64",
        "discard-only",
    ),
    V6Block(
        v6([0x100, 0, 0, 1, 0, 0, 0, 0]),
        64,
        "100:0:0:1::/64",
        "dummy",
    ),
    V6Block(
        v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]),
        32,
        "2001:db8::/32",
        "documentation",
    ),
    V6Block(
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0]),
        23,
        "2001::/23",
        "IETF protocol assignments",
    ),
    V6Block(
        v6([0x3fff, 0, 0, 0, 0, 0, 0, 0]),
        20,
        "3fff::/20",
        "documentation",
    ),
    V6Block(v6([0x2002, 0, 0, 0, 0, 0, 0, 0]), 16, "2002::/16", "6to4"),
    V6Block(
        v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0]),
        48,
        "2620:4f:8000::/48",
        "AS112",
    ),
    V6Block(
        v6([0x5f00, 0, 0, 0, 0, 0, 0, 0]),
        16,
        "5f00::/16",
        "SRv6 SIDs",
    ),
    V6Block(
        v6([0xfc00, 0, 0, 0, 0, 0, 0, 0]),
        7,
        "fc00::/7",
        "unique-local",
    ),
    V6Block(
        v6([0xfe80, 0, 0, 0, 0, 0, 0, 0]),
        10,
        "fe80::/10",
        "link-local",
    ),
    V6Block(
        v6([0xfec0, 0, 0, 0, 0, 0, 0, 0]),
        10,
        "fec0::/10",
        "deprecated site-local",
    ),
    V6Block(
        v6([0xff00, 0, 0, 0, 0, 0, 0, 0]),
        8,
        "ff00::/8",
        "multicast",
    ),
];

const MAPPED_PREFIX: u128 = v6([0, 0, 0, 0, 0, 0xffff, 0, 0]);
const NAT64_PREFIX: u128 = v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0]);
const GLOBAL_UNICAST: u128 = v6([0x2000, 0, 0, 0, 0, 0, 0, 0]);

fn in_v4(addr: u32, net: u32, len: u32) -> bool {
    // `checked_shl` keeps /0 well-defined: shifting a u32 by 32 would overflow.
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
    addr & mask == net
}

fn in_v6(addr: u128, net: u128, len: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
    addr & mask == net
}

/// How an IPv6 address carries an IPv4, when it does in a way the table judges by the IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Embedding {
    /// `::ffff:a.b.c.d`: the kernel dials the IPv4 itself.
    Mapped(Ipv4Addr),
    /// `64:ff9b::a.b.c.d`: a NAT64 gateway translates to the IPv4.
    Nat64(Ipv4Addr),
}

impl Embedding {
    pub(crate) fn ipv4(self) -> Ipv4Addr {
        match self {
            Self::Mapped(v4) | Self::Nat64(v4) => v4,
        }
    }
}

/// The IPv4 an IPv6 address stands for, if it is IPv4-mapped or NAT64 well-known-prefix.
pub(crate) fn embedded_ipv4(addr: Ipv6Addr) -> Option<Embedding> {
    let bits = u128::from(addr);
    // The low 32 bits are the IPv4 in both layouts; truncation is the point here.
    #[allow(clippy::cast_possible_truncation)]
    let low = Ipv4Addr::from(bits as u32);
    if in_v6(bits, MAPPED_PREFIX, 96) {
        Some(Embedding::Mapped(low))
    } else if in_v6(bits, NAT64_PREFIX, 96) {
        Some(Embedding::Nat64(low))
    } else {
        None
    }
}

/// Classifies one address by the table alone (no operator lists).
#[must_use]
pub fn classify(addr: IpAddr) -> Classification {
    match addr {
        IpAddr::V4(v4) => classify_v4(v4, false).map_or_else(Classification::Special, |()| {
            Classification::Public { dial: addr }
        }),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(addr: Ipv4Addr, embedded: bool) -> Result<(), SpecialRange> {
    let bits = u32::from(addr);
    for V4Block(net, len, range, what) in V4_BLOCKS {
        if in_v4(bits, *net, *len) {
            return Err(SpecialRange {
                range,
                what,
                embedded: embedded.then_some(addr),
            });
        }
    }
    Ok(())
}

fn classify_v6(addr: Ipv6Addr) -> Classification {
    match embedded_ipv4(addr) {
        Some(Embedding::Mapped(v4)) => {
            return match classify_v4(v4, true) {
                Ok(()) => Classification::Public {
                    dial: IpAddr::V4(v4),
                },
                Err(special) => Classification::Special(special),
            };
        }
        Some(Embedding::Nat64(v4)) => {
            // NAT64: judge the IPv4 but dial the IPv6 as returned (the gateway translates).
            return match classify_v4(v4, true) {
                Ok(()) => Classification::Public {
                    dial: IpAddr::V6(addr),
                },
                Err(special) => Classification::Special(special),
            };
        }
        None => {}
    }
    let bits = u128::from(addr);
    for V6Block(net, len, range, what) in V6_BLOCKS {
        if in_v6(bits, *net, *len) {
            return Classification::Special(SpecialRange {
                range,
                what,
                embedded: None,
            });
        }
    }
    if in_v6(bits, GLOBAL_UNICAST, 3) {
        Classification::Public {
            dial: IpAddr::V6(addr),
        }
    } else {
        Classification::Special(SpecialRange {
            range: "outside 2000::/3",
            what: "not global unicast",
            embedded: None,
        })
    }
}

/// [`embedded_ipv4`] for any address (IPv4 addresses embed nothing).
pub(crate) fn embedded_ipv4_of(addr: IpAddr) -> Option<Embedding> {
    match addr {
        IpAddr::V4(_) => None,
        IpAddr::V6(v6) => embedded_ipv4(v6),
    }
}

/// True for the unspecified address in any spelling (`0.0.0.0`, `::`, mapped or NAT64 forms):
/// connecting to it reaches the local host, so no operator rule can allow it.
pub(crate) fn is_unspecified(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.is_unspecified(),
        IpAddr::V6(v6) => {
            v6.is_unspecified() || embedded_ipv4(v6).is_some_and(|e| e.ipv4().is_unspecified())
        }
    }
}

/// True when connecting to `addr` reaches this host's loopback interface.
pub(crate) fn is_loopback(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || matches!(embedded_ipv4(v6), Some(Embedding::Mapped(v4)) if v4.is_loopback())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(s: &str) -> bool {
        classify(s.parse().unwrap()).is_public()
    }

    #[test]
    fn mapped_public_is_dialled_as_ipv4() {
        assert_eq!(
            classify("::ffff:8.8.8.8".parse().unwrap()),
            Classification::Public {
                dial: "8.8.8.8".parse().unwrap()
            }
        );
    }

    #[test]
    fn nat64_public_is_dialled_as_returned() {
        let a: IpAddr = "64:ff9b::808:808".parse().unwrap();
        assert_eq!(classify(a), Classification::Public { dial: a });
        assert!(!public("64:ff9b::a00:5"));
    }

    #[test]
    fn block_edges() {
        for blocked in [
            "0.0.0.0",
            "255.255.255.255",
            "198.19.255.255",
            "100::1",
            "100:0:0:1::1",
        ] {
            assert!(!public(blocked), "{blocked}");
        }
        for allowed in ["198.20.0.0", "2600::1", "2620:4f:8001::1", "3fff:1000::"] {
            assert!(public(allowed), "{allowed}");
        }
    }

    #[test]
    fn reasons_name_the_block() {
        let Classification::Special(s) = classify("64:ff9b::a9fe:a9fe".parse().unwrap()) else {
            panic!("public")
        };
        assert_eq!(
            s.to_string(),
            "embeds 169.254.169.254, link-local (cloud metadata) (169.254.0.0/16)"
        );
    }

    #[test]
    fn unspecified_and_loopback_in_every_spelling() {
        for a in ["0.0.0.0", "::", "::ffff:0.0.0.0", "64:ff9b::"] {
            assert!(is_unspecified(a.parse().unwrap()), "{a}");
        }
        for a in ["127.0.0.2", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(a.parse().unwrap()), "{a}");
        }
        assert!(!is_loopback("10.0.0.1".parse().unwrap()));
    }
}
