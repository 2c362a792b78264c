//! Dropout fused into a product (`Var::dropout_matmul`, the lazy
//! `Features::DenseDropout`, the CPU backend's blockwise kernels): the same
//! values and gradients as dropout followed by the product, a gradient
//! check, and the errors.

use hdgcn::autograd::{Param, Tape, gradcheck};
use hdgcn::backend::{Backend, Cpu};
use hdgcn::nn::Features;
use hdgcn::{Error, Float};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

fn rand_array<F: Float>(rows: usize, cols: usize, seed: u64) -> Array2<F> {
    let mut rng = StdRng::seed_from_u64(seed);
    Array2::from_shape_fn((rows, cols), |_| {
        F::from_f64_lossy(rng.random_range(-1.0..1.0))
    })
}

/// Shapes across the kernels' paths: one block, several blocks, rows not a
/// multiple of the block, the threaded forward product (work of 2^20 and
/// more), and one part of the weight gradient (at most 2^14 rows).
const SHAPES: [(usize, usize, usize); 6] = [
    (1, 1, 1),
    (7, 3, 2),
    (300, 130, 5),
    (1001, 33, 17),
    (3000, 128, 64),
    (16384, 9, 4),
];

fn fused_is_unfused_exactly<F: Float>() {
    let b = Cpu::<F>::new();
    for (i, &(n, d, m)) in SHAPES.iter().enumerate() {
        let seed = 11 + i as u64;
        let x = b.upload(rand_array::<F>(n, d, seed).view());
        let w = b.upload(rand_array::<F>(d, m, seed + 1).view());
        let g = b.upload(rand_array::<F>(n, m, seed + 2).view());
        let xd = b.dropout(&x, 0.4, seed);
        assert_eq!(
            b.dropout_matmul(&x, 0.4, seed, &w),
            b.matmul(&xd, &w, false, false),
            "dropout(x)·w {n}x{d}x{m}"
        );
        assert_eq!(
            b.dropout_t_matmul(&x, 0.4, seed, &g),
            b.matmul(&xd, &g, true, false),
            "dropout(x)ᵀ·g {n}x{d}x{m}"
        );
    }
}

#[test]
fn cpu_kernels_equal_the_unfused_products_f32() {
    fused_is_unfused_exactly::<f32>();
}

#[test]
fn cpu_kernels_equal_the_unfused_products_f64() {
    fused_is_unfused_exactly::<f64>();
}

/// Past 2^14 rows the weight gradient is a sum of parts in a fixed order:
/// equal to the unfused product up to the rounding of that order (in `f64`,
/// some 1e-15 relative), and the same for every thread count.
#[test]
fn cpu_weight_gradient_over_parts_is_the_product_in_another_order() {
    let b = Cpu::<f64>::new();
    let (n, d, m) = (40_000, 6, 3);
    let x = rand_array::<f64>(n, d, 1);
    let g = rand_array::<f64>(n, m, 2);
    let fused = b.dropout_t_matmul(&x, 0.5, 9, &g);
    let plain = b.matmul(&b.dropout(&x, 0.5, 9), &g, true, false);
    let scale = plain.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let err = (&fused - &plain).iter().fold(0.0f64, |a, v| a.max(v.abs()));
    assert!(
        err <= 1e-12 * scale,
        "max error {err:e} against scale {scale:e}"
    );
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    assert_eq!(one.install(|| b.dropout_t_matmul(&x, 0.5, 9, &g)), fused);
}

/// The lazy features of `Features::dropout` give the values and gradients
/// of the eager dropout with the same tape seed: the product (fused), the
/// dense value, and the gradients of both the weight and the features.
#[test]
fn dense_dropout_features_match_the_eager_dropout() {
    let cpu = Cpu::<f64>::new();
    let x = Param::from_array(&cpu, &rand_array::<f64>(50, 8, 3));
    let w = Param::from_array(&cpu, &rand_array::<f64>(8, 4, 4));
    let run = |lazy: bool| {
        let tape = Tape::with_seed(&cpu, 5);
        let xv = tape.param(&x);
        let y = if lazy {
            let f = Features::Dense(xv).dropout(&tape, 0.3).unwrap();
            assert!(matches!(f, Features::DenseDropout { .. }));
            let dense = f.dense().unwrap().to_array();
            (f.matmul(&tape.param(&w)).unwrap(), dense)
        } else {
            let d = xv.dropout(0.3).unwrap();
            let dense = d.to_array();
            (d.matmul(&tape.param(&w)).unwrap(), dense)
        };
        let (y, dense) = y;
        let loss = y.square().sum_all();
        let grads = loss.backward().unwrap();
        (
            y.to_array(),
            dense,
            grads.get(&x).unwrap().clone(),
            grads.get(&w).unwrap().clone(),
        )
    };
    let (lazy, eager) = (run(true), run(false));
    assert_eq!(lazy.0, eager.0, "product");
    assert_eq!(lazy.1, eager.1, "dense value");
    assert_eq!(lazy.2, eager.2, "gradient of the features");
    assert_eq!(lazy.3, eager.3, "gradient of the weight");
    // The dropout is real: about 30 % of the entries are zero.
    let zeros = eager.1.iter().filter(|v| **v == 0.0).count();
    assert!((60..=180).contains(&zeros), "{zeros} of 400 dropped");
}

#[test]
fn gradcheck_dropout_matmul() {
    let report = gradcheck::check_inputs(
        &[rand_array::<f64>(9, 5, 6), rand_array::<f64>(5, 3, 7)],
        |_, v| Ok(v[0].dropout_matmul(0.4, &v[1])?.square().sum_all()),
        1e-6,
    )
    .unwrap();
    assert!(report.max_error < 1e-7, "{report:?}");
    assert!(report.checked == 45 + 15);
    // The unfused path, whose weight gradient reads the kept dropout through
    // `Backend::dropout_t_matmul` instead of its dropped-out copy.
    let report = gradcheck::check_inputs(
        &[rand_array::<f64>(9, 5, 8), rand_array::<f64>(5, 3, 9)],
        |_, v| Ok(v[0].dropout(0.4)?.matmul(&v[1])?.square().sum_all()),
        1e-6,
    )
    .unwrap();
    assert!(report.max_error < 1e-7, "{report:?}");
}

#[test]
fn dropout_matmul_rejects_bad_input() {
    let cpu = Cpu::<f64>::new();
    let tape = Tape::new(&cpu);
    let x = tape.constant_array(&Array2::ones((4, 3)));
    let w = tape.constant_array(&Array2::ones((2, 2)));
    assert!(matches!(
        x.dropout_matmul(0.5, &w),
        Err(Error::ShapeMismatch { .. })
    ));
    let w = tape.constant_array(&Array2::ones((3, 2)));
    for p in [1.0, -0.1, f64::NAN] {
        assert!(
            matches!(x.dropout_matmul(p, &w), Err(Error::InvalidConfig(_))),
            "p = {p}"
        );
        assert!(matches!(
            Features::Dense(x.clone()).dropout(&tape, p),
            Err(Error::InvalidConfig(_))
        ));
    }
    // A hand-built `DenseDropout` with a bad probability is refused too.
    let bad = Features::DenseDropout {
        x: x.clone(),
        p: 1.0,
        seed: 3,
    };
    assert!(matches!(bad.matmul(&w), Err(Error::InvalidConfig(_))));
    assert!(matches!(bad.dense(), Err(Error::InvalidConfig(_))));
    // p = 0 is the plain product.
    assert_eq!(
        x.dropout_matmul(0.0, &w).unwrap().to_array(),
        Array2::from_elem((4, 2), 3.0)
    );
}
