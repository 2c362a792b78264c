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
/// `O(N M h)` (MVCAttn); the static ablation is a power of `Â`
/// ([`StaticTransition`]: `Â` under [`HdChaining::Output`], `Â²` under
/// [`HdChaining::Transition`]). Any type implementing this trait can be
/// used, which is how a user plugs in another transition.
pub trait Transition<B: Backend>: Module<B> {
    /// Applies the transition to node states `z` (`N x h` to `N x h`).
    fn apply(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, z: &Var<B>) -> Result<Var<B>>;

    /// `T(z) · w` for a weight `w` (`h x h'`), the product an HD unit
    /// takes next (`T_k(Z) Wd_k`).
    ///
    /// The default computes `self.apply(..)` and then the product. A
    /// transition whose output already ends in a weight product may fold
    /// `w` into it, so that the product runs over fewer rows: MVCAttn's
    /// output is `A_b (Ŝ W_bv)`, and `A_b (Ŝ (W_bv w))` multiplies `w` with
    /// `h x h` and the supernode rows instead of the `N` node rows. The
    /// value is the same up to rounding.
    fn apply_then(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        z: &Var<B>,
        w: &Var<B>,
    ) -> Result<Var<B>> {
        self.apply(tape, graph, z)?.matmul(w)
    }
}

/// The static transition `T(Z) = Â^hops Z` (the paper's ablation
/// "HDGCN-static"), computed as `hops` sparse products with the cached GCN
/// operator.
///
/// [`StaticTransition::default`] is `Â` (one hop), the transition of the
/// default reading [`HdChaining::Output`], under which unit `k` computes the
/// paper's `Â^{2k} Â X` (Eq. 3rdcheb). The earlier reading
/// [`HdChaining::Transition`] used `Â²`
/// ([`StaticTransition::squared`]); [`HdChebConfig::build_static`] picks the
/// one that belongs to [`HdChebConfig::chaining`], and
/// [`HdChebConfig::build`] accepts either with either reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticTransition {
    /// The power of `Â` (at least 1).
    pub hops: usize,
}

impl Default for StaticTransition {
    /// `Â` (one hop).
    fn default() -> Self {
        StaticTransition { hops: 1 }
    }
}

impl StaticTransition {
    /// `T(Z) = Â Z`, the default reading's static transition.
    pub fn a_hat() -> Self {
        StaticTransition { hops: 1 }
    }

    /// `T(Z) = Â² Z`, the earlier reading's static transition.
    pub fn squared() -> Self {
        StaticTransition { hops: 2 }
    }

    /// The static transition that belongs to a reading: `Â` for
    /// [`HdChaining::Output`], `Â²` for [`HdChaining::Transition`]
    /// (hdgcn-math.md §3).
    pub fn for_chaining(chaining: HdChaining) -> Self {
        match chaining {
            HdChaining::Output => Self::a_hat(),
            HdChaining::Transition => Self::squared(),
        }
    }
}

impl<B: Backend> Module<B> for StaticTransition {
    fn visit_params(&self, _v: &mut ParamVisitor<'_, B>) {}
}

impl<B: Backend> Transition<B> for StaticTransition {
    /// # Errors
    /// [`Error::InvalidConfig`] if `hops` is 0; otherwise as the sparse
    /// product.
    fn apply(&self, _tape: &Tape<B>, graph: &DeviceGraph<B>, z: &Var<B>) -> Result<Var<B>> {
        if self.hops == 0 {
            return Err(Error::InvalidConfig(
                "StaticTransition: hops must be at least 1".into(),
            ));
        }
        let a = graph.gcn_operator()?;
        let mut out = a.matmul(z)?;
        for _ in 1..self.hops {
            out = a.matmul(&out)?;
        }
        Ok(out)
    }
}

/// The dynamic transition of HDGCN: MVCAttn's `A_b A_f` applied to the node
/// states, each graph of a batch with its own supernodes.
impl<B: Backend> Transition<B> for MvcAttn<B> {
    fn apply(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, z: &Var<B>) -> Result<Var<B>> {
        let seg = graph.segments_or_whole()?;
        self.forward(tape, z, &seg)
    }

    /// `A_b (Ŝ (W_bv w))`: `w` joins the value weights (see
    /// [`MvcAttn::forward_then`]).
    fn apply_then(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        z: &Var<B>,
        w: &Var<B>,
    ) -> Result<Var<B>> {
        let seg = graph.segments_or_whole()?;
        self.forward_then(tape, z, &seg, w)
    }
}

/// How the HD units of an [`HdChebConv`] chain (hdgcn-math.md §3).
///
/// Both readings have the same parameters (names and shapes), so a
/// checkpoint of one loads into the other without an error but computes
/// something else: a model saved before the default became
/// [`HdChaining::Output`] must be rebuilt with [`HdChaining::Transition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HdChaining {
    /// The paper's layer equation (Section 3 and the appendix), the
    /// default: each unit takes the previous unit's **output**,
    /// `Z_k = σ(Â T_k(Z_{k-1}) Wd_k W_k + b_k)`, and the static
    /// transition is `Â`, so that with identity weights unit `k` is
    /// `Â^{2k} Â X` (Eq. 3rdcheb) and with MVCAttn it realises
    /// `Â A_d^{(k)} ⋯ Â A_d^{(1)} Â X` (the paper's "`Â^k A_d^k`").
    #[default]
    Output,
    /// The earlier reading (the notation of the paper's Section 3.2): each
    /// unit's transition takes the previous unit's **transition output**,
    /// `Z_k = T_k(Z_{k-1}) Wd_k`, `Ẑ_k = σ(Â Z_k W_k + b_k)`, and the static
    /// transition is `Â²`. Nothing re-injects the graph between
    /// transitions, so a near-uniform MVCAttn hands units 2, 3, … the same
    /// vector at every node. Kept to reproduce earlier results and to load
    /// models trained before the default changed.
    Transition,
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
/// notebook, `git show 949970a:docs/results.md`, "Why wide dynamic layers
/// collapse"; measured with the earlier reading, [`HdChaining::Transition`]).
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
    /// Dropout inside every unit, on `T_k(Z_{k-1}) Wd_k` before its
    /// `Â · W_k` (under [`HdChaining::Transition`] that is the `Z_k` the
    /// next unit's transition reads).
    pub dropout: f64,
    /// Dropout on the layer input. Set it to 0 when the surrounding model
    /// already drops the layer's input (as [`crate::models::NodeClassifier`]
    /// and [`crate::models::GraphClassifier`] do before every convolution);
    /// otherwise the input is dropped twice.
    pub input_dropout: f64,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
    /// How the units chain ([`HdChaining::Output`], the paper's layer
    /// equation, by default). It also picks the transition of
    /// [`HdChebConfig::build_static`].
    pub chaining: HdChaining,
}

impl HdChebConfig {
    /// Defaults: ReLU, dropout 0.5 on the input and inside every unit,
    /// LayerNorm eps 1e-5, [`HdChaining::Output`].
    pub fn new(in_channels: usize, hidden: usize, k: usize) -> Self {
        HdChebConfig {
            in_channels,
            hidden,
            k,
            activation: Activation::Relu,
            dropout: 0.5,
            input_dropout: 0.5,
            layer_norm_eps: 1e-5,
            chaining: HdChaining::Output,
        }
    }

    /// The configuration for an HD-ChebConv inside a model that drops every
    /// convolution's input itself ([`crate::models::NodeClassifier`],
    /// [`crate::models::GraphClassifier`]): `dropout` inside every unit and no
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

    /// Builds the static variant ("HDGCN-static"), with the transition of
    /// [`HdChebConfig::chaining`] ([`StaticTransition::for_chaining`]):
    /// `T_k = Â` under [`HdChaining::Output`] (the default), `Â²` under
    /// [`HdChaining::Transition`]. For another combination, pass the
    /// transition to [`HdChebConfig::build`].
    pub fn build_static<B: Backend, R: Rng + ?Sized>(
        &self,
        backend: &B,
        rng: &mut R,
    ) -> Result<HdChebConv<B, StaticTransition>> {
        let t = StaticTransition::for_chaining(self.chaining);
        self.build(backend, rng, |_, _| Ok(t))
    }
}

/// One HD-ChebNet unit: `σ(Â T_k(·) Wd_k W_k + b_k)`; what `T_k` reads
/// depends on [`HdChaining`].
#[derive(Debug, Clone)]
pub struct HdUnit<B: Backend, T> {
    /// The transition `T_k`.
    pub transition: T,
    /// `Wd_k` (`h x h`, no bias).
    pub wd: Linear<B>,
    /// `Â · W_k + b_k`.
    pub conv: GcnConv<B>,
}

/// High-order dynamic Chebyshev convolution (HDGCN, Jiang et al. 2021, §3).
///
/// By default ([`HdChaining::Output`], the paper's layer equation) each
/// unit takes the previous unit's output:
///
/// ```text
/// Z0  = σ(Â X W0 + b0)                                 prime ChebNet
/// Z_k = σ(Â T_k(Z_{k-1}) Wd_k W_k + b_k)                k = 1 .. K/2
/// H   = LayerNorm(Z0 + Σ_k Z_k)
/// ```
///
/// With [`StaticTransition`] (`T = Â`, "HDGCN-static") unit `k` is the
/// paper's `Â^{2k} Â X θ^{(k)}` up to the non-linearities (exactly, with
/// identity weights, zero biases and a non-negative input); with MVCAttn
/// (HDGCN) it realises `Â A_d^{(k)} ⋯ Â A_d^{(1)} Â X`, each MVCAttn
/// attending over the previous unit's output.
///
/// The earlier reading, [`HdChaining::Transition`] (set
/// [`HdChebConfig::chaining`]), chains the units through the transition
/// outputs instead, with `T = Â²` for the static variant:
///
/// ```text
/// Z_k = T_k(Z_{k-1}) Wd_k,  Ẑ_k = σ(Â Z_k W_k + b_k),  H = LayerNorm(Z0 + Σ_k Ẑ_k)
/// ```
///
/// The transition is [`StaticTransition`] or a learned one such as
/// MVCAttn. Dropout applies to the layer input
/// ([`HdChebConfig::input_dropout`]) and inside every unit to
/// `T_k(·) Wd_k` ([`HdChebConfig::dropout`]).
///
/// Parameters (the same under both readings, so checkpoints load across
/// them; see [`HdChaining`]): `prime.*`, `units.{i}.transition.*`,
/// `units.{i}.wd.weight`, `units.{i}.conv.*`, `norm.weight`, `norm.bias`.
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{DeviceGraph, GraphConv, HdChaining, HdChebConfig};
/// use hdgcn::graph::Graph;
/// use rand::SeedableRng;
/// let cpu = Cpu::<f64>::new();
/// let g = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)]).unwrap());
/// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
/// let conv = HdChebConfig::new(4, 8, 6).build_static(&cpu, &mut rng).unwrap();
/// let tape = Tape::inference(&cpu);
/// let y = conv.forward(&tape, &g, &tape.constant_array(&ndarray::Array2::ones((3, 4))).into()).unwrap();
/// assert_eq!(y.shape(), (3, 8));
/// // The earlier reading (units chained through the transitions, static T = Â²):
/// let mut cfg = HdChebConfig::new(4, 8, 6);
/// cfg.chaining = HdChaining::Transition;
/// let earlier = cfg.build_static(&cpu, &mut rng).unwrap();
/// assert_eq!(earlier.units[0].transition.hops, 2);
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

    /// The summands of `H` before the LayerNorm: the prime ChebNet's `Z0`,
    /// then every unit's output (`Z_k` under [`HdChaining::Output`], `Ẑ_k`
    /// under [`HdChaining::Transition`]), `K / 2 + 1` entries of `N x h`.
    /// The layer's output is `LayerNorm` of their sum.
    ///
    /// # Errors
    /// As [`GraphConv::forward`].
    pub fn forward_units(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Features<B>,
    ) -> Result<Vec<Var<B>>> {
        self.run_units(tape, graph, x, |t, z, w| t.apply_then(tape, graph, z, w))
    }

    /// The summands of `H` (see [`HdChebConv::forward_units`]) with each
    /// unit's `T_k(input) Wd_k` given by `transition(T_k, input, Wd_k)`.
    fn run_units<F>(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Features<B>,
        mut transition: F,
    ) -> Result<Vec<Var<B>>>
    where
        F: FnMut(&T, &Var<B>, &Var<B>) -> Result<Var<B>>,
    {
        check_input("HdChebConv", graph, x, self.config.in_channels)?;
        let act = self.config.activation;
        let x = self.input_dropout.forward_features(tape, x)?;
        let z0 = act.apply(&self.prime.forward(tape, graph, &x)?);
        let mut outputs = Vec::with_capacity(self.units.len() + 1);
        outputs.push(z0.clone());
        // The input of the next unit's transition.
        let mut prev = z0;
        for unit in &self.units {
            // `T_k(Z) Wd_k`, formed by the transition (which may fold the
            // product into its own; see `Transition::apply_then`).
            let mut t = transition(&unit.transition, &prev, &tape.param(&unit.wd.weight))?;
            if let Some(b) = &unit.wd.bias {
                t = t.add(&tape.param(b))?;
            }
            let zk = self.dropout.forward(&t)?;
            let out = act.apply(
                &unit
                    .conv
                    .forward(tape, graph, &Features::Dense(zk.clone()))?,
            );
            prev = match self.config.chaining {
                HdChaining::Output => out.clone(),
                HdChaining::Transition => zk,
            };
            outputs.push(out);
        }
        Ok(outputs)
    }

    /// The layer's forward pass with each unit's `T_k(input) Wd_k` given by
    /// `transition(T_k, input, Wd_k)`.
    fn run<F>(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Features<B>,
        transition: F,
    ) -> Result<Var<B>>
    where
        F: FnMut(&T, &Var<B>, &Var<B>) -> Result<Var<B>>,
    {
        let outputs = self.run_units(tape, graph, x, transition)?;
        let mut it = outputs.into_iter();
        let mut sum = it
            .next()
            .ok_or_else(|| Error::InvalidConfig("HdChebConv: no prime output".into()))?;
        for out in it {
            sum = sum.add(&out)?;
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
        let out = self.run(tape, graph, x, |t, z, w| {
            let (out, m) = t.forward_with_maps_then(tape, z, &seg, Some(w))?;
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
        self.run(tape, graph, x, |t, z, w| t.apply_then(tape, graph, z, w))
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
