//! Where a bar that renders the daemon's samples reads them: the daemon's `summary` key,
//! from the shared-memory snapshot (polled when a sample is due; no socket, nothing for
//! the daemon to do), else a socket `watch` stream.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use kernstat_client::lookup;
use kernstat_model::Model;

/// One update of the daemon's `summary` key.
#[derive(serde::Deserialize)]
struct Update {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Option<Summary>,
}

/// The daemon's model of one interval, and what its sample cost.
#[derive(serde::Deserialize)]
pub struct Summary {
    /// The model, as the daemon computed it.
    #[serde(flatten)]
    pub model: Model,
    /// The daemon's sample time, µs.
    #[serde(default)]
    pub sample_us: f64,
}

/// A followed `summary` key.
pub enum Feed {
    /// The shared-memory snapshot's copy.
    Shm(Box<lookup::Follow>),
    /// A socket `watch` stream.
    Socket(kernstat_client::session::Watch),
}

impl Feed {
    /// Follows the daemon at `socket` (default: the user's, else the system's); Err
    /// says in one sentence why there is none.
    pub fn open(socket: Option<&Path>) -> Result<(PathBuf, Feed), String> {
        let sock = match socket {
            Some(p) => p.to_path_buf(),
            None => kernstat_client::default_socket().map_err(|e| e.to_string())?,
        };
        if let Some(f) = lookup::Follow::new(sock.clone(), "summary") {
            return Ok((sock, Feed::Shm(Box::new(f))));
        }
        let (sock, s) = kernstat_client::session::connect_to(Some(&sock))?;
        let w = s
            .watch("summary", None)
            .map_err(|e| format!("daemon at {}: {e}", sock.display()))?;
        Ok((sock, Feed::Socket(w)))
    }

    /// The next summary; Ok(None) when this feed ended (the daemon went away).
    pub fn next_summary(&mut self) -> anyhow::Result<Option<Summary>> {
        let update: Update = match self {
            Feed::Shm(f) => {
                let Some((v, _)) = f.next_stored() else {
                    return Ok(None);
                };
                if v.error {
                    bail!("daemon: {}", String::from_utf8_lossy(&v.bytes));
                }
                Update {
                    ok: true,
                    error: None,
                    data: serde_json::from_slice(&v.bytes)
                        .context("reading the daemon's summary")?,
                }
            }
            Feed::Socket(w) => match w.next_raw() {
                Ok(Some(line)) => {
                    serde_json::from_slice(line).context("reading the daemon's summary")?
                }
                Ok(None) | Err(_) => return Ok(None),
            },
        };
        match update.data.filter(|_| update.ok) {
            Some(summary) => Ok(Some(summary)),
            None => bail!(
                "daemon: {}",
                update.error.unwrap_or_else(|| "no summary".into())
            ),
        }
    }
}
