//! `sliced tune --plot FILE.svg`: writes per second against p99 latency, one labelled point per
//! setting, the recommended one in red.

use plotters::prelude::*;

use sliced::tune::{Outcome, Setting};

/// Draws the sweep into `path` (SVG).
pub fn plot(
    path: &str,
    settings: &[Setting],
    outcomes: &[Outcome],
    chosen: Option<usize>,
    label: impl Fn(&Setting) -> String,
) -> Result<(), String> {
    if !path.ends_with(".svg") {
        return Err(format!(
            "--plot {path}: only SVG is drawn (give a .svg file)"
        ));
    }
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
    let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
    let draw = |e: &dyn std::fmt::Display| format!("--plot {path}: {e}");
    root.fill(&WHITE).map_err(|e| draw(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "sliced tune: API writes against p99 propagation latency",
            ("sans-serif", 20),
        )
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..max_x, 0.0..max_y)
        .map_err(|e| draw(&e))?;
    chart
        .configure_mesh()
        .x_desc("API writes per second (mean over the trace)")
        .y_desc("p99 latency, pod change to write (ms)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(|e| draw(&e))?;
    for (i, (setting, point)) in settings.iter().zip(&points).enumerate() {
        let color = if Some(i) == chosen { RED } else { BLUE };
        let text = if Some(i) == chosen {
            format!("{} (recommended)", label(setting))
        } else {
            label(setting)
        };
        chart
            .draw_series(std::iter::once(Circle::new(*point, 5, color.filled())))
            .map_err(|e| draw(&e))?;
        chart
            .draw_series(std::iter::once(Text::new(
                text,
                *point,
                ("sans-serif", 13).into_font().color(&color),
            )))
            .map_err(|e| draw(&e))?;
    }
    root.present().map_err(|e| draw(&e))?;
    Ok(())
}
