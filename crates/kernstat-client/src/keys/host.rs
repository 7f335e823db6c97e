//! Facts about the host (name, kernel, uptime, the user) and its network (the default
//! route's interface, addresses, VPN), as keys.

/// Every key this provider publishes.
pub const BASIC_KEYS: &[(&str, &str)] = &[
    ("hostname.name", "host name"),
    ("hostname.short", "host name up to the first dot"),
    ("user.name", "the daemon's user"),
    ("user.uid", "the daemon's uid"),
    ("uname.sysname", "kernel name (Linux)"),
    ("uname.release", "kernel release"),
    ("uname.version", "kernel build version"),
    ("uname.machine", "hardware name (x86_64)"),
    ("uptime.seconds", "seconds since boot"),
    ("uptime.days", "whole days since boot"),
    ("uptime.hours", "hours since boot, after the days (0-23)"),
    (
        "uptime.minutes",
        "minutes since boot, after the hours (0-59)",
    ),
];

/// Every key this provider publishes.
pub const NETWORK_KEYS: &[(&str, &str)] = &[
    (
        "network.interface",
        "the interface of the default route (null without one)",
    ),
    ("network.ip", "its IPv4 address"),
    ("network.ipv6", "its global IPv6 address"),
    (
        "network.online",
        "a default route on an interface that is up and has an address",
    ),
    (
        "network.vpn_active",
        "a tun/tap or WireGuard interface is up and carries a route",
    ),
    ("network.vpn_name", "that interface's name"),
    (
        "network.ssid",
        "the wifi network's name (not read yet: no value)",
    ),
    (
        "network.rx_bps",
        "bytes/s received on the default interface",
    ),
    ("network.tx_bps", "bytes/s sent on the default interface"),
];
