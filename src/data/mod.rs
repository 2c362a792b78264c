//! Dataset loading: Planetoid citation graphs, their public and
//! full-supervised splits, the safe pickle reader behind them, and the
//! text_gcn document corpora ([`text`]) and the aspect-based sentiment
//! sets ([`absa`]).

pub mod absa;
mod feature_store;
pub mod npy;
pub mod pickle;
pub mod planetoid;
pub mod splits;
pub mod text;

pub use feature_store::FeatureStore;
pub use planetoid::{Planetoid, PlanetoidFiles, Split, UnlabelledNodes};
pub use splits::{geom_gcn_split, geom_gcn_split_sized, masks_to_split, random_split};
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

/// Maps an open/stat error on `path`: "not found" becomes
/// [`crate::Error::MissingFile`], anything else [`crate::Error::Io`].
fn open_error(path: &Path, e: std::io::Error) -> crate::Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        crate::Error::MissingFile(path.to_path_buf())
    } else {
        crate::Error::io(path, e)
    }
}

/// What kind of non-regular file `t` is, in words.
fn file_kind(t: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// The error for a path that is not a regular file.
pub(crate) fn not_regular(path: &Path, t: std::fs::FileType, doing: &str) -> crate::Error {
    crate::Error::io(
        path,
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is not a regular file; refusing to {doing} it",
                file_kind(t)
            ),
        ),
    )
}

/// Opens `path` for reading if it is a regular file (symbolic links are
/// followed: a link to a regular file is fine, a link to `/dev/zero` is
/// not). FIFOs, devices, sockets and directories are refused with
/// [`crate::Error::Io`] (kind `InvalidInput`) before anything is opened, so
/// a FIFO without a writer cannot block the reader. Returns the file and
/// its length.
pub(crate) fn open_regular(path: &Path) -> crate::Result<(std::fs::File, u64)> {
    open_regular_as(path, true)
}

fn open_regular_as(path: &Path, missing: bool) -> crate::Result<(std::fs::File, u64)> {
    let open_error = |path: &Path, e: std::io::Error| {
        if missing {
            open_error(path, e)
        } else {
            crate::Error::io(path, e)
        }
    };
    let meta = std::fs::metadata(path).map_err(|e| open_error(path, e))?;
    if !meta.is_file() {
        return Err(not_regular(path, meta.file_type(), "read"));
    }
    let f = std::fs::File::open(path).map_err(|e| open_error(path, e))?;
    // The path may have been replaced between the two looks.
    let meta = f.metadata().map_err(|e| crate::Error::io(path, e))?;
    if !meta.is_file() {
        return Err(not_regular(path, meta.file_type(), "read"));
    }
    Ok((f, meta.len()))
}

/// Reads a whole regular file of at most `cap` bytes (`what` names the
/// format in the error). A missing file is [`crate::Error::MissingFile`],
/// a non-regular one [`crate::Error::Io`] (see [`open_regular`]), a larger
/// one [`crate::Error::Format`] — found from its length before reading, and
/// never more than `cap + 1` bytes are read should it grow meanwhile.
pub(crate) fn read_file_capped(path: &Path, cap: u64, what: &str) -> crate::Result<Vec<u8>> {
    read_capped(path, cap, what, true)
}

/// [`read_file_capped`], but a missing file is an [`crate::Error::Io`] (of
/// kind `NotFound`) too.
pub(crate) fn read_file_capped_io(path: &Path, cap: u64, what: &str) -> crate::Result<Vec<u8>> {
    read_capped(path, cap, what, false)
}

fn read_capped(path: &Path, cap: u64, what: &str, missing: bool) -> crate::Result<Vec<u8>> {
    use std::io::Read;
    let (f, len) = open_regular_as(path, missing)?;
    let too_big = |len: u64| {
        crate::Error::format(
            path.display().to_string(),
            format!("{len} bytes, more than the {cap} that {what} may take"),
        )
    };
    if len > cap {
        return Err(too_big(len));
    }
    let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    f.take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| crate::Error::io(path, e))?;
    if buf.len() as u64 > cap {
        return Err(too_big(buf.len() as u64));
    }
    Ok(buf)
}
