//! The optimisers end to end on `Cpu<f64>`: fixture trajectories through
//! `Optimizer::step`, gradient clipping, state handling and errors.

use hdgcn::Error;
use hdgcn::autograd::{Gradients, Param, Tape};
use hdgcn::backend::{Backend, Cpu};
use hdgcn::optim::{
    AdaBelief, AdaBeliefConfig, Adam, AdamConfig, AdamW, AdamWConfig, CosineAnnealing, LrSchedule,
    Optimizer, Sgd, SgdConfig, clip_grad_norm, grad_norm,
};
use ndarray::Array2;
use serde_json::Value;

mod common;
use common::optim_fixture;

type B = Cpu<f64>;

const RTOL: f64 = 1e-10;

fn arr(v: &Value) -> Array2<f64> {
    let rows: Vec<Vec<f64>> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect();
    let (r, c) = (rows.len(), rows[0].len());
    Array2::from_shape_vec((r, c), rows.into_iter().flatten().collect()).unwrap()
}

fn f(h: &Value, k: &str) -> f64 {
    h[k].as_f64().unwrap()
}

fn optimizer_of(case: &Value) -> Box<dyn Optimizer<B>> {
    let h = &case["hyper"];
    match case["optimizer"].as_str().unwrap() {
        "sgd" => Box::new(
            Sgd::<B>::new(SgdConfig {
                lr: f(h, "lr"),
                momentum: f(h, "momentum"),
                dampening: f(h, "dampening"),
                nesterov: h["nesterov"].as_bool().unwrap(),
                weight_decay: f(h, "weight_decay"),
            })
            .unwrap(),
        ),
        "adam" => Box::new(
            Adam::<B>::new(AdamConfig {
                lr: f(h, "lr"),
                beta1: f(h, "beta1"),
                beta2: f(h, "beta2"),
                eps: f(h, "eps"),
                weight_decay: f(h, "weight_decay"),
            })
            .unwrap(),
        ),
        "adamw" => Box::new(
            AdamW::<B>::new(AdamWConfig {
                lr: f(h, "lr"),
                beta1: f(h, "beta1"),
                beta2: f(h, "beta2"),
                eps: f(h, "eps"),
                weight_decay: f(h, "weight_decay"),
            })
            .unwrap(),
        ),
        "adabelief" => Box::new(
            AdaBelief::<B>::new(AdaBeliefConfig {
                lr: f(h, "lr"),
                beta1: f(h, "beta1"),
                beta2: f(h, "beta2"),
                eps: f(h, "eps"),
                weight_decay: f(h, "weight_decay"),
                weight_decouple: h["weight_decouple"].as_bool().unwrap(),
                rectify: h["rectify"].as_bool().unwrap(),
            })
            .unwrap(),
        ),
        other => panic!("unknown optimizer {other}"),
    }
}

fn assert_close(name: &str, got: &Array2<f64>, want: &Array2<f64>) {
    assert_eq!(got.dim(), want.dim(), "{name}");
    for (a, e) in got.iter().zip(want) {
        assert!((a - e).abs() <= RTOL * e.abs(), "{name}: {a} vs {e}");
    }
}

#[test]
fn fixture_trajectories_through_optimizer_step() {
    let cpu = B::new();
    let fx = optim_fixture();
    for case in fx["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let w = Param::from_array(&cpu, &arr(&case["init"]["W"]));
        let b = Param::from_array(&cpu, &arr(&case["init"]["b"]));
        let params = [w.clone(), b.clone()];
        let mut opt = optimizer_of(case);
        for (t, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            let mut grads = Gradients::default();
            grads.insert(&w, cpu.upload(arr(&step["grads"]["W"]).view()));
            grads.insert(&b, cpu.upload(arr(&step["grads"]["b"]).view()));
            opt.step(&params, &grads).unwrap();
            assert_close(
                &format!("{name} step {t} W"),
                &w.to_array(),
                &arr(&step["params"]["W"]),
            );
            assert_close(
                &format!("{name} step {t} b"),
                &b.to_array(),
                &arr(&step["params"]["b"]),
            );
        }
    }
}

#[test]
fn clip_grad_norm_matches_torch() {
    let cpu = B::new();
    let fx = optim_fixture();
    let clips = fx["clip"].as_array().unwrap();
    assert_eq!(clips.len(), 2);
    for c in clips {
        let name = c["name"].as_str().unwrap();
        let w = Param::from_array(&cpu, &Array2::zeros((3, 4)));
        let b = Param::from_array(&cpu, &Array2::zeros((1, 4)));
        let mut grads = Gradients::default();
        grads.insert(&w, cpu.upload(arr(&c["grads"]["W"]).view()));
        grads.insert(&b, cpu.upload(arr(&c["grads"]["b"]).view()));
        let want = f(c, "norm");
        // Measuring alone gives torch's norm and leaves the gradients as they were.
        let measured = grad_norm(&cpu, &grads);
        assert!(
            (measured - want).abs() <= 1e-12 * want,
            "{name}: {measured}"
        );
        assert_eq!(
            cpu.download(grads.get(&w).unwrap()),
            arr(&c["grads"]["W"]),
            "{name}"
        );
        let norm = clip_grad_norm(&cpu, &mut grads, f(c, "max_norm")).unwrap();
        assert!(
            (norm - want).abs() <= 1e-12 * want,
            "{name}: norm {norm} vs {want}"
        );
        assert_close(
            name,
            &cpu.download(grads.get(&w).unwrap()),
            &arr(&c["clipped"]["W"]),
        );
        assert_close(
            name,
            &cpu.download(grads.get(&b).unwrap()),
            &arr(&c["clipped"]["b"]),
        );
    }
    // The clipped case really scaled, the other did not.
    assert!(f(&clips[0], "norm") > f(&clips[0], "max_norm"));
    assert!(f(&clips[1], "norm") < f(&clips[1], "max_norm"));
}

#[test]
fn clip_of_no_gradients_is_zero() {
    let cpu = B::new();
    let mut grads = Gradients::<B>::default();
    assert_eq!(grad_norm(&cpu, &grads), 0.0);
    assert_eq!(clip_grad_norm(&cpu, &mut grads, 1.0).unwrap(), 0.0);
}

#[test]
fn clip_bound_must_be_finite_and_positive() {
    let cpu = B::new();
    let w = Param::from_array(&cpu, &Array2::zeros((1, 2)));
    let mut grads = Gradients::default();
    grads.insert(&w, cpu.upload(ndarray::arr2(&[[3.0, 4.0]]).view()));
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let err = clip_grad_norm(&cpu, &mut grads, bad).unwrap_err();
        assert!(matches!(err, Error::InvalidConfig(_)), "{bad}: {err:?}");
    }
    // Nothing was scaled by the rejected calls.
    assert_eq!(
        cpu.download(grads.get(&w).unwrap()),
        ndarray::arr2(&[[3.0, 4.0]])
    );
    assert_eq!(clip_grad_norm(&cpu, &mut grads, 1.0).unwrap(), 5.0);
}

#[test]
fn params_without_gradient_are_untouched_and_duplicates_updated_once() {
    let cpu = B::new();
    let a = Param::from_array(&cpu, &Array2::from_elem((2, 2), 1.0));
    let b = Param::from_array(&cpu, &Array2::from_elem((1, 2), 5.0));
    let mut grads = Gradients::default();
    grads.insert(&a, cpu.full(2, 2, 1.0));
    let mut opt = SgdConfig::default()
        .lr(0.5)
        .momentum(0.9)
        .build::<B>()
        .unwrap();
    opt.step(&[a.clone(), b.clone(), a.clone()], &grads)
        .unwrap();
    assert_eq!(a.to_array(), Array2::from_elem((2, 2), 0.5));
    assert_eq!(b.to_array(), Array2::from_elem((1, 2), 5.0));
    assert_eq!(opt.step_count(&a), 1);
    assert_eq!(opt.step_count(&b), 0);
    // Momentum state persists across steps: buf = 0.9 * 1 + 1 = 1.9.
    opt.step(&[a.clone(), b.clone()], &grads).unwrap();
    assert_eq!(a.to_array(), Array2::from_elem((2, 2), 0.5 - 0.5 * 1.9));
    assert_eq!(opt.step_count(&a), 2);
    // After a reset the buffer starts again from the gradient.
    opt.reset();
    assert_eq!(opt.step_count(&a), 0);
    opt.step(std::slice::from_ref(&a), &grads).unwrap();
    assert_eq!(
        a.to_array(),
        Array2::from_elem((2, 2), 0.5 - 0.5 * 1.9 - 0.5)
    );
}

#[test]
fn shape_mismatch_is_an_error_and_updates_nothing() {
    let cpu = B::new();
    let a = Param::from_array(&cpu, &Array2::from_elem((2, 2), 1.0));
    let b = Param::from_array(&cpu, &Array2::from_elem((1, 2), 1.0));
    let mut grads = Gradients::default();
    grads.insert(&a, cpu.full(2, 2, 1.0));
    grads.insert(&b, cpu.full(2, 1, 1.0));
    let mut opt = AdamConfig::default().build::<B>().unwrap();
    let err = opt.step(&[a.clone(), b.clone()], &grads).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err:?}");
    assert_eq!(a.to_array(), Array2::from_elem((2, 2), 1.0));
    assert_eq!(opt.step_count(&a), 0);

    // A parameter replaced by one of another shape no longer fits its state.
    let mut grads = Gradients::default();
    grads.insert(&a, cpu.full(2, 2, 1.0));
    opt.step(std::slice::from_ref(&a), &grads).unwrap();
    // `set` refuses another shape; only a write through `value_mut` can.
    let err = a.set(cpu.full(3, 1, 0.0)).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err:?}");
    *a.value_mut() = cpu.full(3, 1, 0.0);
    let mut grads = Gradients::default();
    grads.insert(&a, cpu.full(3, 1, 1.0));
    let err = opt.step(std::slice::from_ref(&a), &grads).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err:?}");
}

#[test]
fn invalid_learning_rate_fails_the_step() {
    let cpu = B::new();
    let a = Param::from_array(&cpu, &Array2::from_elem((1, 1), 1.0));
    let mut grads = Gradients::default();
    grads.insert(&a, cpu.full(1, 1, 1.0));
    let mut opt = AdaBeliefConfig::default().build::<B>().unwrap();
    opt.set_learning_rate(f64::NAN);
    assert!(
        matches!(opt.step(std::slice::from_ref(&a), &grads), Err(Error::InvalidConfig(m)) if m.contains("lr"))
    );
    opt.set_learning_rate(-1.0);
    assert!(
        matches!(opt.step(std::slice::from_ref(&a), &grads), Err(Error::InvalidConfig(m)) if m.contains("lr"))
    );
    assert_eq!(a.to_array()[[0, 0]], 1.0);
    opt.set_learning_rate(0.25);
    assert_eq!(opt.learning_rate(), 0.25);
    opt.step(std::slice::from_ref(&a), &grads).unwrap();
    assert!(a.to_array()[[0, 0]] < 1.0);
}

/// Least squares through the autograd tape: every optimiser drives the loss
/// down, with a schedule applied through `set_learning_rate`.
#[test]
fn training_reduces_loss_with_autograd() {
    let cpu = B::new();
    let x = Array2::from_shape_fn((8, 3), |(i, j)| ((i * 3 + j) as f64 * 0.37).sin());
    let w_true = Array2::from_shape_fn((3, 2), |(i, j)| i as f64 - j as f64 * 0.5);
    let y = x.dot(&w_true);
    let loss_of = |w: &Param<B>| -> (f64, Gradients<B>) {
        let tape = Tape::new(&cpu);
        let pred = tape.constant_array(&x).matmul(&tape.param(w)).unwrap();
        let loss = pred
            .sub(&tape.constant_array(&y))
            .unwrap()
            .square()
            .mean_all();
        (loss.scalar().unwrap(), loss.backward().unwrap())
    };
    let opts: Vec<(&str, Box<dyn Optimizer<B>>)> = vec![
        (
            "sgd",
            Box::new(
                SgdConfig::default()
                    .lr(0.1)
                    .momentum(0.9)
                    .build::<B>()
                    .unwrap(),
            ),
        ),
        (
            "adam",
            Box::new(AdamConfig::default().lr(0.05).build::<B>().unwrap()),
        ),
        (
            "adamw",
            Box::new(AdamWConfig::default().lr(0.05).build::<B>().unwrap()),
        ),
        (
            "adabelief",
            Box::new(AdaBeliefConfig::default().lr(0.05).build::<B>().unwrap()),
        ),
    ];
    let schedule = CosineAnnealing::new(0.1, 300, 1e-3).unwrap();
    for (name, mut opt) in opts {
        let w = Param::from_array(&cpu, &Array2::zeros((3, 2)));
        let (initial, _) = loss_of(&w);
        for epoch in 0..300 {
            if name != "sgd" {
                opt.set_learning_rate(schedule.lr_at(epoch));
            }
            let (_, grads) = loss_of(&w);
            assert_eq!(grads.get(&w).map(|g| cpu.shape(g)), Some((3, 2)));
            opt.step(std::slice::from_ref(&w), &grads).unwrap();
        }
        let (last, _) = loss_of(&w);
        assert!(last < 1e-2 * initial, "{name}: loss {initial} -> {last}");
    }
}
