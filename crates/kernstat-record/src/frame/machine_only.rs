//! Reading a frame without its processes, ended processes and control groups. A
//! timeline over a day needs the machine's part of 17,280 frames, and decoding the
//! 300 processes of each (their text allocated, checked and freed) was nearly all of a
//! cold day's 2.8 s (docs/measured.md, `## kernstat view`). postcard is not
//! self-describing, so those lists must still be parsed to be passed: here into records
//! that borrow their text from the decompressed bytes as bytes (postcard writes a string
//! and a byte string alike; not checking UTF-8 was 18 % of what was left), so that
//! nothing is allocated for them and only their number is kept ([`Omitted`]).
//!
//! The records below mirror [`Proc`](super::Proc), [`Ended`](super::Ended) and
//! [`Group`](super::Group) field for field: a field added there and not here misreads
//! every field after it, which the unit test below (a frame with every list filled)
//! and the cursor tests in tests/format.rs catch.

use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, Error, SeqAccess, Visitor};
use serde::Deserialize as DeriveDeserialize;

use super::bounded::{MAX_OTHERS, MAX_PROCS};
use super::{Disk, Event, Frame, Hists, Link, Machine, Psi, Retransmit, UserSummary};

/// What a frame read machine-only listed and was not decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Omitted {
    /// Processes.
    pub procs: usize,
    /// Ended processes.
    pub ended: usize,
    /// Control groups.
    pub groups: usize,
}

/// A list parsed and counted, its entries dropped as they come; at most `MAX` of them,
/// as the full decode bounds them.
struct Counted<T, const MAX: usize>(usize, PhantomData<T>);

impl<'de, T: Deserialize<'de>, const MAX: usize> Deserialize<'de> for Counted<T, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Count<T, const MAX: usize>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const MAX: usize> Visitor<'de> for Count<T, MAX> {
            type Value = Counted<T, MAX>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "at most {MAX} entries")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut n = 0;
                while seq.next_element::<T>()?.is_some() {
                    n += 1;
                    if n > MAX {
                        return Err(A::Error::custom(format!(
                            "more than {MAX} entries in one sample"
                        )));
                    }
                }
                Ok(Counted(n, PhantomData))
            }
        }
        d.deserialize_seq(Count::<T, MAX>(PhantomData))
    }
}

/// [`Proc`](super::Proc) with its text borrowed, unchecked.
#[allow(dead_code)]
#[derive(DeriveDeserialize)]
struct ProcText<'a> {
    pid: u32,
    ppid: u32,
    uid: u32,
    euid: u32,
    gid: u32,
    start_ns: u64,
    state: u8,
    kthread: bool,
    threads: u32,
    nice: i32,
    prio: i32,
    cpu_ns: u64,
    children_cpu_ns: u64,
    run_delay_ns: u64,
    read_bytes: u64,
    write_bytes: u64,
    rss_bytes: u64,
    vsz_bytes: u64,
    minflt: u64,
    majflt: u64,
    net: Option<[[u64; 4]; 2]>,
    comm: &'a [u8],
    cmd: &'a [u8],
    cgroup: &'a [u8],
}

/// [`Ended`](super::Ended) with its text borrowed, unchecked.
#[allow(dead_code)]
#[derive(DeriveDeserialize)]
struct EndedText<'a> {
    pid: u32,
    ppid: u32,
    uid: u32,
    start_ns: u64,
    exit_ns: u64,
    cpu_ns: u64,
    read_bytes: u64,
    write_bytes: u64,
    maxrss_bytes: u64,
    exit_code: i32,
    net: Option<[[u64; 4]; 2]>,
    comm: &'a [u8],
    cmd: &'a [u8],
    cgroup: &'a [u8],
}

/// [`GroupIo`](super::GroupIo), counted.
#[allow(dead_code)]
#[derive(DeriveDeserialize)]
struct GroupIoSkip {
    major: u32,
    minor: u32,
    rbytes: u64,
    wbytes: u64,
    rios: u64,
    wios: u64,
}

/// [`Group`](super::Group) with its path borrowed and its devices counted.
#[allow(dead_code)]
#[derive(DeriveDeserialize)]
struct GroupText<'a> {
    path: &'a [u8],
    id: u64,
    depth: u32,
    read_ns: u64,
    cpu_usage_us: u64,
    cpu_user_us: u64,
    cpu_system_us: u64,
    periods: Option<u64>,
    throttled_periods: Option<u64>,
    throttled_us: Option<u64>,
    cpu_max_us: Option<u64>,
    cpu_period_us: Option<u64>,
    cpu_weight: Option<u64>,
    mem_current: Option<u64>,
    mem_max: Option<u64>,
    mem_high: Option<u64>,
    mem_oom: u64,
    mem_oom_kill: u64,
    mem_high_events: u64,
    io: Option<Counted<GroupIoSkip, MAX_OTHERS>>,
    pids: Option<u64>,
    pids_max: Option<u64>,
    psi: [Option<Psi>; 6],
    truncated: u32,
}

/// [`FrameOf`](super::FrameOf), field for field, its three long lists counted.
#[derive(DeriveDeserialize)]
struct MachineOnly<'a> {
    time_unix_ns: u64,
    boot_ns: u64,
    machine: Machine,
    #[serde(borrow)]
    procs: Counted<ProcText<'a>, MAX_PROCS>,
    #[serde(borrow)]
    ended: Counted<EndedText<'a>, MAX_OTHERS>,
    ended_lost: u64,
    exits_hook: bool,
    #[serde(deserialize_with = "super::bounded::others")]
    summaries: Vec<UserSummary>,
    #[serde(borrow)]
    groups: Counted<GroupText<'a>, MAX_OTHERS>,
    groups_mount: String,
    groups_layout: String,
    #[serde(deserialize_with = "super::bounded::others")]
    links: Vec<Link>,
    #[serde(deserialize_with = "super::bounded::others")]
    disks: Vec<Disk>,
    hists: Hists,
    #[serde(deserialize_with = "super::bounded::others")]
    events: Vec<Event>,
    tcp: bool,
    #[serde(deserialize_with = "super::bounded::others")]
    retransmits: Vec<Retransmit>,
}

/// A frame's bytes (this format's) decoded without its processes, ended processes and
/// groups: the frame with those lists empty and their numbers in `omitted`.
pub fn decode(raw: &[u8]) -> Result<Frame, String> {
    let m: MachineOnly = postcard::from_bytes(raw).map_err(|e| e.to_string())?;
    Ok(Frame {
        time_unix_ns: m.time_unix_ns,
        boot_ns: m.boot_ns,
        machine: m.machine,
        ended_lost: m.ended_lost,
        exits_hook: m.exits_hook,
        summaries: m.summaries,
        groups_mount: m.groups_mount,
        groups_layout: m.groups_layout,
        links: m.links,
        disks: m.disks,
        hists: m.hists,
        events: m.events,
        tcp: m.tcp,
        retransmits: m.retransmits,
        omitted: Some(Omitted {
            procs: m.procs.0,
            ended: m.ended.0,
            groups: m.groups.0,
        }),
        ..Frame::default()
    })
}

impl Frame {
    /// The same frame without its processes, ended processes and groups, their numbers
    /// kept (what [`decode`] makes of a frame's bytes).
    pub fn strip(&mut self) {
        if self.omitted.is_none() {
            self.omitted = Some(Omitted {
                procs: self.procs.len(),
                ended: self.ended.len(),
                groups: self.groups.len(),
            });
        }
        self.procs = Vec::new();
        self.ended = Vec::new();
        self.groups = Vec::new();
    }

    /// How many processes it listed (also when read machine-only).
    pub fn process_count(&self) -> usize {
        self.omitted.map_or(self.procs.len(), |o| o.procs)
    }

    /// How many ended processes it listed (also when read machine-only).
    pub fn ended_count(&self) -> usize {
        self.omitted.map_or(self.ended.len(), |o| o.ended)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Core, DiskLatency, Ended, Group, GroupIo, Proc, WriteSizes};
    use super::*;

    /// Every field of every list set, so that a field read as the wrong type shifts
    /// what comes after it and the comparison fails.
    fn full() -> Frame {
        let psi = Some(Psi {
            avg10: 1.5,
            avg60: 2.5,
            total_us: 123_456,
        });
        Frame {
            time_unix_ns: 1_764_000_000_000_000_000,
            boot_ns: 77_000_000_000,
            machine: Machine {
                mono_ns: 5,
                ncpus: 2,
                busy_ns: 9_999,
                cores: vec![Core {
                    busy_ns: 1,
                    total_ns: 2,
                    steal_ns: 3,
                    irq_ns: 4,
                }],
                load: [0.5, 0.25, 0.125],
                psi: [psi, None, psi, None, psi],
                ..Machine::default()
            },
            procs: (1..40)
                .map(|pid| Proc {
                    pid,
                    ppid: 1,
                    uid: 1000,
                    euid: 1000,
                    gid: 7,
                    start_ns: u64::from(pid) << 40,
                    state: b'R',
                    kthread: pid % 2 == 0,
                    threads: 3,
                    nice: -5,
                    prio: 20,
                    cpu_ns: u64::MAX - u64::from(pid),
                    children_cpu_ns: 1 << 50,
                    run_delay_ns: 1 << 33,
                    read_bytes: 1 << 34,
                    write_bytes: 1 << 35,
                    rss_bytes: 1 << 36,
                    vsz_bytes: 1 << 37,
                    minflt: 1 << 38,
                    majflt: 1 << 39,
                    net: (pid % 3 == 0).then_some([[1, 2, 3, 4], [5, 6, 7, 8]]),
                    comm: format!("proc-{pid}"),
                    cmd: "a command\u{e9} line".repeat(pid as usize),
                    cgroup: "/system.slice/x.service".into(),
                })
                .collect(),
            ended: (0..5)
                .map(|k| Ended {
                    pid: 9000 + k,
                    ppid: 1,
                    uid: 0,
                    start_ns: 1 << 45,
                    exit_ns: 1 << 46,
                    cpu_ns: 1 << 47,
                    read_bytes: 1,
                    write_bytes: 2,
                    maxrss_bytes: 1 << 30,
                    exit_code: -9,
                    net: Some([[9; 4]; 2]),
                    comm: "gone".into(),
                    cmd: "gone --now".into(),
                    cgroup: "/user.slice".into(),
                })
                .collect(),
            ended_lost: 3,
            exits_hook: true,
            summaries: vec![UserSummary {
                uid: 1001,
                processes: 64,
                ended: 2,
                cpu_ns: 1 << 40,
                rss_bytes: 1 << 41,
                cmd_bytes_cut: 77,
            }],
            groups: (0..7)
                .map(|k| Group {
                    path: format!("/g{k}"),
                    id: 1 << (k + 20),
                    depth: k,
                    read_ns: 1 << 42,
                    cpu_usage_us: 1,
                    cpu_user_us: 2,
                    cpu_system_us: 3,
                    periods: Some(4),
                    throttled_periods: Some(5),
                    throttled_us: Some(1 << 40),
                    cpu_max_us: Some(50_000),
                    cpu_period_us: Some(100_000),
                    cpu_weight: Some(100),
                    mem_current: Some(1 << 33),
                    mem_max: None,
                    mem_high: Some(1 << 34),
                    mem_oom: 1,
                    mem_oom_kill: 2,
                    mem_high_events: 3,
                    io: Some(vec![
                        GroupIo {
                            major: 7,
                            minor: 1,
                            rbytes: 1 << 40,
                            wbytes: 2,
                            rios: 3,
                            wios: 4,
                        };
                        2
                    ]),
                    pids: Some(9),
                    pids_max: None,
                    psi: [psi, None, psi, psi, None, psi],
                    truncated: 1,
                })
                .collect(),
            groups_mount: "/sys/fs/cgroup".into(),
            groups_layout: "v2".into(),
            links: vec![Link {
                name: "eth0".into(),
                is_default: true,
                rx: [1 << 40, 2, 3, 4],
                tx: [5, 6, 7, 1 << 41],
            }],
            disks: vec![Disk {
                name: "vda".into(),
                major: 254,
                io_ms: 1 << 30,
                ..Disk::default()
            }],
            hists: Hists {
                runqlat_us: Some(vec![1, 2, 3, 1 << 40]),
                writes: vec![WriteSizes {
                    syscall: "write".into(),
                    kind: "file".into(),
                    slots: vec![4, 5],
                    bytes: 6,
                }],
                biolat: vec![DiskLatency {
                    disk: "vda".into(),
                    op: "write".into(),
                    slots: vec![7, 8, 9],
                    bytes: 10,
                    errors: 11,
                }],
                connect_us: Some(vec![0, 1]),
            },
            events: Vec::new(),
            tcp: true,
            retransmits: vec![Retransmit {
                pid: 42,
                comm: "curl".into(),
                cgroup: "/".into(),
                peer: "10.0.0.1:443".into(),
                count: 3,
            }],
            ..Frame::default()
        }
    }

    #[test]
    fn machine_only_is_the_frame_without_its_lists() {
        let f = full();
        let raw = postcard::to_stdvec(&f).unwrap();
        let got = decode(&raw).unwrap();
        let mut want = f.clone();
        want.strip();
        assert_eq!(got, want);
        assert_eq!(got.process_count(), 39);
        assert_eq!(got.ended_count(), 5);
        assert_eq!(got.omitted.unwrap().groups, 7);
    }

    #[test]
    fn a_cut_frame_is_an_error() {
        let raw = postcard::to_stdvec(&full()).unwrap();
        for cut in [1, raw.len() / 3, raw.len() / 2, raw.len() - 1] {
            assert!(decode(&raw[..cut]).is_err(), "cut at {cut}");
        }
    }
}
