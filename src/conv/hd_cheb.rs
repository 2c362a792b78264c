//! `HdChebConv`: the high-order dynamic Chebyshev layer of HDGCN.

use rand::Rng;

use super::{DeviceGraph, GcnConv, GraphConv, check_input};
use crate::attention::{AttentionMaps, MvcAttn, MvcAttnConfig};
use crate::autograd::{Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::nn::{Activation, Dropout, Features, LayerNorm, Linear, Module, ParamVisitor};

/// The node-to-node transition `T_k` of an HD unit.
///
/// HDGCN's dynamic transition is a learned row-stochastic matrix applied in
/// `O(N M h)` (MVCAttn); the static ablation is `Â²`. Any type implementing
/// this trait can be used, which is how a user plugs in another transition.
pub trait Transition<B: Backend>: Module<B> {
    /// Applies the transition to node states `z` (`N x h` to `N x h`).
    fn apply(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, z: &Var<B>) -> Result<Var<B>>;
}

/// The static transition `T(Z) = Â² Z` (paper's ablation "HDGCN-static"),
/// computed as two sparse products with the cached GCN operator.
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticTransition;

impl<B: Backend> Module<B> for StaticTransition {
    fn visit_params(&self, _v: &mut ParamVisitor<'_, B>) {}
}

impl<B: Backend> Transition<B> for StaticTransition {
    fn apply(&self, _tape: &Tape<B>, graph: &DeviceGraph<B>, z: &Var<B>) -> Result<Var<B>> {
        let a = graph.gcn_operator()?;
        a.matmul(&a.matmul(z)?)
    }
}

/// The dynamic transition of HDGCN: MVCAttn's `A_b A_f` applied to the node
/// states, each graph of a batch with its own supernodes.
impl<B: Backend> Transition<B> for MvcAttn<B> {
    fn apply(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, z: &Var<B>) -> Result<Var<B>> {
        let seg = graph.segments_or_whole()?;
        self.forward(tape, z, &seg)
    }
}

/// Hyper-parameters of [`HdChebConv`] (hdgcn-math.md §3).
///
/// # Learning rate and width
///
/// With MVCAttn transitions, keep Adam's learning rate times `hidden` at or
/// below about 0.75. At initialisation each transition hands every node the
/// same vector, so the gradients of the `h x h` value weights are rank one
/// and Adam's first steps change each of them by `lr × hidden` in spectral
/// norm. On Cora the dynamic layer collapsed to the majority class once the
/// product passed 0.9–1.1, at every width from 32 to 256 (the earlier lab
/// notebook, `git show 949970a:docs/results.md`, "Why wide dynamic layers collapse").
#[derive(Debug, Clone, PartialEq)]
pub struct HdChebConfig {
    /// Input width.
    pub in_channels: usize,
    /// Hidden (and output) width `h` (64 in the paper).
    pub hidden: usize,
    /// Chebyshev order `K`, even and at least 2 (6 in the paper): `K / 2` HD units.
    pub k: usize,
    /// Non-linearity σ (ReLU by default).
    pub activation: Activation,
    /// Dropout on every `Z_k`.
    pub dropout: f64,
    /// Dropout on the layer input. Set it to 0 when the surrounding model
    /// already drops the layer's input (as [`crate::models::NodeClassifier`]
    /// and [`crate::models::GraphClassifier`] do before every convolution);
    /// otherwise the input is dropped twice.
    pub input_dropout: f64,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
}

impl HdChebConfig {
    /// Defaults: ReLU, dropout 0.5 on the input and on every `Z_k`,
    /// LayerNorm eps 1e-5.
    pub fn new(in_channels: usize, hidden: usize, k: usize) -> Self {
        HdChebConfig {
            in_channels,
            hidden,
            k,
            activation: Activation::Relu,
            dropout: 0.5,
            input_dropout: 0.5,
            layer_norm_eps: 1e-5,
        }
    }

    /// The configuration for an HD-ChebConv inside a model that drops every
    /// convolution's input itself ([`crate::models::NodeClassifier`],
    /// [`crate::models::GraphClassifier`]): `dropout` on every `Z_k` and no
    /// input dropout, so that the input is not dropped twice.
    pub fn in_model(in_channels: usize, hidden: usize, k: usize, dropout: f64) -> Self {
        HdChebConfig {
            dropout,
            input_dropout: 0.0,
            ..Self::new(in_channels, hidden, k)
        }
    }

    /// Checks the configuration: positive widths, `K` even and `>= 2`,
    /// both dropouts in `[0, 1)`.
    pub fn validate(&self) -> Result<()> {
        crate::nn::check_dims(self.in_channels, self.hidden)?;
        if self.k == 0 || self.k % 2 == 1 {
            return Err(Error::InvalidConfig(format!(
                "HdChebConv needs an even K >= 2 (K/2 HD units), got K = {}",
                self.k
            )));
        }
        for (name, p) in [
            ("dropout", self.dropout),
            ("input_dropout", self.input_dropout),
        ] {
            if !(0.0..1.0).contains(&p) {
                return Err(Error::InvalidConfig(format!(
                    "HdChebConv: {name} must be in [0, 1), got {p}"
                )));
            }
        }
        Ok(())
    }

    /// Number of parameters besides the transitions': the first GCN
    /// (`in · h + h`), per HD unit `Wd` (`h²`) and a GCN (`h² + h`), and the
    /// LayerNorm (`2h`). `None` when it overflows.
    pub fn num_params(&self) -> Option<usize> {
        let h = self.hidden;
        let per_unit = h.checked_mul(h)?.checked_mul(2)?.checked_add(h)?;
        self.in_channels
            .checked_add(1)?
            .checked_mul(h)?
            .checked_add(per_unit.checked_mul(self.k / 2)?)?
            .checked_add(h.checked_mul(2)?)
    }

    /// [`HdChebConfig::num_params`] with one MVCAttn (`attention`, at this
    /// layer's width) per HD unit: the dynamic variant's count.
    pub fn num_params_dynamic(&self, attention: &MvcAttnConfig) -> Option<usize> {
        let mut cfg = attention.clone();
        cfg.hidden = self.hidden;
        self.num_params()?
            .checked_add(cfg.num_params()?.checked_mul(self.k / 2)?)
    }

    /// Builds the layer with one transition per HD unit, made by `transition(k)`
    /// for `k = 1..=K/2`.
    pub fn build<B, T, R, F>(
        &self,
        backend: &B,
        rng: &mut R,
        mut transition: F,
    ) -> Result<HdChebConv<B, T>>
    where
        B: Backend,
        T: Transition<B>,
        R: Rng + ?Sized,
        F: FnMut(usize, &mut R) -> Result<T>,
    {
        self.validate()?;
        // All units at once (the transitions' own parameters are checked
        // by `build_dynamic` and by the transitions).
        crate::limits::check_elements::<B::Elem>(
            format_args!(
                "HdChebConv parameters (K = {}, hidden {}, {} inputs)",
                self.k, self.hidden, self.in_channels
            ),
            self.num_params(),
        )?;
        let h = self.hidden;
        let prime = GcnConv::new(backend, self.in_channels, h, rng)?;
        let mut units = Vec::new();
        for k in 1..=self.k / 2 {
            let transition = transition(k, rng)?;
            let wd = Linear::glorot(backend, h, h, false, rng)?;
            let conv = GcnConv::new(backend, h, h, rng)?;
            units.push(HdUnit {
                transition,
                wd,
                conv,
            });
        }
        Ok(HdChebConv {
            config: self.clone(),
            prime,
            units,
            norm: LayerNorm::new(backend, h, self.layer_norm_eps)?,
            dropout: Dropout::new(self.dropout)?,
            input_dropout: Dropout::new(self.input_dropout)?,
        })
    }

    /// Builds the dynamic variant (HDGCN): one MVCAttn per HD unit, configured
    /// by `attention` (its `hidden` is set to this layer's hidden width).
    pub fn build_dynamic<B: Backend, R: Rng + ?Sized>(
        &self,
        backend: &B,
        rng: &mut R,
        attention: &MvcAttnConfig,
    ) -> Result<HdChebConv<B, MvcAttn<B>>> {
        let mut cfg = attention.clone();
        cfg.hidden = self.hidden;
        self.validate()?;
        cfg.validate()?;
        crate::limits::check_elements::<B::Elem>(
            format_args!(
                "HdChebConv parameters with MVCAttn (K = {}, hidden {}, {} supernodes, {} inputs)",
                self.k, self.hidden, cfg.supernodes, self.in_channels
            ),
            self.num_params_dynamic(&cfg),
        )?;
        self.build(backend, rng, |_, rng| cfg.build(backend, rng))
    }

    /// Builds the static variant (`T_k = Â²`, "HDGCN-static").
    pub fn build_static<B: Backend, R: Rng + ?Sized>(
        &self,
        backend: &B,
        rng: &mut R,
    ) -> Result<HdChebConv<B, StaticTransition>> {
        self.build(backend, rng, |_, _| Ok(StaticTransition))
    }
}

/// One HD-ChebNet unit: `Z_k = T_k(Z_{k-1}) Wd_k`, `Ẑ_k = σ(Â Z_k W_k + b_k)`.
#[derive(Debug, Clone)]
pub struct HdUnit<B: Backend, T> {
    /// The transition `T_k`.
    pub transition: T,
    /// `Wd_k` (`h x h`, no bias).
    pub wd: Linear<B>,
    /// `Â · W_k + b_k`.
    pub conv: GcnConv<B>,
}

/// High-order dynamic Chebyshev convolution (HDGCN, Jiang et al. 2021, §3):
///
/// ```text
/// Z0 = σ(Â X W0 + b0)                                  prime ChebNet
/// Z_k = T_k(Z_{k-1}) Wd_k,  Ẑ_k = σ(Â Z_k W_k + b_k)    k = 1 .. K/2
/// H  = LayerNorm(Z0 + Σ_k Ẑ_k)
/// ```
///
/// Each unit takes the previous unit's transition output (`Z0` for the
/// first). The transition is [`StaticTransition`] (`Â²`) or a learned one
/// such as MVCAttn. Dropout applies to the layer input
/// ([`HdChebConfig::input_dropout`]) and to every `Z_k`
/// ([`HdChebConfig::dropout`]).
///
/// Parameters: `prime.*`, `units.{i}.transition.*`, `units.{i}.wd.weight`,
/// `units.{i}.conv.*`, `norm.weight`, `norm.bias`.
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{DeviceGraph, GraphConv, HdChebConfig};
/// use hdgcn::graph::Graph;
/// use rand::SeedableRng;
/// let cpu = Cpu::<f64>::new();
/// let g = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)]).unwrap());
/// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
/// let conv = HdChebConfig::new(4, 8, 6).build_static(&cpu, &mut rng).unwrap();
/// let tape = Tape::inference(&cpu);
/// let y = conv.forward(&tape, &g, &tape.constant_array(&ndarray::Array2::ones((3, 4))).into()).unwrap();
/// assert_eq!(y.shape(), (3, 8));
/// ```
#[derive(Debug, Clone)]
pub struct HdChebConv<B: Backend, T> {
    config: HdChebConfig,
    /// The prime ChebNet `σ(Â X W0 + b0)`.
    pub prime: GcnConv<B>,
    /// The `K / 2` HD units.
    pub units: Vec<HdUnit<B, T>>,
    /// LayerNorm of the sum.
    pub norm: LayerNorm<B>,
    /// Dropout on every `Z_k`.
    pub dropout: Dropout,
    /// Dropout on the layer input.
    pub input_dropout: Dropout,
}

impl<B: Backend, T: Transition<B>> HdChebConv<B, T> {
    /// The configuration.
    pub fn config(&self) -> &HdChebConfig {
        &self.config
    }

    /// The layer's forward pass with each unit's transition given by
    /// `transition(T_k, Z_{k-1})`.
    fn run<F>(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Features<B>,
        mut transition: F,
    ) -> Result<Var<B>>
    where
        F: FnMut(&T, &Var<B>) -> Result<Var<B>>,
    {
        check_input("HdChebConv", graph, x, self.config.in_channels)?;
        let act = self.config.activation;
        let x = self.input_dropout.forward_features(tape, x)?;
        let z0 = act.apply(&self.prime.forward(tape, graph, &x)?);
        let mut sum = z0.clone();
        let mut prev = z0;
        for unit in &self.units {
            let t = transition(&unit.transition, &prev)?;
            let zk = self
                .dropout
                .forward(&unit.wd.forward(&Features::Dense(t))?)?;
            let zk_hat = act.apply(&unit.conv.forward(
                tape,
                graph,
                &Features::Dense(zk.clone()),
            )?);
            sum = sum.add(&zk_hat)?;
            prev = zk;
        }
        self.norm.forward(&sum)
    }
}

impl<B: Backend> HdChebConv<B, MvcAttn<B>> {
    /// As [`GraphConv::forward`], also returning the MVCAttn attention maps
    /// of every HD unit (`K / 2` entries, unit 1 first), each with `A_f`
    /// (`M x N_g`) and `A_b` (`N_g x M`) per graph of the batch, on the host.
    ///
    /// ```
    /// use hdgcn::attention::MvcAttnConfig;
    /// use hdgcn::autograd::Tape;
    /// use hdgcn::backend::Cpu;
    /// use hdgcn::conv::{DeviceGraph, HdChebConfig};
    /// use hdgcn::graph::Graph;
    /// use rand::SeedableRng;
    /// let cpu = Cpu::<f64>::new();
    /// let g = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)])?);
    /// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    /// let mut attn = MvcAttnConfig::new(8);
    /// attn.supernodes = 2;
    /// let conv = HdChebConfig::new(4, 8, 6).build_dynamic(&cpu, &mut rng, &attn)?;
    /// let tape = Tape::inference(&cpu);
    /// let x = tape.constant_array(&ndarray::Array2::ones((3, 4))).into();
    /// let (y, maps) = conv.forward_with_maps(&tape, &g, &x)?;
    /// assert_eq!(y.shape(), (3, 8));
    /// assert_eq!(maps.len(), 3);
    /// assert_eq!(maps[0].forward[0].dim(), (2, 3));
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`GraphConv::forward`].
    pub fn forward_with_maps(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Features<B>,
    ) -> Result<(Var<B>, Vec<AttentionMaps>)> {
        let seg = graph.segments_or_whole()?;
        let mut maps = Vec::with_capacity(self.units.len());
        let out = self.run(tape, graph, x, |t, z| {
            let (out, m) = t.forward_with_maps(tape, z, &seg)?;
            maps.push(m);
            Ok(out)
        })?;
        Ok((out, maps))
    }
}

impl<B: Backend, T: Transition<B>> GraphConv<B> for HdChebConv<B, T> {
    fn in_channels(&self) -> usize {
        self.config.in_channels
    }

    fn out_channels(&self) -> usize {
        self.config.hidden
    }

    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        self.run(tape, graph, x, |t, z| t.apply(tape, graph, z))
    }
}

impl<B: Backend, T: Transition<B>> Module<B> for HdChebConv<B, T> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.child("prime", &self.prime);
        for (i, u) in self.units.iter().enumerate() {
            v.child(&format!("units.{i}.transition"), &u.transition);
            v.child(&format!("units.{i}.wd"), &u.wd);
            v.child(&format!("units.{i}.conv"), &u.conv);
        }
        v.child("norm", &self.norm);
    }

    fn set_training(&mut self, training: bool) {
        self.dropout.set_training(training);
        self.input_dropout.set_training(training);
        for u in &mut self.units {
            u.transition.set_training(training);
        }
    }
}
