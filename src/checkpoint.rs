//! Saving and loading model parameters as [safetensors] files.
//!
//! A checkpoint holds every named parameter of a [`Module`] (names from
//! [`Module::named_params`], e.g. `conv1.lin.weight`) as a 2-D tensor with
//! its shape and element type (`F32` or `F64`, from the backend's
//! [`Float`]), so it can be read by the Python `safetensors` package too.
//!
//! * [`save_checkpoint`] writes atomically: a temporary file in the same
//!   directory, flushed to disk, then renamed over the target. A failed save
//!   leaves any previous checkpoint intact and removes the temporary file.
//!   It replaces only a regular, writable file (or creates a missing one):
//!   a symbolic link, a read-only file, a directory, a FIFO or a device at
//!   the path is refused and left as it is.
//!
//!   A process killed outright (`SIGKILL`, power loss, or any signal whose
//!   default action ends the process, `SIGINT` included) between creating
//!   the temporary file and the rename cannot clean up: it may leave a file
//!   `.NAME.PID.N.tmp` next to `NAME` (PID the process id, N a counter),
//!   complete or partial. The file at the path itself is then the previous
//!   checkpoint, intact, or none if there was none; never a partial one.
//!   Such leftovers can be deleted at any time.
//! * [`load_checkpoint`] validates everything (names match exactly, shapes,
//!   element types) before assigning anything: on error the model is
//!   unchanged.
//! * [`load_pytorch_state_dict`] loads a PyTorch / PyG `state_dict` saved
//!   with `safetensors.torch.save_file(model.state_dict(), path)`, in
//!   PyTorch's layouts (`[out, in]` weights, 1-D biases), with the same
//!   checks, naming every tensor that is missing, unexpected, or of the
//!   wrong shape or dtype.
//!
//! ```
//! use hdgcn::backend::Cpu;
//! use hdgcn::checkpoint::{load_checkpoint, save_checkpoint};
//! use hdgcn::nn::{Linear, Module};
//! use rand::SeedableRng;
//!
//! let cpu = Cpu::<f32>::new();
//! let mut rng = rand::rngs::StdRng::seed_from_u64(0);
//! let a = Linear::new(&cpu, 3, 2, true, &mut rng)?;
//! let b = Linear::new(&cpu, 3, 2, true, &mut rng)?;
//! let dir = std::env::temp_dir().join(format!("hdgcn-doc-ckpt-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("linear.safetensors");
//! save_checkpoint(&a, &path)?;
//! load_checkpoint(&b, &path)?;
//! assert_eq!(a.weight.to_array(), b.weight.to_array());
//! // A model of another shape is rejected and left as it was.
//! let c = Linear::new(&cpu, 4, 2, true, &mut rng)?;
//! let before = c.weight.to_array();
//! assert!(matches!(load_checkpoint(&c, &path), Err(hdgcn::Error::CheckpointMismatch { .. })));
//! assert_eq!(c.weight.to_array(), before);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), hdgcn::Error>(())
//! ```
//!
//! [safetensors]: https://huggingface.co/docs/safetensors

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ndarray::Array2;
use safetensors::tensor::{Dtype, SafeTensors, View};

use crate::autograd::Param;
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::float::Float;
use crate::nn::{Module, TorchLayout};

/// The safetensors element type of a backend element type.
fn dtype_of<F: Float>() -> Result<Dtype> {
    match F::NAME {
        "f32" => Ok(Dtype::F32),
        "f64" => Ok(Dtype::F64),
        other => Err(Error::InvalidConfig(format!(
            "checkpoints support f32 and f64 parameters, not {other}"
        ))),
    }
}

/// One parameter's bytes, little-endian, row-major.
struct Tensor {
    dtype: Dtype,
    shape: [usize; 2],
    bytes: Vec<u8>,
}

impl View for &Tensor {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

fn encode<F: Float>(a: &Array2<F>, dtype: Dtype) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len() * dtype.bitsize() / 8);
    // `iter` walks in logical (row-major) order whatever the memory layout.
    for &v in a.iter() {
        match dtype {
            Dtype::F32 => out.extend_from_slice(&(v.to_f64_exact() as f32).to_le_bytes()),
            _ => out.extend_from_slice(&v.to_f64_exact().to_le_bytes()),
        }
    }
    out
}

fn decode<F: Float>(bytes: &[u8], dtype: Dtype, shape: (usize, usize)) -> Array2<F> {
    let vals: Vec<F> = match dtype {
        Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|c| F::from_f64_lossy(f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64))
            .collect(),
        _ => bytes
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                F::from_f64_lossy(f64::from_le_bytes(b))
            })
            .collect(),
    };
    // Lengths were validated against the shape by the caller.
    Array2::from_shape_vec(shape, vals).unwrap_or_else(|_| Array2::zeros(shape))
}

/// Named parameters, rejecting a model that reports one name twice.
fn unique_params<B: Backend, M: Module<B> + ?Sized>(
    model: &M,
) -> Result<BTreeMap<String, Param<B>>> {
    let mut map = BTreeMap::new();
    for (name, p) in model.named_params() {
        if map.insert(name.clone(), p).is_some() {
            return Err(Error::InvalidConfig(format!(
                "the model names two parameters '{name}'; checkpoints need unique names"
            )));
        }
    }
    Ok(map)
}

/// Saves every named parameter of `model` to `path` as a safetensors file,
/// atomically: the data goes to a temporary file in the same directory,
/// which is flushed to disk and then renamed over `path`.
///
/// Only a missing path or a regular, writable file is replaced: a symbolic
/// link (even to a regular file), a read-only file, a directory, a FIFO, a
/// device or a socket at `path` is refused with [`Error::Io`] and left
/// untouched. See the [module docs](self) for what a killed process can
/// leave behind.
///
/// # Errors
/// [`Error::Io`] with the path if the file cannot be written or the path
/// is refused (any previous file at `path` is then left intact, and the
/// temporary file removed); [`Error::InvalidConfig`] if the model reports
/// a parameter name twice.
pub fn save_checkpoint<B: Backend, M: Module<B> + ?Sized>(model: &M, path: &Path) -> Result<()> {
    let dtype = dtype_of::<B::Elem>()?;
    let params = unique_params(model)?;
    let tensors: Vec<(String, Tensor)> = params
        .into_iter()
        .map(|(name, p)| {
            let a = p.to_array();
            let (r, c) = a.dim();
            let bytes = encode(&a, dtype);
            (
                name,
                Tensor {
                    dtype,
                    shape: [r, c],
                    bytes,
                },
            )
        })
        .collect();
    let mut meta = std::collections::HashMap::new();
    meta.insert("format".to_string(), "hdgcn".to_string());
    let bytes = safetensors::serialize(tensors.iter().map(|(n, t)| (n.as_str(), t)), Some(meta))
        .map_err(|e| Error::format(path.display().to_string(), e.to_string()))?;
    write_atomic(path, &bytes, |_| Ok(()))
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` through a synced temporary file and a rename.
/// `before_rename` runs once the temporary file is complete (a test hook
/// for failures at the last moment).
fn write_atomic(
    path: &Path,
    bytes: &[u8],
    before_rename: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<()> {
    let file_name = path.file_name().ok_or_else(|| {
        Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "checkpoint path has no file name",
            ),
        )
    })?;
    check_replaceable(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        file_name.to_string_lossy(),
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| -> std::io::Result<()> {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        before_rename(&tmp)?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    // Make the rename itself durable (best effort: not every platform can
    // open a directory).
    #[cfg(unix)]
    if let Ok(d) = fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Checks that a save may replace `path`: it is missing, or a regular file
/// (not a symbolic link) that is not read-only.
fn check_replaceable(path: &Path) -> Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(path, e)),
    };
    let t = meta.file_type();
    if t.is_symlink() {
        return Err(Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a symbolic link; refusing to replace it with a checkpoint (save to its target \
                 instead)",
            ),
        ));
    }
    if !t.is_file() {
        return Err(crate::data::not_regular(path, t, "replace"));
    }
    if meta.permissions().readonly() {
        return Err(Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "a read-only file; refusing to overwrite it",
            ),
        ));
    }
    Ok(())
}

/// Bytes a checkpoint for `params` may take: every parameter at 8 bytes an
/// element, doubled, plus 16 MiB for the header (names, shapes, metadata).
fn checkpoint_cap<'a, B: Backend>(params: impl IntoIterator<Item = &'a Param<B>>) -> u64 {
    let elems = params.into_iter().fold(0u64, |acc, p| {
        let (r, c) = p.shape();
        acc.saturating_add((r as u64).saturating_mul(c as u64))
    });
    elems.saturating_mul(16).saturating_add(16 << 20)
}

/// Loads the parameters saved by [`save_checkpoint`] into `model`.
///
/// Every check runs before any parameter is assigned, so on error the model
/// is exactly as it was.
///
/// # Errors
/// [`Error::Io`] with the path if the file cannot be read (e.g. it does not
/// exist); [`Error::Format`] if it is not a valid safetensors file (e.g.
/// truncated) or holds a tensor that is not 2-D;
/// [`Error::CheckpointMismatch`] listing every missing or unexpected name
/// and every shape or element-type difference;
/// [`Error::NonFinite`] for a NaN or infinite value.
///
/// Only a regular file is read (a FIFO or device is an [`Error::Io`]), and
/// only up to a size derived from the model (16 bytes per parameter
/// element plus 16 MiB): a larger file is an [`Error::Format`].
pub fn load_checkpoint<B: Backend, M: Module<B> + ?Sized>(model: &M, path: &Path) -> Result<()> {
    let params = unique_params(model)?;
    let bytes =
        crate::data::read_file_capped_io(path, checkpoint_cap(params.values()), "a checkpoint")?;
    load_params(params, &bytes, path)
}

/// [`load_checkpoint`] from the bytes of a checkpoint file; `name` names it
/// in errors. Same checks and errors (but no size cap).
pub fn load_checkpoint_bytes<B: Backend, M: Module<B> + ?Sized>(
    model: &M,
    bytes: &[u8],
    name: &str,
) -> Result<()> {
    load_params(unique_params(model)?, bytes, Path::new(name))
}

/// The names `expected` lacks in `in_file` ("missing {noun} NAME") and those
/// `in_file` has beyond `expected` ("unexpected {noun} NAME"), in order.
fn name_differences<'a>(
    expected: impl Iterator<Item = &'a String> + Clone,
    in_file: &BTreeSet<&str>,
    noun: &str,
) -> Vec<String> {
    let mut out: Vec<String> = expected
        .clone()
        .filter(|name| !in_file.contains(name.as_str()))
        .map(|name| format!("missing {noun} {name}"))
        .collect();
    let known: BTreeSet<&str> = expected.map(String::as_str).collect();
    out.extend(
        in_file
            .iter()
            .filter(|name| !known.contains(**name))
            .map(|name| format!("unexpected {noun} {name}")),
    );
    out
}

fn load_params<B: Backend>(
    params: BTreeMap<String, Param<B>>,
    bytes: &[u8],
    path: &Path,
) -> Result<()> {
    let dtype = dtype_of::<B::Elem>()?;
    let shown = path.display().to_string();
    let st = SafeTensors::deserialize(bytes).map_err(|e| Error::format(&shown, e.to_string()))?;

    let in_file: BTreeSet<&str> = st.names().into_iter().collect();
    let mut differences = name_differences(params.keys(), &in_file, "parameter");
    let mut staged = Vec::with_capacity(params.len());
    for (name, p) in &params {
        let Ok(view) = st.tensor(name) else { continue };
        let shape = view.shape();
        if shape.len() != 2 {
            return Err(Error::format(
                &shown,
                format!("tensor {name} has {} dimensions, expected 2", shape.len()),
            ));
        }
        let (r, c) = (shape[0], shape[1]);
        let want = p.shape();
        let mut ok = true;
        if (r, c) != want {
            differences.push(format!(
                "{name}: shape ({r}, {c}) in the file, ({}, {}) in the model",
                want.0, want.1
            ));
            ok = false;
        }
        if view.dtype() != dtype {
            differences.push(format!(
                "{name}: dtype {:?} in the file, {:?} in the model",
                view.dtype(),
                dtype
            ));
            ok = false;
        }
        if ok {
            let a: Array2<B::Elem> = decode(view.data(), dtype, (r, c));
            if let Some(v) = a.iter().find(|v| !num_traits::Float::is_finite(**v)) {
                return Err(Error::NonFinite {
                    what: format!("checkpoint {shown} tensor {name}"),
                    value: v.to_f64_exact(),
                });
            }
            staged.push((p, a));
        }
    }
    if !differences.is_empty() {
        return Err(Error::CheckpointMismatch {
            path: path.to_path_buf(),
            differences,
        });
    }
    for (p, a) in staged {
        p.set(p.backend().upload(a.view()))?;
    }
    Ok(())
}

/// Loads a PyTorch `state_dict` saved with
/// `safetensors.torch.save_file(model.state_dict(), path)` into `model`.
///
/// Names must match [`Module::named_params`] exactly (the crate uses PyG's
/// names: `conv1.lin.weight`, `conv1.bias`, `conv1.lins.0.weight`, ...).
/// Each tensor is read in PyTorch's layout ([`TorchLayout`]): a
/// [`Linear`](crate::nn::Linear) weight is `[out, in]` in the file and is
/// transposed into the crate's `in x out`; a 1-D tensor of length `n` (a
/// bias) fills a `1 x n` parameter; an attention vector of PyG's
/// `GATConv` (`[1, heads, C]`, [`TorchLayout::LeadingOne`]) fills a
/// `heads x C` parameter; any other parameter has the same 2-D shape in
/// both. The element type must be the backend's (`F32` for
/// `f32`, `F64` for `f64`).
///
/// As [`load_checkpoint`], every check runs before any parameter is
/// assigned, so on error the model is exactly as it was, and only a
/// regular file of at most 16 bytes per parameter element plus 16 MiB is
/// read.
///
/// ```
/// # fn main() -> hdgcn::Result<()> {
/// use hdgcn::backend::Cpu;
/// use hdgcn::checkpoint::load_pytorch_state_dict;
/// use hdgcn::models::NodeClassifier;
/// use rand::SeedableRng;
///
/// // Saved from a PyG model `conv1 = GCNConv(5, 4)`, `conv2 = GCNConv(4, 3)`
/// // (see tests/fixtures/gen_state_dict.py).
/// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
///     .join("tests/fixtures/state_dict_gcn.safetensors");
/// let cpu = Cpu::<f32>::new();
/// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
/// let model = NodeClassifier::gcn(&cpu, 5, 4, 3, 0.5, &mut rng)?;
/// load_pytorch_state_dict(&model, &path)?;
///
/// // A model of other widths is refused, naming the tensors that differ.
/// let wide = NodeClassifier::gcn(&cpu, 5, 8, 3, 0.5, &mut rng)?;
/// let err = load_pytorch_state_dict(&wide, &path).unwrap_err();
/// assert!(err.to_string().contains("conv1.lin.weight"), "{err}");
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`Error::Io`] with the path if the file cannot be read;
/// [`Error::Format`] if it is not a valid safetensors file or is larger
/// than the cap; [`Error::CheckpointMismatch`] listing every missing or
/// unexpected tensor and every tensor of the wrong shape or element type,
/// by name; [`Error::NonFinite`] for a NaN or infinite value;
/// [`Error::InvalidConfig`] if the model names two parameters alike.
pub fn load_pytorch_state_dict<B: Backend, M: Module<B> + ?Sized>(
    model: &M,
    path: &Path,
) -> Result<()> {
    let params = unique_params_with_layout(model)?;
    let cap = checkpoint_cap(params.values().map(|(p, _)| p));
    let bytes = crate::data::read_file_capped_io(path, cap, "a PyTorch state_dict")?;
    load_torch_params(params, &bytes, path)
}

/// [`load_pytorch_state_dict`] from the bytes of a safetensors file; `name`
/// names it in errors. Same checks and errors (but no size cap).
pub fn load_pytorch_state_dict_bytes<B: Backend, M: Module<B> + ?Sized>(
    model: &M,
    bytes: &[u8],
    name: &str,
) -> Result<()> {
    load_torch_params(unique_params_with_layout(model)?, bytes, Path::new(name))
}

type LayoutParams<B> = BTreeMap<String, (Param<B>, TorchLayout)>;

fn unique_params_with_layout<B: Backend, M: Module<B> + ?Sized>(
    model: &M,
) -> Result<LayoutParams<B>> {
    let mut map = BTreeMap::new();
    for (name, p, layout) in model.named_params_with_layout() {
        if map.insert(name.clone(), (p, layout)).is_some() {
            return Err(Error::InvalidConfig(format!(
                "the model names two parameters '{name}'; checkpoints need unique names"
            )));
        }
    }
    Ok(map)
}

fn shape_list(s: &[usize]) -> String {
    let parts: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

fn load_torch_params<B: Backend>(params: LayoutParams<B>, bytes: &[u8], path: &Path) -> Result<()> {
    let dtype = dtype_of::<B::Elem>()?;
    let shown = path.display().to_string();
    let st = SafeTensors::deserialize(bytes).map_err(|e| Error::format(&shown, e.to_string()))?;

    let in_file: BTreeSet<&str> = st.names().into_iter().collect();
    let mut differences = name_differences(params.keys(), &in_file, "tensor");
    let mut staged = Vec::with_capacity(params.len());
    for (name, (p, layout)) in &params {
        let Ok(view) = st.tensor(name) else { continue };
        let shape = view.shape();
        let (r, c) = p.shape();
        // The file's (rows, cols) in PyTorch's layout, if the shape fits.
        let fits = match (*layout, shape) {
            (TorchLayout::Same, &[n]) if r == 1 && n == c => Some((1, c)),
            (TorchLayout::Same, &[a, b]) if (a, b) == (r, c) => Some((r, c)),
            (TorchLayout::Transposed, &[a, b]) if (a, b) == (c, r) => Some((c, r)),
            (TorchLayout::LeadingOne, &[1, a, b]) if (a, b) == (r, c) => Some((r, c)),
            _ => None,
        };
        let mut ok = true;
        if fits.is_none() {
            let want = match layout {
                TorchLayout::Same if r == 1 => format!("[{c}] or [1, {c}]"),
                TorchLayout::Same => format!("[{r}, {c}]"),
                TorchLayout::Transposed => {
                    format!("[{c}, {r}] (PyTorch's [out, in] of the model's {r} x {c})")
                }
                TorchLayout::LeadingOne => format!("[1, {r}, {c}]"),
            };
            differences.push(format!(
                "{name}: wrong shape {} in the file, expected {want}",
                shape_list(shape)
            ));
            ok = false;
        }
        if view.dtype() != dtype {
            differences.push(format!(
                "{name}: wrong dtype {:?} in the file, {:?} in the model",
                view.dtype(),
                dtype
            ));
            ok = false;
        }
        if let (true, Some(dims)) = (ok, fits) {
            let a: Array2<B::Elem> = decode(view.data(), dtype, dims);
            if let Some(v) = a.iter().find(|v| !num_traits::Float::is_finite(**v)) {
                return Err(Error::NonFinite {
                    what: format!("state_dict {shown} tensor {name}"),
                    value: v.to_f64_exact(),
                });
            }
            let a = match layout {
                TorchLayout::Same | TorchLayout::LeadingOne => a,
                TorchLayout::Transposed => a.t().as_standard_layout().into_owned(),
            };
            staged.push((p, a));
        }
    }
    if !differences.is_empty() {
        return Err(Error::CheckpointMismatch {
            path: path.to_path_buf(),
            differences,
        });
    }
    for (p, a) in staged {
        p.set(p.backend().upload(a.view()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hdgcn-ckpt-unit-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn failure_before_rename_keeps_previous_file_and_removes_temp() {
        let dir = scratch("fail");
        let path = dir.join("model.safetensors");
        write_atomic(&path, b"previous", |_| Ok(())).unwrap();
        let err = write_atomic(&path, b"new contents", |tmp| {
            assert_eq!(fs::read(tmp).unwrap(), b"new contents");
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(
            matches!(&err, Error::Io { path: p, .. } if p == &path),
            "{err}"
        );
        assert_eq!(fs::read(&path).unwrap(), b"previous");
        let left: Vec<_> = fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "temporary file left behind: {left:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn encode_decode_round_trip() {
        let a = ndarray::arr2(&[[1.5f64, -2.25], [3.0, 1e-30]]);
        for dtype in [Dtype::F32, Dtype::F64] {
            let b: Array2<f64> = decode(&encode(&a, dtype), dtype, (2, 2));
            assert_eq!(
                b,
                a.mapv(|v| if dtype == Dtype::F32 {
                    v as f32 as f64
                } else {
                    v
                })
            );
        }
        // Non-standard layouts are written in logical order.
        let t = a.t().to_owned();
        let b: Array2<f64> = decode(&encode(&a.t().to_owned(), Dtype::F64), Dtype::F64, (2, 2));
        assert_eq!(b, t);
        let b: Array2<f64> = decode(&encode(&a.reversed_axes(), Dtype::F64), Dtype::F64, (2, 2));
        assert_eq!(b, t);
    }
}
