//! The memory budget (issue 70 item 1): sizes from settings are refused
//! before anything is allocated, with an error naming the setting, the
//! bytes needed and the budget. The budgets here are set through
//! `MemoryBudget::scope`, never left to the machine: no test allocates
//! more than a few megabytes.

use hdgcn::Error;
use hdgcn::attention::MvcAttnConfig;
use hdgcn::backend::Cpu;
use hdgcn::conv::{ChebConv, HdChebConfig};
use hdgcn::limits::MemoryBudget;
use hdgcn::models::NodeClassifier;
use hdgcn::nn::{Embedding, Linear};
use hdgcn::util::peak_rss_mb;
use rand::SeedableRng;
use rand::rngs::StdRng;

type C = Cpu<f32>;

/// Cora's feature count.
const CORA_FEATURES: usize = 1433;

fn over_budget<T: std::fmt::Debug>(r: hdgcn::Result<T>, names: &[&str]) -> (u64, u64) {
    match r {
        Err(e @ Error::OverBudget { .. }) => {
            let text = e.to_string();
            for n in names {
                assert!(text.contains(n), "{n:?} not in {text}");
            }
            assert!(text.contains("HDGCN_MEMORY_BUDGET"), "{text}");
            let Error::OverBudget { needed, budget, .. } = e else {
                unreachable!()
            };
            (needed, budget)
        }
        other => panic!("expected OverBudget naming {names:?}, got {other:?}"),
    }
}

/// Runs `f` and checks that the process's peak resident memory grew by
/// less than 64 MiB meanwhile (the refused sizes are gigabytes).
fn without_allocating<T>(f: impl FnOnce() -> T) -> T {
    let before = peak_rss_mb();
    let out = f();
    if let (Some(b), Some(a)) = (before, peak_rss_mb()) {
        assert!(a - b < 64.0, "peak RSS grew from {b:.0} to {a:.0} MiB");
    }
    out
}

#[test]
fn hidden_1e6_on_cora_is_refused_before_the_weights_exist() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(0);
    let budget = MemoryBudget::parse("1GiB").unwrap();
    without_allocating(|| {
        budget.scope(|| {
            let (needed, b) = over_budget(
                Linear::glorot(&cpu, CORA_FEATURES, 1_000_000, false, &mut rng),
                &["Linear weight of 1433 x 1000000", "5.3 GiB", "1.0 GiB"],
            );
            assert_eq!((needed, b), (1433 * 1_000_000 * 4, 1 << 30));
            over_budget(
                NodeClassifier::gcn(&cpu, CORA_FEATURES, 1_000_000, 7, 0.5, &mut rng),
                &["1433 x 1000000"],
            );
        })
    });
    // The same layer at the default width builds under that budget.
    budget
        .scope(|| Linear::glorot(&cpu, CORA_FEATURES, 16, false, &mut rng))
        .unwrap();
}

#[test]
fn chebconv_k_1000_is_refused_as_a_whole() {
    // Each of the 1000 weights is 92 KiB; together they are 87 MiB.
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(1);
    let budget = MemoryBudget::parse("64MiB").unwrap();
    let built = without_allocating(|| {
        budget.scope(|| ChebConv::new(&cpu, CORA_FEATURES, 16, 1000, &mut rng))
    });
    let (needed, _) = over_budget(built, &["ChebConv weights (K = 1000 terms of 1433 x 16)"]);
    assert_eq!(needed, 4 * (1000 * 1433 * 16 + 16));
    budget
        .scope(|| ChebConv::new(&cpu, CORA_FEATURES, 16, 3, &mut rng))
        .unwrap();
}

#[test]
fn hd_cheb_and_mvcattn_count_all_their_parameters() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(2);
    let attn = MvcAttnConfig::new(64);
    let cfg = HdChebConfig::in_model(CORA_FEATURES, 64, 1000, 0.5);
    // 500 units of about 74 000 parameters each with MVCAttn.
    let n = cfg.num_params_dynamic(&attn).unwrap();
    assert!(n > 500 * 70_000, "{n}");
    let budget = MemoryBudget::from_bytes(8 << 20);
    without_allocating(|| {
        budget.scope(|| {
            over_budget(
                cfg.build_dynamic(&cpu, &mut rng, &attn),
                &["K = 1000", "hidden 64"],
            );
            over_budget(cfg.build_static(&cpu, &mut rng), &["K = 1000", "hidden 64"]);
            let mut wide = MvcAttnConfig::new(4096);
            wide.supernodes = 10;
            over_budget(
                wide.build(&cpu, &mut rng),
                &["MvcAttn MVProj weight of 4096 x 40960"],
            );
            over_budget(
                Embedding::new(&cpu, 1_000_000, 300, &mut rng),
                &["embedding table of 1000000 x 300"],
            );
        })
    });
    // The paper's layer (K = 6, h = 64) fits easily; the count is exact.
    let small = HdChebConfig::in_model(CORA_FEATURES, 64, 6, 0.5);
    let layer = budget
        .scope(|| small.build_dynamic(&cpu, &mut rng, &attn))
        .unwrap();
    let counted: usize = hdgcn::nn::Module::named_params(&layer)
        .iter()
        .map(|(_, p)| p.shape().0 * p.shape().1)
        .sum();
    assert_eq!(small.num_params_dynamic(&attn), Some(counted));
}
