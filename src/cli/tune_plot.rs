//! `sliced tune --plot FILE.svg|FILE.png`: writes per second against p99 latency, one labelled
//! point per setting, the recommended one in red.

use plotters::coord::Shift;
use plotters::prelude::*;

use sliced::tune::{Outcome, Setting};

/// The plot's size in pixels.
const SIZE: (u32, u32) = (900, 600);

/// A label's line height, and a generous width per character, in pixels (13 px text).
const LABEL_HEIGHT: i32 = 16;
const LABEL_CHAR_WIDTH: i32 = 7;

/// Whether `path` names a kind of file the plot can be drawn into.
pub fn drawable(path: &str) -> bool {
    path.ends_with(".svg") || path.ends_with(".png")
}

/// Draws the sweep into `path`: SVG, or PNG, laid out and drawn with an embedded font (DejaVu
/// Sans), so that a machine without fonts still draws the labels.
pub fn plot(
    path: &str,
    settings: &[Setting],
    outcomes: &[Outcome],
    chosen: Option<usize>,
    label: impl Fn(&Setting) -> String,
) -> Result<(), String> {
    let failed = |e: &dyn std::fmt::Display| format!("--plot {path}: {e}");
    // Both backends lay text out with the font's metrics.
    plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| failed(&"the embedded font cannot be read"))?;
    if path.ends_with(".svg") {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        draw(root, settings, outcomes, chosen, label).map_err(|e| failed(&e))
    } else if path.ends_with(".png") {
        let root = BitMapBackend::new(path, SIZE).into_drawing_area();
        draw(root, settings, outcomes, chosen, label).map_err(|e| failed(&e))
    } else {
        Err(failed(&"give a .svg or .png file"))
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    settings: &[Setting],
    outcomes: &[Outcome],
    chosen: Option<usize>,
    label: impl Fn(&Setting) -> String,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let points: Vec<(f64, f64)> = (outcomes.iter())
        .map(|o| {
            (
                o.mean_writes_per_second,
                o.latency_p99.as_secs_f64() * 1000.0,
            )
        })
        .collect();
    // Room on the right for the last point's label.
    let max_x = points.iter().map(|p| p.0).fold(1.0, f64::max) * 1.6;
    let max_y = points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.15;
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "sliced tune: API writes against p99 propagation latency",
            ("sans-serif", 20),
        )
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..max_x, 0.0..max_y)?;
    chart
        .configure_mesh()
        .x_desc("API writes per second (mean over the trace)")
        .y_desc("p99 latency, pod change to write (ms)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    // Labels beside their dots, each moved down below any label already placed that it would
    // overlap: two settings of equal latency sit on one line.
    let mut placed: Vec<(i32, i32, i32)> = Vec::new();
    for (i, (setting, point)) in settings.iter().zip(&points).enumerate() {
        let color = if Some(i) == chosen { RED } else { BLUE };
        let text = if Some(i) == chosen {
            format!("{} (recommended)", label(setting))
        } else {
            label(setting)
        };
        let (x, y) = chart.backend_coord(point);
        let width = i32::try_from(text.len()).unwrap_or(i32::MAX / 8) * LABEL_CHAR_WIDTH;
        let mut dy = -LABEL_HEIGHT / 2;
        while placed.iter().any(|&(px, py, pw)| {
            x < px + pw && px < x + width && (y + dy - py).abs() < LABEL_HEIGHT
        }) {
            dy += LABEL_HEIGHT;
        }
        placed.push((x, y + dy, width));
        chart.draw_series(std::iter::once(Circle::new(*point, 5, color.filled())))?;
        chart.draw_series(std::iter::once(
            EmptyElement::at(*point)
                + Text::new(text, (10, dy), ("sans-serif", 13).into_font().color(&color)),
        ))?;
    }
    root.present()
}
