//! A TrueType font for the examples' plots (included with
//! `#[path = "common/font.rs"] mod font;` by `attention_map` and `k_sweep`).

use std::path::{Path, PathBuf};

/// Registers a font as plotters' "sans-serif"; `false` if none was found.
pub fn register_font(flag: Option<&Path>) -> bool {
    let mut candidates: Vec<PathBuf> = Vec::new();
    candidates.extend(flag.map(Path::to_path_buf));
    candidates.extend(std::env::var_os("HDGCN_FONT").map(PathBuf::from));
    candidates.extend(
        [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
            "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
            "/Library/Fonts/Arial.ttf",
            "/System/Library/Fonts/Supplemental/Arial.ttf",
            "C:\\Windows\\Fonts\\arial.ttf",
        ]
        .map(PathBuf::from),
    );
    for p in candidates {
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        if plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, bytes)
            .is_ok()
        {
            return true;
        }
        eprintln!("warning: {} is not a usable font", p.display());
    }
    false
}
