//! The crate's single error type and its `Result` alias.

use std::path::PathBuf;

/// Every fallible operation in `hdgcn` returns this error.
///
/// Variants are structured so that callers can match on what went wrong and
/// the `Display` text names the offending value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two shapes that must agree do not.
    #[error("shape mismatch in {op}: expected {expected}, got {got}")]
    ShapeMismatch {
        /// Operation or argument that checked the shapes.
        op: &'static str,
        /// What was expected, e.g. `"(2708, 1433)"`.
        expected: String,
        /// What was given.
        got: String,
    },
    /// An edge (or index) points at a node that does not exist.
    #[error("node index {index} out of range for a graph with {num_nodes} nodes")]
    NodeOutOfRange {
        /// The offending index.
        index: usize,
        /// Number of nodes in the graph.
        num_nodes: usize,
    },
    /// An index into rows, classes or segments is out of range.
    #[error("index {index} out of range in {what} (length {len})")]
    IndexOutOfRange {
        /// What was indexed.
        what: &'static str,
        /// The offending index.
        index: usize,
        /// Length of the indexed dimension.
        len: usize,
    },
    /// A value is NaN or infinite where a finite number is required.
    #[error("non-finite value {value} in {what}")]
    NonFinite {
        /// Where the value was found.
        what: String,
        /// The value itself.
        value: f64,
    },
    /// A negative edge weight where the normalisation requires non-negative weights.
    #[error("negative edge weight {weight} on edge ({src}, {dst}): {why}")]
    NegativeWeight {
        /// Source node.
        src: usize,
        /// Target node.
        dst: usize,
        /// The weight.
        weight: f64,
        /// Why negative weights are not allowed here.
        why: &'static str,
    },
    /// A graph (or batch, or segment) with no nodes where one is required.
    #[error("empty input: {0}")]
    Empty(String),
    /// A hyper-parameter or option is outside its valid range.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// A data file could not be parsed.
    #[error("malformed data in {path}: {reason}")]
    Format {
        /// The file (or logical source) that was being read.
        path: String,
        /// What was wrong with it.
        reason: String,
    },
    /// A required file is missing.
    #[error("file not found: {}", .0.display())]
    MissingFile(PathBuf),
    /// A numerical routine did not converge.
    #[error("numerical failure: {0}")]
    Numerical(String),
    /// A backend (device) is unavailable or failed.
    #[error("backend error: {0}")]
    Backend(String),
    /// An autograd misuse (e.g. backward from a non-scalar).
    #[error("autograd: {0}")]
    Autograd(String),
    /// An I/O error, with the path involved.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A well-formed checkpoint that does not fit the model it is loaded
    /// into: missing or unexpected parameter names, shapes or element types.
    #[error("checkpoint {} does not match the model: {}", path.display(), differences.join("; "))]
    CheckpointMismatch {
        /// The checkpoint file.
        path: PathBuf,
        /// Every difference found, e.g. `"missing parameter conv1.lin.weight"`.
        differences: Vec<String>,
    },
    /// A size from a setting or a file that the memory budget
    /// ([`crate::limits`]) cannot hold, refused before anything is allocated.
    #[error(
        "{what} needs {} ({needed} bytes), more than the memory budget of {} ({budget} bytes); \
         make it smaller, or raise the budget with {} (e.g. {}={}GiB)",
        crate::limits::format_bytes(*needed),
        crate::limits::format_bytes(*budget),
        crate::limits::BUDGET_ENV,
        crate::limits::BUDGET_ENV,
        needed.div_ceil(1 << 30)
    )]
    OverBudget {
        /// What needs the memory: the setting and its value, or the tensor
        /// and its shape (e.g. `"Linear weight of 1433 x 1000000"`).
        what: String,
        /// Bytes needed.
        needed: u64,
        /// The budget in bytes ([`crate::limits::MemoryBudget::current`]).
        budget: u64,
    },
}

/// `Result` with [`enum@Error`] as the error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::ShapeMismatch`].
    pub fn shape(op: &'static str, expected: impl Into<String>, got: impl Into<String>) -> Self {
        Error::ShapeMismatch {
            op,
            expected: expected.into(),
            got: got.into(),
        }
    }

    /// Shorthand for [`Error::Format`].
    pub fn format(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// Checks that the setting `what` is finite and `> 0`
/// ([`Error::InvalidConfig`] naming it and the value otherwise).
pub(crate) fn check_positive(what: impl std::fmt::Display, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "{what} must be finite and > 0, got {v}"
        )))
    }
}

/// Checks that the setting `what` is finite and `>= 0`
/// ([`Error::InvalidConfig`] naming it and the value otherwise).
pub(crate) fn check_non_negative(what: impl std::fmt::Display, v: f64) -> Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "{what} must be finite and >= 0, got {v}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_positive_takes_only_finite_values_above_zero() {
        assert!(check_positive("x", 1e-300).is_ok());
        assert!(check_positive("x", 3.0).is_ok());
        for bad in [0.0, -0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let e = check_positive(format_args!("layer: {}", "eps"), bad).unwrap_err();
            assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
            assert_eq!(
                e.to_string(),
                format!("invalid configuration: layer: eps must be finite and > 0, got {bad}")
            );
        }
    }

    #[test]
    fn check_non_negative_takes_zero_but_not_negatives_or_non_finite() {
        assert!(check_non_negative("x", 0.0).is_ok());
        assert!(check_non_negative("x", 2.5).is_ok());
        for bad in [-1e-300, -1.0, f64::NAN, f64::INFINITY] {
            let e = check_non_negative("lr", bad).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("invalid configuration: lr must be finite and >= 0, got {bad}")
            );
        }
    }
}
