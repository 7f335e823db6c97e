//! How kernstat reaches a machine: the systemd units (checked by `systemd-analyze
//! verify` and its security review), `make install` / `make uninstall` into a staging
//! directory (completions that the shells load, man pages), and the Debian package
//! installed and purged with dpkg. The package test installs into the real system, so
//! it runs only as root, only where no kernstat package is installed, and removes
//! everything it added.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kernstat_testkit::{gate, tool_gate};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kernstat() -> &'static str {
    static FRONT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FRONT.get_or_init(|| kernstat_testkit::front_bin().to_str().unwrap().to_string())
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The unit with its ExecStart pointing at the binary under test (verify checks that
/// the program exists).
fn unit_copy(rel: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join(rel)).unwrap();
    let p = dir.join("kernstat.service");
    std::fs::write(&p, text.replace("/usr/bin/kernstat", kernstat())).unwrap();
    p
}

#[test]
fn systemd_units_pass_verify_and_the_security_review() {
    if !tool_gate("systemd-analyze") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let system = unit_copy("dist/systemd/kernstat.service", dir.path());
    // --man=no: the man page is checked where it is installed (the package test).
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&system)
        .output()
        .unwrap();
    ok(&out, "systemd-analyze verify (system unit)");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("kernstat.service"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=true"])
        .arg(&system)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&security.stdout);
    let exposure: f64 = text
        .lines()
        .find_map(|l| l.split("kernstat.service: ").nth(1))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in: {text}"));
    // systemd's scale: below 4.0 is "OK" (the start-up needs root and BPF capabilities,
    // which the daemon drops itself).
    assert!(exposure < 4.0, "exposure {exposure}: {text}");

    let user_dir = tempfile::tempdir().unwrap();
    let user = unit_copy("dist/systemd/user/kernstat.service", user_dir.path());
    let rt = tempfile::tempdir().unwrap();
    let out = Command::new("systemd-analyze")
        .args(["--user", "verify", "--man=no"])
        .arg(&user)
        .env("XDG_RUNTIME_DIR", rt.path())
        .output()
        .unwrap();
    ok(&out, "systemd-analyze --user verify");
}

fn make(args: &[&str]) -> Output {
    Command::new("make")
        .arg("-s")
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run make")
}

const INSTALLED: &[&str] = &[
    "usr/bin/kernstat",
    "usr/lib/systemd/system/kernstat.service",
    "usr/lib/systemd/user/kernstat.service",
    "usr/lib/sysusers.d/kernstat.conf",
    "usr/share/bash-completion/completions/kernstat",
    "usr/share/zsh/vendor-completions/_kernstat",
    "usr/share/fish/vendor_completions.d/kernstat.fish",
    "usr/share/man/man1/kernstat.1.gz",
    "usr/share/man/man1/kernstat-daemon.1.gz",
    "usr/bin/kernstat-full",
];

#[test]
fn make_install_and_uninstall_into_a_staging_directory() {
    let stage = tempfile::tempdir().unwrap();
    let gen = tempfile::tempdir().unwrap();
    let dest = format!("DESTDIR={}", stage.path().display());
    let bin = format!("KERNSTAT_BIN={}", kernstat());
    let genv = format!("GEN={}", gen.path().join("g").display());
    ok(
        &make(&["install", "PREFIX=/usr", &dest, &bin, &genv]),
        "make install",
    );
    for f in INSTALLED {
        assert!(stage.path().join(f).is_file(), "{f} installed");
    }
    // The unit runs the installed binary.
    let unit =
        std::fs::read_to_string(stage.path().join("usr/lib/systemd/system/kernstat.service"))
            .unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/kernstat daemon --system"));
    // Completions the shells accept.
    let bash = stage
        .path()
        .join("usr/share/bash-completion/completions/kernstat");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p kernstat", bash.display()))
        .output()
        .unwrap();
    assert!(ok(&out, "bash completion").contains("kernstat"));
    let zsh = std::fs::read_to_string(stage.path().join(INSTALLED[5])).unwrap();
    assert!(zsh.starts_with("#compdef kernstat"));
    let fish = std::fs::read_to_string(stage.path().join(INSTALLED[6])).unwrap();
    assert!(fish.contains("complete -c kernstat") && fish.contains("metrics"));
    // Every command has its page, and the daemon's documents --metrics.
    let page = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "gzip -dc {}",
            stage.path().join(INSTALLED[8]).display()
        ))
        .output()
        .unwrap();
    assert!(ok(&page, "man page").contains("metrics"));
    ok(
        &make(&["uninstall", "PREFIX=/usr", &dest]),
        "make uninstall",
    );
    for f in INSTALLED {
        assert!(!stage.path().join(f).exists(), "{f} removed");
    }
}

fn installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

fn user_exists(name: &str) -> bool {
    Command::new("getent")
        .args(["passwd", name])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn the_debian_package_installs_and_purges_with_dpkg() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !gate("root (dpkg -i)", root, || "not root".into())
        || !tool_gate("dpkg-deb")
        || !gate(
            "a machine without the kernstat package",
            !installed("kernstat"),
            || "kernstat is installed here; the test would replace it".into(),
        )
    {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    // The shipped binary carries no debug information: package the test build the same way.
    let bin = work.path().join("kernstat");
    for (from, to) in [
        (kernstat(), bin.clone()),
        (
            env!("CARGO_BIN_EXE_kernstat-full"),
            work.path().join("kernstat-full"),
        ),
    ] {
        ok(
            &Command::new("objcopy")
                .args(["--strip-debug", from])
                .arg(&to)
                .output()
                .unwrap(),
            "objcopy --strip-debug",
        );
    }
    let out = Command::new(repo().join("scripts/deb.sh"))
        .env("KERNSTAT_BIN", &bin)
        .env("OUT", work.path())
        .output()
        .unwrap();
    let deb = ok(&out, "scripts/deb.sh").trim().to_string();
    let had_user = user_exists("kernstat");

    let out = Command::new("dpkg").args(["-i", &deb]).output().unwrap();
    let purge = || {
        let _ = Command::new("dpkg").args(["--purge", "kernstat"]).output();
        if !had_user && user_exists("kernstat") {
            let _ = Command::new("userdel").arg("kernstat").output();
        }
    };
    if !out.status.success() {
        purge();
        panic!("dpkg -i: {}", String::from_utf8_lossy(&out.stderr));
    }
    let check = || -> Result<(), String> {
        let v = Command::new("/usr/bin/kernstat")
            .arg("--version")
            .output()
            .map_err(|e| e.to_string())?;
        let v = String::from_utf8_lossy(&v.stdout);
        if !v.starts_with("kernstat ") {
            return Err(format!("kernstat --version: {v}"));
        }
        for f in INSTALLED {
            if !Path::new("/").join(f).is_file() {
                return Err(format!("/{f} not installed"));
            }
        }
        if !user_exists("kernstat") {
            return Err("postinst did not create the kernstat user".into());
        }
        if kernstat_testkit::which("systemd-analyze").is_some() {
            let man = if kernstat_testkit::which("man").is_some() {
                "--man=yes"
            } else {
                "--man=no"
            };
            let out = Command::new("systemd-analyze")
                .args(["verify", man, "/usr/lib/systemd/system/kernstat.service"])
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!(
                    "verify installed unit: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        Ok(())
    };
    let result = check();
    let out = Command::new("dpkg")
        .args(["--purge", "kernstat"])
        .output()
        .unwrap();
    purge();
    result.unwrap();
    ok(&out, "dpkg --purge");
    for f in INSTALLED {
        assert!(!Path::new("/").join(f).exists(), "/{f} left after purge");
    }
}
