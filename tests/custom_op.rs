//! Ops defined outside the crate ([`CustomOp`]): a softplus and a row-wise
//! normalisation written on `Cpu<f64>` arrays, gradient-checked, and the
//! errors a faulty op's backward turns into.

use std::rc::Rc;

use hdgcn::Error;
use hdgcn::autograd::gradcheck::check_inputs;
use hdgcn::autograd::{CustomOp, Tape, Var};
use hdgcn::backend::Cpu;
use ndarray::{Array2, Axis};

type C = Cpu<f64>;

/// `softplus(x) = log(1 + eˣ)`, element-wise, computed stably.
struct Softplus;

impl CustomOp<C> for Softplus {
    fn name(&self) -> &str {
        "softplus"
    }

    fn forward(&self, _: &C, inputs: &[&Array2<f64>]) -> hdgcn::Result<Array2<f64>> {
        Ok(inputs[0].mapv(|v| v.max(0.0) + (-v.abs()).exp().ln_1p()))
    }

    fn backward(
        &self,
        _: &C,
        inputs: &[&Array2<f64>],
        _output: &Array2<f64>,
        grad: &Array2<f64>,
    ) -> hdgcn::Result<Vec<Option<Array2<f64>>>> {
        let sigmoid = inputs[0].mapv(|v| 1.0 / (1.0 + (-v).exp()));
        Ok(vec![Some(grad * &sigmoid)])
    }
}

/// `out[i, j] = x[i, j] · s[i] / ‖x[i]‖` with `‖·‖ = sqrt(Σ x² + ε)`: each
/// row of `x` scaled to the norm given by the `n x 1` column `s`.
struct RowNormalize;

const EPS: f64 = 1e-3;

impl CustomOp<C> for RowNormalize {
    fn name(&self) -> &str {
        "row_normalize"
    }

    fn forward(&self, _: &C, inputs: &[&Array2<f64>]) -> hdgcn::Result<Array2<f64>> {
        let (x, s) = (inputs[0], inputs[1]);
        if s.dim() != (x.nrows(), 1) {
            return Err(Error::shape(
                "row_normalize",
                format!("scales ({}, 1)", x.nrows()),
                format!("{:?}", s.dim()),
            ));
        }
        let norm = x
            .mapv(|v| v * v)
            .sum_axis(Axis(1))
            .mapv(|v| (v + EPS).sqrt());
        let mut out = x.clone();
        for (i, mut row) in out.rows_mut().into_iter().enumerate() {
            row *= s[[i, 0]] / norm[i];
        }
        Ok(out)
    }

    fn backward(
        &self,
        _: &C,
        inputs: &[&Array2<f64>],
        _output: &Array2<f64>,
        grad: &Array2<f64>,
    ) -> hdgcn::Result<Vec<Option<Array2<f64>>>> {
        let (x, s) = (inputs[0], inputs[1]);
        let mut dx = Array2::zeros(x.dim());
        let mut ds = Array2::zeros(s.dim());
        for i in 0..x.nrows() {
            let (xi, gi) = (x.row(i), grad.row(i));
            let n = (xi.dot(&xi) + EPS).sqrt();
            let gx = gi.dot(&xi);
            // d/dx (s x / n) = s/n (g - x (g·x) / n²)
            let row = (&gi - &(&xi * (gx / (n * n)))) * (s[[i, 0]] / n);
            dx.row_mut(i).assign(&row);
            ds[[i, 0]] = gx / n;
        }
        Ok(vec![Some(dx), Some(ds)])
    }
}

/// Returns gradients of a wrong shape, or the wrong number of them.
struct Faulty {
    count: usize,
    shape: (usize, usize),
}

impl CustomOp<C> for Faulty {
    fn name(&self) -> &str {
        "faulty"
    }

    fn forward(&self, _: &C, inputs: &[&Array2<f64>]) -> hdgcn::Result<Array2<f64>> {
        Ok(inputs[0].clone())
    }

    fn backward(
        &self,
        _: &C,
        _inputs: &[&Array2<f64>],
        _output: &Array2<f64>,
        _grad: &Array2<f64>,
    ) -> hdgcn::Result<Vec<Option<Array2<f64>>>> {
        Ok((0..self.count)
            .map(|_| Some(Array2::ones(self.shape)))
            .collect())
    }
}

fn x() -> Array2<f64> {
    ndarray::arr2(&[
        [0.3, -1.2, 2.0],
        [0.5, 0.1, -0.7],
        [-2.5, 1.5, 0.0],
        [40.0, -40.0, 0.2],
    ])
}

#[test]
fn softplus_values_and_gradient_check() {
    let cpu = C::new();
    let tape = Tape::inference(&cpu);
    let y = Var::apply_custom(Rc::new(Softplus), &[&tape.constant_array(&x())]).unwrap();
    let want = x().mapv(|v: f64| (1.0 + v.exp()).ln());
    for (a, b) in y.to_array().iter().zip(&want) {
        assert!(
            (a - b).abs() < 1e-12 || (a - b).abs() / b.abs() < 1e-12,
            "{a} vs {b}"
        );
    }

    let w = ndarray::arr2(&[[0.2, -0.4], [1.1, 0.3], [-0.6, 0.9]]);
    let report = check_inputs(
        &[x(), w],
        |_tape, v| {
            let h = v[0].matmul(&v[1])?;
            Ok(Var::apply_custom(Rc::new(Softplus), &[&h])?
                .square()
                .sum_all())
        },
        1e-6,
    )
    .unwrap();
    assert!(report.max_error < 1e-6, "{report:?}");
}

#[test]
fn row_normalize_gradient_check_in_both_inputs() {
    let s = ndarray::arr2(&[[1.0], [0.5], [-2.0], [1.5]]);
    let c = ndarray::arr2(&[
        [0.7, -0.1, 0.4],
        [0.2, 0.9, -0.3],
        [-0.5, 0.6, 1.1],
        [0.3, 0.8, -1.0],
    ]);
    let op: Rc<dyn CustomOp<C>> = Rc::new(RowNormalize);
    let x = x() / 20.0;
    let report = check_inputs(
        &[x, s, c],
        |_tape, v| {
            let y = Var::apply_custom(op.clone(), &[&v[0].tanh(), &v[1]])?;
            Ok(y.mul(&v[2])?.sum_all())
        },
        1e-6,
    )
    .unwrap();
    assert!(report.max_error < 1e-6, "{report:?}");
}

#[test]
fn an_input_used_twice_accumulates() {
    // `x` reaches the loss through two custom nodes: softplus(x) and
    // softplus(softplus(x)); their gradients add up.
    let report = check_inputs(
        &[x()],
        |_tape, v| {
            let a = Var::apply_custom(Rc::new(Softplus), &[&v[0]])?;
            let b = Var::apply_custom(Rc::new(Softplus), &[&a])?;
            Ok(a.mul(&b)?.sum_all())
        },
        1e-6,
    )
    .unwrap();
    assert!(report.max_error < 1e-6, "{report:?}");
}

#[test]
fn a_wrong_gradient_from_backward_is_an_error() {
    let cpu = C::new();
    for (count, shape, what) in [
        (
            1,
            (1, 1),
            "gradient for input 0 is 1 x 1, the input is 4 x 3",
        ),
        (
            1,
            (3, 4),
            "gradient for input 0 is 3 x 4, the input is 4 x 3",
        ),
        (2, (4, 3), "backward returned 2 gradients for 1 inputs"),
        (0, (4, 3), "backward returned 0 gradients for 1 inputs"),
    ] {
        let tape = Tape::new(&cpu);
        let v = tape.input(x());
        let y = Var::apply_custom(Rc::new(Faulty { count, shape }), &[&v]).unwrap();
        match y.sum_all().backward() {
            Err(Error::Autograd(m)) => {
                assert!(m.contains("custom op faulty") && m.contains(what), "{m}")
            }
            other => panic!("expected an autograd error, got {other:?}"),
        }
    }
}

#[test]
fn forward_errors_and_bad_inputs_are_errors() {
    let cpu = C::new();
    let tape = Tape::new(&cpu);
    let v = tape.input(x());
    // The op's own check: a scale column of the wrong length.
    let s = tape.constant_array(&Array2::ones((3, 1)));
    let err = Var::apply_custom(Rc::new(RowNormalize), &[&v, &s]).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err:?}");
    // No inputs.
    let err = Var::apply_custom(Rc::new(Softplus), &[]).unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    // Inputs on two tapes.
    let other = Tape::new(&cpu);
    let s = other.constant_array(&Array2::ones((4, 1)));
    let err = Var::apply_custom(Rc::new(RowNormalize), &[&v, &s]).unwrap_err();
    assert!(matches!(err, Error::Autograd(_)), "{err:?}");
}

#[test]
fn constants_get_no_gradient_and_inference_records_nothing() {
    let cpu = C::new();
    let tape = Tape::new(&cpu);
    let v = tape.input(x());
    let s = tape.constant_array(&ndarray::arr2(&[[1.0], [2.0], [3.0], [4.0]]));
    let y = Var::apply_custom(Rc::new(RowNormalize), &[&v, &s]).unwrap();
    let grads = y.sum_all().backward().unwrap();
    assert_eq!(grads.wrt(&v).unwrap().dim(), (4, 3));
    assert!(grads.wrt(&s).is_none());

    let tape = Tape::inference(&cpu);
    let y = Var::apply_custom(Rc::new(Softplus), &[&tape.constant_array(&x())]).unwrap();
    assert_eq!(y.shape(), (4, 3));
    assert!(tape.is_empty());
}

/// `softplus` written once for every backend with the `Backend` kernels
/// (so it would run on wgpu too): `log(1 + eˣ)`, gradient `g · σ(x)`.
struct GenericSoftplus;

impl<B: hdgcn::backend::Backend> CustomOp<B> for GenericSoftplus {
    fn name(&self) -> &str {
        "generic_softplus"
    }

    fn forward(&self, b: &B, inputs: &[&B::Tensor]) -> hdgcn::Result<B::Tensor> {
        use hdgcn::backend::{BinaryOp, UnaryOp};
        let e = b.unary(UnaryOp::Exp, inputs[0]);
        let (r, c) = b.shape(&e);
        let one = b.full(r, c, num_traits::One::one());
        Ok(b.unary(UnaryOp::Log, &b.binary(BinaryOp::Add, &one, &e)))
    }

    fn backward(
        &self,
        b: &B,
        inputs: &[&B::Tensor],
        _output: &B::Tensor,
        grad: &B::Tensor,
    ) -> hdgcn::Result<Vec<Option<B::Tensor>>> {
        use hdgcn::backend::{BinaryOp, UnaryOp};
        let s = b.unary(UnaryOp::Sigmoid, inputs[0]);
        Ok(vec![Some(b.binary(BinaryOp::Mul, grad, &s))])
    }
}

#[test]
fn a_generic_op_runs_on_f32_and_f64_and_matches_the_array_one() {
    let small = x().mapv(|v| v.clamp(-5.0, 5.0));
    let report = check_inputs(
        std::slice::from_ref(&small),
        |_tape, v| {
            Ok(Var::apply_custom(Rc::new(GenericSoftplus), &[&v[0]])?
                .square()
                .sum_all())
        },
        1e-6,
    )
    .unwrap();
    assert!(report.max_error < 1e-6, "{report:?}");

    let cpu = Cpu::<f32>::new();
    let tape = Tape::new(&cpu);
    let v = tape.input(small.mapv(|v| v as f32));
    let y = Var::apply_custom(Rc::new(GenericSoftplus), &[&v]).unwrap();
    let g = y.sum_all().backward().unwrap();
    let want = small.mapv(|v: f64| (1.0 + v.exp()).ln());
    for (a, b) in y.to_array().iter().zip(&want) {
        assert!((*a as f64 - b).abs() < 1e-5, "{a} vs {b}");
    }
    let dsig = small.mapv(|v: f64| 1.0 / (1.0 + (-v).exp()));
    for (a, b) in g.wrt(&v).unwrap().iter().zip(&dsig) {
        assert!((*a as f64 - b).abs() < 1e-6, "{a} vs {b}");
    }
}
