//! Hardware readings from sysfs: CPU temperature, CPU frequency, GPU (i915, amdgpu),
//! platform power profile and battery.
//!
//! Discovery (readdir, readlink, choosing a sensor) happens once in
//! [`HardwareReader::discover`]; every file that will be sampled is opened then and read
//! with pread on each tick. A device the machine lacks is simply `None` in the sample:
//! it is left out of the output, never reported as an error.
//!
//! Layouts follow the kernel's sysfs ABI documents (Documentation/ABI/testing/
//! sysfs-class-thermal, sysfs-class-hwmon, sysfs-devices-system-cpu, sysfs-driver-amdgpu,
//! sysfs-class-power, sysfs-platform_profile) and i915's gt/gt0 files (6.x; the older
//! card-level gt_act_freq_mhz / power/rc6_residency_ms are the fallback).

use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use kernstat_model::{BatterySample, GpuDriver, GpuSample, Hardware, ShortStr};

use crate::file::{parse_i64, parse_u64, PreadFile};
use crate::Roots;

/// Which sensor is the CPU temperature.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TempSource {
    /// The first of the usual CPU sensors found (see [`AUTO_ZONE_TYPES`], [`AUTO_HWMON_NAMES`]).
    #[default]
    Auto,
    /// The thermal zone whose `type` is this.
    Zone(String),
    /// The hwmon device whose `name` is this, optionally its input with this label.
    Hwmon {
        /// hwmon `name` file contents.
        name: String,
        /// `tempN_label` contents; without it, temp1_input.
        label: Option<String>,
    },
    /// A file holding millidegrees Celsius.
    Path(PathBuf),
    /// No temperature.
    Off,
}

impl FromStr for TempSource {
    type Err = String;

    /// `auto`, `off`, `zone:TYPE`, `hwmon:NAME`, `hwmon:NAME:LABEL`, or an absolute path.
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            Ok(TempSource::Auto)
        } else if s == "off" {
            Ok(TempSource::Off)
        } else if let Some(t) = s.strip_prefix("zone:") {
            Ok(TempSource::Zone(t.to_string()))
        } else if let Some(rest) = s.strip_prefix("hwmon:") {
            let mut it = rest.splitn(2, ':');
            let name = it.next().unwrap_or_default().to_string();
            let label = it.next().map(str::to_string);
            if name.is_empty() {
                return Err("hwmon: needs a device name, e.g. hwmon:coretemp".into());
            }
            Ok(TempSource::Hwmon { name, label })
        } else if s.starts_with('/') {
            Ok(TempSource::Path(PathBuf::from(s)))
        } else {
            Err(format!(
                "unknown temperature source {s:?}: use auto, off, zone:TYPE, hwmon:NAME[:LABEL] or /path/to/temp"
            ))
        }
    }
}

/// Thermal zone types tried by `auto`, best first (acpitz last: it is often the board).
pub const AUTO_ZONE_TYPES: &[&str] = &[
    "x86_pkg_temp",
    "cpu-thermal",
    "cpu_thermal",
    "soc_thermal",
    "cpu0-thermal",
    "acpitz",
];
/// hwmon names tried by `auto` when no thermal zone matched.
pub const AUTO_HWMON_NAMES: &[&str] = &["coretemp", "k10temp", "zenpower", "cpu_thermal"];

#[derive(Debug)]
struct I915Files {
    rc6_ms: Option<PreadFile>,
    act_freq: Option<PreadFile>,
    max_freq: Option<PreadFile>,
    throttle: Vec<(PreadFile, ShortStr<24>)>,
}

#[derive(Debug)]
struct AmdgpuFiles {
    busy: Option<PreadFile>,
    vram_used: Option<PreadFile>,
    vram_total: Option<PreadFile>,
    freq_hz: Option<PreadFile>,
    max_freq_mhz: Option<u32>,
}

#[derive(Debug)]
enum GpuFiles {
    I915(I915Files),
    Amdgpu(AmdgpuFiles),
}

#[derive(Debug)]
struct BatteryFiles {
    capacity: PreadFile,
    status: Option<PreadFile>,
    power_now: Option<PreadFile>,
    current_now: Option<PreadFile>,
    voltage_now: Option<PreadFile>,
    /// energy_now/energy_full (µWh) or charge_now/charge_full (µAh), whichever the
    /// battery has.
    now: Option<PreadFile>,
    full: Option<PreadFile>,
}

/// What was found, for `--json` and diagnostics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovered {
    /// The temperature file chosen, if any.
    pub temp: Option<PathBuf>,
    /// The DRM card used for GPU readings, if any.
    pub gpu_card: Option<PathBuf>,
    /// The battery, if any.
    pub battery: Option<PathBuf>,
}

/// Reads the hardware files found at discovery.
#[derive(Debug)]
pub struct HardwareReader {
    temp: Option<PreadFile>,
    cpufreq_cur: Vec<PreadFile>,
    cpufreq_max_mhz: Option<f32>,
    gpu: Option<GpuFiles>,
    profile: Option<PreadFile>,
    battery: Option<BatteryFiles>,
    discovered: Discovered,
    buf: [u8; 512],
}

fn read_word(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn sorted_entries(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<(u64, PathBuf)> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let idx = name.strip_prefix(prefix)?;
                let n = idx.parse::<u64>().ok()?;
                Some((n, e.path()))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

fn find_temp(sys: &Path, source: &TempSource) -> Option<PathBuf> {
    let zones = sorted_entries(&sys.join("class/thermal"), "thermal_zone");
    let zone_with_type = |want: &str| {
        zones
            .iter()
            .find(|z| read_word(&z.join("type")).as_deref() == Some(want))
            .map(|z| z.join("temp"))
    };
    let hwmons = sorted_entries(&sys.join("class/hwmon"), "hwmon");
    let hwmon_input = |name: &str, label: Option<&str>| -> Option<PathBuf> {
        let dev = hwmons
            .iter()
            .find(|h| read_word(&h.join("name")).as_deref() == Some(name))?;
        match label {
            Some(label) => (1..=64)
                .map(|i| dev.join(format!("temp{i}_label")))
                .find_map(|l| {
                    (read_word(&l).as_deref() == Some(label))
                        .then(|| PathBuf::from(l.to_string_lossy().replace("_label", "_input")))
                }),
            None => (1..=64)
                .map(|i| dev.join(format!("temp{i}_input")))
                .find(|p| p.exists()),
        }
    };
    match source {
        TempSource::Off => None,
        TempSource::Path(p) => Some(p.clone()),
        TempSource::Zone(t) => zone_with_type(t),
        TempSource::Hwmon { name, label } => hwmon_input(name, label.as_deref()),
        TempSource::Auto => AUTO_ZONE_TYPES
            .iter()
            .find_map(|t| zone_with_type(t))
            .or_else(|| AUTO_HWMON_NAMES.iter().find_map(|n| hwmon_input(n, None))),
    }
}

fn find_gpu(sys: &Path) -> Option<(PathBuf, GpuFiles)> {
    for card in sorted_entries(&sys.join("class/drm"), "card") {
        let driver = fs::read_link(card.join("device/driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        match driver.as_deref() {
            Some("i915") => {
                let gt = card.join("gt/gt0");
                let pick = |new: &str, old: &str| {
                    PreadFile::open_optional(gt.join(new))
                        .or_else(|| PreadFile::open_optional(card.join(old)))
                };
                let mut throttle = Vec::new();
                if let Ok(rd) = fs::read_dir(&gt) {
                    let mut names: Vec<String> = rd
                        .filter_map(Result::ok)
                        .filter_map(|e| e.file_name().into_string().ok())
                        .filter(|n| {
                            n.starts_with("throttle_reason_") && n != "throttle_reason_status"
                        })
                        .collect();
                    names.sort();
                    for n in names {
                        if let Some(f) = PreadFile::open_optional(gt.join(&n)) {
                            let short = n.trim_start_matches("throttle_reason_");
                            throttle.push((f, ShortStr::from_str_lossy(short)));
                        }
                    }
                }
                let files = I915Files {
                    rc6_ms: pick("rc6_residency_ms", "power/rc6_residency_ms"),
                    act_freq: pick("rps_act_freq_mhz", "gt_act_freq_mhz"),
                    max_freq: pick("rps_max_freq_mhz", "gt_max_freq_mhz"),
                    throttle,
                };
                return Some((card, GpuFiles::I915(files)));
            }
            Some("amdgpu") => {
                let dev = card.join("device");
                let hwmon = sorted_entries(&dev.join("hwmon"), "hwmon")
                    .into_iter()
                    .next();
                let max_freq_mhz = fs::read_to_string(dev.join("pp_dpm_sclk"))
                    .ok()
                    .and_then(|s| parse_dpm_max_mhz(&s));
                let files = AmdgpuFiles {
                    busy: PreadFile::open_optional(dev.join("gpu_busy_percent")),
                    vram_used: PreadFile::open_optional(dev.join("mem_info_vram_used")),
                    vram_total: PreadFile::open_optional(dev.join("mem_info_vram_total")),
                    freq_hz: hwmon.and_then(|h| PreadFile::open_optional(h.join("freq1_input"))),
                    max_freq_mhz,
                };
                return Some((card, GpuFiles::Amdgpu(files)));
            }
            _ => continue,
        }
    }
    None
}

/// The highest clock in an amdgpu pp_dpm_sclk table ("0: 500Mhz\n1: 2000Mhz *\n").
pub fn parse_dpm_max_mhz(table: &str) -> Option<u32> {
    table
        .lines()
        .filter_map(|l| {
            let v = l.split_once(':')?.1.trim();
            let digits: String = v.chars().take_while(|c| c.is_ascii_digit()).collect();
            digits.parse::<u32>().ok()
        })
        .max()
}

fn find_battery(sys: &Path) -> Option<(PathBuf, BatteryFiles)> {
    let mut supplies: Vec<PathBuf> = fs::read_dir(sys.join("class/power_supply"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    supplies.sort();
    for s in supplies {
        if read_word(&s.join("type")).as_deref() != Some("Battery") {
            continue;
        }
        // Peripherals (mice, headsets) report scope=Device; the laptop battery does not.
        if read_word(&s.join("scope")).as_deref() == Some("Device") {
            continue;
        }
        let Some(capacity) = PreadFile::open_optional(s.join("capacity")) else {
            continue;
        };
        let files = BatteryFiles {
            capacity,
            status: PreadFile::open_optional(s.join("status")),
            power_now: PreadFile::open_optional(s.join("power_now")),
            current_now: PreadFile::open_optional(s.join("current_now")),
            voltage_now: PreadFile::open_optional(s.join("voltage_now")),
            now: PreadFile::open_optional(s.join("energy_now"))
                .or_else(|| PreadFile::open_optional(s.join("charge_now"))),
            full: PreadFile::open_optional(s.join("energy_full"))
                .or_else(|| PreadFile::open_optional(s.join("charge_full"))),
        };
        return Some((s, files));
    }
    None
}

impl HardwareReader {
    /// Finds and opens every hardware file under `roots.sys`.
    pub fn discover(roots: &Roots, temp: &TempSource) -> Self {
        let sys = &roots.sys;
        let temp_path = find_temp(sys, temp);
        let temp_file = temp_path.as_ref().and_then(PreadFile::open_optional);
        let cpus = sorted_entries(&sys.join("devices/system/cpu"), "cpu");
        let cpufreq_cur: Vec<PreadFile> = cpus
            .iter()
            .filter_map(|c| PreadFile::open_optional(c.join("cpufreq/scaling_cur_freq")))
            .collect();
        let cpufreq_max_mhz = cpus
            .iter()
            .filter_map(|c| {
                read_word(&c.join("cpufreq/cpuinfo_max_freq"))
                    .or_else(|| read_word(&c.join("cpufreq/scaling_max_freq")))
                    .and_then(|s| s.parse::<u64>().ok())
            })
            .max()
            .map(|khz| khz as f32 / 1000.0);
        let gpu = find_gpu(sys);
        let battery = find_battery(sys);
        let discovered = Discovered {
            temp: temp_file.as_ref().map(|f| f.path().to_path_buf()),
            gpu_card: gpu.as_ref().map(|(p, _)| p.clone()),
            battery: battery.as_ref().map(|(p, _)| p.clone()),
        };
        HardwareReader {
            temp: temp_file,
            cpufreq_cur,
            cpufreq_max_mhz,
            gpu: gpu.map(|(_, g)| g),
            profile: PreadFile::open_optional(sys.join("firmware/acpi/platform_profile")),
            battery: battery.map(|(_, b)| b),
            discovered,
            buf: [0; 512],
        }
    }

    /// What discovery found.
    pub fn discovered(&self) -> &Discovered {
        &self.discovered
    }

    /// Reads every opened file. A file that fails to read this time is `None` this time.
    pub fn read(&mut self, hw: &mut Hardware) {
        let buf = &mut self.buf;
        hw.temp_c = self.temp.as_ref().and_then(|f| {
            let b = f.read(buf).ok()?;
            parse_i64(b.trim_ascii()).map(|m| m as f32 / 1000.0)
        });
        let (mut sum, mut n) = (0u64, 0u64);
        for f in &self.cpufreq_cur {
            if let Some(khz) = f.read_u64(buf) {
                sum = sum.saturating_add(khz);
                n += 1;
            }
        }
        hw.cpu_freq_mhz = (n > 0).then(|| sum as f32 / n as f32 / 1000.0);
        hw.cpu_freq_max_mhz = self.cpufreq_max_mhz;
        hw.gpu = self.gpu.as_ref().map(|g| read_gpu(g, buf));
        hw.power_profile = self
            .profile
            .as_ref()
            .and_then(|f| f.read(buf).ok().map(ShortStr::from_bytes));
        hw.battery = self.battery.as_ref().and_then(|b| read_battery(b, buf));
    }
}

fn read_gpu(g: &GpuFiles, buf: &mut [u8]) -> GpuSample {
    match g {
        GpuFiles::I915(f) => {
            let mut throttle = ShortStr::<96>::default();
            for (file, name) in &f.throttle {
                if file.read_u64(buf) == Some(1) {
                    if !throttle.is_empty() {
                        throttle.push_str(",");
                    }
                    throttle.push_str(name.as_str());
                }
            }
            GpuSample {
                driver: GpuDriver::I915,
                busy_percent: None,
                rc6_ms: f.rc6_ms.as_ref().and_then(|x| x.read_u64(buf)),
                freq_mhz: f
                    .act_freq
                    .as_ref()
                    .and_then(|x| x.read_u64(buf))
                    .map(|v| v as u32),
                max_freq_mhz: f
                    .max_freq
                    .as_ref()
                    .and_then(|x| x.read_u64(buf))
                    .map(|v| v as u32),
                vram_used: None,
                vram_total: None,
                throttle,
            }
        }
        GpuFiles::Amdgpu(f) => GpuSample {
            driver: GpuDriver::Amdgpu,
            busy_percent: f
                .busy
                .as_ref()
                .and_then(|x| x.read_u64(buf))
                .map(|v| v as f32),
            rc6_ms: None,
            freq_mhz: f
                .freq_hz
                .as_ref()
                .and_then(|x| x.read_u64(buf))
                .map(|hz| (hz / 1_000_000) as u32),
            max_freq_mhz: f.max_freq_mhz,
            vram_used: f.vram_used.as_ref().and_then(|x| x.read_u64(buf)),
            vram_total: f.vram_total.as_ref().and_then(|x| x.read_u64(buf)),
            throttle: ShortStr::default(),
        },
    }
}

fn read_battery(b: &BatteryFiles, buf: &mut [u8]) -> Option<BatterySample> {
    let percent = b.capacity.read_u64(buf)? as f32;
    let status = b
        .status
        .as_ref()
        .and_then(|f| f.read(buf).ok().map(ShortStr::from_bytes))
        .unwrap_or_default();
    let power_uw = b.power_now.as_ref().and_then(|f| f.read_u64(buf));
    let current_ua = b.current_now.as_ref().and_then(|f| f.read_u64(buf));
    let power_w = match power_uw {
        Some(uw) => Some(uw as f32 / 1e6),
        None => {
            let uv = b.voltage_now.as_ref().and_then(|f| f.read_u64(buf));
            current_ua
                .zip(uv)
                .map(|(a, v)| (a as f64 * v as f64 / 1e12) as f32)
        }
    };
    // energy (µWh) goes with power (µW), charge (µAh) with current (µA): whichever
    // pair the battery has, the hours left are their ratio.
    let rate = if b
        .now
        .as_ref()
        .is_some_and(|f| f.path().ends_with("energy_now"))
    {
        power_uw
    } else {
        current_ua
    };
    let now = b.now.as_ref().and_then(|f| f.read_u64(buf));
    let full = b.full.as_ref().and_then(|f| f.read_u64(buf));
    let left = match status.as_str() {
        "Discharging" => now,
        "Charging" => full.zip(now).map(|(f, n)| f.saturating_sub(n)),
        _ => None,
    };
    let time_remaining_s = match (left, rate) {
        (Some(l), Some(r)) if r > 0 => u32::try_from(l.saturating_mul(3600) / r).ok(),
        _ => None,
    };
    Some(BatterySample {
        percent,
        status,
        power_w,
        time_remaining_s,
    })
}

/// A sysfs value as an integer (for callers outside the sampling loop).
pub fn read_u64_file(path: &Path) -> Option<u64> {
    read_word(path).and_then(|s| parse_u64(s.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_source_parsing() {
        assert_eq!("auto".parse::<TempSource>().unwrap(), TempSource::Auto);
        assert_eq!(
            "zone:x86_pkg_temp".parse::<TempSource>().unwrap(),
            TempSource::Zone("x86_pkg_temp".into())
        );
        assert_eq!(
            "hwmon:coretemp:Package id 0".parse::<TempSource>().unwrap(),
            TempSource::Hwmon {
                name: "coretemp".into(),
                label: Some("Package id 0".into())
            }
        );
        assert!("hwmon:".parse::<TempSource>().is_err());
        assert!("cpu".parse::<TempSource>().is_err());
    }

    #[test]
    fn dpm_table() {
        assert_eq!(
            parse_dpm_max_mhz("0: 500Mhz\n1: 1800Mhz *\n2: 2100Mhz\n"),
            Some(2100)
        );
        assert_eq!(parse_dpm_max_mhz(""), None);
    }
}
