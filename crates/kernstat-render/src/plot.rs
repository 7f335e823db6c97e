//! `--plot FILE`: the percentile time series over the intervals, and the final
//! distribution, drawn with plotters into a PNG or an SVG (chosen by the extension).
//!
//! Text needs a TrueType font (to rasterise it in PNG, and to measure it for layout in
//! both formats); none is bundled: the first of the usual system paths (DejaVu Sans,
//! Liberation Sans) is used, and without one the error says to install fonts-dejavu-core.

use std::path::Path;

use kernstat_model::hist::Log2Bucket;
use plotters::coord::Shift;
use plotters::prelude::*;

/// One interval's summary, at `t` seconds since tracing started.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Seconds since start.
    pub t: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

/// Why a plot could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// Not .png or .svg.
    #[error("--plot {0}: the file name must end in .png or .svg")]
    Extension(String),
    /// No font for PNG text.
    #[error(
        "no TrueType font found for the plot's text (looked in {0}); install fonts-dejavu-core"
    )]
    NoFont(String),
    /// plotters failed.
    #[error("drawing {0}: {1}")]
    Draw(String, String),
}

const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

fn register_font() -> Result<(), PlotError> {
    for f in FONTS {
        if let Ok(bytes) = std::fs::read(f) {
            // plotters keeps fonts for the life of the process: leak the one we load.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return Ok(());
            }
        }
    }
    Err(PlotError::NoFont(FONTS.join(", ")))
}

/// Draws `points` and `dist` into `path` (.png or .svg).
pub fn plot(
    path: &Path,
    unit: &str,
    points: &[Point],
    dist: &[Log2Bucket],
) -> Result<(), PlotError> {
    let name = path.display().to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let size = (1000, 720);
    let err = |e: String| PlotError::Draw(name.clone(), e);
    match ext.as_deref() {
        Some("svg") => {
            register_font()?;
            let root = SVGBackend::new(path, size).into_drawing_area();
            draw(&root, unit, points, dist).map_err(err)?;
            root.present()
                .map_err(|e| PlotError::Draw(name.clone(), e.to_string()))
        }
        Some("png") => {
            register_font()?;
            let root = BitMapBackend::new(path, size).into_drawing_area();
            draw(&root, unit, points, dist).map_err(err)?;
            root.present()
                .map_err(|e| PlotError::Draw(name.clone(), e.to_string()))
        }
        _ => Err(PlotError::Extension(name)),
    }
}

/// A line of the percentile chart: its label, colour, and how to read it from a point.
type Series = (&'static str, RGBColor, fn(&Point) -> f64);

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    unit: &str,
    points: &[Point],
    dist: &[Log2Bucket],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (top, bottom) = root.split_vertically(400);

    let t_max = points.iter().map(|p| p.t).fold(1.0, f64::max);
    let y_max = points.iter().map(|p| p.max.max(p.p99)).fold(1.0, f64::max) * 1.5;
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!("run-queue latency percentiles ({unit})"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..t_max, (0.5f64..y_max).log_scale())
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc(unit)
        .draw()
        .map_err(e)?;
    let series: [Series; 4] = [
        ("p50", BLUE, |p| p.p50),
        ("p90", GREEN, |p| p.p90),
        ("p99", RGBColor(230, 120, 0), |p| p.p99),
        ("max", RED, |p| p.max),
    ];
    for (label, color, get) in series {
        chart
            .draw_series(LineSeries::new(
                points.iter().map(|p| (p.t, get(p).max(0.5))),
                color.stroke_width(2),
            ))
            .map_err(e)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(e)?;

    let n = dist.len().max(1);
    let c_max = dist.iter().map(|b| b.count).max().unwrap_or(1).max(1);
    let labels: Vec<String> = dist.iter().map(|b| format!("{}-{}", b.lo, b.hi)).collect();
    let mut bars = ChartBuilder::on(&bottom)
        .caption(
            format!("distribution, all intervals ({unit})"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d((0..n).into_segmented(), 0u64..c_max + c_max / 10 + 1)
        .map_err(e)?;
    bars.configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_desc("events")
        .draw()
        .map_err(e)?;
    bars.draw_series(
        Histogram::vertical(&bars)
            .style(BLUE.mix(0.7).filled())
            .margin(2)
            .data(dist.iter().enumerate().map(|(i, b)| (i, b.count))),
    )
    .map_err(e)?;
    Ok(())
}

/// One chart of [`plot_panels`]: a title, the y unit, and named lines of (x, y) points.
#[derive(Clone, Debug, Default)]
pub struct Panel {
    /// Shown above the chart.
    pub title: String,
    /// The y axis' label.
    pub unit: String,
    /// (label, points).
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
}

/// Draws `panels` one under the other, sharing the x axis (`x_desc`), into `path`
/// (.png or .svg): time series such as a soak's memory, descriptors and CPU.
pub fn plot_panels(path: &Path, x_desc: &str, panels: &[Panel]) -> Result<(), PlotError> {
    let name = path.display().to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let size = (1000, 240 * panels.len().max(1) as u32);
    let err = |e: String| PlotError::Draw(name.clone(), e);
    register_font()?;
    match ext.as_deref() {
        Some("svg") => {
            let root = SVGBackend::new(path, size).into_drawing_area();
            draw_panels(&root, x_desc, panels).map_err(err)?;
            root.present()
                .map_err(|e| PlotError::Draw(name.clone(), e.to_string()))
        }
        Some("png") => {
            let root = BitMapBackend::new(path, size).into_drawing_area();
            draw_panels(&root, x_desc, panels).map_err(err)?;
            root.present()
                .map_err(|e| PlotError::Draw(name.clone(), e.to_string()))
        }
        _ => Err(PlotError::Extension(name)),
    }
}

fn draw_panels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    x_desc: &str,
    panels: &[Panel],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let colors = [BLUE, RED, GREEN, RGBColor(230, 120, 0), MAGENTA];
    let areas = root.split_evenly((panels.len().max(1), 1));
    for (panel, area) in panels.iter().zip(&areas) {
        let points = panel.lines.iter().flat_map(|(_, p)| p.iter());
        let (mut x_max, mut y_max) = (1.0f64, 0.0f64);
        for &(x, y) in points {
            x_max = x_max.max(x);
            y_max = y_max.max(y);
        }
        let y_max = if y_max > 0.0 { y_max * 1.2 } else { 1.0 };
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(72)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(panel.unit.as_str())
            .draw()
            .map_err(e)?;
        for (i, (label, pts)) in panel.lines.iter().enumerate() {
            let color = colors[i % colors.len()];
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(e)?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        if panel.lines.len() > 1 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(e)?;
        }
    }
    Ok(())
}
