//! Alert levels and the thresholds that set them (Waybar's `class`, a bar's colour):
//! the defaults, and a user's overrides as `--warn cpu=70,mem=80,temp=85` gives them.

use serde::{Deserialize, Serialize};

/// Alert level, as Waybar's `class`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Nothing above its warning threshold.
    #[default]
    Normal,
    /// Something at or above its warning threshold.
    Warning,
    /// Something at or above its critical threshold.
    Critical,
}

impl Level {
    /// The CSS class name.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Normal => "normal",
            Level::Warning => "warning",
            Level::Critical => "critical",
        }
    }
}

/// Warning and critical thresholds for one metric.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Threshold {
    /// At or above: warning.
    pub warning: f64,
    /// At or above: critical.
    pub critical: f64,
}

impl Threshold {
    pub(crate) fn level(&self, value: f64) -> Level {
        if value >= self.critical {
            Level::Critical
        } else if value >= self.warning {
            Level::Warning
        } else {
            Level::Normal
        }
    }
}

/// Thresholds that decide the alert level.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    /// CPU busy percent.
    pub cpu: Threshold,
    /// Memory used percent.
    pub mem: Threshold,
    /// Temperature, degrees Celsius.
    pub temp: Threshold,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            cpu: Threshold {
                warning: 70.0,
                critical: 90.0,
            },
            mem: Threshold {
                warning: 80.0,
                critical: 95.0,
            },
            temp: Threshold {
                warning: 80.0,
                critical: 95.0,
            },
        }
    }
}

/// Overrides of some thresholds: `cpu=70,mem=80,temp=85`, any subset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LevelSpec {
    /// CPU percent.
    pub cpu: Option<f64>,
    /// Memory used percent.
    pub mem: Option<f64>,
    /// Temperature, degrees Celsius.
    pub temp: Option<f64>,
}

impl LevelSpec {
    /// Parses `cpu=70,mem=80,temp=85` (any subset; empty: no override).
    pub fn parse(s: &str) -> Result<LevelSpec, String> {
        let mut spec = LevelSpec::default();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: expected METRIC=VALUE, e.g. cpu=90"))?;
            let v: f64 = v
                .trim()
                .parse()
                .map_err(|_| format!("{part:?}: {v:?} is not a number"))?;
            match k.trim() {
                "cpu" => spec.cpu = Some(v),
                "mem" => spec.mem = Some(v),
                "temp" => spec.temp = Some(v),
                other => return Err(format!("unknown metric {other:?}: use cpu, mem or temp")),
            }
        }
        Ok(spec)
    }
}

impl Thresholds {
    /// The defaults, with `warn` and `crit` overriding the levels they name.
    pub fn with_overrides(warn: &LevelSpec, crit: &LevelSpec) -> Thresholds {
        let d = Thresholds::default();
        let pick = |base: Threshold, w: Option<f64>, c: Option<f64>| Threshold {
            warning: w.unwrap_or(base.warning),
            critical: c.unwrap_or(base.critical),
        };
        Thresholds {
            cpu: pick(d.cpu, warn.cpu, crit.cpu),
            mem: pick(d.mem, warn.mem, crit.mem),
            temp: pick(d.temp, warn.temp, crit.temp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_specs() {
        let l = LevelSpec::parse("cpu=50, temp=70").unwrap();
        assert_eq!(l.cpu, Some(50.0));
        assert_eq!(l.temp, Some(70.0));
        assert_eq!(l.mem, None);
        assert!(LevelSpec::parse("disk=3").is_err());
        assert!(LevelSpec::parse("cpu").is_err());
        assert!(LevelSpec::parse("cpu=x").is_err());
        let t = Thresholds::with_overrides(&l, &LevelSpec::parse("mem=99").unwrap());
        assert_eq!(t.cpu.warning, 50.0);
        assert_eq!(t.cpu.critical, Thresholds::default().cpu.critical);
        assert_eq!(t.mem.critical, 99.0);
    }
}
