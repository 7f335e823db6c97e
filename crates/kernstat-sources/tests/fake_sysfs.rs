//! The sysfs readers against fake trees laid out as on real machines: class directories
//! are symlinks into /sys/devices, cpuN/cpufreq links to a policy directory, drivers are
//! found through the device's `driver` link. This VM has no thermal zones, cpufreq, GPU or
//! battery, so these trees are how those readers are tested.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use kernstat_model::{GpuDriver, Hardware};
use kernstat_sources::{HardwareReader, Roots, TempSource};

fn write(root: &Path, rel: &str, contents: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, contents).unwrap();
}

fn link(root: &Path, rel: &str, target: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    symlink(target, p).unwrap();
}

/// An Intel laptop: ACPI and package thermal zones, coretemp, cpufreq policies, an i915
/// GPU with gt/gt0 files, a platform profile, a laptop battery, a mains adapter and a
/// wireless mouse battery (scope=Device) that must not be taken for the laptop's.
fn intel_laptop(sys: &Path) {
    for (i, ty, t) in [(0, "acpitz", "45000"), (1, "x86_pkg_temp", "61000")] {
        let dev = format!("devices/virtual/thermal/thermal_zone{i}");
        write(sys, &format!("{dev}/type"), &format!("{ty}\n"));
        write(sys, &format!("{dev}/temp"), &format!("{t}\n"));
        link(
            sys,
            &format!("class/thermal/thermal_zone{i}"),
            &format!("../../{dev}"),
        );
    }
    let hw = "devices/platform/coretemp.0/hwmon/hwmon3";
    write(sys, &format!("{hw}/name"), "coretemp\n");
    write(sys, &format!("{hw}/temp1_label"), "Package id 0\n");
    write(sys, &format!("{hw}/temp1_input"), "62000\n");
    write(sys, &format!("{hw}/temp2_label"), "Core 0\n");
    write(sys, &format!("{hw}/temp2_input"), "58000\n");
    link(sys, "class/hwmon/hwmon3", &format!("../../{hw}"));

    for (cpu, cur) in [(0, "2400000"), (1, "1600000")] {
        let pol = format!("devices/system/cpu/cpufreq/policy{cpu}");
        write(sys, &format!("{pol}/scaling_cur_freq"), &format!("{cur}\n"));
        write(sys, &format!("{pol}/scaling_max_freq"), "4700000\n");
        write(sys, &format!("{pol}/cpuinfo_max_freq"), "4700000\n");
        link(
            sys,
            &format!("devices/system/cpu/cpu{cpu}/cpufreq"),
            &format!("../cpufreq/policy{cpu}"),
        );
    }
    write(sys, "devices/system/cpu/online", "0-1\n");

    let gpu = "devices/pci0000:00/0000:00:02.0";
    fs::create_dir_all(sys.join("bus/pci/drivers/i915")).unwrap();
    link(
        sys,
        &format!("{gpu}/driver"),
        "../../../bus/pci/drivers/i915",
    );
    let gt = format!("{gpu}/drm/card1/gt/gt0");
    write(sys, &format!("{gt}/rc6_residency_ms"), "100000\n");
    write(sys, &format!("{gt}/rps_act_freq_mhz"), "350\n");
    write(sys, &format!("{gt}/rps_max_freq_mhz"), "1300\n");
    write(sys, &format!("{gt}/throttle_reason_status"), "1\n");
    write(sys, &format!("{gt}/throttle_reason_pl1"), "1\n");
    write(sys, &format!("{gt}/throttle_reason_pl2"), "0\n");
    write(sys, &format!("{gt}/throttle_reason_thermal"), "1\n");
    link(
        sys,
        &format!("{gpu}/drm/card1/device"),
        "../../../0000:00:02.0",
    );
    link(sys, "class/drm/card1", &format!("../../{gpu}/drm/card1"));
    fs::create_dir_all(sys.join(format!("{gpu}/drm/card1-eDP-1"))).unwrap();
    link(
        sys,
        "class/drm/card1-eDP-1",
        &format!("../../{gpu}/drm/card1-eDP-1"),
    );

    write(sys, "firmware/acpi/platform_profile", "balanced\n");
    write(
        sys,
        "firmware/acpi/platform_profile_choices",
        "low-power balanced performance\n",
    );

    let mouse = "devices/virtual/misc/uhid/0003:046D:4082.0004/power_supply/hidpp_battery_0";
    write(sys, &format!("{mouse}/type"), "Battery\n");
    write(sys, &format!("{mouse}/scope"), "Device\n");
    write(sys, &format!("{mouse}/capacity"), "10\n");
    link(
        sys,
        "class/power_supply/hidpp_battery_0",
        &format!("../../{mouse}"),
    );
    let ac = "devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0003:00/power_supply/AC";
    write(sys, &format!("{ac}/type"), "Mains\n");
    write(sys, &format!("{ac}/online"), "0\n");
    link(sys, "class/power_supply/AC", &format!("../../{ac}"));
    let bat = "devices/LNXSYSTM:00/LNXSYBUS:00/PNP0C0A:00/power_supply/BAT0";
    write(sys, &format!("{bat}/type"), "Battery\n");
    write(sys, &format!("{bat}/status"), "Discharging\n");
    write(sys, &format!("{bat}/capacity"), "87\n");
    write(sys, &format!("{bat}/power_now"), "9870000\n");
    write(sys, &format!("{bat}/energy_now"), "44000000\n");
    write(sys, &format!("{bat}/energy_full"), "50000000\n");
    link(sys, "class/power_supply/BAT0", &format!("../../{bat}"));
}

/// An AMD desktop: no thermal zones, k10temp, an amdgpu card, no battery, no profile.
fn amd_desktop(sys: &Path) {
    let hw = "devices/pci0000:00/0000:00:18.3/hwmon/hwmon1";
    write(sys, &format!("{hw}/name"), "k10temp\n");
    write(sys, &format!("{hw}/temp1_label"), "Tctl\n");
    write(sys, &format!("{hw}/temp1_input"), "55125\n");
    link(sys, "class/hwmon/hwmon1", &format!("../../{hw}"));
    // An NVMe drive's hwmon comes first and must not be taken for the CPU.
    let nvme = "devices/pci0000:00/0000:01:00.0/nvme/nvme0/hwmon0";
    write(sys, &format!("{nvme}/name"), "nvme\n");
    write(sys, &format!("{nvme}/temp1_input"), "38850\n");
    link(sys, "class/hwmon/hwmon0", &format!("../../{nvme}"));

    let gpu = "devices/pci0000:00/0000:00:03.1/0000:0a:00.0";
    fs::create_dir_all(sys.join("bus/pci/drivers/amdgpu")).unwrap();
    link(
        sys,
        &format!("{gpu}/driver"),
        "../../../../bus/pci/drivers/amdgpu",
    );
    write(sys, &format!("{gpu}/gpu_busy_percent"), "37\n");
    write(sys, &format!("{gpu}/mem_info_vram_used"), "1073741824\n");
    write(sys, &format!("{gpu}/mem_info_vram_total"), "8589934592\n");
    write(
        sys,
        &format!("{gpu}/pp_dpm_sclk"),
        "0: 500Mhz\n1: 1800Mhz *\n2: 2615Mhz\n",
    );
    write(sys, &format!("{gpu}/hwmon/hwmon5/name"), "amdgpu\n");
    write(
        sys,
        &format!("{gpu}/hwmon/hwmon5/freq1_input"),
        "1800000000\n",
    );
    link(
        sys,
        &format!("{gpu}/drm/card0/device"),
        "../../../0000:0a:00.0",
    );
    link(sys, "class/drm/card0", &format!("../../{gpu}/drm/card0"));
}

fn roots(dir: &Path) -> Roots {
    Roots {
        proc: dir.join("proc"),
        sys: dir.join("sys"),
    }
}

#[test]
fn intel_laptop_every_reading() {
    let dir = tempfile::tempdir().unwrap();
    intel_laptop(&dir.path().join("sys"));
    let mut r = HardwareReader::discover(&roots(dir.path()), &TempSource::Auto);
    let mut hw = Hardware::default();
    r.read(&mut hw);

    // auto prefers the package sensor over the ACPI zone.
    assert_eq!(hw.temp_c, Some(61.0));
    assert_eq!(hw.cpu_freq_mhz, Some(2000.0));
    assert_eq!(hw.cpu_freq_max_mhz, Some(4700.0));
    let gpu = hw.gpu.expect("i915 found");
    assert_eq!(gpu.driver, GpuDriver::I915);
    assert_eq!(gpu.rc6_ms, Some(100000));
    assert_eq!(gpu.freq_mhz, Some(350));
    assert_eq!(gpu.max_freq_mhz, Some(1300));
    assert_eq!(gpu.throttle.as_str(), "pl1,thermal");
    assert_eq!(hw.power_profile.unwrap().as_str(), "balanced");
    let bat = hw.battery.expect("BAT0, not the mouse");
    assert_eq!(bat.percent, 87.0);
    assert_eq!(bat.status.as_str(), "Discharging");
    assert_eq!(bat.power_w, Some(9.87));
    // Until empty: 44 Wh at 9.87 W, as UPower estimates it.
    assert_eq!(
        bat.time_remaining_s,
        Some((44_000_000u64 * 3600 / 9_870_000) as u32)
    );
    assert!(r.discovered().battery.as_ref().unwrap().ends_with("BAT0"));
}

#[test]
fn readings_follow_the_files_without_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path().join("sys");
    intel_laptop(&sys);
    let mut r = HardwareReader::discover(&roots(dir.path()), &TempSource::Auto);
    let mut hw = Hardware::default();
    r.read(&mut hw);
    // sysfs files change in place; rewriting the same inode is what pread sees.
    let temp = sys.join("devices/virtual/thermal/thermal_zone1/temp");
    fs::write(&temp, "70500\n").unwrap();
    fs::write(sys.join("firmware/acpi/platform_profile"), "performance\n").unwrap();
    r.read(&mut hw);
    assert_eq!(hw.temp_c, Some(70.5));
    assert_eq!(hw.power_profile.unwrap().as_str(), "performance");
}

#[test]
fn temperature_source_choices() {
    let dir = tempfile::tempdir().unwrap();
    intel_laptop(&dir.path().join("sys"));
    let read = |src: &str| {
        let mut r = HardwareReader::discover(&roots(dir.path()), &src.parse().unwrap());
        let mut hw = Hardware::default();
        r.read(&mut hw);
        hw.temp_c
    };
    assert_eq!(read("zone:acpitz"), Some(45.0));
    assert_eq!(read("hwmon:coretemp"), Some(62.0));
    assert_eq!(read("hwmon:coretemp:Core 0"), Some(58.0));
    assert_eq!(read("zone:nonexistent"), None);
    assert_eq!(read("off"), None);
}

#[test]
fn amd_desktop_every_reading() {
    let dir = tempfile::tempdir().unwrap();
    amd_desktop(&dir.path().join("sys"));
    let mut r = HardwareReader::discover(&roots(dir.path()), &TempSource::Auto);
    let mut hw = Hardware::default();
    r.read(&mut hw);
    // No thermal zone: auto falls to k10temp, skipping the NVMe sensor.
    assert_eq!(hw.temp_c, Some(55.125));
    let gpu = hw.gpu.expect("amdgpu found");
    assert_eq!(gpu.driver, GpuDriver::Amdgpu);
    assert_eq!(gpu.busy_percent, Some(37.0));
    assert_eq!(gpu.freq_mhz, Some(1800));
    assert_eq!(gpu.max_freq_mhz, Some(2615));
    assert_eq!(gpu.vram_used, Some(1 << 30));
    assert_eq!(gpu.vram_total, Some(8 << 30));
    assert!(hw.battery.is_none());
    assert!(hw.power_profile.is_none());
    assert!(hw.cpu_freq_mhz.is_none());
}

#[test]
fn an_empty_machine_has_nothing_and_no_errors() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("sys")).unwrap();
    let mut r = HardwareReader::discover(&roots(dir.path()), &TempSource::Auto);
    let mut hw = Hardware::default();
    r.read(&mut hw);
    assert_eq!(hw, Hardware::default());
}

#[test]
fn battery_power_from_current_and_voltage() {
    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path().join("sys");
    let bat = "devices/platform/battery/power_supply/BAT1";
    write(&sys, &format!("{bat}/type"), "Battery\n");
    write(&sys, &format!("{bat}/status"), "Charging\n");
    write(&sys, &format!("{bat}/capacity"), "40\n");
    write(&sys, &format!("{bat}/current_now"), "1500000\n");
    write(&sys, &format!("{bat}/voltage_now"), "12000000\n");
    write(&sys, &format!("{bat}/charge_now"), "2000000\n");
    write(&sys, &format!("{bat}/charge_full"), "5000000\n");
    link(&sys, "class/power_supply/BAT1", &format!("../../{bat}"));
    let mut r = HardwareReader::discover(&roots(dir.path()), &TempSource::Auto);
    let mut hw = Hardware::default();
    r.read(&mut hw);
    let b = hw.battery.unwrap();
    assert_eq!(b.status.as_str(), "Charging");
    assert!((b.power_w.unwrap() - 18.0).abs() < 1e-3);
    // Until full: 3 Ah to go at 1.5 A.
    assert_eq!(b.time_remaining_s, Some(7200));
}

/// Every regular file under `dir` (not following links), sorted.
fn value_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let t = e.file_type().unwrap();
        if t.is_dir() {
            value_files(&e.path(), out);
        } else if t.is_file() {
            out.push(e.path());
        }
    }
    out.sort();
}

use proptest::strategy::Strategy as _;

proptest::proptest! {
    /// Both machines' trees with their value files replaced by anything (truncated,
    /// huge numbers, negative, invalid UTF-8, empty): discovery and every reading go
    /// on, never a panic. (proptest's default case count in `make test`; `make fuzz`
    /// runs more.)
    #[test]
    fn any_file_contents_are_survived(
        contents in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
                "-?[0-9]{1,30}\n?".prop_map(String::into_bytes),
                proptest::prelude::Just(b"18446744073709551615\n".to_vec()),
            ],
            1..40,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys");
        intel_laptop(&sys);
        amd_desktop(&sys);
        let mut files = Vec::new();
        value_files(&sys, &mut files);
        for (i, f) in files.iter().enumerate() {
            fs::write(f, &contents[i % contents.len()]).unwrap();
        }
        for src in ["auto", "off", "zone:x86_pkg_temp", "hwmon:coretemp", "hwmon:k10temp:Tctl"] {
            let mut r = HardwareReader::discover(&roots(dir.path()), &src.parse().unwrap());
            let mut hw = Hardware::default();
            r.read(&mut hw);
            r.read(&mut hw);
        }
    }
}
