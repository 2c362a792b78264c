//! Forward + backward of one MVCAttn layer (`h = 64`, `M = 10`, one graph,
//! gradients for every weight and for `Z`) at `N = 10³ .. 10⁶` nodes: the
//! time side of the linear-scaling target (`t(10N) ≤ 12 t(N)`). Peak memory
//! and the dense-attention baseline are in `examples/mvcattn_scaling.rs`.
//!
//! ```sh
//! cargo bench --bench mvcattn
//! ```
//!
//! As the example by default, the benchmark runs with glibc tunables that
//! keep freed memory for reuse at every size (it starts itself again with
//! `GLIBC_TUNABLES` set, unless the caller set that variable): with glibc's
//! defaults the `N x h` tensors of `N = 10⁶` are mapped afresh and faulted
//! in on every step while the smaller ones are reused, which measures the
//! allocator rather than the layer (see the example's docs and
//! `docs/performance.md`).

use std::hint::black_box;
use std::process::Command;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group};
use hdgcn::attention::MvcAttnConfig;
use hdgcn::autograd::{Segments, Tape};
use hdgcn::backend::Cpu;
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

type C = Cpu<f32>;

fn bench_mvcattn(c: &mut Criterion) {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(0);
    let mut cfg = MvcAttnConfig::new(64);
    cfg.supernodes = 10;
    let layer = cfg.build(&cpu, &mut rng).unwrap();
    let mut group = c.benchmark_group("mvcattn_fwd_bwd");
    group.sample_size(10);
    for n in [1_000usize, 10_000, 100_000, 1_000_000] {
        group.measurement_time(Duration::from_secs(if n >= 1_000_000 { 20 } else { 5 }));
        let seg = Segments::new(&cpu, &[0, n]).unwrap();
        let z = Array2::from_shape_fn((n, 64), |_| rng.random_range(-1.0f32..1.0));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            // The input is copied outside the timed routine.
            b.iter_batched(
                || z.clone(),
                |z| {
                    let tape = Tape::new(&cpu);
                    let z = tape.input(z);
                    let out = layer.forward(&tape, &z, &seg).unwrap();
                    black_box(out.mean_all().backward().unwrap());
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

// Plots are off: the examples enable plotters' `ab_glyph` text backend,
// which needs a registered font, so criterion's PDF plots would fail.
criterion_group! {
    name = benches;
    config = Criterion::default().without_plots();
    targets = bench_mvcattn
}

/// The example's `--malloc reuse` setting.
const REUSE_TUNABLES: &str =
    "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=17179869184";

fn main() {
    if cfg!(all(target_os = "linux", target_env = "gnu"))
        && std::env::var_os("GLIBC_TUNABLES").is_none()
    {
        let status = std::env::current_exe().and_then(|exe| {
            Command::new(exe)
                .args(std::env::args_os().skip(1))
                .env("GLIBC_TUNABLES", REUSE_TUNABLES)
                .status()
        });
        match status {
            Ok(s) => std::process::exit(s.code().unwrap_or(1)),
            Err(e) => eprintln!("could not restart with GLIBC_TUNABLES ({e}); running as is"),
        }
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
