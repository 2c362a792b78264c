//! `k_sweep`'s plot: test accuracy against K for both variants, and the
//! dynamic model's distance from uniform attention per HD unit.

use std::path::Path;

use hdgcn::{Error, Result};
use plotters::prelude::*;

use super::Point;
use super::font;

/// Per unit `(a_f, a_b)` of a point's `attention_entropy` (empty when null).
pub(super) fn entropies(p: &Point) -> Vec<(f64, f64)> {
    p.attention_entropy
        .as_array()
        .map(|units| {
            units
                .iter()
                .map(|u| {
                    let f = |key: &str| u[key].as_f64().unwrap_or(f64::NAN);
                    (f("a_f"), f("a_b"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Where the entropy panel's axis ends: distances from uniform below it
/// are `f32` rounding of a uniform map and are drawn on it.
const DEFICIT_FLOOR: f64 = 1e-9;

/// `1 - entropy`, at least [`DEFICIT_FLOOR`].
fn deficit(entropy: f64) -> f64 {
    (1.0 - entropy).max(DEFICIT_FLOOR)
}

fn plot_error(e: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!("drawing the plot: {e}"))
}

/// Two panels: accuracy against K, and entropy per unit.
pub(super) fn plot(path: &Path, points: &[Point], title: &str) -> Result<()> {
    if points.is_empty() {
        return Err(Error::Empty("no sweep points to plot".into()));
    }
    let labels = font::register_font(None);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    // Drawn to a temporary file beside the target, then renamed.
    let tmp = path.with_extension(format!("{}.tmp.png", std::process::id()));
    {
        let root = BitMapBackend::new(&tmp, (1200, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (left, right) = root.split_horizontally(600);
        let font = |size: u32| ("sans-serif", size).into_font();
        let ks: Vec<usize> = points.iter().map(|p| p.k).collect();
        let (kmin, kmax) = (
            *ks.iter().min().unwrap_or(&2) as f64,
            *ks.iter().max().unwrap_or(&10) as f64,
        );
        let lo = points
            .iter()
            .map(|p| p.test_acc_mean - p.test_acc_std)
            .fold(f64::INFINITY, f64::min);
        let hi = points
            .iter()
            .map(|p| p.test_acc_mean + p.test_acc_std)
            .fold(f64::NEG_INFINITY, f64::max);
        let pad = ((hi - lo) * 0.1).max(0.5);
        let mut chart = ChartBuilder::on(&left)
            .margin(20)
            .caption(
                if labels {
                    format!("{title}: test accuracy against K")
                } else {
                    String::new()
                },
                font(20),
            )
            .x_label_area_size(if labels { 40 } else { 0 })
            .y_label_area_size(if labels { 50 } else { 0 })
            .build_cartesian_2d((kmin - 0.5)..(kmax + 0.5), (lo - pad)..(hi + pad))
            .map_err(plot_error)?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc("K")
            .y_desc("test accuracy (%)")
            .x_labels((kmax - kmin) as usize + 2)
            .x_label_formatter(&|x| format!("{x:.0}"));
        if !labels {
            mesh.disable_x_axis().disable_y_axis();
        }
        mesh.draw().map_err(plot_error)?;
        for (model, colour) in [("hdgcn", RED), ("hdgcn-static", BLUE)] {
            let mut line: Vec<&Point> = points.iter().filter(|p| p.model == model).collect();
            line.sort_by_key(|p| p.k);
            let xy: Vec<(f64, f64)> = line.iter().map(|p| (p.k as f64, p.test_acc_mean)).collect();
            let series = chart
                .draw_series(std::iter::once(PathElement::new(
                    xy.clone(),
                    colour.stroke_width(2),
                )))
                .map_err(plot_error)?;
            if labels {
                series.label(model).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            }
            chart
                .draw_series(xy.iter().map(|&c| Circle::new(c, 4, colour.filled())))
                .map_err(plot_error)?;
            chart
                .draw_series(line.iter().map(|p| {
                    let x = p.k as f64;
                    PathElement::new(
                        vec![
                            (x, p.test_acc_mean - p.test_acc_std),
                            (x, p.test_acc_mean + p.test_acc_std),
                        ],
                        colour.stroke_width(1),
                    )
                }))
                .map_err(plot_error)?;
        }
        if labels {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(plot_error)?;
        }

        let dynamic: Vec<&Point> = points
            .iter()
            .filter(|p| p.model == "hdgcn" && !entropies(p).is_empty())
            .collect();
        let units = dynamic
            .iter()
            .map(|p| entropies(p).len())
            .max()
            .unwrap_or(1);
        // Drawn as the distance from uniform, 1 - entropy, on a log scale:
        // trained maps sit anywhere from 1e-1 to f32 rounding (1e-7 and
        // below), which a linear axis near 1 cannot tell apart.
        let e_hi = dynamic
            .iter()
            .flat_map(|p| entropies(p).into_iter().flat_map(|(f, b)| [f, b]))
            .filter(|v| v.is_finite())
            .map(deficit)
            .fold(DEFICIT_FLOOR * 10.0, f64::max);
        let mut chart = ChartBuilder::on(&right)
            .margin(20)
            .caption(
                if labels {
                    "HDGCN: 1 - entropy of A_b (solid), A_f (dashed)".to_string()
                } else {
                    String::new()
                },
                font(20),
            )
            .x_label_area_size(if labels { 40 } else { 0 })
            .y_label_area_size(if labels { 60 } else { 0 })
            .build_cartesian_2d(
                0.5..(units as f64 + 0.5),
                (DEFICIT_FLOOR * 0.5..(e_hi * 2.0).min(1.0)).log_scale(),
            )
            .map_err(plot_error)?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc("HD unit")
            .y_desc("1 - normalised row entropy")
            .x_labels(units + 2)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0e}"));
        if !labels {
            mesh.disable_x_axis().disable_y_axis();
        }
        mesh.draw().map_err(plot_error)?;
        for (i, p) in dynamic.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            let e = entropies(p);
            let ab: Vec<(f64, f64)> = e
                .iter()
                .enumerate()
                .map(|(u, v)| (u as f64 + 1.0, deficit(v.1)))
                .collect();
            let af: Vec<(f64, f64)> = e
                .iter()
                .enumerate()
                .map(|(u, v)| (u as f64 + 1.0, deficit(v.0)))
                .collect();
            let series = chart
                .draw_series(std::iter::once(PathElement::new(
                    ab.clone(),
                    colour.stroke_width(2),
                )))
                .map_err(plot_error)?;
            if labels {
                series.label(format!("K = {}", p.k)).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            }
            chart
                .draw_series(ab.iter().map(|&c| Circle::new(c, 3, colour.filled())))
                .map_err(plot_error)?;
            // Dashes: every other segment of the A_f line, cut in eight.
            let dashes = af.windows(2).flat_map(|w| {
                let (a, b) = (w[0], w[1]);
                (0..8).step_by(2).map(move |j| {
                    let t0 = j as f64 / 8.0;
                    let t1 = (j + 1) as f64 / 8.0;
                    let at = |t: f64| (a.0 + t * (b.0 - a.0), a.1 + t * (b.1 - a.1));
                    PathElement::new(vec![at(t0), at(t1)], colour.stroke_width(2))
                })
            });
            chart.draw_series(dashes).map_err(plot_error)?;
            chart
                .draw_series(af.iter().map(|&c| Cross::new(c, 4, colour.stroke_width(2))))
                .map_err(plot_error)?;
        }
        if labels && !dynamic.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::MiddleLeft)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(plot_error)?;
        }
        root.present().map_err(plot_error)?;
    }
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}
