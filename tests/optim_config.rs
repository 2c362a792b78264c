//! Configuration defaults and validation of the optimisers and schedules.

use hdgcn::Error;
use hdgcn::backend::UpdateRule;
use hdgcn::optim::{
    AdaBeliefConfig, AdamConfig, AdamWConfig, Constant, CosineAnnealing, SgdConfig, StepLr,
};

/// Asserts `r` is `InvalidConfig` whose message names `field`.
fn rejects(r: hdgcn::Result<()>, field: &str) {
    match r {
        Err(Error::InvalidConfig(msg)) => {
            assert!(msg.contains(field), "message {msg:?} does not name {field}")
        }
        other => panic!("expected InvalidConfig naming {field}, got {other:?}"),
    }
}

#[test]
fn defaults_match_reference_implementations() {
    assert_eq!(
        SgdConfig::default().rule(),
        UpdateRule::Sgd {
            lr: 1e-3,
            momentum: 0.0,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0
        }
    );
    assert_eq!(
        AdamConfig::default().rule(),
        UpdateRule::Adam {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false
        }
    );
    assert_eq!(
        AdamWConfig::default().rule(),
        UpdateRule::Adam {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 1e-2,
            decoupled: true
        }
    );
    assert_eq!(
        AdaBeliefConfig::default().rule(),
        UpdateRule::AdaBelief {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-16,
            weight_decay: 0.0,
            decoupled: true,
            rectify: true
        }
    );
    SgdConfig::default().validate().unwrap();
    AdamConfig::default().validate().unwrap();
    AdamWConfig::default().validate().unwrap();
    AdaBeliefConfig::default().validate().unwrap();
}

#[test]
fn sgd_validation() {
    let ok = SgdConfig::default();
    rejects(ok.lr(-0.1).validate(), "lr");
    rejects(ok.lr(f64::NAN).validate(), "lr");
    rejects(ok.lr(f64::INFINITY).validate(), "lr");
    rejects(ok.momentum(-0.5).validate(), "momentum");
    rejects(ok.momentum(f64::NAN).validate(), "momentum");
    rejects(ok.dampening(1.5).validate(), "dampening");
    rejects(ok.dampening(f64::NAN).validate(), "dampening");
    rejects(ok.weight_decay(-1e-4).validate(), "weight_decay");
    rejects(ok.nesterov(true).validate(), "nesterov");
    rejects(
        ok.momentum(0.9).dampening(0.1).nesterov(true).validate(),
        "nesterov",
    );
    ok.momentum(0.9).nesterov(true).validate().unwrap();
    ok.lr(0.0).validate().unwrap();
}

#[test]
fn adam_family_validation() {
    macro_rules! check {
        ($cfg:expr) => {
            let ok = $cfg;
            rejects(ok.lr(-1e-3).validate(), "lr");
            rejects(ok.lr(f64::NAN).validate(), "lr");
            rejects(ok.beta1(1.0).validate(), "beta1");
            rejects(ok.beta1(-0.1).validate(), "beta1");
            rejects(ok.beta1(f64::NAN).validate(), "beta1");
            rejects(ok.beta2(1.0).validate(), "beta2");
            rejects(ok.beta2(-1e-9).validate(), "beta2");
            rejects(ok.beta2(f64::NAN).validate(), "beta2");
            rejects(ok.eps(0.0).validate(), "eps");
            rejects(ok.eps(-1e-8).validate(), "eps");
            rejects(ok.eps(f64::NAN).validate(), "eps");
            rejects(ok.weight_decay(-0.1).validate(), "weight_decay");
            rejects(ok.weight_decay(f64::NAN).validate(), "weight_decay");
            ok.beta1(0.0).beta2(0.0).validate().unwrap();
        };
    }
    check!(AdamConfig::default());
    check!(AdamWConfig::default());
    check!(AdaBeliefConfig::default());
}

#[test]
fn build_validates() {
    type B = hdgcn::backend::Cpu<f64>;
    fn is_invalid<T>(r: hdgcn::Result<T>) -> bool {
        matches!(r, Err(Error::InvalidConfig(_)))
    }
    assert!(is_invalid(SgdConfig::default().lr(-1.0).build::<B>()));
    assert!(is_invalid(AdamConfig::default().beta1(1.0).build::<B>()));
    assert!(is_invalid(AdamWConfig::default().eps(0.0).build::<B>()));
    assert!(is_invalid(
        AdaBeliefConfig::default().beta2(f64::NAN).build::<B>()
    ));
}

#[test]
fn schedule_validation() {
    assert!(matches!(Constant::new(-1.0), Err(Error::InvalidConfig(m)) if m.contains("lr")));
    assert!(
        matches!(StepLr::new(0.1, 0, 0.5), Err(Error::InvalidConfig(m)) if m.contains("step_size"))
    );
    assert!(
        matches!(StepLr::new(f64::NAN, 1, 0.5), Err(Error::InvalidConfig(m)) if m.contains("base_lr"))
    );
    assert!(
        matches!(StepLr::new(0.1, 1, -0.5), Err(Error::InvalidConfig(m)) if m.contains("gamma"))
    );
    assert!(
        matches!(CosineAnnealing::new(0.1, 0, 0.0), Err(Error::InvalidConfig(m)) if m.contains("t_max"))
    );
    assert!(
        matches!(CosineAnnealing::new(0.1, 5, -1.0), Err(Error::InvalidConfig(m)) if m.contains("eta_min"))
    );
}
