//! End to end with the real Waybar: headless sway (pixman renderer) runs Waybar as an
//! unprivileged user, Waybar runs `kernstat bar` as its custom module, grim takes a
//! screenshot, and the test checks that kernstat's text was drawn (tesseract reads it
//! back) and that Waybar applied kernstat's `class` (the CSS for `.critical` paints the
//! text red, and red pixels appear).
//!
//! Needs root (to hand the session to an unprivileged user), sway, waybar, grim and
//! tesseract; `make deps` installs them. Skips elsewhere; fails under CI=true.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kernstat_testkit::{gate, tool_gate};

const UID: u32 = 65534; // nobody
const GID: u32 = 65534; // nogroup

struct Session {
    sway: Child,
}

impl Drop for Session {
    fn drop(&mut self) {
        // sway runs in its own process group (setsid): end waybar and kernstat with it.
        // SAFETY: kill with a valid signal.
        unsafe { libc::kill(-(self.sway.id() as i32), libc::SIGTERM) };
        let _ = self.sway.kill();
        let _ = self.sway.wait();
    }
}

fn as_user(cmd: &mut Command) -> &mut Command {
    cmd.arg(format!("--reuid={UID}"))
        .arg(format!("--regid={GID}"))
        .arg("--clear-groups")
        .arg("--inh-caps=-all")
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// (red-ish pixels, width, height) in a binary PPM (P6, maxval 255).
fn red_pixels(ppm: &[u8]) -> (usize, usize, usize) {
    let mut fields = Vec::new();
    let mut i = 0;
    while fields.len() < 4 {
        while ppm[i].is_ascii_whitespace() {
            i += 1;
        }
        let start = i;
        while !ppm[i].is_ascii_whitespace() {
            i += 1;
        }
        fields.push(std::str::from_utf8(&ppm[start..i]).unwrap().to_string());
    }
    assert_eq!(fields[0], "P6");
    let (w, h): (usize, usize) = (fields[1].parse().unwrap(), fields[2].parse().unwrap());
    let data = &ppm[i + 1..];
    let red = data
        .chunks_exact(3)
        .filter(|p| p[0] > 180 && p[1] < 80 && p[2] < 80)
        .count();
    (red, w, h)
}

#[test]
fn waybar_draws_kernstat_text_and_class() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !gate("root (to run the session as another user)", root, || {
        "not root".into()
    }) {
        return;
    }
    for tool in ["sway", "waybar", "grim", "tesseract", "setpriv"] {
        if !tool_gate(tool) {
            return;
        }
    }
    let dir = tempfile::Builder::new()
        .prefix("kernstat-e2e")
        .tempdir()
        .unwrap();
    let d = dir.path();
    fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    // The user must be able to run the binary wherever this checkout lives.
    // Both programs: `kernstat` execs `kernstat-full` from its own directory.
    let bin = d.join("kernstat");
    for (from, to) in [
        (
            kernstat_testkit::front_bin().to_str().unwrap().to_string(),
            bin.clone(),
        ),
        (
            env!("CARGO_BIN_EXE_kernstat-full").to_string(),
            d.join("kernstat-full"),
        ),
    ] {
        fs::copy(from, &to).unwrap();
        fs::set_permissions(&to, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let rt = d.join("runtime");
    fs::create_dir(&rt).unwrap();
    std::os::unix::fs::chown(&rt, Some(UID), Some(GID)).unwrap();
    fs::set_permissions(&rt, fs::Permissions::from_mode(0o700)).unwrap();

    let exec = format!(
        "{} bar --no-lock --interval 0.5 --text 'KSTAT {{cpu}} PCT' --crit cpu=0",
        bin.display()
    );
    let waybar_cfg = serde_json::json!({
        "layer": "top", "position": "top", "height": 60,
        "modules-left": ["custom/kernstat"],
        "custom/kernstat": { "exec": exec, "return-type": "json" }
    });
    let write = |name: &str, body: &str| {
        let p = d.join(name);
        fs::write(&p, body).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        p
    };
    let cfg = write("waybar.json", &waybar_cfg.to_string());
    let css = write(
        "style.css",
        "* { font-family: monospace; font-size: 40px; }\n\
         window#waybar { background: #000000; }\n\
         #custom-kernstat { color: #ffffff; }\n\
         #custom-kernstat.critical { color: #ff0000; }\n",
    );
    let log = d.join("waybar.log");
    fs::write(&log, "").unwrap();
    std::os::unix::fs::chown(&log, Some(UID), Some(GID)).unwrap();
    let sway_cfg = write(
        "sway.conf",
        &format!(
            "output HEADLESS-1 resolution 800x200\nexec waybar -c {} -s {} > {} 2>&1\n",
            cfg.display(),
            css.display(),
            log.display()
        ),
    );

    let mut cmd = Command::new("setpriv");
    as_user(&mut cmd)
        .args(["setsid", "sway", "-c"])
        .arg(&sway_cfg)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", d)
        .env("XDG_RUNTIME_DIR", &rt)
        .env("WLR_BACKENDS", "headless")
        .env("WLR_RENDERER", "pixman")
        .env("WLR_LIBINPUT_NO_DEVICES", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let session = Session {
        sway: cmd.spawn().expect("start sway"),
    };
    wait_for("the Wayland socket", Duration::from_secs(20), || {
        rt.join("wayland-1").exists()
    });
    wait_for("Waybar's bar", Duration::from_secs(20), || {
        fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("Bar configured")
    });
    // A few kernstat ticks (0.5 s apart; the first comes at once).
    std::thread::sleep(Duration::from_millis(1500));

    let shot = |kind: &str, path: &Path| {
        let mut g = Command::new("setpriv");
        as_user(&mut g)
            .args(["grim", "-t", kind])
            .arg(path)
            .env("XDG_RUNTIME_DIR", &rt)
            .env("WAYLAND_DISPLAY", "wayland-1");
        let st = g.status().unwrap();
        assert!(st.success(), "grim failed");
    };
    let png = rt.join("shot.png");
    let ppm = rt.join("shot.ppm");
    shot("png", &png);
    shot("ppm", &ppm);
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("waybar-e2e.png");
    let _ = fs::copy(&png, &keep);

    let ocr = Command::new("tesseract")
        .arg(&png)
        .arg("-")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ocr.stdout);
    let words: Vec<&str> = text.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "KSTAT").unwrap_or_else(|| {
        panic!(
            "kernstat's text not on screen; OCR read {text:?} (screenshot: {})",
            keep.display()
        )
    });
    assert!(
        words
            .get(at + 1)
            .and_then(|w| w.parse::<u32>().ok())
            .is_some(),
        "OCR: {text:?}"
    );
    assert_eq!(words.get(at + 2), Some(&"PCT"), "OCR: {text:?}");

    let (red, w, h) = red_pixels(&fs::read(&ppm).unwrap());
    assert_eq!((w, h), (800, 200));
    assert!(
        red > 200,
        "class \"critical\" should paint the text red: {red} red pixels"
    );
    let waybar_log = fs::read_to_string(&log).unwrap_or_default();
    assert!(
        waybar_log.contains("BPF unavailable"),
        "as an unprivileged user kernstat says once that it reads /proc: {waybar_log}"
    );
    drop(session);
}
