//! Element-wise kernels: fill, broadcast binary ops, activations and their
//! gradients, dropout masks, optimiser updates.

use hdgcn::backend::{Backend, BinaryOp, UnaryOp, UpdateRule, rng};
use ndarray::Array2;

use crate::{assert_close, down, r32, rand_array, reference, up};

backend_tests!(
    full_fills,
    binary_broadcasts_every_way,
    binary_broadcasts_size_one_to_size_zero,
    add_assign_accumulates_without_aliasing,
    unary_matches_reference,
    relu_propagates_nan,
    unary_grad_matches_reference,
    dropout_mask_is_the_shared_counter_hash,
    owned_gradient_kernels_are_the_borrowing_ones,
    relu_mask_gradient_is_unary_grad,
    optimiser_updates_match_f64,
    large_dispatch_is_split,
);

fn full_fills<B: Backend<Elem = f32>>(b: &B) {
    let t = b.full(37, 5, 2.5);
    assert_eq!(b.shape(&t), (37, 5));
    assert!(b.download(&t).iter().all(|&v| v == 2.5));
    let empty = b.full(0, 4, 1.0);
    assert_eq!(b.download(&empty).dim(), (0, 4));
}

fn binary_broadcasts_size_one_to_size_zero<B: Backend<Elem = f32>>(b: &B) {
    // A size-1 dimension stretches to 0 as to any other size (a bias added
    // to an empty batch of rows): the result is empty, not 1 wide.
    let cases = [
        ((0, 3), (1, 3), (0, 3)),
        ((3, 0), (3, 1), (3, 0)),
        ((0, 1), (1, 4), (0, 4)),
    ];
    for &(sa, sb, want) in &cases {
        for swap in [false, true] {
            let (x, y) = (b.full(sa.0, sa.1, 1.0), b.full(sb.0, sb.1, 2.0));
            let out = if swap {
                b.binary(BinaryOp::Add, &y, &x)
            } else {
                b.binary(BinaryOp::Add, &x, &y)
            };
            assert_eq!(b.download(&out).dim(), want, "{sa:?} + {sb:?}, swap={swap}");
        }
    }
}

fn binary_broadcasts_every_way<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    let a = r32(&rand_array(33, 7, 1, -2.0, 2.0));
    let shapes = [(33, 7), (1, 7), (33, 1), (1, 1)];
    for (s, &(rows, cols)) in shapes.iter().enumerate() {
        // Divisors away from zero.
        let other = r32(&rand_array(rows, cols, 10 + s as u64, 0.5, 2.0));
        for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
            for swap in [false, true] {
                let (x, y) = if swap { (&other, &a) } else { (&a, &other) };
                let got = down(b, &b.binary(op, &up(b, x), &up(b, y)));
                let want = r.binary(op, x, y);
                assert_close(&format!("{op:?} {rows}x{cols} swap={swap}"), &got, &want);
            }
        }
    }
}

fn add_assign_accumulates_without_aliasing<B: Backend<Elem = f32>>(b: &B) {
    let x = r32(&rand_array(20, 9, 2, -1.0, 1.0));
    let y = r32(&rand_array(20, 9, 3, -1.0, 1.0));
    let tx = up(b, &x);
    let mut acc = tx.clone();
    b.add_assign(&mut acc, &up(b, &y));
    assert_close("acc", &down(b, &acc), &(&x + &y));
    // The clone it came from is unchanged (value semantics).
    assert_close("source", &down(b, &tx), &x);
    // Accumulating a tensor into a copy of itself.
    let mut twice = tx.clone();
    b.add_assign(&mut twice, &tx);
    assert_close("x + x", &down(b, &twice), &(&x * 2.0));
}

fn unary_ops() -> Vec<UnaryOp> {
    vec![
        UnaryOp::Relu,
        UnaryOp::LeakyRelu(0.2),
        UnaryOp::Elu(1.3),
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Gelu,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Neg,
        UnaryOp::Square,
        UnaryOp::Affine(-1.5, 0.25),
    ]
}

fn input_for(op: UnaryOp, seed: u64) -> Array2<f64> {
    match op {
        UnaryOp::Log => r32(&rand_array(31, 11, seed, 0.05, 4.0)),
        // Large magnitudes check the stable formulas (no overflow to NaN).
        UnaryOp::Sigmoid | UnaryOp::Tanh => {
            let mut a = r32(&rand_array(31, 11, seed, -4.0, 4.0));
            a[[0, 0]] = 90.0;
            a[[0, 1]] = -90.0;
            a
        }
        // Tiny magnitudes check expm1 accuracy.
        UnaryOp::Elu(_) => {
            let mut a = r32(&rand_array(31, 11, seed, -3.0, 3.0));
            a[[0, 0]] = -1e-5;
            a[[0, 1]] = -3e-4;
            a
        }
        _ => r32(&rand_array(31, 11, seed, -3.0, 3.0)),
    }
}

fn unary_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (i, op) in unary_ops().into_iter().enumerate() {
        let x = input_for(op, 20 + i as u64);
        let got = down(b, &b.unary(op, &up(b, &x)));
        assert_close(&format!("{op:?}"), &got, &r.unary(op, &x));
    }
}

fn relu_propagates_nan<B: Backend<Elem = f32>>(b: &B) {
    // As torch.relu: NaN stays NaN (a `max(x, 0)` would hide it as 0 and
    // let NaN parameters train on unnoticed).
    let x = ndarray::arr2(&[[f32::NAN, -1.5, 2.0, 0.0]]);
    let got = b.download(&b.unary(UnaryOp::Relu, &b.upload(x.view())));
    assert!(got[[0, 0]].is_nan(), "relu(NaN) = {}", got[[0, 0]]);
    assert_eq!(
        got.slice(ndarray::s![.., 1..]),
        ndarray::arr2(&[[0.0, 2.0, 0.0]])
    );
}

fn unary_grad_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (i, op) in unary_ops().into_iter().enumerate() {
        let x = input_for(op, 40 + i as u64);
        let y = r.unary(op, &x);
        let dy = r32(&rand_array(31, 11, 60 + i as u64, -1.0, 1.0));
        let y32 = r32(&y);
        let got = down(b, &b.unary_grad(op, &up(b, &x), &up(b, &y32), &up(b, &dy)));
        assert_close(&format!("{op:?}'"), &got, &r.unary_grad(op, &x, &y32, &dy));
    }
}

fn dropout_mask_is_the_shared_counter_hash<B: Backend<Elem = f32>>(b: &B) {
    let (rows, cols, p, seed) = (57, 13, 0.3, 0x1234_5678_9abc_def0_u64);
    let got = b.download(&b.dropout_mask(rows, cols, p, seed));
    let scale = (1.0 / (1.0 - p)) as f32;
    for (i, &v) in got.iter().enumerate() {
        let want = if rng::keep(seed, i as u32, p as f32) {
            scale
        } else {
            0.0
        };
        assert_eq!(v, want, "mask entry {i}");
    }
}

/// The bits of every entry of `t`, row-major.
fn bits_of<B: Backend<Elem = f32>>(b: &B, t: &B::Tensor) -> Vec<u32> {
    b.download(t).iter().map(|v| v.to_bits()).collect()
}

/// `unary_grad_owned` and `dropout_owned` (which may write over the tensor
/// they take) give the values of `unary_grad` and `dropout` to the bit:
/// every activation, tensors under and over the CPU kernel's parallel
/// threshold (2^18 entries), and a gradient uploaded from a transposed view.
fn owned_gradient_kernels_are_the_borrowing_ones<B: Backend<Elem = f32>>(b: &B) {
    let bits = |t: &B::Tensor| bits_of(b, t);
    for (i, op) in unary_ops().into_iter().enumerate() {
        let x = up(b, &input_for(op, 70 + i as u64));
        let y = b.unary(op, &x);
        let dy = up(b, &rand_array(31, 11, 80 + i as u64, -1.0, 1.0));
        let want = bits(&b.unary_grad(op, &x, &y, &dy));
        assert_eq!(
            bits(&b.unary_grad_owned(op, &x, &y, dy.clone())),
            want,
            "{op:?}"
        );
        // Input and output one tensor, as the backward pass passes a side
        // it does not read.
        let want = bits(&b.unary_grad(op, &x, &x, &dy));
        assert_eq!(
            bits(&b.unary_grad_owned(op, &x, &x, dy)),
            want,
            "{op:?}, x twice"
        );
    }
    // A gradient uploaded from a transposed view.
    let x = up(b, &rand_array(9, 4, 90, -2.0, 2.0));
    let y = b.unary(UnaryOp::Relu, &x);
    let dy_t = b.upload(r32(&rand_array(4, 9, 91, -1.0, 1.0)).mapv(|v| v as f32).t());
    let want = bits(&b.unary_grad(UnaryOp::Relu, &x, &y, &dy_t));
    assert_eq!(bits(&b.unary_grad_owned(UnaryOp::Relu, &x, &y, dy_t)), want);
    for (rows, cols, p, seed) in [
        (57, 13, 0.3, 7_u64),
        (700, 400, 0.5, 0xdead_beef_u64),
        (5, 1, 0.9, 1),
    ] {
        let g = up(b, &rand_array(rows, cols, seed, -1.0, 1.0));
        let want = bits(&b.dropout(&g, p, seed));
        assert_eq!(
            bits(&b.dropout_owned(g, p, seed)),
            want,
            "dropout {rows} x {cols}"
        );
    }
}

/// ReLU's backward from the packed mask (`positive_mask`, then
/// `masked_grad_owned`) gives `unary_grad`'s values to the bit: shapes
/// whose length is and is not a multiple of 32, NaN, signed zeros,
/// infinities and subnormals among the inputs, NaN and infinities in the
/// gradient where the mask is 0, a tensor split over several CPU tasks,
/// and a gradient from a transposed view.
fn relu_mask_gradient_is_unary_grad<B: Backend<Elem = f32>>(b: &B) {
    let bits = |t: &B::Tensor| bits_of(b, t);
    let specials = [
        f32::NAN,
        -f32::NAN,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE / 4.0,
        -f32::MIN_POSITIVE / 4.0,
        1.0,
        -1.0,
    ];
    // 701 x 401: over the CPU kernels' task size (2^17 entries), three
    // tasks, the last one partial and not a whole number of words.
    for (case, (rows, cols)) in [
        (1, 1),
        (1, 32),
        (3, 33),
        (31, 11),
        (64, 64),
        (1, 10),
        (701, 401),
    ]
    .into_iter()
    .enumerate()
    {
        let seed = 100 + case as u64;
        let mut x = rand_array(rows, cols, seed, -2.0, 2.0).mapv(|v| v as f32);
        let mut dy = rand_array(rows, cols, seed + 50, -1.0, 1.0).mapv(|v| v as f32);
        for (i, v) in x.iter_mut().enumerate().take(specials.len()) {
            *v = specials[i];
        }
        // Non-finite gradients where the input is negative, zero or NaN.
        for (i, v) in dy.iter_mut().enumerate().skip(1).step_by(3).take(3) {
            *v = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][i % 3];
        }
        let (x, dy) = (b.upload(x.view()), b.upload(dy.view()));
        let y = b.unary(UnaryOp::Relu, &x);
        let mask = b.positive_mask(&y);
        assert_eq!(
            b.index_len(&mask),
            (rows * cols).div_ceil(32),
            "{rows} x {cols}"
        );
        let want = bits(&b.unary_grad(UnaryOp::Relu, &x, &y, &dy));
        assert_eq!(
            bits(&b.masked_grad_owned(dy.clone(), &mask)),
            want,
            "{rows} x {cols}"
        );
        // The gradient tensor is not changed through another handle.
        let before = bits(&dy);
        let _ = b.masked_grad_owned(dy.clone(), &mask);
        assert_eq!(bits(&dy), before, "{rows} x {cols}: a shared gradient");
    }
    let x = up(b, &rand_array(9, 4, 190, -2.0, 2.0));
    let y = b.unary(UnaryOp::Relu, &x);
    let dy_t = b.upload(
        r32(&rand_array(4, 9, 191, -1.0, 1.0))
            .mapv(|v| v as f32)
            .t(),
    );
    let want = bits(&b.unary_grad(UnaryOp::Relu, &x, &y, &dy_t));
    assert_eq!(bits(&b.masked_grad_owned(dy_t, &b.positive_mask(&y))), want);
}

fn rules() -> Vec<UpdateRule> {
    vec![
        UpdateRule::Sgd {
            lr: 0.1,
            momentum: 0.0,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.01,
        },
        UpdateRule::Sgd {
            lr: 0.1,
            momentum: 0.9,
            dampening: 0.1,
            nesterov: false,
            weight_decay: 0.0,
        },
        UpdateRule::Sgd {
            lr: 0.05,
            momentum: 0.8,
            dampening: 0.0,
            nesterov: true,
            weight_decay: 1e-3,
        },
        UpdateRule::Adam {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 5e-4,
            decoupled: false,
        },
        UpdateRule::Adam {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 1e-2,
            decoupled: true,
        },
        UpdateRule::AdaBelief {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-16,
            weight_decay: 1e-2,
            decoupled: true,
            rectify: false,
        },
        UpdateRule::AdaBelief {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-16,
            weight_decay: 5e-4,
            decoupled: false,
            rectify: true,
        },
    ]
}

/// Ten steps of every rule on the backend against the same steps in `f64`.
fn optimiser_updates_match_f64<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (i, rule) in rules().into_iter().enumerate() {
        let p0 = r32(&rand_array(13, 6, 100 + i as u64, -1.0, 1.0));
        let (mut p, mut pr) = (up(b, &p0), p0.clone());
        let mut slots: Vec<_> = (0..rule.num_slots()).map(|_| b.full(13, 6, 0.0)).collect();
        let mut slots_r: Vec<_> = (0..rule.num_slots())
            .map(|_| Array2::<f64>::zeros((13, 6)))
            .collect();
        let kept = p.clone();
        for step in 1..=10u64 {
            let g = r32(&rand_array(13, 6, 1000 * i as u64 + step, -1.0, 1.0));
            b.optim_update(&rule, step, &mut p, &up(b, &g), &mut slots);
            r.optim_update(&rule, step, &mut pr, &g, &mut slots_r);
        }
        assert_close(&format!("{rule:?}"), &down(b, &p), &pr);
        for (k, (s, sr)) in slots.iter().zip(&slots_r).enumerate() {
            assert_close(&format!("{rule:?} slot {k}"), &down(b, s), sr);
        }
        // In-place updates never write through a shared handle.
        assert_close("shared handle", &down(b, &kept), &p0);
    }
}

/// More than 65,535 workgroups of 256 invocations: the dispatch is split.
fn large_dispatch_is_split<B: Backend<Elem = f32>>(b: &B) {
    let rows = 65_536 + 3;
    let cols = 257;
    let ones = b.full(rows, cols, 1.0);
    let col = b.full(1, cols, 2.0);
    let sum = b.binary(BinaryOp::Add, &ones, &col);
    let got = b.download(&sum);
    assert!(
        got.iter().all(|&v| v == 3.0),
        "split dispatch missed entries"
    );
}
