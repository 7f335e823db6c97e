//! `kernstat daemon`: its flags resolved (who the daemon becomes, who may connect, which
//! socket and config; unknown users are usage errors), then kernstat-service runs it.

use std::path::PathBuf;

use anyhow::bail;
use kernstat_client::runtime::SYSTEM_SOCKET;
use kernstat_daemon::Access;
use kernstat_service::metrics_feed::MetricsOptions;
use kernstat_service::recording::RecordOptions;
use kernstat_service::DaemonOptions;

use crate::cli::{Collect, DaemonArgs};

/// Runs `kernstat daemon`; returns the exit status.
pub fn run(args: &DaemonArgs) -> anyhow::Result<i32> {
    kernstat_client::autostart::adopt_lock();
    let opts = options(args)?;
    kernstat_service::run(&opts)
}

/// The flags with every name resolved (unknown users and groups are usage errors).
fn options(args: &DaemonArgs) -> anyhow::Result<DaemonOptions> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if args.system && euid != 0 {
        bail!(
            "--system needs root: it loads BPF and binds {SYSTEM_SOCKET}, then switches to --user {}",
            args.user
        );
    }
    let switch_to = match args.system {
        true => match kernstat_sources::users::by_name_or_uid(&args.user) {
            Some(u) => Some(u),
            None => crate::cli::usage!("--user {}: no such user", args.user),
        },
        false => None,
    };
    let mut allowed = Vec::new();
    for a in &args.allow {
        match kernstat_sources::users::by_name_or_uid(a) {
            Some(u) => allowed.push(u.uid),
            None => crate::cli::usage!("--allow {a}: no such user"),
        }
    }
    let access = match (allowed.is_empty(), args.system) {
        (false, _) => Access {
            uids: Some(allowed),
        },
        (true, true) => Access { uids: None },
        (true, false) => Access {
            uids: Some(vec![euid]),
        },
    };
    let socket = args.socket.clone().unwrap_or_else(|| match args.system {
        true => PathBuf::from(SYSTEM_SOCKET),
        false => kernstat_client::session::socket_from_env()
            .unwrap_or_else(kernstat_client::session::user_socket),
    });
    let metrics = args.metrics.map(|addr| MetricsOptions {
        addr,
        top: args.metrics_top,
        top_given: args.metrics_top != 10,
        runqlat: args.collect.contains(&Collect::Runqlat),
        writes: args.collect.contains(&Collect::Writes),
        biolat: args.collect.contains(&Collect::Biolat),
        bpf_stats: !args.no_bpf_stats,
    });
    let record = match &args.record {
        Some(dir) => Some(RecordOptions {
            dir: dir.clone(),
            interval: args.record_interval,
            retention: kernstat_record::Retention {
                max_age: args.retain,
                max_bytes: args.max_size,
            },
            group: match &args.record_group {
                Some(g) => match kernstat_sources::users::group_id(g) {
                    Some(id) => Some(id),
                    None => crate::cli::usage!("--record-group {g}: no such group"),
                },
                None => None,
            },
        }),
        None => None,
    };
    Ok(DaemonOptions {
        system: args.system,
        switch_to,
        access,
        allow_given: !args.allow.is_empty(),
        socket,
        config_path: args
            .config
            .clone()
            .or_else(kernstat_daemon::settings::default_path),
        config_named: args.config.is_some(),
        hidepid: args.private_processes
            || (args.system && kernstat_daemon::providers::system::proc_hides_pids()),
        interval: args.interval,
        kthreads: args.kthreads,
        max_connections: args.max_connections,
        max_connections_per_user: args.max_connections_per_user.unwrap_or(if args.system {
            256
        } else {
            args.max_connections
        }),
        collect: crate::source::collect_options(&args.source),
        cgroup_depth: args.cgroup_depth,
        cgroup_max: args.cgroup_max,
        metrics,
        record,
    })
}
