//! Script providers: the user's own questions (`[[script]]` in the config file), answered
//! by their own commands. A script runs only while someone asks for its keys (first on
//! the first request, then every `poll_secs` and when a `watch` file changes), never
//! twice at once, at most `[scripts] concurrency` of them together, off the server's
//! threads; it is killed with its whole process group after `timeout_secs`, its output
//! is cut at `max_bytes` (and the script stopped), it sees only the variables its `env`
//! lists, its stderr goes to the daemon's log, and a failing one is retried after 2, 4 …
//! 64 s while its keys say why (`failed`). The system daemon runs none (its seccomp
//! filter forbids starting processes).

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};
use tokio::sync::Semaphore;

use crate::cache::Entry;
use crate::hub::{Event, Hub};
use crate::settings::{Format, Script};

struct Run {
    busy: bool,
    ran: bool,
    failures: u32,
    next: Option<Instant>,
    last_asked: Instant,
    keys: Vec<String>,
    _watcher: Option<notify::RecommendedWatcher>,
}

/// The scripts' state.
pub struct Scripts {
    runs: Arc<Mutex<HashMap<String, Run>>>,
    limit: Mutex<(usize, Arc<Semaphore>)>,
    /// Scripts started so far (for tests and `status`).
    started: std::sync::atomic::AtomicU64,
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            runs: Arc::new(Mutex::new(HashMap::new())),
            limit: Mutex::new((4, Arc::new(Semaphore::new(4)))),
            started: Default::default(),
        }
    }
}

/// The values a script's output gives: (key, JSON) pairs, the whole first.
pub fn values(s: &Script, out: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let text = String::from_utf8_lossy(out);
    let j = |v: &serde_json::Value| serde_json::to_vec(v).unwrap_or_else(|_| b"null".to_vec());
    let object = |m: serde_json::Map<String, serde_json::Value>| {
        let mut v = vec![(s.name.clone(), j(&serde_json::Value::Object(m.clone())))];
        for (k, val) in &m {
            v.push((format!("{}.{k}", s.name), j(val)));
        }
        v
    };
    match s.format {
        Format::Text => Ok(vec![(
            s.name.clone(),
            j(&serde_json::Value::String(text.trim().to_string())),
        )]),
        Format::Kv => {
            let mut m = serde_json::Map::new();
            for line in text.lines() {
                if let Some((k, v)) = line.split_once('=') {
                    let k = k.trim();
                    if !k.is_empty() && !k.contains(char::is_whitespace) {
                        m.insert(
                            k.to_string(),
                            serde_json::Value::String(v.trim().to_string()),
                        );
                    }
                }
            }
            Ok(object(m))
        }
        Format::Json => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Object(m)) => Ok(object(m)),
            Ok(other) => Ok(vec![(s.name.clone(), j(&other))]),
            Err(e) => Err(format!("output is not JSON: {e}")),
        },
    }
}

/// Runs `s` once: its stdout (at most `max_bytes`), or why it failed.
pub fn execute(s: &Script) -> Result<Vec<u8>, String> {
    let mut cmd = if s.shell {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(&s.command[0]);
        c
    } else {
        let mut c = Command::new(&s.command[0]);
        c.args(&s.command[1..]);
        c
    };
    cmd.env_clear();
    for v in &s.env {
        if let Some(val) = std::env::var_os(v) {
            cmd.env(v, val);
        }
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", s.command[0]))?;
    let pgid = child.id() as i32;
    let kill_group = move || {
        // SAFETY: kill with a valid signal; the group may be gone already (ESRCH).
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    };
    let cut = Arc::new(AtomicBool::new(false));
    let mut stdout = child.stdout.take().expect("piped");
    let max = s.max_bytes;
    let reader = {
        let cut = cut.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::with_capacity(max.min(64 * 1024));
            let mut chunk = [0u8; 8192];
            loop {
                match stdout.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let room = max - buf.len();
                        buf.extend_from_slice(&chunk[..n.min(room)]);
                        if n >= room {
                            // The cap: stop the script instead of draining the rest.
                            cut.store(true, Ordering::Relaxed);
                            kill_group();
                            break;
                        }
                    }
                }
            }
            buf
        })
    };
    let name = s.name.clone();
    let stderr = child.stderr.take().expect("piped");
    let logger = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().take(100) {
            let Ok(line) = line else { break };
            eprintln!("kernstat daemon: script {name}: {line}");
        }
    });
    let deadline = Instant::now() + Duration::from_secs_f64(s.timeout_secs);
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() >= deadline => {
                kill_group();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(e.to_string()),
        }
    };
    let out = reader.join().unwrap_or_default();
    let _ = logger.join();
    match status {
        None => Err(format!("timed out after {} s (killed)", s.timeout_secs)),
        Some(_) if cut.load(Ordering::Relaxed) => Ok(out),
        Some(st) if st.success() => Ok(out),
        Some(st) => Err(format!("exited with {st}")),
    }
}

impl Scripts {
    /// Applies `[scripts] concurrency`.
    pub fn set_concurrency(&self, n: usize) {
        if let Ok(mut l) = self.limit.lock() {
            if l.0 != n {
                *l = (n, Arc::new(Semaphore::new(n)));
            }
        }
    }

    /// Scripts started so far.
    pub fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    /// The entry of `key` of script `s`, running it first when nobody asked before.
    pub async fn get(self: &Arc<Self>, h: &Arc<Hub>, s: &Script, key: &str) -> Option<Arc<Entry>> {
        let first = {
            let mut g = self.runs.lock().ok()?;
            let r = g.entry(s.name.clone()).or_insert_with(|| Run {
                busy: false,
                ran: false,
                failures: 0,
                next: None,
                last_asked: Instant::now(),
                keys: Vec::new(),
                _watcher: watch(&s.watch, &self.runs, &s.name),
            });
            r.last_asked = Instant::now();
            !r.ran
        };
        if first {
            self.run(h, s.clone(), true).await;
        }
        h.cache.get(key, None)
    }

    /// Runs `s` (unless it is running; with `wait`, the caller waits for it).
    async fn run(self: &Arc<Self>, h: &Arc<Hub>, s: Script, wait: bool) {
        // Some(true): we start it; Some(false): it is running already; None: forgotten.
        let start = {
            let Ok(mut g) = self.runs.lock() else { return };
            g.get_mut(&s.name)
                .map(|r| !std::mem::replace(&mut r.busy, true))
        };
        match start {
            None => return,
            Some(false) => {
                if wait {
                    // Someone else's run: wait for it to publish.
                    for _ in 0..(s.timeout_secs * 100.0) as u64 + 100 {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        let busy = self
                            .runs
                            .lock()
                            .map(|g| g.get(&s.name).is_some_and(|r| r.busy))
                            .unwrap_or(false);
                        if !busy {
                            break;
                        }
                    }
                }
                return;
            }
            Some(true) => {}
        }
        let sem = self.limit.lock().map(|l| l.1.clone()).ok();
        let _permit = match &sem {
            Some(sem) => sem.clone().acquire_owned().await.ok(),
            None => None,
        };
        self.started.fetch_add(1, Ordering::Relaxed);
        let script = s.clone();
        let result = tokio::task::spawn_blocking(move || {
            execute(&script).and_then(|out| values(&script, &out))
        })
        .await
        .unwrap_or_else(|_| Err("the runner panicked".into()));
        let now = Instant::now();
        let Ok(mut g) = self.runs.lock() else { return };
        let Some(r) = g.get_mut(&s.name) else { return };
        r.busy = false;
        r.ran = true;
        match result {
            Ok(vals) => {
                r.failures = 0;
                r.next = s.poll_secs.map(|p| now + Duration::from_secs_f64(p));
                let keys: Vec<String> = vals.iter().map(|(k, _)| k.clone()).collect();
                for old in &r.keys {
                    if !keys.contains(old) {
                        h.cache.remove(old, None);
                    }
                }
                for (k, v) in vals {
                    h.cache.put(&k, None, v);
                }
                r.keys = keys;
            }
            Err(why) => {
                eprintln!("kernstat daemon: script {}: {why}", s.name);
                r.failures += 1;
                r.next = Some(now + Duration::from_secs(1u64 << r.failures.min(6)));
                let mut keys = r.keys.clone();
                if !keys.contains(&s.name) {
                    keys.push(s.name.clone());
                }
                for k in &keys {
                    h.cache.put_failed(k, None, &why);
                }
                r.keys = keys;
            }
        }
        drop(g);
        h.notify(Event::System);
    }

    /// Every second: runs what is due, forgets scripts nobody asked about (and those
    /// the settings no longer have).
    pub async fn tick(self: &Arc<Self>, h: &Arc<Hub>) {
        let settings = h.settings();
        let now = Instant::now();
        let idle_after = h.timing().idle_after;
        let (gone, due): (Vec<String>, Vec<Script>) = {
            let Ok(g) = self.runs.lock() else { return };
            let gone = g
                .iter()
                .filter(|(n, r)| {
                    // A running script is kept: someone may be waiting for it.
                    !r.busy
                        && (settings.script(n).is_none()
                            || now.duration_since(r.last_asked) >= idle_after)
                })
                .map(|(n, _)| n.clone())
                .collect();
            let due = g
                .iter()
                .filter(|(_, r)| !r.busy && r.next.is_some_and(|t| t <= now))
                .filter_map(|(n, _)| settings.script(n).cloned())
                .collect();
            (gone, due)
        };
        for n in gone {
            if let Some(r) = self.runs.lock().ok().and_then(|mut g| g.remove(&n)) {
                for k in r.keys {
                    h.cache.remove(&k, None);
                }
            }
        }
        for s in due {
            let (h2, me) = (h.clone(), self.clone());
            tokio::spawn(async move { me.run(&h2, s, false).await });
        }
    }
}

/// A watcher that makes script `name` due when one of `files` changes.
fn watch(
    files: &[std::path::PathBuf],
    runs: &Arc<Mutex<HashMap<String, Run>>>,
    name: &str,
) -> Option<notify::RecommendedWatcher> {
    if files.is_empty() {
        return None;
    }
    let runs = Arc::downgrade(runs);
    let wanted: Vec<std::path::PathBuf> = files.to_vec();
    let name = name.to_string();
    let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(ev) = res else { return };
        if !ev.paths.iter().any(|p| wanted.contains(p)) {
            return;
        }
        if let Some(runs) = runs.upgrade() {
            if let Some(r) = runs.lock().ok().as_mut().and_then(|g| g.get_mut(&name)) {
                r.next = Some(Instant::now());
            }
        }
    })
    .ok()?;
    for f in files {
        if let Some(dir) = f.parent() {
            let _ = w.watch(dir, RecursiveMode::NonRecursive);
        }
    }
    Some(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(cmd: &str, format: Format) -> Script {
        Script {
            name: "t".into(),
            command: vec![cmd.into()],
            shell: true,
            poll_secs: None,
            watch: vec![],
            timeout_secs: 2.0,
            format,
            max_bytes: 1024,
            env: vec![],
        }
    }

    #[test]
    fn formats_timeouts_caps_and_the_environment() {
        let out = execute(&script("echo ' 21 C '", Format::Text)).unwrap();
        assert_eq!(
            values(&script("", Format::Text), &out).unwrap()[0].1,
            b"\"21 C\""
        );
        let kv = values(
            &script("", Format::Kv),
            b"temp=21\nwind = 3 km/h\nnonsense\n",
        )
        .unwrap();
        assert!(kv.contains(&("t.wind".into(), b"\"3 km/h\"".to_vec())));
        let js = values(&script("", Format::Json), br#"{"a":1,"b":[2]}"#).unwrap();
        assert!(js.contains(&("t.a".into(), b"1".to_vec())));
        assert!(values(&script("", Format::Json), b"{oops").is_err());
        // Killed with its children at the timeout.
        let mut hang = script("sleep 30 & sleep 30", Format::Text);
        hang.timeout_secs = 0.3;
        let t = Instant::now();
        let e = execute(&hang).unwrap_err();
        assert!(e.contains("timed out"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
        // 100 MB of output: cut at the cap, the writer stopped.
        let t = Instant::now();
        let out = execute(&script(
            "head -c 100000000 /dev/zero | tr '\\0' x",
            Format::Text,
        ))
        .unwrap();
        assert_eq!(out.len(), 1024);
        assert!(t.elapsed() < Duration::from_secs(5));
        // Only the listed variables.
        std::env::set_var("KS_SCRIPT_SECRET", "s");
        let out = execute(&script("echo \"[$KS_SCRIPT_SECRET][$HOME]\"", Format::Text)).unwrap();
        assert_eq!(String::from_utf8(out).unwrap().trim(), "[][]");
        let mut with = script("echo \"[$KS_SCRIPT_SECRET]\"", Format::Text);
        with.env = vec!["KS_SCRIPT_SECRET".into()];
        assert_eq!(
            String::from_utf8(execute(&with).unwrap()).unwrap().trim(),
            "[s]"
        );
        let e = execute(&script("exit 3", Format::Text)).unwrap_err();
        assert!(e.contains("3"), "{e}");
    }
}
