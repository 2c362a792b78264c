//! Sinusoidal position encodings ("Attention Is All You Need").

use ndarray::{Array2, s};

use crate::error::{Error, Result, check_positive};
use crate::float::Float;

/// PyG's `PositionalEncoding(out_channels, base_freq, granularity)`, with an
/// amplitude `scale` on top.
///
/// For a position `x` and `d = out_channels` (even), with `d/2`
/// frequencies `f_i = base_freq^(i / (d/2 - 1))` from 1 down to
/// `base_freq` (PyG's `torch.logspace(0, 1, d/2, base_freq)`; one
/// frequency, 1, when `d = 2`):
///
/// ```text
/// PE(x)[i]       = scale · sin(x / granularity · f_i)     i < d/2
/// PE(x)[d/2 + i] = scale · cos(x / granularity · f_i)
/// ```
///
/// so the sines fill the first half of a row and the cosines the second,
/// as in PyG. It has no parameters. [`GraphClassifier`] can add it to its
/// node inputs, with each node's index inside its graph as the position
/// (for the text graphs of [`doc_graph`], the order in which words first
/// occur), as the HDGCN reference code does.
///
/// [`GraphClassifier`]: crate::models::GraphClassifier
/// [`doc_graph`]: crate::data::text::doc_graph
///
/// ```
/// use hdgcn::nn::PositionalEncoding;
/// let pe = PositionalEncoding::new(4)?; // frequencies 1 and 1e-4
/// let e = pe.encode::<f64>(&[0.0, 2.0])?;
/// assert_eq!(e.row(0).to_vec(), vec![0.0, 0.0, 1.0, 1.0]);
/// assert!((e[[1, 0]] - 2f64.sin()).abs() < 1e-15);
/// assert!((e[[1, 3]] - (2e-4f64).cos()).abs() < 1e-15);
/// assert!(PositionalEncoding::new(3).is_err()); // odd width
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PositionalEncoding {
    out_channels: usize,
    base_freq: f64,
    granularity: f64,
    scale: f64,
}

impl PositionalEncoding {
    /// PyG's defaults: `base_freq = 1e-4`, `granularity = 1`, and scale 1.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] if `out_channels` is zero or odd.
    pub fn new(out_channels: usize) -> Result<Self> {
        if out_channels == 0 || out_channels % 2 == 1 {
            return Err(Error::InvalidConfig(format!(
                "a positional encoding needs a positive even width, got {out_channels}"
            )));
        }
        Ok(PositionalEncoding {
            out_channels,
            base_freq: 1e-4,
            granularity: 1.0,
            scale: 1.0,
        })
    }

    /// Sets the lowest frequency (`0 < base_freq <= 1`).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] outside `(0, 1]` or for NaN.
    pub fn with_base_freq(mut self, base_freq: f64) -> Result<Self> {
        if !(base_freq > 0.0 && base_freq <= 1.0) {
            return Err(Error::InvalidConfig(format!(
                "positional encoding base_freq must be in (0, 1], got {base_freq}"
            )));
        }
        self.base_freq = base_freq;
        Ok(self)
    }

    /// Sets the granularity: positions are divided by it first.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] unless it is positive and finite.
    pub fn with_granularity(mut self, granularity: f64) -> Result<Self> {
        self.granularity = positive_finite("granularity", granularity)?;
        Ok(self)
    }

    /// Sets the amplitude every entry is multiplied by (to match the scale
    /// of the vectors the encoding is added to).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] unless it is positive and finite.
    pub fn with_scale(mut self, scale: f64) -> Result<Self> {
        self.scale = positive_finite("scale", scale)?;
        Ok(self)
    }

    /// Width of each encoding.
    pub fn out_channels(&self) -> usize {
        self.out_channels
    }

    /// The lowest frequency.
    pub fn base_freq(&self) -> f64 {
        self.base_freq
    }

    /// The granularity positions are divided by.
    pub fn granularity(&self) -> f64 {
        self.granularity
    }

    /// The amplitude.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The `out_channels / 2` frequencies, from 1 down to `base_freq`.
    pub fn frequencies(&self) -> Vec<f64> {
        let half = self.out_channels / 2;
        if half == 1 {
            return vec![1.0];
        }
        (0..half)
            .map(|i| self.base_freq.powf(i as f64 / (half - 1) as f64))
            .collect()
    }

    /// One row per position (`positions.len() x out_channels`), computed in
    /// f64 and rounded to `F`.
    ///
    /// # Errors
    /// [`Error::NonFinite`] for a NaN or infinite position.
    pub fn encode<F: Float>(&self, positions: &[f64]) -> Result<Array2<F>> {
        if let Some(i) = positions.iter().position(|p| !p.is_finite()) {
            return Err(Error::NonFinite {
                what: format!("position {i} given to the positional encoding"),
                value: positions[i],
            });
        }
        let freqs = self.frequencies();
        let half = freqs.len();
        let mut out = Array2::zeros((positions.len(), self.out_channels));
        for (mut row, &p) in out.rows_mut().into_iter().zip(positions) {
            let x = p / self.granularity;
            for (i, &f) in freqs.iter().enumerate() {
                let (s, c) = (x * f).sin_cos();
                row[i] = F::from_f64_lossy(self.scale * s);
                row[half + i] = F::from_f64_lossy(self.scale * c);
            }
        }
        Ok(out)
    }

    /// Encodes each node's index inside its graph, for a batch whose graph
    /// `g` holds nodes `ptr[g]..ptr[g + 1]` (as [`DeviceGraph::ptr`]):
    /// every graph's first node gets position 0.
    ///
    /// [`DeviceGraph::ptr`]: crate::conv::DeviceGraph::ptr
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] if `ptr` is empty, does not start at 0 or
    /// decreases.
    pub fn encode_node_indices<F: Float>(&self, ptr: &[usize]) -> Result<Array2<F>> {
        if ptr.first() != Some(&0) || ptr.windows(2).any(|w| w[1] < w[0]) {
            return Err(Error::InvalidConfig(format!(
                "node offsets must start at 0 and not decrease, got {ptr:?}"
            )));
        }
        // Every graph's rows are a prefix of the largest graph's: encode
        // 0..longest once and copy, instead of one sin/cos per node.
        let longest = ptr.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let positions: Vec<f64> = (0..longest).map(|i| i as f64).collect();
        let table = self.encode::<F>(&positions)?;
        let n = ptr[ptr.len() - 1];
        let mut out = Array2::zeros((n, self.out_channels));
        for w in ptr.windows(2) {
            out.slice_mut(s![w[0]..w[1], ..])
                .assign(&table.slice(s![..w[1] - w[0], ..]));
        }
        Ok(out)
    }
}

/// `v` if it is positive and finite, else an error naming the setting.
fn positive_finite(name: &str, v: f64) -> Result<f64> {
    check_positive(format_args!("positional encoding {name}"), v)?;
    Ok(v)
}
