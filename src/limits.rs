//! A memory budget, checked before sizes that come from settings or files
//! are allocated.
//!
//! Linux overcommits memory: asking the allocator whether a block can be
//! had (`try_reserve`) says yes to far more than the machine holds, and the
//! process is killed (or aborts) only when the pages are touched. So every
//! size that a user setting or a file controls (a layer width, a Chebyshev
//! order, a number of layers, a vocabulary) is compared, before anything is
//! allocated, with a budget in bytes:
//!
//! 1. a budget set for the current thread ([`MemoryBudget::scope`]), else
//! 2. one set for the process ([`set_process_budget`]), else
//! 3. `HDGCN_MEMORY_BUDGET` ([`BUDGET_ENV`]: `"8GiB"`, `"500MB"`, `"123456"`
//!    bytes; see [`MemoryBudget::parse`]), else
//! 4. the machine's memory ([`MemoryBudget::machine`]): the smaller of
//!    `MemTotal` in `/proc/meminfo` and the cgroup v2 limit
//!    (`/sys/fs/cgroup/memory.max`) where they can be read, else
//!    [`FALLBACK_BUDGET`] (8 GiB).
//!
//! Layers check each parameter tensor ([`check_tensor`]) and their total
//! ([`check_elements`]); the runners also check an estimate of a whole run
//! ([`training_bytes`]) before loading or building anything. A size over
//! the budget is [`Error::OverBudget`], naming the setting, the bytes needed
//! and the budget; a size whose byte count overflows the address space is
//! [`Error::InvalidConfig`] ("too large to allocate").
//!
//! ```
//! use hdgcn::limits::MemoryBudget;
//! use hdgcn::nn::Linear;
//! use rand::SeedableRng;
//!
//! let cpu = hdgcn::backend::Cpu::<f32>::new();
//! let mut rng = rand::rngs::StdRng::seed_from_u64(0);
//! // 1433 x 1_000_000 f32 weights are 5.3 GiB: refused before allocating.
//! let err = MemoryBudget::parse("1GiB")?
//!     .scope(|| Linear::new(&cpu, 1433, 1_000_000, true, &mut rng))
//!     .unwrap_err();
//! assert!(matches!(err, hdgcn::Error::OverBudget { .. }), "{err}");
//! assert!(err.to_string().contains("HDGCN_MEMORY_BUDGET"), "{err}");
//! # Ok::<(), hdgcn::Error>(())
//! ```

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// The environment variable that sets the budget (`"8GiB"`, `"500MB"`, bytes).
pub const BUDGET_ENV: &str = "HDGCN_MEMORY_BUDGET";

/// The budget where neither the variable nor the machine's memory can be
/// read: 8 GiB.
pub const FALLBACK_BUDGET: u64 = 8 << 30;

/// A memory budget in bytes ([`MemoryBudget::current`] is the one in force).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    bytes: u64,
}

thread_local! {
    static THREAD_BUDGET: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The process-wide budget; 0 when none is set.
static PROCESS_BUDGET: AtomicU64 = AtomicU64::new(0);

impl MemoryBudget {
    /// A budget of `bytes` (at least 1).
    pub fn from_bytes(bytes: u64) -> Self {
        MemoryBudget {
            bytes: bytes.max(1),
        }
    }

    /// The budget in bytes.
    pub fn bytes(self) -> u64 {
        self.bytes
    }

    /// Parses a size: a number of bytes (`"123456"`), or a number (with a
    /// fraction if wanted) followed by a unit, in any case and with or
    /// without a space: `B`, `KB`/`MB`/`GB`/`TB` (powers of 1000),
    /// `KiB`/`MiB`/`GiB`/`TiB` or `K`/`M`/`G`/`T` (powers of 1024).
    ///
    /// ```
    /// use hdgcn::limits::MemoryBudget;
    /// assert_eq!(MemoryBudget::parse("8GiB")?.bytes(), 8 << 30);
    /// assert_eq!(MemoryBudget::parse("500MB")?.bytes(), 500_000_000);
    /// assert_eq!(MemoryBudget::parse("1.5 g")?.bytes(), 3 << 29);
    /// assert_eq!(MemoryBudget::parse("4096")?.bytes(), 4096);
    /// assert!(MemoryBudget::parse("lots").is_err());
    /// assert!(MemoryBudget::parse("0").is_err());
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for text that is not a positive size.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: &str| {
            Error::InvalidConfig(format!(
                "memory budget {text:?}: {why} (e.g. \"8GiB\", \"500MB\" or a number of bytes)"
            ))
        };
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, unit) = (t[..split].trim(), t[split..].trim());
        let value: f64 = number.parse().map_err(|_| bad("not a number"))?;
        let scale: u64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            "tb" => 1_000_000_000_000,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            "t" | "tib" => 1 << 40,
            _ => return Err(bad("unknown unit")),
        };
        let bytes = value * scale as f64;
        if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
            return Err(bad("must be at least 1 byte and below 16 EiB"));
        }
        Ok(MemoryBudget::from_bytes(bytes as u64))
    }

    /// The machine's memory: the smaller of `MemTotal` (`/proc/meminfo`)
    /// and the cgroup v2 limit (`/sys/fs/cgroup/memory.max`) where they can
    /// be read, else [`FALLBACK_BUDGET`]. Read once per process.
    pub fn machine() -> Self {
        static MACHINE: OnceLock<u64> = OnceLock::new();
        let bytes = *MACHINE.get_or_init(|| {
            let total = std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|s| mem_total_bytes(&s));
            let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok());
            match (total, cgroup) {
                (Some(t), Some(c)) => t.min(c),
                (Some(t), None) => t,
                (None, Some(c)) => c,
                (None, None) => FALLBACK_BUDGET,
            }
        });
        MemoryBudget::from_bytes(bytes)
    }

    /// `HDGCN_MEMORY_BUDGET` when set, else [`MemoryBudget::machine`].
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the variable when it is set but not
    /// a size ([`MemoryBudget::parse`]).
    pub fn from_env() -> Result<Self> {
        match std::env::var(BUDGET_ENV) {
            Ok(v) => MemoryBudget::parse(&v).map_err(|e| match e {
                Error::InvalidConfig(m) => Error::InvalidConfig(format!("{BUDGET_ENV}: {m}")),
                other => other,
            }),
            Err(std::env::VarError::NotPresent) => Ok(MemoryBudget::machine()),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::InvalidConfig(format!(
                "{BUDGET_ENV} is not valid UTF-8"
            ))),
        }
    }

    /// The budget in force on this thread: the one of an enclosing
    /// [`MemoryBudget::scope`], else the process's ([`set_process_budget`]),
    /// else [`MemoryBudget::from_env`].
    ///
    /// # Errors
    /// As [`MemoryBudget::from_env`].
    pub fn current() -> Result<Self> {
        if let Some(b) = THREAD_BUDGET.with(Cell::get) {
            return Ok(MemoryBudget::from_bytes(b));
        }
        match PROCESS_BUDGET.load(Ordering::Relaxed) {
            0 => MemoryBudget::from_env(),
            b => Ok(MemoryBudget::from_bytes(b)),
        }
    }

    /// Runs `f` with this budget in force on the current thread (and
    /// restores the previous one after, also when `f` panics). Tests use it
    /// to check refusals with a small budget without touching the process.
    pub fn scope<T>(self, f: impl FnOnce() -> T) -> T {
        struct Restore(Option<u64>);
        impl Drop for Restore {
            fn drop(&mut self) {
                THREAD_BUDGET.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(THREAD_BUDGET.with(|c| c.replace(Some(self.bytes))));
        f()
    }

    /// `Ok` when `bytes` fit this budget; [`Error::OverBudget`] naming
    /// `what` otherwise, and [`Error::InvalidConfig`] when the size
    /// overflowed (`None`) or exceeds the address space.
    ///
    /// # Errors
    /// As above.
    pub fn check(self, what: impl std::fmt::Display, bytes: Option<u64>) -> Result<()> {
        match bytes {
            Some(b) if b <= isize::MAX as u64 => {
                if b <= self.bytes {
                    Ok(())
                } else {
                    Err(Error::OverBudget {
                        what: what.to_string(),
                        needed: b,
                        budget: self.bytes,
                    })
                }
            }
            _ => Err(Error::InvalidConfig(format!(
                "{what} is too large to allocate (its size in bytes overflows the address space)"
            ))),
        }
    }
}

/// Sets (`Some`) or clears (`None`: back to `HDGCN_MEMORY_BUDGET` or the
/// machine's memory) the budget of the whole process. A thread's
/// [`MemoryBudget::scope`] takes precedence.
pub fn set_process_budget(budget: Option<MemoryBudget>) {
    PROCESS_BUDGET.store(budget.map_or(0, MemoryBudget::bytes), Ordering::Relaxed);
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Checks `bytes` against the current budget ([`MemoryBudget::current`],
/// [`MemoryBudget::check`]).
///
/// # Errors
/// [`Error::OverBudget`] naming `what`; [`Error::InvalidConfig`] for a size
/// that overflowed (`None`) or a malformed `HDGCN_MEMORY_BUDGET`.
pub fn check_bytes(what: impl std::fmt::Display, bytes: Option<u64>) -> Result<()> {
    MemoryBudget::current()?.check(what, bytes)
}

/// Checks `count` values of `T` (`None`: a count that overflowed) against
/// the current budget.
///
/// # Errors
/// As [`check_bytes`].
pub fn check_elements<T>(what: impl std::fmt::Display, count: Option<usize>) -> Result<()> {
    let bytes = count
        .and_then(|n| n.checked_mul(std::mem::size_of::<T>()))
        .and_then(|b| u64::try_from(b).ok());
    check_bytes(what, bytes)
}

/// Checks a `rows x cols` tensor of `T` against the current budget; the
/// message names `what` and the shape.
///
/// # Errors
/// As [`check_bytes`].
pub fn check_tensor<T>(what: &str, rows: usize, cols: usize) -> Result<()> {
    check_elements::<T>(
        format_args!("{what} of {rows} x {cols}"),
        rows.checked_mul(cols),
    )
}

/// How many copies of every parameter a training run keeps: the value, its
/// gradient, two optimiser moments (Adam, AdaBelief) and the copy of the
/// selected epoch.
pub const PARAMETER_COPIES: u64 = 5;

/// How many values a training step keeps per activation element: the
/// forward value on the tape, its gradient, and one temporary of the op
/// that made it.
pub const ACTIVATION_COPIES: u64 = 3;

/// An estimate of the memory of a training run, in bytes (`None` when it
/// overflows `u64`):
///
/// `elem_bytes × (PARAMETER_COPIES × parameters + ACTIVATION_COPIES × nodes × width × terms) + data_bytes`
///
/// where `parameters` counts the model's parameters, `nodes` is the number
/// of nodes of one step (the whole graph, or the largest batch), `width`
/// the hidden width and `terms` the number of `nodes x width` tensors a
/// step records (the runner counts them per model: a few per layer, a few
/// per Chebyshev term or HD unit), and `data_bytes` what the loaded data
/// takes. It is meant to be within a small factor of the peak resident
/// memory, so that a run that cannot fit is refused before it starts, not
/// to be exact.
pub fn training_bytes(
    elem_bytes: u64,
    parameters: u64,
    nodes: u64,
    width: u64,
    terms: u64,
    data_bytes: u64,
) -> Option<u64> {
    let params = parameters.checked_mul(PARAMETER_COPIES)?;
    let acts = nodes
        .checked_mul(width)?
        .checked_mul(terms)?
        .checked_mul(ACTIVATION_COPIES)?;
    params
        .checked_add(acts)?
        .checked_mul(elem_bytes)?
        .checked_add(data_bytes)
}

/// A byte count for people: `"5.6 GiB"`, `"512 B"`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_refuses_nonsense() {
        for (text, bytes) in [
            ("1", 1),
            ("8GiB", 8 << 30),
            ("8 gib", 8 << 30),
            ("2G", 2 << 30),
            ("500MB", 500_000_000),
            ("0.5KiB", 512),
            ("3 TB", 3_000_000_000_000),
        ] {
            assert_eq!(MemoryBudget::parse(text).unwrap().bytes(), bytes, "{text}");
        }
        for bad in [
            "",
            "GiB",
            "-1G",
            "1 XB",
            "0",
            "0.1",
            "1e30",
            "nan",
            "99999999999999T",
        ] {
            let e = MemoryBudget::parse(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidConfig(_)), "{bad}: {e:?}");
        }
    }

    #[test]
    fn mem_total_is_read_in_kib() {
        let info = "MemTotal:       24683664 kB\nMemFree:  1 kB\n";
        assert_eq!(mem_total_bytes(info), Some(24683664 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 1 kB\n"), None);
        assert!(MemoryBudget::machine().bytes() > 0);
    }

    #[test]
    fn a_scope_sets_the_budget_of_its_thread_only_and_restores_it() {
        let before = MemoryBudget::current().unwrap();
        let small = MemoryBudget::from_bytes(1000);
        small.scope(|| {
            assert_eq!(MemoryBudget::current().unwrap(), small);
            assert!(check_bytes("x", Some(1000)).is_ok());
            let e = check_elements::<f32>("hidden 1000", Some(251)).unwrap_err();
            assert_eq!(
                e.to_string(),
                "hidden 1000 needs 1004 B (1004 bytes), more than the memory budget of 1000 B \
                 (1000 bytes); make it smaller, or raise the budget with HDGCN_MEMORY_BUDGET \
                 (e.g. HDGCN_MEMORY_BUDGET=1GiB)"
            );
            let other = std::thread::spawn(MemoryBudget::current).join().unwrap();
            assert_eq!(other.unwrap(), before);
        });
        assert_eq!(MemoryBudget::current().unwrap(), before);
    }

    #[test]
    fn overflowing_sizes_are_invalid_not_over_budget() {
        for count in [None, Some(usize::MAX), Some(usize::MAX / 3)] {
            let e = check_elements::<f64>("t", count).unwrap_err();
            assert!(
                matches!(e, Error::InvalidConfig(ref m) if m.contains("too large")),
                "{e:?}"
            );
        }
        let e = check_tensor::<f32>("W", 1 << 20, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("W of 1048576 x 1048576"), "{e}");
    }

    #[test]
    fn training_bytes_follows_its_formula() {
        assert_eq!(
            training_bytes(4, 10, 100, 8, 2, 7),
            Some(4 * (PARAMETER_COPIES * 10 + ACTIVATION_COPIES * 100 * 8 * 2) + 7)
        );
        assert_eq!(training_bytes(4, u64::MAX, 1, 1, 1, 0), None);
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
    }
}
