//! `network.*`: which interface carries the default route, its addresses, whether the
//! machine is online, whether a VPN carries traffic, and the default interface's
//! throughput. Read from /proc/net/route and ipv6_route, /sys/class/net and
//! getifaddrs(3) (one netlink dump inside the C library) — `ip` and `iw` are never run.
//! Published with every system sample, and at once when the kernel announces a link,
//! address or route change on a NETLINK_ROUTE socket (`Events`), so a prompt shows a VPN
//! the moment it comes up rather than a sample later.
//!
//! A VPN is a tun/tap device (`/sys/class/net/X/tun_flags`: OpenVPN, tailscale, most
//! clients) or a WireGuard device (`DEVTYPE=wireguard`) that is up and carries a route.
//! The wifi SSID needs nl80211 over generic netlink; not read yet (`network.ssid` has no
//! value), see docs/limits.md.

use std::fs;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use crate::cache::Cache;

pub use kernstat_client::keys::host::NETWORK_KEYS;

/// What was found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetInfo {
    /// Default route's interface.
    pub interface: Option<String>,
    /// Its IPv4 address.
    pub ip: Option<Ipv4Addr>,
    /// Its global IPv6 address.
    pub ipv6: Option<Ipv6Addr>,
    /// Default route, interface up, an address.
    pub online: bool,
    /// A VPN interface carrying a route.
    pub vpn: Option<String>,
    /// Byte counters of the default interface (rx, tx).
    pub bytes: Option<(u64, u64)>,
}

/// Interfaces with a default route, from /proc/net/route (IPv4) then ipv6_route, lowest
/// metric first; and every interface that carries any route.
pub fn routes(proc_net: &Path) -> (Vec<String>, Vec<String>) {
    use kernstat_sources::net::{routes_v4, routes_v6, Route};
    let mut defaults: Vec<(u64, String)> = Vec::new();
    let mut carrying: Vec<String> = Vec::new();
    let name = |r: &Route<'_>| String::from_utf8_lossy(r.iface).into_owned();
    let v4 = fs::read(proc_net.join("route")).unwrap_or_default();
    for r in routes_v4(&v4).filter(|r| r.up) {
        carrying.push(name(&r));
        if r.is_default {
            defaults.push((r.metric, name(&r)));
        }
    }
    let ipv4_defaults = defaults.len();
    let v6 = fs::read(proc_net.join("ipv6_route")).unwrap_or_default();
    for r in routes_v6(&v6).filter(|r| r.up) {
        carrying.push(name(&r));
        if r.is_default {
            defaults.push((r.metric, name(&r)));
        }
    }
    // IPv4 defaults first (by metric), then IPv6 ones.
    defaults[..ipv4_defaults].sort();
    defaults[ipv4_defaults..].sort();
    carrying.sort();
    carrying.dedup();
    (defaults.into_iter().map(|(_, i)| i).collect(), carrying)
}

/// The interface's primary IPv4 address: SIOCGIFADDR on a datagram socket (an ioctl,
/// allowed inside a system daemon's seccomp filter, where getifaddrs' netlink socket is
/// not).
pub fn ipv4_of(probe: &OwnedFd, iface: &str) -> Option<Ipv4Addr> {
    // struct ifreq: the name (IFNAMSIZ = 16), then a struct sockaddr_in.
    let mut req = [0u8; 40];
    let name = iface.as_bytes();
    if name.len() >= 16 {
        return None;
    }
    req[..name.len()].copy_from_slice(name);
    // SAFETY: req is a buffer the size of struct ifreq; the kernel writes inside it.
    let r = unsafe { libc::ioctl(probe.as_raw_fd(), libc::SIOCGIFADDR, req.as_mut_ptr()) };
    if r != 0 || u16::from_ne_bytes([req[16], req[17]]) != libc::AF_INET as u16 {
        return None;
    }
    Some(Ipv4Addr::new(req[20], req[21], req[22], req[23]))
}

/// The interface's global IPv6 addresses, from /proc/net/if_inet6 (scope 00).
pub fn ipv6_of(proc_net: &Path, iface: &str) -> Vec<Ipv6Addr> {
    let Ok(t) = fs::read_to_string(proc_net.join("if_inet6")) else {
        return Vec::new();
    };
    t.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 || f[5] != iface || f[3] != "00" || f[0].len() != 32 {
                return None;
            }
            u128::from_str_radix(f[0], 16).ok().map(Ipv6Addr::from)
        })
        .collect()
}

/// A datagram socket for the address ioctl (opened before a sandbox forbids socket()).
pub fn probe_socket() -> Option<OwnedFd> {
    // SAFETY: plain socket creation; the fd is owned below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    // SAFETY: raw is a new descriptor we own.
    (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw) })
}

fn sys_text(sys_net: &Path, iface: &str, file: &str) -> Option<String> {
    fs::read_to_string(sys_net.join(iface).join(file)).ok()
}

fn is_up(sys_net: &Path, iface: &str) -> bool {
    sys_text(sys_net, iface, "flags")
        .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|f| f & libc::IFF_UP as u32 != 0)
}

/// A tun/tap or WireGuard device.
pub fn is_vpn_device(sys_net: &Path, iface: &str) -> bool {
    sys_net.join(iface).join("tun_flags").exists()
        || sys_text(sys_net, iface, "uevent")
            .is_some_and(|u| u.lines().any(|l| l == "DEVTYPE=wireguard"))
}

/// Reads everything; `root` is `/` (a fake tree's root in tests of the file parts).
pub fn read(root: &Path, probe: Option<&OwnedFd>) -> NetInfo {
    let proc_net = root.join("proc/net");
    let sys_net = root.join("sys/class/net");
    let (defaults, carrying) = routes(&proc_net);
    let interface = defaults.into_iter().next();
    let ip = interface
        .as_deref()
        .zip(probe)
        .and_then(|(i, p)| ipv4_of(p, i));
    let ipv6 = interface
        .as_deref()
        .and_then(|i| ipv6_of(&proc_net, i).first().copied());
    let online = interface
        .as_deref()
        .is_some_and(|i| is_up(&sys_net, i) && (ip.is_some() || ipv6.is_some()));
    let vpn = carrying
        .iter()
        .find(|i| is_vpn_device(&sys_net, i) && is_up(&sys_net, i))
        .cloned();
    let bytes = interface.as_deref().and_then(|i| {
        let n = |f: &str| {
            sys_text(&sys_net, i, &format!("statistics/{f}"))?
                .trim()
                .parse::<u64>()
                .ok()
        };
        Some((n("rx_bytes")?, n("tx_bytes")?))
    });
    NetInfo {
        interface,
        ip,
        ipv6,
        online,
        vpn,
        bytes,
    }
}

/// The provider's state: the last byte counters, for rates.
#[derive(Debug, Default)]
pub struct Network {
    last: Mutex<Option<(Instant, String, u64, u64)>>,
    probe: std::sync::OnceLock<Option<OwnedFd>>,
}

impl Network {
    /// Uses `probe` for the address ioctl (see [`Events::probe`]).
    pub fn set_probe(&self, probe: OwnedFd) {
        let _ = self.probe.set(Some(probe));
    }

    /// Reads and publishes every key; with `sample`, the rates over the time since the
    /// previous sample too (a netlink announcement between samples re-publishes the
    /// rest and leaves the rates and their window alone).
    pub fn publish(&self, cache: &Cache, sample: bool) {
        let probe = self.probe.get_or_init(probe_socket).as_ref();
        let info = read(Path::new("/"), probe);
        let j = |v: serde_json::Value| serde_json::to_vec(&v).unwrap_or_else(|_| b"null".to_vec());
        let put = |k: &str, v: serde_json::Value| cache.put(k, None, j(v));
        if sample {
            let mut rates: Option<(u64, u64)> = None;
            if let Ok(mut last) = self.last.lock() {
                let now = Instant::now();
                if let (Some((t, iface, rx0, tx0)), Some(i), Some((rx, tx))) =
                    (&*last, &info.interface, info.bytes)
                {
                    let s = now.duration_since(*t).as_secs_f64();
                    if iface == i && s > 0.0 {
                        rates = Some((
                            (rx.saturating_sub(*rx0) as f64 / s) as u64,
                            (tx.saturating_sub(*tx0) as f64 / s) as u64,
                        ));
                    }
                }
                *last = match (&info.interface, info.bytes) {
                    (Some(i), Some((rx, tx))) => Some((now, i.clone(), rx, tx)),
                    _ => None,
                };
            }
            put("network.rx_bps", serde_json::json!(rates.map(|r| r.0)));
            put("network.tx_bps", serde_json::json!(rates.map(|r| r.1)));
        } else if cache.get("network.rx_bps", None).is_none() {
            put("network.rx_bps", serde_json::Value::Null);
            put("network.tx_bps", serde_json::Value::Null);
        }
        put("network.interface", serde_json::json!(info.interface));
        put(
            "network.ip",
            serde_json::json!(info.ip.map(|i| i.to_string())),
        );
        put(
            "network.ipv6",
            serde_json::json!(info.ipv6.map(|i| i.to_string())),
        );
        put("network.online", serde_json::json!(info.online));
        put("network.vpn_active", serde_json::json!(info.vpn.is_some()));
        put("network.vpn_name", serde_json::json!(info.vpn));
        put("network.ssid", serde_json::Value::Null);
    }
}

/// A NETLINK_ROUTE socket subscribed to link, address and route changes. Opened before
/// a system daemon drops privileges and installs its seccomp filter (socket and bind are
/// not in its allow-list; recvfrom is).
#[derive(Debug)]
pub struct Events {
    fd: OwnedFd,
    /// The socket for the address ioctl, opened with it.
    pub probe: Option<OwnedFd>,
}

impl Events {
    /// Opens and subscribes.
    pub fn open() -> std::io::Result<Events> {
        const GROUPS: u32 = (libc::RTMGRP_LINK
            | libc::RTMGRP_IPV4_IFADDR
            | libc::RTMGRP_IPV6_IFADDR
            | libc::RTMGRP_IPV4_ROUTE
            | libc::RTMGRP_IPV6_ROUTE) as u32;
        // SAFETY: plain socket creation; the fd is owned below.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: raw is a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_nl is plain data.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = GROUPS;
        // SAFETY: sa is a valid sockaddr_nl of the size given.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Events {
            fd,
            probe: probe_socket(),
        })
    }

    /// Calls `changed` after each burst of announcements (50 ms quiet), on a thread of
    /// its own, until the socket fails.
    pub fn run(self, changed: impl Fn() + Send + 'static) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("netlink".into())
            .spawn(move || {
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    // SAFETY: buf is writable for its length.
                    let n = unsafe {
                        libc::recvfrom(
                            self.fd.as_raw_fd(),
                            buf.as_mut_ptr().cast(),
                            buf.len(),
                            0,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                        )
                    };
                    if n < 0 {
                        let e = std::io::Error::last_os_error();
                        // ENOBUFS: announcements were dropped; re-reading covers them.
                        if e.raw_os_error() != Some(libc::ENOBUFS)
                            && e.kind() != std::io::ErrorKind::Interrupted
                        {
                            return;
                        }
                    }
                    // Coalesce: an interface coming up announces link, addresses and
                    // routes in a burst.
                    let mut pfd = libc::pollfd {
                        fd: self.fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: pfd is one valid pollfd; drained without blocking after.
                    while unsafe { libc::poll(&mut pfd, 1, 50) } > 0 {
                        // SAFETY: as above.
                        let _ = unsafe {
                            libc::recvfrom(
                                self.fd.as_raw_fd(),
                                buf.as_mut_ptr().cast(),
                                buf.len(),
                                libc::MSG_DONTWAIT,
                                std::ptr::null_mut(),
                                std::ptr::null_mut(),
                            )
                        };
                    }
                    changed();
                }
            })
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_routes_and_carriers_from_proc() {
        let t = tempfile::tempdir().unwrap();
        let net = t.path();
        fs::write(
            net.join("route"),
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
             wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n\
             eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
             tun0\t0000080A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
             down0\t00000000\t00000000\t0000\t0\t0\t0\t00000000\t0\t0\t0\n",
        )
        .unwrap();
        fs::write(
            net.join("ipv6_route"),
            "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     wg0\n",
        )
        .unwrap();
        let (defaults, carrying) = routes(net);
        assert_eq!(defaults, vec!["eth0", "wlan0", "wg0"]);
        assert_eq!(carrying, vec!["eth0", "tun0", "wg0", "wlan0"]);
    }
}
