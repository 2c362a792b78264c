//! `ExponentialMovingAverage`: values against a hand-computed recurrence,
//! swapping and copying, and every error path.

use hdgcn::Error;
use hdgcn::autograd::Param;
use hdgcn::backend::{Backend, Cpu};
use hdgcn::optim::ExponentialMovingAverage;
use ndarray::{Array2, array};

type B = Cpu<f64>;

fn set(p: &Param<B>, a: &Array2<f64>) {
    p.set(p.backend().upload(a.view())).unwrap();
}

#[test]
fn follows_the_recurrence_with_and_without_warmup() {
    let cpu = B::new();
    let w = Param::from_array(&cpu, &array![[1.0, -2.0], [0.5, 4.0]]);
    let b = Param::from_array(&cpu, &array![[3.0]]);
    let params = [w.clone(), b.clone()];
    // The values the optimiser "steps" to, one per update.
    let steps = [
        (array![[2.0, 0.0], [1.5, 3.0]], array![[-1.0]]),
        (array![[0.0, 1.0], [2.0, 2.0]], array![[5.0]]),
        (array![[4.0, -4.0], [0.0, 1.0]], array![[0.25]]),
    ];
    for warmup in [false, true] {
        set(&w, &array![[1.0, -2.0], [0.5, 4.0]]);
        set(&b, &array![[3.0]]);
        let mut ema = ExponentialMovingAverage::new(&params, 0.8)
            .unwrap()
            .with_warmup(warmup);
        // The reference: plain loops over f64 values.
        let mut avg_w = w.to_array();
        let mut avg_b = b.to_array();
        for (n, (sw, sb)) in steps.iter().enumerate() {
            // TensorFlow's num_updates rule: min(decay, (1 + n) / (10 + n)).
            let d = if warmup {
                0.8_f64.min((1.0 + n as f64) / (10.0 + n as f64))
            } else {
                0.8
            };
            assert_eq!(ema.effective_decay(), d);
            set(&w, sw);
            set(&b, sb);
            ema.update(&params).unwrap();
            for (a, x) in avg_w.iter_mut().zip(sw) {
                *a = d * *a + (1.0 - d) * x;
            }
            avg_b[[0, 0]] = d * avg_b[[0, 0]] + (1.0 - d) * sb[[0, 0]];
            let got = ema.averages();
            for (g, want) in got[0].iter().zip(&avg_w) {
                assert!((g - want).abs() < 1e-15, "{g} vs {want}");
            }
            assert!((got[1][[0, 0]] - avg_b[[0, 0]]).abs() < 1e-15);
            assert_eq!(ema.num_updates(), n as u64 + 1);
        }
    }
    // Hand-computed without warm-up, first entry: 0.8·1 + 0.2·2 = 1.2, then
    // 0.8·1.2 + 0.2·0 = 0.96, then 0.8·0.96 + 0.2·4 = 1.568.
    set(&w, &array![[1.0, -2.0], [0.5, 4.0]]);
    let mut ema = ExponentialMovingAverage::new(&params, 0.8).unwrap();
    assert_eq!(ema.averages()[0], w.to_array());
    for (sw, _) in &steps {
        set(&w, sw);
        ema.update(&params).unwrap();
    }
    assert!((ema.averages()[0][[0, 0]] - 1.568).abs() < 1e-12);
}

#[test]
fn decay_zero_tracks_the_weights_exactly() {
    let cpu = B::new();
    let w = Param::from_array(&cpu, &array![[0.1, -0.3, 7.0]]);
    let ws = [w.clone()];
    let mut ema = ExponentialMovingAverage::new(&ws, 0.0).unwrap();
    for k in 1..4 {
        let next = array![[0.1, -0.3, 7.0]] * (k as f64 / 3.0) + 1e-9;
        set(&w, &next);
        ema.update(&ws).unwrap();
        assert_eq!(ema.averages()[0], next);
    }
}

#[test]
fn swap_twice_restores_and_copy_to_writes_the_average() {
    let cpu = B::new();
    let w = Param::from_array(&cpu, &array![[2.0, 2.0]]);
    let ws = [w.clone()];
    let mut ema = ExponentialMovingAverage::new(&ws, 0.5).unwrap();
    set(&w, &array![[4.0, 0.0]]);
    ema.update(&ws).unwrap();
    ema.swap(&ws).unwrap();
    assert_eq!(w.to_array(), array![[3.0, 1.0]]);
    assert_eq!(ema.averages()[0], array![[4.0, 0.0]]);
    ema.swap(&ws).unwrap();
    assert_eq!(w.to_array(), array![[4.0, 0.0]]);
    assert_eq!(ema.averages()[0], array![[3.0, 1.0]]);
    ema.copy_to(&ws).unwrap();
    assert_eq!(w.to_array(), array![[3.0, 1.0]]);
    assert_eq!(ema.averages()[0], array![[3.0, 1.0]]);
    // The copy is the parameter's own: a later update leaves it alone.
    ema.update(&ws).unwrap();
    assert_eq!(w.to_array(), array![[3.0, 1.0]]);
}

#[test]
fn invalid_decays_and_duplicates_are_refused() {
    let cpu = B::new();
    let w = Param::from_array(&cpu, &array![[1.0]]);
    let ws = [w.clone()];
    for d in [1.0, 1.5, -0.1, f64::NAN, f64::INFINITY] {
        match ExponentialMovingAverage::new(&ws, d) {
            Err(Error::InvalidConfig(m)) => assert!(m.contains("decay"), "{m}"),
            other => panic!("decay {d}: expected InvalidConfig, got {other:?}"),
        }
    }
    match ExponentialMovingAverage::new(&[w.clone(), w.clone()], 0.9) {
        Err(Error::InvalidConfig(m)) => assert!(m.contains("twice"), "{m}"),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
    let empty = ExponentialMovingAverage::<B>::new(&[], 0.9).unwrap();
    assert!(empty.averages().is_empty());
}

#[test]
fn other_parameters_are_refused_and_nothing_changes() {
    let cpu = B::new();
    let w = Param::from_array(&cpu, &array![[1.0, 2.0]]);
    let b = Param::from_array(&cpu, &array![[3.0]]);
    let other = Param::from_array(&cpu, &array![[1.0, 2.0]]);
    let mut ema = ExponentialMovingAverage::new(&[w.clone(), b.clone()], 0.9).unwrap();
    let before = ema.averages();

    // Too few.
    assert!(matches!(
        ema.update(std::slice::from_ref(&w)),
        Err(Error::ShapeMismatch { .. })
    ));
    // Same shapes, but not the averaged parameter.
    match ema.swap(&[other.clone(), b.clone()]) {
        Err(Error::InvalidConfig(m)) => assert!(m.contains("parameter 0"), "{m}"),
        r => panic!("expected InvalidConfig, got {r:?}"),
    }
    // Swapped order.
    assert!(ema.copy_to(&[b.clone(), w.clone()]).is_err());
    // A parameter whose shape changed since (`set` refuses that; a write
    // through `value_mut` does not).
    assert!(b.set(array![[3.0, 4.0]]).is_err());
    *b.value_mut() = array![[3.0, 4.0]];
    match ema.update(&[w.clone(), b.clone()]) {
        Err(Error::ShapeMismatch { expected, got, .. }) => {
            assert!(expected.contains("(1, 1)") && got.contains("(1, 2)"));
        }
        r => panic!("expected ShapeMismatch, got {r:?}"),
    }
    assert_eq!(ema.averages(), before);
    assert_eq!(ema.num_updates(), 0);
    assert_eq!(w.to_array(), array![[1.0, 2.0]]);
}
