//! TCP retransmits and connect latency (bpf/tcp.bpf.c): the retransmit program in the
//! form this kernel's tracepoint has (6.17 added `err`), the connect hook, and readers:
//! retransmits per socket taken out of the map at each read (so an interval's are
//! exactly those since the last), connect latency and per-process connects cumulative.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, BorrowedFd};

use libbpf_rs::{MapCore, MapFlags};

use kernstat_model::hist::{Hist, SLOTS};
use kernstat_model::tcp::{ProcessTcp, SocketRetrans};

use crate::loader::{load_skel, LoadError};
use crate::skel::tcp::types::{ks_tcp_conn_stats, ks_tcp_hist, ks_tcp_retrans};
use crate::skel::tcp::{TcpSkel, TcpSkelBuilder};

// SAFETY: plain old data; all zeroes is a valid value.
const _: () = assert!(unsafe { std::mem::zeroed::<ks_tcp_hist>() }.slots.len() == SLOTS);

/// The loaded hooks.
pub struct Tcp {
    skel: TcpSkel<'static>,
    with_err: bool,
}

impl std::fmt::Debug for Tcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tcp")
            .field("with_err", &self.with_err)
            .finish()
    }
}

fn plain<T: Default>(bytes: &[u8]) -> T {
    let mut v = T::default();
    let n = std::mem::size_of::<T>().min(bytes.len());
    // SAFETY: T is a generated plain-old-data BPF type (any bit pattern is valid); at
    // most its size is copied.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&mut v as *mut T).cast::<u8>(), n) };
    v
}

fn text(b: &[i8]) -> String {
    let bytes: Vec<u8> = b
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    kernstat_model::text::printable(&String::from_utf8_lossy(&bytes)).into_owned()
}

fn addr(family: u16, b: &[u8; 16]) -> IpAddr {
    if family == 10 {
        IpAddr::V6(Ipv6Addr::from(*b))
    } else {
        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    }
}

impl Tcp {
    /// Loads and attaches (tp_btf: 5.5+ with BTF).
    pub fn load() -> Result<Self, LoadError> {
        let f = crate::kernel::features();
        let with_err = f
            .tracepoint_arity("tcp_retransmit_skb")
            .is_some_and(|n| n >= 3);
        let skel = load_skel(TcpSkelBuilder::default(), "tcp", |open| {
            open.progs.tcp_retrans.set_autoload(!with_err);
            open.progs.tcp_retrans_err.set_autoload(with_err);
            Ok(())
        })?;
        Ok(Tcp { skel, with_err })
    }

    /// Retransmits per socket since the last call (taken out of the map).
    pub fn take_retransmits(&self) -> io::Result<Vec<SocketRetrans>> {
        let map = &self.skel.maps.retrans;
        let keys: Vec<Vec<u8>> = map.keys().collect();
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let Ok(Some(v)) = map.lookup_and_delete(&k) else {
                continue;
            };
            let r: ks_tcp_retrans = plain(&v);
            out.push(SocketRetrans {
                count: r.count,
                pid: r.owner.tgid,
                comm: text(&r.owner.comm),
                cgroup_id: r.owner.cgroup,
                cgroup: String::new(),
                local: (addr(r.family, &r.saddr), r.sport),
                remote: (addr(r.family, &r.daddr), r.dport),
                ino: r.ino,
            });
        }
        Ok(out)
    }

    /// Retransmits counted since load, machine-wide (whatever happened to their sockets'
    /// entries).
    pub fn total(&self) -> u64 {
        self.skel
            .maps
            .total
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .unwrap_or_default()
            .iter()
            .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("8 bytes")))
            .sum()
    }

    /// Connect latency since load, µs.
    pub fn connect_hist(&self) -> io::Result<Hist> {
        let vals = self
            .skel
            .maps
            .conn_hist
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(io::Error::other)?
            .unwrap_or_default();
        let mut h = Hist::default();
        for v in vals {
            let one: ks_tcp_hist = plain(&v);
            h.add(&Hist::from_slots(&one.slots));
        }
        Ok(h)
    }

    /// Connects per process since load.
    pub fn connects(&self) -> io::Result<Vec<ProcessTcp>> {
        let mut out: Vec<ProcessTcp> = Vec::new();
        crate::batch::each_entry(&self.skel.maps.conn_stats, 256, |k, v| {
            let pid = u32::from_ne_bytes(k[..4].try_into().expect("4-byte key"));
            let s: ks_tcp_conn_stats = plain(v);
            out.push(ProcessTcp {
                pid,
                comm: text(&s.comm),
                retransmits: 0,
                connects: s.connects,
                failed: s.failed,
                connect_mean_ms: if s.connects > 0 {
                    s.sum_ns as f64 / s.connects as f64 / 1e6
                } else {
                    0.0
                },
                connect_max_ms: s.max_ns as f64 / 1e6,
            });
        })?;
        out.sort_by_key(|p| p.pid);
        Ok(out)
    }

    /// The attached programs (for BPF run-time statistics).
    pub fn programs(&self) -> Vec<(&'static str, BorrowedFd<'_>)> {
        let p = &self.skel.progs;
        vec![
            (
                "tcp_retransmit_skb",
                if self.with_err {
                    p.tcp_retrans_err.as_fd()
                } else {
                    p.tcp_retrans.as_fd()
                },
            ),
            ("inet_sock_set_state", p.tcp_state.as_fd()),
        ]
    }
}
