//! Time and memory of MVCAttn against dense softmax self-attention as the
//! number of nodes grows (one graph, `h = 64`, `M = 10`, `f32`, CPU).
//!
//! ```text
//! cargo run --release --example mvcattn_scaling -- [--json] [--max-n 1000000] [--dense-max-n 10000] [--rounds 3] [--malloc reuse|system]
//! ```
//!
//! Each measurement (forward + backward of `mean(Z')`, median over a few
//! repetitions after one warm-up) runs in a fresh child process of this
//! example (`--single N --kind mvcattn|dense`), so that its peak resident
//! memory (`VmHWM`) belongs to that measurement alone. The whole sweep over
//! the sizes runs `--rounds` times, one round after the other, and each
//! size reports the median of its rounds' times (and the largest peak), so
//! that a slow spell of a shared machine lands in one round of every size
//! instead of in all repetitions of one size. The dense baseline is
//! `softmax(Q Kᵀ / sqrt(d)) V` with `N x N` scores, built from ordinary `Var`
//! ops. With `--json` every measurement is one JSON object per line:
//! `{"n", "ms", "peak_rss_mb", "kind"}`.
//!
//! Allocator: above glibc's dynamic mmap threshold (at most 32 MiB) every
//! fresh `N x h` tensor is mapped from the kernel and faulted in page by page
//! on every step, while smaller ones are reused from the heap. So with glibc
//! left alone the step from `N = 10^5` (25 MiB tensors, reused) to `10^6`
//! (256 MiB tensors, faulted in) costs page faults that the smaller sizes never
//! pay, and the measured growth is not the kernels' growth. By default
//! (`--malloc reuse`) the children therefore run with
//! `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=17179869184`,
//! so that freed memory is reused at every size, as a caching allocator
//! would; `--malloc system` leaves glibc's defaults. A `GLIBC_TUNABLES` set
//! by the caller is always passed through unchanged.

use std::process::Command;
use std::time::Instant;

use clap::Parser;
use hdgcn::attention::MvcAttnConfig;
use hdgcn::autograd::{Segments, Tape, Var};
use hdgcn::backend::{Axis, Cpu};
use hdgcn::nn::{Linear, Module};
use hdgcn::util::{median, peak_rss_mb};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

type B = Cpu<f32>;

const HIDDEN: usize = 64;
const SUPERNODES: usize = 10;

#[derive(Parser, Debug)]
#[command(about = "MVCAttn vs dense self-attention: time and peak memory against N")]
struct Args {
    /// One JSON object per measurement.
    #[arg(long)]
    json: bool,
    /// Largest N measured (the sizes are 10^3 .. 10^6).
    #[arg(long, default_value_t = 1_000_000)]
    max_n: usize,
    /// Largest N for the dense baseline.
    #[arg(long, default_value_t = 10_000)]
    dense_max_n: usize,
    /// Sweeps over all sizes; each size reports the median over them.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Child mode: measure this N only and print one JSON line.
    #[arg(long)]
    single: Option<usize>,
    /// Child mode: mvcattn | dense.
    #[arg(long, default_value = "mvcattn")]
    kind: String,
    /// reuse (children reuse freed memory at every size, see the file's
    /// docs) | system (glibc's defaults).
    #[arg(long, default_value = "reuse")]
    malloc: String,
}

/// glibc tunables that keep freed memory for reuse at every size.
const REUSE_TUNABLES: &str =
    "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=17179869184";

fn random_z(n: usize, seed: u64) -> Array2<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    Array2::from_shape_fn((n, HIDDEN), |_| rng.random_range(-1.0f32..1.0))
}

fn reps_for(n: usize) -> usize {
    match n {
        0..=10_000 => 7,
        10_001..=100_000 => 5,
        _ => 3,
    }
}

/// Times `step` (one forward + backward) `reps` times after a warm-up.
fn time_steps(
    n: usize,
    mut step: impl FnMut(Array2<f32>) -> hdgcn::Result<()>,
) -> hdgcn::Result<f64> {
    let mut times = Vec::new();
    for r in 0..=reps_for(n) {
        let z = random_z(n, r as u64);
        let t0 = Instant::now();
        step(z)?;
        if r > 0 {
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok(median(&times))
}

/// `N x h` tensors a forward and backward of MVCAttn keep (inputs, values,
/// outputs and their gradients; the `N x M` maps are narrower).
const MVCATTN_TENSORS: usize = 16;

/// `N x N` tensors the dense baseline keeps: the scores, their softmax and
/// the gradients of both.
const DENSE_TENSORS: usize = 4;

/// Refuses a measurement of `n` nodes whose tensors (`tensors` of
/// `n x width` `f32` values) the memory budget (`HDGCN_MEMORY_BUDGET`, else
/// the machine's memory) cannot hold, before anything is allocated.
fn check_size(kind: &str, n: usize, width: usize, tensors: usize) -> hdgcn::Result<()> {
    hdgcn::limits::check_elements::<f32>(
        format_args!("--single {n} --kind {kind} ({tensors} tensors of {n} x {width})"),
        n.checked_mul(width).and_then(|e| e.checked_mul(tensors)),
    )
}

fn measure_mvcattn(n: usize) -> hdgcn::Result<f64> {
    check_size("mvcattn", n, HIDDEN, MVCATTN_TENSORS)?;
    let cpu = B::new();
    let mut rng = StdRng::seed_from_u64(0);
    let mut cfg = MvcAttnConfig::new(HIDDEN);
    cfg.supernodes = SUPERNODES;
    let layer = cfg.build(&cpu, &mut rng)?;
    let seg = Segments::new(&cpu, &[0, n])?;
    time_steps(n, |z| {
        let tape = Tape::new(&cpu);
        let z = tape.input(z);
        let out = layer.forward(&tape, &z, &seg)?;
        let grads = out.mean_all().backward()?;
        if grads.len() != layer.named_params().len() || grads.wrt(&z).is_none() {
            return Err(hdgcn::Error::Autograd("missing gradients".into()));
        }
        Ok(())
    })
}

fn measure_dense(n: usize) -> hdgcn::Result<f64> {
    check_size("dense", n, n, DENSE_TENSORS)?;
    let cpu = B::new();
    let mut rng = StdRng::seed_from_u64(0);
    let lin = |rng: &mut StdRng| Linear::new(&cpu, HIDDEN, HIDDEN, false, rng);
    let (wq, wk, wv) = (lin(&mut rng)?, lin(&mut rng)?, lin(&mut rng)?);
    time_steps(n, |z| {
        let tape = Tape::new(&cpu);
        let z = tape.input(z);
        let proj = |l: &Linear<B>| -> hdgcn::Result<Var<B>> { z.matmul(&tape.param(&l.weight)) };
        let (q, k, v) = (proj(&wq)?, proj(&wk)?, proj(&wv)?);
        let scores = q
            .matmul_t(&k, false, true)?
            .scale(1.0 / (HIDDEN as f64).sqrt());
        let out = scores.softmax(Axis::Cols).matmul(&v)?;
        out.mean_all().backward()?;
        Ok(())
    })
}

fn json_line(n: usize, ms: f64, rss: f64, kind: &str) -> String {
    serde_json::json!({ "n": n, "ms": ms, "peak_rss_mb": rss, "kind": kind }).to_string()
}

fn main() {
    // The errors' own text (`Display`), not their debug structure.
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(n) = args.single {
        let ms = match args.kind.as_str() {
            "mvcattn" => measure_mvcattn(n)?,
            "dense" => measure_dense(n)?,
            other => return Err(format!("unknown --kind {other} (mvcattn | dense)").into()),
        };
        let rss = peak_rss_mb().unwrap_or(f64::NAN);
        println!("{}", json_line(n, ms, rss, &args.kind));
        return Ok(());
    }

    if args.rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    let exe = std::env::current_exe()?;
    let reuse = match args.malloc.as_str() {
        "reuse" => std::env::var_os("GLIBC_TUNABLES").is_none(),
        "system" => false,
        other => return Err(format!("unknown --malloc {other:?} (reuse | system)").into()),
    };
    if !args.json {
        println!(
            "{:>9} {:>8} {:>12} {:>14}",
            "N", "kind", "fwd+bwd ms", "peak RSS MB"
        );
    }
    let sizes = [1_000usize, 10_000, 100_000, 1_000_000];
    let runs: Vec<(usize, &str)> = sizes
        .iter()
        .filter(|&&n| n <= args.max_n)
        .flat_map(|&n| [(n, "mvcattn"), (n, "dense")])
        .filter(|&(n, kind)| kind == "mvcattn" || n <= args.dense_max_n)
        .collect();
    // (ms of every round, largest peak) per run; the peak stays NaN where
    // the platform does not report it.
    let mut results: Vec<(Vec<f64>, f64)> = vec![(Vec::new(), f64::NAN); runs.len()];
    for round in 0..args.rounds {
        if !args.json {
            eprintln!("round {} of {}", round + 1, args.rounds);
        }
        for (&(n, kind), (times, peak)) in runs.iter().zip(results.iter_mut()) {
            let mut child = Command::new(&exe);
            child.args(["--single", &n.to_string(), "--kind", kind]);
            if reuse {
                child.env("GLIBC_TUNABLES", REUSE_TUNABLES);
            }
            let out = child.output()?;
            if !out.status.success() {
                return Err(format!(
                    "child for N = {n} ({kind}) failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            let v: serde_json::Value = serde_json::from_str(String::from_utf8(out.stdout)?.trim())?;
            let ms = v["ms"]
                .as_f64()
                .ok_or_else(|| format!("child for N = {n} ({kind}) printed no time"))?;
            times.push(ms);
            *peak = peak.max(v["peak_rss_mb"].as_f64().unwrap_or(f64::NAN));
        }
    }
    for (&(n, kind), (times, peak)) in runs.iter().zip(&results) {
        let ms = median(times);
        if args.json {
            println!("{}", json_line(n, ms, *peak, kind));
        } else {
            println!("{n:>9} {kind:>8} {ms:>12.1} {peak:>14.1}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_carry_exactly_the_issue_fields() {
        let line = json_line(1000, 1.5, 20.25, "dense");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let obj = v.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["kind", "ms", "n", "peak_rss_mb"]);
        assert_eq!(
            (v["n"].as_u64(), v["kind"].as_str()),
            (Some(1000), Some("dense"))
        );
        assert_eq!(
            (v["ms"].as_f64(), v["peak_rss_mb"].as_f64()),
            (Some(1.5), Some(20.25))
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn a_dense_size_over_the_budget_is_refused_before_allocating() {
        // Issue 70: `--single 100000000 --kind dense` aborted (10^16 scores).
        let before = peak_rss_mb();
        let budget = hdgcn::limits::MemoryBudget::parse("500MB").unwrap();
        let e = budget.scope(|| measure_dense(100_000_000)).unwrap_err();
        assert!(matches!(e, hdgcn::Error::OverBudget { .. }), "{e:?}");
        let text = e.to_string();
        for part in [
            "--single 100000000 --kind dense (4 tensors of 100000000 x 100000000)",
            "HDGCN_MEMORY_BUDGET",
        ] {
            assert!(text.contains(part), "{part:?} not in {text}");
        }
        let e = budget.scope(|| measure_mvcattn(100_000_000)).unwrap_err();
        assert!(
            e.to_string().contains("--single 100000000 --kind mvcattn"),
            "{e}"
        );
        if let (Some(b), Some(a)) = (before, peak_rss_mb()) {
            assert!(a - b < 64.0, "peak RSS grew from {b:.0} to {a:.0} MiB");
        }
        // 10^4 nodes, the sweep's largest dense size, fit (1.5 GiB) only a
        // larger budget: the sweep's default needs the machine's memory.
        hdgcn::limits::MemoryBudget::parse("2GiB")
            .unwrap()
            .scope(|| check_size("dense", 10_000, 10_000, DENSE_TENSORS))
            .unwrap();
    }

    #[test]
    fn both_kinds_measure_a_small_graph() {
        for ms in [measure_mvcattn(200).unwrap(), measure_dense(200).unwrap()] {
            assert!(ms.is_finite() && ms > 0.0, "{ms}");
        }
    }
}
