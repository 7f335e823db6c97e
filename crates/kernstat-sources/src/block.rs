//! Block devices by name and by number (sysfs): what `biolat -d sda` means, and what
//! the kernel's dev_t of a request is called.

use std::collections::HashMap;
use std::path::Path;

/// The (major, minor) of a block device by name (/sys/class/block/NAME/dev).
pub fn block_device_numbers(name: &str) -> Option<(u32, u32)> {
    if name.contains('/') || name.starts_with('.') {
        return None;
    }
    let text =
        std::fs::read_to_string(Path::new("/sys/class/block").join(name).join("dev")).ok()?;
    let (ma, mi) = text.trim().split_once(':')?;
    Some((ma.parse().ok()?, mi.parse().ok()?))
}

/// Names of block devices by number, looked up once each (/sys/dev/block/M:m/uevent's
/// DEVNAME; "M:m" when there is none).
#[derive(Debug, Default)]
pub struct BlockNames {
    known: HashMap<(u32, u32), String>,
}

impl BlockNames {
    /// The name of (major, minor).
    pub fn name(&mut self, major: u32, minor: u32) -> String {
        self.known
            .entry((major, minor))
            .or_insert_with(|| {
                std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent"))
                    .ok()
                    .and_then(|u| {
                        u.lines()
                            .find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_string))
                    })
                    .map(|n| kernstat_model::text::printable(&n).into_owned())
                    .unwrap_or_else(|| format!("{major}:{minor}"))
            })
            .clone()
    }
}
