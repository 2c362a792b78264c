//! What a tape holds for its backward pass (`Tape::saved_elements`): only
//! the values that gradients read, a dropout's output as its input, nothing
//! after the backward pass; and the gradients computed from re-drawn
//! dropout outputs are those of the values the forward pass produced.

use hdgcn::Error;
use hdgcn::autograd::{Param, SparseMatrix, Tape, Var};
use hdgcn::backend::Cpu;
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

type C = Cpu<f64>;

fn random(rng: &mut StdRng, r: usize, c: usize) -> Array2<f64> {
    Array2::from_shape_fn((r, c), |_| rng.random_range(-1.0..1.0))
}

/// A ring of `n` nodes, both directions.
fn ring(cpu: &C, n: usize) -> SparseMatrix<C> {
    let mut tri = sprs::TriMat::new((n, n));
    for i in 0..n {
        tri.add_triplet(i, (i + 1) % n, 0.5);
        tri.add_triplet((i + 1) % n, i, 0.5);
    }
    SparseMatrix::from_csmat(cpu, &tri.to_csr::<usize>()).unwrap()
}

const N: usize = 7;
const F: usize = 5;
const H: usize = 4;
const K: usize = 3;

/// A two-layer GCN step written with ops: dropout on the constant input,
/// `Â (X_d W1)`, ReLU, dropout, `D W2`, a scalar loss. Returns the loss and
/// the dropout outputs the forward pass produced.
fn gcn_step(
    tape: &Tape<C>,
    x: &Array2<f64>,
    w1: &Param<C>,
    w2: &Param<C>,
) -> (Var<C>, Array2<f64>, Array2<f64>) {
    let a = ring(tape.backend(), N);
    // The caller holds its features (as a training loop does), so the
    // dropout's output can be drawn again from them.
    let features = tape.constant_array(x);
    let xd = features.dropout(0.5).unwrap();
    let xd_value = xd.to_array();
    let h = a.matmul(&xd.matmul(&tape.param(w1)).unwrap()).unwrap();
    drop(xd);
    let d = h.relu().dropout(0.5).unwrap();
    let d_value = d.to_array();
    let out = d.matmul(&tape.param(w2)).unwrap();
    let loss = out.square().sum_all();
    (loss, xd_value, d_value)
}

/// Features and the two layers' weights (values and parameters), seeded.
fn inputs(cpu: &C, seed: u64) -> (Array2<f64>, [Array2<f64>; 2], [Param<C>; 2]) {
    let mut rng = StdRng::seed_from_u64(seed);
    let x = random(&mut rng, N, F);
    let w = [random(&mut rng, F, H), random(&mut rng, H, K)];
    let p = [Param::from_array(cpu, &w[0]), Param::from_array(cpu, &w[1])];
    (x, w, p)
}

#[test]
fn a_gcn_step_keeps_only_what_its_gradients_read() {
    let cpu = C::new();
    let (x, _, [w1, w2]) = inputs(&cpu, 1);
    let tape = Tape::with_seed(&cpu, 3);
    let (loss, _, _) = gcn_step(&tape, &x, &w1, &w2);
    // Held: the input (the dropped-out input is drawn again from it for
    // W1's gradient), ReLU's output (drawn again as the hidden dropout's
    // output for W2's gradient; ReLU's own gradient reads a one-bit mask),
    // and `out` (the square's gradient reads it). Not held: `X_d`,
    // `X_d W1`, `Â X_d W1`, `D`, the dropout masks.
    assert_eq!(tape.saved_elements(), N * F + N * H + N * K);
    loss.backward().unwrap();
    assert_eq!(tape.saved_elements(), 0);
}

#[test]
fn gradients_from_redrawn_dropout_outputs_match_the_forward_values() {
    let cpu = C::new();
    let (x, [_, w2v], [w1, w2]) = inputs(&cpu, 2);
    let tape = Tape::with_seed(&cpu, 9);
    let (loss, xd, d) = gcn_step(&tape, &x, &w1, &w2);
    assert!(
        xd.iter().any(|&v| v == 0.0) && d.iter().any(|&v| v == 0.0),
        "masks drop something"
    );
    let grads = loss.backward().unwrap();

    // By hand: loss = Σ (D W2)², so dW2 = Dᵀ · 2 D W2; dD = 2 D W2 W2ᵀ, times
    // the mask (D's zero pattern; 1 / (1 - p) = 2 where kept) and ReLU's
    // derivative (kept entries of D are ReLU outputs > 0); dW1 = X_dᵀ Â dH.
    let g_out = d.dot(&w2v) * 2.0;
    let dw2 = d.t().dot(&g_out);
    let mut dh = g_out.dot(&w2v.t());
    dh.zip_mut_with(&d, |g, &dv| *g = if dv > 0.0 { *g * 2.0 } else { 0.0 });
    let mut a = Array2::<f64>::zeros((N, N));
    for i in 0..N {
        a[[i, (i + 1) % N]] += 0.5;
        a[[(i + 1) % N, i]] += 0.5;
    }
    let dw1 = xd.t().dot(&a.t().dot(&dh));
    let close = |got: &Array2<f64>, want: &Array2<f64>| {
        got.iter()
            .zip(want)
            .all(|(g, w)| (g - w).abs() <= 1e-12 * (1.0 + w.abs()))
    };
    assert!(
        close(grads.get(&w2).unwrap(), &dw2),
        "dW2 from the re-drawn D"
    );
    assert!(
        close(grads.get(&w1).unwrap(), &dw1),
        "dW1 from the re-drawn X_d"
    );
}

#[test]
fn relu_keeps_a_mask_not_its_output() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(5);
    let x = random(&mut rng, N, F);
    let tape = Tape::new(&cpu);
    let xv = tape.input(ndarray_to(&cpu, &x));
    // ReLU then a sum: neither keeps a tensor (the ReLU's gradient reads
    // where its output is positive, packed one bit per entry).
    let loss = xv.relu().sum_all();
    assert_eq!(tape.saved_elements(), 0);
    let grads = loss.backward().unwrap();
    let got = grads.wrt(&xv).unwrap();
    assert_eq!(got, &x.mapv(|v| if v > 0.0 { 1.0 } else { 0.0 }));
    // A tanh in its place keeps its output.
    let tape = Tape::new(&cpu);
    let _loss = tape.input(ndarray_to(&cpu, &x)).tanh().sum_all();
    assert_eq!(tape.saved_elements(), N * F);
}

fn ndarray_to(cpu: &C, a: &Array2<f64>) -> Array2<f64> {
    use hdgcn::backend::Backend;
    cpu.upload(a.view())
}

#[test]
fn a_second_backward_over_released_values_is_an_error() {
    let cpu = C::new();
    let (x, _, [w1, w2]) = inputs(&cpu, 3);
    let tape = Tape::with_seed(&cpu, 0);
    let (loss, _, _) = gcn_step(&tape, &x, &w1, &w2);
    loss.backward().unwrap();
    match loss.backward() {
        Err(Error::Autograd(m)) => assert!(m.contains("released"), "{m}"),
        other => panic!("expected an autograd error, got {other:?}"),
    }
}

#[test]
fn intermediates_the_caller_drops_are_freed() {
    // Sums and sparse products read no values: a long chain of them holds
    // nothing, however many intermediates it made.
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(4);
    let tape = Tape::new(&cpu);
    let a = ring(&cpu, N);
    let mut h = tape.input(random(&mut rng, N, H));
    for _ in 0..10 {
        h = a.matmul(&h).unwrap().add(&h).unwrap();
    }
    assert_eq!(tape.saved_elements(), 0);
    let grads = h.sum_all().backward();
    assert!(grads.is_ok());
}
