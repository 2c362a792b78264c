//! Dataset loading: Planetoid citation graphs, their public and
//! full-supervised splits, the safe pickle reader behind them, and the
//! text_gcn document corpora ([`text`]).

pub mod pickle;
pub mod planetoid;
pub mod splits;
pub mod text;

pub use planetoid::{Planetoid, Split};
pub use splits::{geom_gcn_split, masks_to_split, random_split};
pub use text::{TextCorpus, text_gcn_dir};

use std::path::{Path, PathBuf};

/// Root folder of the benchmark data.
///
/// `flag` (e.g. a `--data` command-line option) wins; otherwise the
/// `HDGCN_DATA` environment variable; otherwise `data` (the repository's
/// vendored folder, laid out as `data/planetoid/ind.cora.*`).
pub fn data_root(flag: Option<&Path>) -> PathBuf {
    if let Some(f) = flag {
        return f.to_path_buf();
    }
    match std::env::var_os("HDGCN_DATA") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from("data"),
    }
}

/// `root/planetoid`: folder of the `ind.<name>.*` files.
pub fn planetoid_dir(root: &Path) -> PathBuf {
    root.join("planetoid")
}

/// `root/geom-gcn-splits`: folder of the `<name>_split_0.6_0.2_<i>.npz` files.
pub fn geom_gcn_dir(root: &Path) -> PathBuf {
    root.join("geom-gcn-splits")
}

/// Reads a whole file, mapping "not found" to [`crate::Error::MissingFile`].
pub(crate) fn read_file(path: &Path) -> crate::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            crate::Error::MissingFile(path.to_path_buf())
        } else {
            crate::Error::io(path, e)
        }
    })
}
