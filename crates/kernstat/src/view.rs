//! `kernstat view`: resolves the archive, the address and the token, prints the URL and
//! runs kernstat-view's server until Ctrl-C.

use crate::cli::ViewArgs;

/// Runs `kernstat view`; returns the exit status.
pub fn run(args: &ViewArgs) -> anyhow::Result<i32> {
    let archive = kernstat_record::locate::archive_dir(args.archive.as_deref());
    for dir in std::iter::once(&archive).chain(&args.compare) {
        if let Err(e) = kernstat_record::archive::Archive::open(dir) {
            eprintln!(
                "kernstat view: no archive at {} ({e}); `kernstat daemon --record DIR` writes one",
                dir.display()
            );
            return Ok(1);
        }
    }
    let token = match &args.token_file {
        Some(f) => {
            let text = match std::fs::read_to_string(f) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("kernstat view: --token-file {}: {e}", f.display());
                    return Ok(2);
                }
            };
            let t = text.lines().next().unwrap_or("").trim().to_string();
            if t.len() < 16
                || !t
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                eprintln!("kernstat view: --token-file: the first line must be at least 16 letters, digits, - or _");
                return Ok(2);
            }
            t
        }
        None if !args.listen.ip().is_loopback() => {
            eprintln!(
                "kernstat view: --listen {} is not loopback: give --token-file (anyone who can reach the port sees command lines and every process's counters)",
                args.listen
            );
            return Ok(2);
        }
        None => kernstat_view::new_token()?,
    };
    let listener = match std::net::TcpListener::bind(args.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("kernstat view: --listen {}: {e}", args.listen);
            return Ok(1);
        }
    };
    let addr = listener.local_addr()?;
    // The URL on stdout (a script can read it), the rest on stderr.
    let follow = if args.live { "&follow=1" } else { "" };
    println!("http://{addr}/?token={token}{follow}");
    eprintln!(
        "kernstat view: serving {} at the URL above (Ctrl-C to stop)",
        archive.display()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let opts = kernstat_view::ViewOptions {
        archive,
        listen: addr,
        token,
        compare: args.compare.clone(),
    };
    rt.block_on(async move {
        // Until a signal ends the process: there is nothing to flush.
        kernstat_view::serve(listener, opts, std::future::pending()).await
    })?;
    Ok(0)
}
