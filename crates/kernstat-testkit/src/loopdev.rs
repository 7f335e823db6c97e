//! A loop device of a test's own (block I/O tests need a disk whose every request is
//! theirs): over a file in /var/tmp (a real filesystem, not tmpfs), with direct I/O so
//! each write is one request, detached when dropped.

use std::process::Command;

/// A loop device over a file of the test's own.
pub struct LoopDevice {
    dev: String,
    _file: tempfile::NamedTempFile,
}

impl LoopDevice {
    /// Attaches a new device over a file of `mib` MiB (needs root and losetup).
    pub fn new(mib: u64) -> LoopDevice {
        let file = tempfile::NamedTempFile::new_in("/var/tmp").expect("a file in /var/tmp");
        file.as_file().set_len(mib << 20).expect("size the file");
        let out = Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on"])
            .arg(file.path())
            .output()
            .expect("run losetup");
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        LoopDevice { dev, _file: file }
    }

    /// Its path (/dev/loopN).
    pub fn path(&self) -> &str {
        &self.dev
    }

    /// Its name as /proc/diskstats gives it (loopN).
    pub fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }

    /// Writes completed on it, per /proc/diskstats.
    pub fn writes_completed(&self) -> u64 {
        let stats = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
        stats
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.len() > 7 && f[2] == self.name())
            .and_then(|f| f[7].parse().ok())
            .unwrap_or(0)
    }

    /// `n` O_DIRECT writes of 4 KiB, one at a time (dd).
    pub fn write_direct(&self, n: u32) {
        let st = Command::new("dd")
            .args([
                "if=/dev/zero",
                &format!("of={}", self.dev),
                "bs=4096",
                &format!("count={n}"),
                "oflag=direct",
                "status=none",
            ])
            .status()
            .expect("run dd");
        assert!(st.success(), "dd to {}", self.dev);
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}
