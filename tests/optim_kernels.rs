//! `update_slices` and the LR schedules against the reference trajectories
//! in `tests/fixtures/optim.json` (see `tests/fixtures/gen_optim.py`).

use hdgcn::backend::UpdateRule;
use hdgcn::optim::kernels::update_slices;
use hdgcn::optim::{
    AdaBeliefConfig, AdamConfig, AdamWConfig, CosineAnnealing, LrSchedule, SgdConfig, StepLr,
};
use serde_json::Value;

mod common;
use common::optim_fixture;

/// Relative tolerance on every parameter after every step.
const RTOL: f64 = 1e-10;

fn flat(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()))
        .collect()
}

fn f(h: &Value, k: &str) -> f64 {
    h[k].as_f64().unwrap_or_else(|| panic!("missing {k}"))
}

fn b(h: &Value, k: &str) -> bool {
    h[k].as_bool().unwrap_or_else(|| panic!("missing {k}"))
}

/// The rule a fixture case describes, built through the public configs.
fn rule_of(case: &Value) -> UpdateRule {
    let h = &case["hyper"];
    match case["optimizer"].as_str().unwrap() {
        "sgd" => {
            let c = SgdConfig {
                lr: f(h, "lr"),
                momentum: f(h, "momentum"),
                dampening: f(h, "dampening"),
                nesterov: b(h, "nesterov"),
                weight_decay: f(h, "weight_decay"),
            };
            c.validate().unwrap();
            c.rule()
        }
        "adam" => {
            let c = AdamConfig {
                lr: f(h, "lr"),
                beta1: f(h, "beta1"),
                beta2: f(h, "beta2"),
                eps: f(h, "eps"),
                weight_decay: f(h, "weight_decay"),
            };
            c.validate().unwrap();
            c.rule()
        }
        "adamw" => {
            let c = AdamWConfig {
                lr: f(h, "lr"),
                beta1: f(h, "beta1"),
                beta2: f(h, "beta2"),
                eps: f(h, "eps"),
                weight_decay: f(h, "weight_decay"),
            };
            c.validate().unwrap();
            c.rule()
        }
        "adabelief" => {
            let c = AdaBeliefConfig {
                lr: f(h, "lr"),
                beta1: f(h, "beta1"),
                beta2: f(h, "beta2"),
                eps: f(h, "eps"),
                weight_decay: f(h, "weight_decay"),
                weight_decouple: b(h, "weight_decouple"),
                rectify: b(h, "rectify"),
            };
            c.validate().unwrap();
            c.rule()
        }
        other => panic!("unknown optimizer {other}"),
    }
}

/// Replays a case with `rule`; returns the worst relative error over all
/// parameters and steps.
fn replay(case: &Value, rule: &UpdateRule) -> f64 {
    let mut worst = 0.0_f64;
    for name in ["W", "b"] {
        let mut p = flat(&case["init"][name]);
        let mut slots = vec![vec![0.0_f64; p.len()]; rule.num_slots()];
        for (t, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            let g = flat(&step["grads"][name]);
            let mut views: Vec<&mut [f64]> = slots.iter_mut().map(|s| s.as_mut_slice()).collect();
            update_slices(rule, t as u64 + 1, &mut p, &g, &mut views);
            let want = flat(&step["params"][name]);
            for (a, e) in p.iter().zip(&want) {
                let err = (a - e).abs() / e.abs().max(f64::MIN_POSITIVE);
                worst = worst.max(if a == e { 0.0 } else { err });
            }
        }
    }
    worst
}

fn case<'a>(fx: &'a Value, name: &str) -> &'a Value {
    fx["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

#[test]
fn every_case_matches_reference() {
    let fx = optim_fixture();
    let cases = fx["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 10);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        assert_eq!(c["steps"].as_array().unwrap().len(), 20, "{name}");
        let worst = replay(c, &rule_of(c));
        assert!(worst <= RTOL, "{name}: worst relative error {worst:e}");
    }
}

/// The fixtures discriminate between the variants: a wrong rule must fail.
#[test]
fn wrong_variants_do_not_match() {
    let fx = optim_fixture();
    let flip = |name: &str, edit: &dyn Fn(UpdateRule) -> UpdateRule| {
        let c = case(&fx, name);
        let worst = replay(c, &edit(rule_of(c)));
        assert!(worst > 1e-6, "{name}: a wrong variant matched ({worst:e})");
    };
    // L2 vs decoupled weight decay.
    flip("adam_lr_wd", &|r| match r {
        UpdateRule::Adam { .. } => AdamWConfig {
            lr: 5e-2,
            weight_decay: 1e-2,
            ..Default::default()
        }
        .rule(),
        _ => unreachable!(),
    });
    // Rectification on/off.
    flip("adabelief_plain", &|r| match r {
        UpdateRule::AdaBelief {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            ..
        } => UpdateRule::AdaBelief {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            rectify: true,
        },
        _ => unreachable!(),
    });
    // Nesterov on/off.
    flip("sgd_nesterov", &|r| match r {
        UpdateRule::Sgd {
            lr,
            momentum,
            dampening,
            weight_decay,
            ..
        } => UpdateRule::Sgd {
            lr,
            momentum,
            dampening,
            nesterov: false,
            weight_decay,
        },
        _ => unreachable!(),
    });
    // Dampening applied from the first step (torch initialises the buffer to d).
    flip("sgd_momentum_dampening_wd", &|r| match r {
        UpdateRule::Sgd {
            lr,
            momentum,
            dampening,
            nesterov,
            weight_decay,
        } => UpdateRule::Sgd {
            lr,
            momentum,
            dampening: dampening + 0.05,
            nesterov,
            weight_decay,
        },
        _ => unreachable!(),
    });
}

/// AdaBelief's epsilon inside `s` matters when the residual vanishes: with a
/// constant gradient `g - m` decays geometrically and `s` is dominated by the
/// accumulated epsilon.
#[test]
fn adabelief_eps_inside_belief() {
    let rule = AdaBeliefConfig::default()
        .lr(0.1)
        .eps(1e-8)
        .rectify(false)
        .rule();
    let (mut p, mut m, mut s) = ([0.0_f64], [0.0_f64], [0.0_f64]);
    update_slices(&rule, 1, &mut p, &[1.0], &mut [&mut m, &mut s]);
    // Same expression order as adabelief-pytorch.
    let m1 = 0.0 * 0.9 + 1.0 * (1.0 - 0.9);
    assert_eq!(m[0], m1);
    let r = 1.0 - m1;
    let s1 = 0.0 * 0.999 + (1.0 - 0.999) * r * r + 1e-8;
    assert_eq!(s[0], s1);
    let bc2: f64 = 1.0 - 0.999_f64.powf(1.0);
    let denom = s1.sqrt() / bc2.sqrt() + 1e-8;
    let want = 0.0 + -(0.1 / (1.0 - 0.9_f64.powf(1.0))) * m1 / denom;
    assert_eq!(p[0], want);
}

#[test]
fn f32_kernels_track_f64() {
    let fx = optim_fixture();
    let c = case(&fx, "adam_lr_wd");
    let rule = rule_of(c);
    let mut p64 = flat(&c["init"]["W"]);
    let mut p32: Vec<f32> = p64.iter().map(|&x| x as f32).collect();
    let n = p64.len();
    let (mut m64, mut v64) = (vec![0.0; n], vec![0.0; n]);
    let (mut m32, mut v32) = (vec![0.0_f32; n], vec![0.0_f32; n]);
    for (t, step) in c["steps"].as_array().unwrap().iter().enumerate() {
        let g = flat(&step["grads"]["W"]);
        let g32: Vec<f32> = g.iter().map(|&x| x as f32).collect();
        update_slices(&rule, t as u64 + 1, &mut p64, &g, &mut [&mut m64, &mut v64]);
        update_slices(
            &rule,
            t as u64 + 1,
            &mut p32,
            &g32,
            &mut [&mut m32, &mut v32],
        );
    }
    for (a, e) in p32.iter().zip(&p64) {
        assert!((*a as f64 - e).abs() < 1e-5, "{a} vs {e}");
    }
}

#[test]
fn sgd_without_momentum_needs_no_slot() {
    let rule = SgdConfig::default().lr(0.5).weight_decay(0.1).rule();
    assert_eq!(rule.num_slots(), 0);
    let mut p = [2.0_f64];
    update_slices(&rule, 1, &mut p, &[1.0], &mut []);
    // d = 1 + 0.1 * 2 = 1.2; p = 2 - 0.5 * 1.2
    assert_eq!(p[0], 2.0 + 1.2 * -0.5);
}

#[test]
#[should_panic(expected = "slots given")]
fn missing_slots_panic() {
    let rule = AdamConfig::default().rule();
    let mut p = [0.0_f64];
    update_slices(&rule, 1, &mut p, &[1.0], &mut []);
}

#[test]
fn schedules_match_torch() {
    let fx = optim_fixture();
    let scheds = fx["schedules"].as_array().unwrap();
    assert_eq!(scheds.len(), 3);
    for s in scheds {
        let name = s["name"].as_str().unwrap();
        let base = f(s, "base_lr");
        let sched: Box<dyn LrSchedule> = match s["kind"].as_str().unwrap() {
            "StepLR" => Box::new(
                StepLr::new(
                    base,
                    s["step_size"].as_u64().unwrap() as usize,
                    f(s, "gamma"),
                )
                .unwrap(),
            ),
            "CosineAnnealingLR" => Box::new(
                CosineAnnealing::new(base, s["T_max"].as_u64().unwrap() as usize, f(s, "eta_min"))
                    .unwrap(),
            ),
            k => panic!("unknown schedule {k}"),
        };
        let lrs = s["lrs"].as_array().unwrap();
        assert_eq!(lrs.len(), 30);
        for (epoch, want) in lrs.iter().enumerate() {
            let want = want.as_f64().unwrap();
            let got = sched.lr_at(epoch);
            // torch's values come from its recursive (chainable) form; the
            // closed form agrees to rounding, measured against base_lr.
            assert!(
                (got - want).abs() <= 1e-12 * base,
                "{name} epoch {epoch}: {got} vs {want}"
            );
        }
    }
}

/// The CPU backend splits the update of a large tensor into chunks (on
/// several cores); the update is elementwise, so the result must equal one
/// `update_slices` call over the whole tensor, bit for bit.
#[test]
fn cpu_update_of_a_large_tensor_equals_one_call() {
    use hdgcn::backend::{Backend, Cpu};
    use ndarray::Array2;
    let cpu = Cpu::<f32>::new();
    let (rows, cols) = (701, 500); // 350,500 entries: several chunks
    let wave = |k: usize, s: f32| (k as f32 * 0.618_034 + s).sin() * 2.0;
    let p0 = Array2::from_shape_fn((rows, cols), |(i, j)| wave(i * cols + j, 0.0));
    for rule in [
        AdaBeliefConfig::default()
            .lr(1e-2)
            .weight_decay(1e-2)
            .rule(),
        AdamConfig::default().lr(1e-2).rule(),
        SgdConfig::default().lr(0.1).momentum(0.9).rule(),
    ] {
        let mut p = p0.clone();
        let mut slots: Vec<Array2<f32>> = (0..rule.num_slots())
            .map(|_| Array2::zeros((rows, cols)))
            .collect();
        let mut flat = p0.as_slice().unwrap().to_vec();
        let mut flat_slots: Vec<Vec<f32>> = (0..rule.num_slots())
            .map(|_| vec![0.0; rows * cols])
            .collect();
        for step in 1..=3u64 {
            let g = Array2::from_shape_fn((rows, cols), |(i, j)| wave(i * cols + j, step as f32));
            cpu.optim_update(&rule, step, &mut p, &g, &mut slots);
            let mut refs: Vec<&mut [f32]> = flat_slots.iter_mut().map(|v| &mut v[..]).collect();
            update_slices(&rule, step, &mut flat, g.as_slice().unwrap(), &mut refs);
        }
        assert_eq!(p.as_slice().unwrap(), &flat[..], "{rule:?}: parameters");
        for (k, (s, f)) in slots.iter().zip(&flat_slots).enumerate() {
            assert_eq!(s.as_slice().unwrap(), &f[..], "{rule:?}: slot {k}");
        }
    }
}
