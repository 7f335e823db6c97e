//! The machine's network interfaces: /proc/net/dev (bytes, packets, errors and drops of
//! each) and the routing tables (/proc/net/route, /proc/net/ipv6_route) for which one
//! carries the default route.
//!
//! Both files describe the reader's network namespace, so inside a container these are
//! the container's interfaces, as they should be. /proc/net/dev is one pread of ~150
//! bytes per interface; an interface that goes away between two samples is simply
//! absent from the second (no error: links come and go). The routing tables are read
//! only every [`ROUTE_EVERY`] samples, as the default route rarely moves.

use std::io;

use kernstat_model::net::LinkSample;
use kernstat_model::text::ShortStr;

use crate::file::{fields, lines, parse_u64, PreadFile};
use crate::Roots;

/// Samples between two reads of the routing tables.
pub const ROUTE_EVERY: u32 = 10;

/// Reads the interfaces of the current network namespace.
#[derive(Debug)]
pub struct LinkReader {
    dev: PreadFile,
    route: Option<PreadFile>,
    route6: Option<PreadFile>,
    buf: Vec<u8>,
    default_link: Option<ShortStr<16>>,
    since_route: u32,
}

impl LinkReader {
    /// Opens /proc/net/dev (None if the machine has no such file: no network stack).
    pub fn open(roots: &Roots) -> Option<Self> {
        let net = roots.proc.join("net");
        Some(LinkReader {
            dev: PreadFile::open_optional(net.join("dev"))?,
            route: PreadFile::open_optional(net.join("route")),
            route6: PreadFile::open_optional(net.join("ipv6_route")),
            buf: vec![0; 64 * 1024],
            default_link: None,
            since_route: 0,
        })
    }

    /// Fills `out` (cleared) with every interface, the default route's first.
    pub fn read(&mut self, out: &mut Vec<LinkSample>) -> io::Result<()> {
        if self.since_route == 0 {
            self.default_link = self.default_route();
        }
        self.since_route = (self.since_route + 1) % ROUTE_EVERY;
        out.clear();
        let buf = self.dev.read(&mut self.buf)?;
        parse_dev(buf, out);
        if let Some(name) = self.default_link {
            if let Some(i) = out.iter().position(|l| l.name == name) {
                out[i].is_default = true;
                out[..=i].rotate_right(1);
            }
        }
        Ok(())
    }

    /// The interface of the IPv4 default route with the lowest metric, else IPv6's.
    fn default_route(&mut self) -> Option<ShortStr<16>> {
        if let Some(f) = &self.route {
            if let Some(name) = f.read(&mut self.buf).ok().and_then(default_route_v4) {
                return Some(name);
            }
        }
        let f = self.route6.as_ref()?;
        f.read(&mut self.buf).ok().and_then(default_route_v6)
    }
}

/// Parses /proc/net/dev into `out`: two header lines, then "name: rx... tx..." where the
/// receive side is bytes packets errs drop fifo frame compressed multicast and the
/// transmit side bytes packets errs drop fifo colls carrier compressed.
pub fn parse_dev(buf: &[u8], out: &mut Vec<LinkSample>) {
    for line in lines(buf) {
        // The name and the first number can touch ("eth0:12345") when the number is long.
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = &line[..colon];
        let mut n = [0u64; 16];
        let mut count = 0;
        for (slot, f) in n.iter_mut().zip(fields(&line[colon + 1..])) {
            match parse_u64(f) {
                Some(v) => *slot = v,
                None => break,
            }
            count += 1;
        }
        if count < 12 {
            continue;
        }
        out.push(LinkSample {
            name: ShortStr::from_bytes(name),
            is_default: false,
            rx_bytes: n[0],
            rx_packets: n[1],
            rx_errors: n[2],
            rx_dropped: n[3],
            tx_bytes: n[8],
            tx_packets: n[9],
            tx_errors: n[10],
            tx_dropped: n[11],
        });
    }
}

/// One route of the kernel's routing tables, as /proc/net/route and ipv6_route list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route<'a> {
    /// The interface it goes out of.
    pub iface: &'a [u8],
    /// Destination 0 with prefix length 0: a default route.
    pub is_default: bool,
    /// RTF_UP.
    pub up: bool,
    /// Its metric (lower wins).
    pub metric: u64,
}

const RTF_UP: u64 = 0x1;

fn hex(s: &[u8]) -> Option<u64> {
    u64::from_str_radix(std::str::from_utf8(s).ok()?, 16).ok()
}

/// The first `N` fields of a line, or None if it has fewer.
fn first_fields<const N: usize>(line: &[u8]) -> Option<[&[u8]; N]> {
    let mut it = fields(line);
    let mut a: [&[u8]; N] = [&[]; N];
    for slot in a.iter_mut() {
        *slot = it.next()?;
    }
    Some(a)
}

/// The routes of /proc/net/route: "Iface Destination Gateway Flags RefCnt Use Metric
/// Mask ...", hex fields but the metric. A default route has destination and mask 0.
pub fn routes_v4(buf: &[u8]) -> impl Iterator<Item = Route<'_>> {
    lines(buf).skip(1).filter_map(|line| {
        let f = first_fields::<8>(line)?;
        Some(Route {
            iface: f[0],
            is_default: hex(f[1])? == 0 && hex(f[7])? == 0,
            up: hex(f[3])? & RTF_UP != 0,
            metric: parse_u64(f[6])?,
        })
    })
}

/// The routes of /proc/net/ipv6_route: "dest plen src plen nexthop metric refcnt use
/// flags device", hex fields. Routes on lo (the kernel's unreachable placeholders) are
/// left out.
pub fn routes_v6(buf: &[u8]) -> impl Iterator<Item = Route<'_>> {
    lines(buf).filter_map(|line| {
        let f = first_fields::<10>(line)?;
        if f[9] == b"lo" {
            return None;
        }
        Some(Route {
            iface: f[9],
            is_default: f[0].iter().all(|&b| b == b'0') && hex(f[1])? == 0,
            up: hex(f[8])? & RTF_UP != 0,
            metric: hex(f[5])?,
        })
    })
}

/// The interface of the up default route with the lowest metric among `routes`.
pub fn default_route<'a>(routes: impl Iterator<Item = Route<'a>>) -> Option<ShortStr<16>> {
    routes
        .filter(|r| r.is_default && r.up)
        .min_by_key(|r| r.metric)
        .map(|r| ShortStr::from_bytes(r.iface))
}

/// The IPv4 default route's interface ([`default_route`] over [`routes_v4`]).
pub fn default_route_v4(buf: &[u8]) -> Option<ShortStr<16>> {
    default_route(routes_v4(buf))
}

/// The IPv6 default route's interface.
pub fn default_route_v6(buf: &[u8]) -> Option<ShortStr<16>> {
    default_route(routes_v6(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  123456     789    0    0    0     0          0         0   123456     789    0    0    0     0       0          0
  eth0:98765432109 4567 1 2    0     0          0        17 55555 66 3 4    0     0       0          0
wlp2s0: 10 1 0 0 0 0 0 0 20 2 0 0 0 0 0 0
";

    #[test]
    fn dev_parses_every_interface_even_when_name_and_number_touch() {
        let mut out = Vec::new();
        parse_dev(DEV.as_bytes(), &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(out[1].name.as_str(), "eth0");
        assert_eq!(out[1].rx_bytes, 98_765_432_109);
        assert_eq!(out[1].rx_errors, 1);
        assert_eq!(out[1].rx_dropped, 2);
        assert_eq!(out[1].tx_bytes, 55555);
        assert_eq!(out[1].tx_packets, 66);
        assert_eq!(out[1].tx_errors, 3);
        assert_eq!(out[1].tx_dropped, 4);
        let mut touching = Vec::new();
        parse_dev(
            b"h\nh\n  eth1:4294967296 5 0 0 0 0 0 0 7 8 0 0 0 0 0 0\n",
            &mut touching,
        );
        assert_eq!(touching[0].name.as_str(), "eth1");
        assert_eq!(touching[0].rx_bytes, 4_294_967_296);
    }

    #[test]
    fn default_route_is_the_lowest_metric_up_default() {
        let v4 =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
wlan0\t00000000\t0102A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0
eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0
";
        assert_eq!(default_route_v4(v4.as_bytes()).unwrap().as_str(), "eth0");
        assert!(default_route_v4(b"Iface\tDestination\n").is_none());
        let v6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00450003   enp1s0
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001   enp1s0
";
        assert_eq!(default_route_v6(v6.as_bytes()).unwrap().as_str(), "enp1s0");
    }

    #[test]
    fn the_default_link_comes_first_and_a_vanished_one_is_no_error() {
        let dir = tempfile::tempdir().unwrap();
        let net = dir.path().join("proc/net");
        std::fs::create_dir_all(&net).unwrap();
        std::fs::write(net.join("dev"), DEV).unwrap();
        std::fs::write(
            net.join("route"),
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
             wlp2s0\t00000000\t0102A8C0\t0003\t0\t0\t600\t00000000\n",
        )
        .unwrap();
        let roots = Roots {
            proc: dir.path().join("proc"),
            sys: dir.path().join("sys"),
        };
        let mut r = LinkReader::open(&roots).unwrap();
        let mut out = Vec::new();
        r.read(&mut out).unwrap();
        let names: Vec<&str> = out.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["wlp2s0", "lo", "eth0"]);
        assert!(out[0].is_default);
        // The default route's link disappears (and the file shrinks): no error, no link.
        std::fs::write(net.join("dev"), &DEV[..DEV.find("  eth0").unwrap()]).unwrap();
        r.read(&mut out).unwrap();
        let names: Vec<&str> = out.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["lo"]);
    }
}
