//! Dense 2-D `.npy` matrices: written from an array ([`write_npy`]) and
//! read back memory-mapped ([`NpyMatrix`]), so that a feature matrix larger
//! than the memory budget ([`crate::limits`]) is never loaded whole: a
//! sampled batch gathers the rows it needs ([`FeatureStore::gather`]).
//!
//! Only what `numpy.save` writes for a 2-D `float32`/`float64` array in C
//! order is read: format versions 1.0 to 3.0, dtype `<f4` or `<f8`
//! (little-endian), `fortran_order: False`, a 2-D shape, and exactly
//! `rows × cols × itemsize` bytes after the header. Anything else is an
//! [`Error::Format`] naming the file and what was wrong.
//!
//! ```
//! use hdgcn::data::npy::{NpyMatrix, write_npy};
//! use hdgcn::data::FeatureStore;
//!
//! let dir = std::env::temp_dir().join(format!("hdgcn-npy-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("x.npy");
//! let x = ndarray::arr2(&[[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]]);
//! write_npy(&path, x.view())?;
//! let m = NpyMatrix::open(&path)?;
//! assert_eq!(m.shape(), (3, 2));
//! let rows: ndarray::Array2<f64> = m.gather(&[2, 0])?;
//! assert_eq!(rows, ndarray::arr2(&[[5.0, 6.0], [1.0, 2.0]]));
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), hdgcn::Error>(())
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;

use super::FeatureStore;
use crate::error::{Error, Result};
use crate::float::Float;

/// Element type of an [`NpyMatrix`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NpyDtype {
    /// `<f4`: little-endian `float32`.
    F32,
    /// `<f8`: little-endian `float64`.
    F64,
}

impl NpyDtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            NpyDtype::F32 => 4,
            NpyDtype::F64 => 8,
        }
    }

    fn descr(self) -> &'static str {
        match self {
            NpyDtype::F32 => "<f4",
            NpyDtype::F64 => "<f8",
        }
    }
}

/// An element type [`write_npy`] can write.
pub trait NpyElement: Copy {
    /// Its `.npy` dtype.
    const DTYPE: NpyDtype;
    /// Its little-endian bytes, appended to `out`.
    fn put_le(self, out: &mut Vec<u8>);
}

impl NpyElement for f32 {
    const DTYPE: NpyDtype = NpyDtype::F32;
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl NpyElement for f64 {
    const DTYPE: NpyDtype = NpyDtype::F64;
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// Writes `a` to `path` as `numpy.save` does (format 1.0, C order,
/// little-endian, header padded to a multiple of 64 bytes), a block of
/// rows at a time.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub fn write_npy<F: NpyElement>(path: &Path, a: ArrayView2<F>) -> Result<()> {
    let io = |e| Error::io(path, e);
    let (rows, cols) = a.dim();
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': ({rows}, {cols}), }}",
        F::DTYPE.descr()
    );
    // magic (6) + version (2) + length (2) + dict + padding + '\n'.
    let unpadded = 10 + dict.len() + 1;
    let pad = unpadded.next_multiple_of(64) - unpadded;
    let mut header = Vec::with_capacity(unpadded + pad);
    header.extend_from_slice(b"\x93NUMPY\x01\x00");
    let hlen = u16::try_from(dict.len() + pad + 1)
        .map_err(|_| Error::InvalidConfig(format!("shape ({rows}, {cols}) is too long")))?;
    header.extend_from_slice(&hlen.to_le_bytes());
    header.extend_from_slice(dict.as_bytes());
    header.extend(std::iter::repeat_n(b' ', pad));
    header.push(b'\n');
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    file.write_all(&header).map_err(io)?;
    let mut buf = Vec::with_capacity(1 << 16);
    for row in a.rows() {
        buf.clear();
        for &v in row.iter() {
            v.put_le(&mut buf);
        }
        file.write_all(&buf).map_err(io)?;
    }
    file.flush().map_err(io)
}

/// A 2-D `.npy` file mapped into memory (read-only): nothing is read until
/// rows are gathered, and the pages read stay in the page cache, not in the
/// process's own allocations, so the file may exceed the memory budget.
///
/// The file must not be changed while it is mapped (the map would see the
/// change; truncation would make reads fault).
#[derive(Debug)]
pub struct NpyMatrix {
    path: PathBuf,
    map: memmap2::Mmap,
    dtype: NpyDtype,
    rows: usize,
    cols: usize,
    data_start: usize,
}

/// Header of a `.npy` file: dtype, shape and where the data starts.
fn parse_header(raw: &[u8]) -> std::result::Result<(NpyDtype, usize, usize, usize), String> {
    let rest = raw
        .strip_prefix(b"\x93NUMPY")
        .ok_or("not an .npy file (bad magic)")?;
    let (major, rest) = match rest {
        [major, _minor, rest @ ..] => (*major, rest),
        _ => return Err("truncated .npy header".into()),
    };
    let (hlen, rest) = match (major, rest) {
        (1, [a, b, rest @ ..]) => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        (2 | 3, [a, b, c, d, rest @ ..]) => (u32::from_le_bytes([*a, *b, *c, *d]) as usize, rest),
        (1..=3, _) => return Err("truncated .npy header".into()),
        _ => return Err(format!("unsupported .npy format version {major}")),
    };
    if hlen > rest.len() {
        return Err(format!(
            "the header claims {hlen} bytes but the file has {} after the preamble",
            rest.len()
        ));
    }
    let header = std::str::from_utf8(&rest[..hlen]).map_err(|_| "non-text .npy header")?;
    let data_start = raw.len() - rest.len() + hlen;
    let field = |key: &str| -> std::result::Result<&str, String> {
        let pat = format!("'{key}':");
        let i = header
            .find(&pat)
            .ok_or_else(|| format!(".npy header lacks {key:?}"))?;
        Ok(header[i + pat.len()..].trim_start())
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or("bad descr in the .npy header")?;
    let dtype = match descr {
        "<f4" => NpyDtype::F32,
        "<f8" => NpyDtype::F64,
        other => {
            return Err(format!(
                "unsupported dtype {other:?}: only little-endian float32 ('<f4') and \
                 float64 ('<f8') are read (convert with x.astype(np.float32))"
            ));
        }
    };
    let fortran = field("fortran_order")?;
    if fortran.starts_with("True") {
        return Err(
            "the array is in Fortran (column-major) order; save it in C order \
             (np.save(path, np.ascontiguousarray(x)))"
                .into(),
        );
    }
    if !fortran.starts_with("False") {
        return Err("bad fortran_order in the .npy header".into());
    }
    let shape = field("shape")?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or("bad shape in the .npy header")?;
    let dims: Vec<&str> = inner
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    let [r, c] = dims[..] else {
        return Err(format!("expected a 2-D array, got shape ({inner})"));
    };
    let parse = |t: &str| {
        t.parse::<usize>()
            .map_err(|_| format!("bad shape ({inner}) in the .npy header"))
    };
    Ok((dtype, parse(r)?, parse(c)?, data_start))
}

impl NpyMatrix {
    /// Maps `path` and checks its header against its size.
    ///
    /// # Errors
    /// [`Error::MissingFile`] if it does not exist, [`Error::Io`] if it
    /// cannot be read or mapped, [`Error::Format`] naming the file for a
    /// bad header, an unsupported dtype (anything but `<f4` and `<f8`),
    /// Fortran order, a shape that is not 2-D, or a data size that
    /// disagrees with the shape.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if !path.exists() {
            return Err(Error::MissingFile(path.to_path_buf()));
        }
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: the map is read-only and private to this value; the
        // documented contract is that the file is not modified meanwhile.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let bad = |reason: String| Error::format(path.display().to_string(), reason);
        let (dtype, rows, cols, data_start) = parse_header(&map).map_err(bad)?;
        let data = (map.len() - data_start) as u64;
        let want = (rows as u64)
            .checked_mul(cols as u64)
            .and_then(|n| n.checked_mul(dtype.size() as u64));
        if want != Some(data) {
            return Err(bad(format!(
                "the header says shape ({rows}, {cols}) of {} = {} bytes of data, \
                 but the file has {data} bytes after its {data_start}-byte header",
                dtype.descr(),
                want.map_or("too many".to_string(), |w| w.to_string())
            )));
        }
        Ok(NpyMatrix {
            path: path.to_path_buf(),
            map,
            dtype,
            rows,
            cols,
            data_start,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// The element type on disk.
    pub fn dtype(&self) -> NpyDtype {
        self.dtype
    }

    /// Bytes of data (the file less its header).
    pub fn data_bytes(&self) -> u64 {
        (self.map.len() - self.data_start) as u64
    }

    /// Row `r` converted into `out` (length `cols`).
    fn read_row<F: Float>(&self, r: usize, out: &mut [F]) {
        let size = self.dtype.size();
        let start = self.data_start + r * self.cols * size;
        let bytes = &self.map[start..start + self.cols * size];
        match self.dtype {
            NpyDtype::F32 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    *o = F::from_f64_lossy(f64::from(v));
                }
            }
            NpyDtype::F64 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(8)) {
                    let v = f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                    *o = F::from_f64_lossy(v);
                }
            }
        }
    }

    /// The whole matrix in memory.
    ///
    /// # Errors
    /// [`Error::OverBudget`] when it does not fit the memory budget (the
    /// reason to keep it mapped and gather batches instead).
    pub fn to_array<F: Float>(&self) -> Result<Array2<F>> {
        let all: Vec<usize> = (0..self.rows).collect();
        self.gather(&all)
    }
}

impl FeatureStore for NpyMatrix {
    fn num_nodes(&self) -> usize {
        self.rows
    }

    fn dim(&self) -> usize {
        self.cols
    }

    fn gather<F: Float>(&self, nodes: &[usize]) -> Result<Array2<F>> {
        super::feature_store::check_gather::<F, _>(self, nodes, &self.path.display().to_string())?;
        let mut out = Array2::<F>::zeros((nodes.len(), self.cols));
        if self.cols > 0 {
            out.as_slice_mut()
                .expect("a fresh array is contiguous")
                .par_chunks_mut(self.cols)
                .zip(nodes.par_iter())
                .for_each(|(row, &r)| self.read_row(r, row));
        }
        Ok(out)
    }
}
