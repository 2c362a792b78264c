//! `attention_map`'s output: a matrix as a labelled PNG heat map and as a
//! CSV table.

use std::fmt::Write as _;
use std::path::Path;

use hdgcn::{Error, Result};
use ndarray::Array2;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Viridis, by linear interpolation between nine of its colours; `t` in [0, 1].
fn viridis(t: f64) -> RGBColor {
    const C: [(u8, u8, u8); 9] = [
        (68, 1, 84),
        (71, 44, 122),
        (59, 81, 139),
        (44, 113, 142),
        (33, 144, 141),
        (39, 173, 129),
        (92, 200, 99),
        (170, 220, 50),
        (253, 231, 37),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (C.len() - 1) as f64;
    let i = (x.floor() as usize).min(C.len() - 2);
    let f = x - i as f64;
    let mix = |a: u8, b: u8| (a as f64 + f * (b as f64 - a as f64)).round() as u8;
    let (a, b) = (C[i], C[i + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

fn plot_err(e: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!("drawing the heat map: {e}"))
}

/// Draws `mat` (`rows x cols`) as a heat map with row labels on the left,
/// column labels (rotated) on top, a title and a colour bar from the
/// matrix's minimum to its maximum.
pub(crate) fn heat_map(
    path: &Path,
    mat: &Array2<f64>,
    rows: &[String],
    cols: &[String],
    title: &str,
    labels: bool,
) -> Result<()> {
    let (nr, nc) = mat.dim();
    let cell = (480 / nr.max(nc)).clamp(18, 40) as i32;
    let chars = |v: &[String]| v.iter().map(|s| s.chars().count()).max().unwrap_or(1) as i32;
    let font_px = (cell as f64 * 0.5).clamp(11.0, 16.0);
    let char_w = (font_px * 0.62).ceil() as i32;
    let left = if labels { chars(rows) * char_w + 12 } else { 8 };
    let top = if labels { chars(cols) * char_w + 40 } else { 8 };
    let (gw, gh) = (nc as i32 * cell, nr as i32 * cell);
    let bar_x = left + gw + 16;
    let width = (bar_x + 20 + if labels { 70 } else { 8 }).max(if labels { 420 } else { 0 });
    let height = top + gh.max(120) + 12;
    let root = BitMapBackend::new(path, (width as u32, height as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;

    let (lo, hi) = mat
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let span = if hi > lo { hi - lo } else { 1.0 };
    for ((r, c), &v) in mat.indexed_iter() {
        let (x, y) = (left + c as i32 * cell, top + r as i32 * cell);
        root.draw(&Rectangle::new(
            [(x, y), (x + cell, y + cell)],
            viridis((v - lo) / span).filled(),
        ))
        .map_err(plot_err)?;
    }
    root.draw(&Rectangle::new(
        [(left, top), (left + gw, top + gh)],
        BLACK.stroke_width(1),
    ))
    .map_err(plot_err)?;
    // Colour bar: top = maximum.
    let bar_h = gh.max(120);
    for i in 0..bar_h {
        let t = 1.0 - i as f64 / (bar_h - 1).max(1) as f64;
        root.draw(&Rectangle::new(
            [(bar_x, top + i), (bar_x + 16, top + i + 1)],
            viridis(t).filled(),
        ))
        .map_err(plot_err)?;
    }
    root.draw(&Rectangle::new(
        [(bar_x, top), (bar_x + 16, top + bar_h)],
        BLACK.stroke_width(1),
    ))
    .map_err(plot_err)?;

    if labels {
        let font = ("sans-serif", font_px).into_font().color(&BLACK);
        let right_mid = font.pos(Pos::new(HPos::Right, VPos::Center));
        for (r, w) in rows.iter().enumerate() {
            root.draw_text(w, &right_mid, (left - 6, top + r as i32 * cell + cell / 2))
                .map_err(plot_err)?;
        }
        let rotated = ("sans-serif", font_px)
            .into_font()
            .transform(FontTransform::Rotate270)
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        for (c, w) in cols.iter().enumerate() {
            root.draw_text(w, &rotated, (left + c as i32 * cell + cell / 2, top - 6))
                .map_err(plot_err)?;
        }
        let title_font = ("sans-serif", 15.0).into_font().color(&BLACK);
        root.draw_text(title, &title_font, (8, 8))
            .map_err(plot_err)?;
        // Enough decimals to tell the ends of the scale apart.
        let prec = ((-(hi - lo).max(1e-12).log10()).ceil() as i64 + 2).clamp(3, 8) as usize;
        let small = ("sans-serif", 12.0)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        for (v, y) in [
            (hi, top),
            ((hi + lo) / 2.0, top + bar_h / 2),
            (lo, top + bar_h),
        ] {
            root.draw_text(&format!("{v:.prec$}"), &small, (bar_x + 20, y))
                .map_err(plot_err)?;
        }
    }
    root.present().map_err(plot_err)?;
    Ok(())
}

/// The matrix as CSV: a header of column labels, each row led by its label.
pub(crate) fn write_csv(
    path: &Path,
    mat: &Array2<f64>,
    rows: &[String],
    cols: &[String],
) -> Result<()> {
    let q = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut s = String::from("label");
    for c in cols {
        s.push(',');
        s.push_str(&q(c));
    }
    s.push('\n');
    for (r, row) in mat.rows().into_iter().enumerate() {
        s.push_str(&q(&rows[r]));
        for v in row {
            let _ = write!(s, ",{v:.9}");
        }
        s.push('\n');
    }
    std::fs::write(path, s).map_err(|e| Error::io(path, e))?;
    Ok(())
}
