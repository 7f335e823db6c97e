//! JSON lines: one object per frame. `model` is what `snapshot --json` shows for the
//! interval ending at the frame, `processes` every process as `ps --json` rows (the
//! ended ones in state X, with their exit code) with their storage rates, then what the
//! recorder summed instead of listing, the kernel events, the kernel histograms
//! (cumulative since the recorder started) and the exits it lost. `boot_ns` is the
//! frame's CLOCK_BOOTTIME, the clock of `start_ns` and `end_ns`.

use std::io::Write;

use kernstat_model::ps::PsRow;
use serde::Serialize;

use crate::{Error, FrameRows, Sink};

pub(crate) struct Json<W: Write> {
    out: W,
}

impl<W: Write> Json<W> {
    pub(crate) fn new(out: W) -> Self {
        Json { out }
    }
}

#[derive(Serialize)]
struct Process<'a> {
    #[serde(flatten)]
    row: &'a PsRow,
    read_bps: f64,
    write_bps: f64,
}

#[derive(Serialize)]
struct FrameJson<'a> {
    time: String,
    time_unix_ns: u64,
    boot_ns: u64,
    interval_s: f64,
    model: &'a kernstat_model::Model,
    processes: Vec<Process<'a>>,
    summaries: &'a [kernstat_record::frame::UserSummary],
    events: &'a [kernstat_record::frame::Event],
    hists: &'a kernstat_record::frame::Hists,
    ended_lost: u64,
    exits_hook: bool,
}

impl<W: Write> Sink for Json<W> {
    fn frame(&mut self, f: &FrameRows<'_>) -> Result<(), Error> {
        let model = kernstat_record::replay::model(f.before, f.frame);
        let v = FrameJson {
            time: kernstat_record::time::local_stamp(f.frame.time_unix_ns),
            time_unix_ns: f.frame.time_unix_ns,
            boot_ns: f.frame.boot_ns,
            interval_s: f.interval_s,
            model: &model,
            processes: f
                .rows
                .iter()
                .map(|(row, r)| Process {
                    row,
                    read_bps: r.read_bps,
                    write_bps: r.write_bps,
                })
                .collect(),
            summaries: &f.frame.summaries,
            events: &f.frame.events,
            hists: &f.frame.hists,
            ended_lost: f.frame.ended_lost,
            exits_hook: f.frame.exits_hook,
        };
        serde_json::to_writer(&mut self.out, &v).map_err(std::io::Error::from)?;
        self.out.write_all(b"\n")?;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Error> {
        self.out.flush()?;
        Ok(())
    }
}
