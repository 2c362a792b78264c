//! The [`Module`] trait: named parameters and train/eval mode.

use crate::autograd::Param;
use crate::backend::Backend;

/// How a parameter is stored here relative to PyTorch's layout of the same
/// tensor (used by
/// [`load_pytorch_state_dict`](crate::checkpoint::load_pytorch_state_dict)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TorchLayout {
    /// As in PyTorch; a 1-D PyTorch tensor of length `n` (a bias) is a
    /// `1 x n` row here.
    Same,
    /// The transpose of PyTorch's: a [`Linear`](crate::nn::Linear) weight
    /// is `in x out` here and `[out, in]` in `torch.nn.Linear` / PyG.
    Transposed,
    /// PyTorch's tensor has one more, leading dimension of size 1: a
    /// `rows x cols` parameter here is `[1, rows, cols]` there (PyG's
    /// attention vectors `att_src`, `att_dst`, `att`: `[1, heads, C]`).
    LeadingOne,
}

enum Sink<'a, B: Backend> {
    Plain(&'a mut dyn FnMut(&str, &Param<B>)),
    WithLayout(&'a mut dyn FnMut(&str, &Param<B>, TorchLayout)),
}

/// Walks a module tree's parameters with stable, PyG-like dotted names
/// (`conv1.lins.0.weight`).
pub struct ParamVisitor<'a, B: Backend> {
    prefix: Vec<String>,
    f: Sink<'a, B>,
}

impl<'a, B: Backend> ParamVisitor<'a, B> {
    /// A visitor calling `f(name, param)` for every parameter.
    pub fn new(f: &'a mut dyn FnMut(&str, &Param<B>)) -> Self {
        ParamVisitor {
            prefix: Vec::new(),
            f: Sink::Plain(f),
        }
    }

    /// A visitor calling `f(name, param, layout)` for every parameter, with
    /// how it is laid out relative to PyTorch.
    pub fn with_layout(f: &'a mut dyn FnMut(&str, &Param<B>, TorchLayout)) -> Self {
        ParamVisitor {
            prefix: Vec::new(),
            f: Sink::WithLayout(f),
        }
    }

    /// Reports a parameter under `name` (relative to the current prefix),
    /// stored as PyTorch stores it ([`TorchLayout::Same`]).
    pub fn param(&mut self, name: &str, p: &Param<B>) {
        self.report(name, p, TorchLayout::Same);
    }

    /// Reports a parameter stored as the transpose of PyTorch's layout
    /// ([`TorchLayout::Transposed`], e.g. a `Linear` weight, `in x out`).
    pub fn param_transposed(&mut self, name: &str, p: &Param<B>) {
        self.report(name, p, TorchLayout::Transposed);
    }

    /// Reports a parameter that PyTorch stores with a leading dimension
    /// of size 1 ([`TorchLayout::LeadingOne`], e.g. GAT's `att_src`,
    /// `heads x C` here and `[1, heads, C]` in PyG).
    pub fn param_leading_one(&mut self, name: &str, p: &Param<B>) {
        self.report(name, p, TorchLayout::LeadingOne);
    }

    fn report(&mut self, name: &str, p: &Param<B>, layout: TorchLayout) {
        let full;
        let name = if self.prefix.is_empty() {
            name
        } else {
            full = format!("{}.{}", self.prefix.join("."), name);
            &full
        };
        match &mut self.f {
            Sink::Plain(f) => f(name, p),
            Sink::WithLayout(f) => f(name, p, layout),
        }
    }

    /// Visits a child module under `name`.
    pub fn child<M: Module<B> + ?Sized>(&mut self, name: &str, m: &M) {
        self.prefix.push(name.to_string());
        m.visit_params(self);
        self.prefix.pop();
    }
}

/// A building block with trainable parameters.
///
/// Implement [`Module::visit_params`] to expose parameters (call
/// [`ParamVisitor::param`] for own parameters and [`ParamVisitor::child`] for
/// sub-modules) and, if the module behaves differently in training (dropout),
/// [`Module::set_training`].
pub trait Module<B: Backend> {
    /// Reports every parameter with its name.
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>);

    /// Switches between training (`true`) and evaluation mode. Containers
    /// must forward the call to their children.
    fn set_training(&mut self, _training: bool) {}

    /// All parameters with their full names, in visiting order.
    fn named_params(&self) -> Vec<(String, Param<B>)> {
        let mut out = Vec::new();
        let mut f = |name: &str, p: &Param<B>| out.push((name.to_string(), p.clone()));
        let mut v = ParamVisitor::new(&mut f);
        self.visit_params(&mut v);
        out
    }

    /// All parameters with their full names and their layout relative to
    /// PyTorch's, in visiting order.
    fn named_params_with_layout(&self) -> Vec<(String, Param<B>, TorchLayout)> {
        let mut out = Vec::new();
        let mut f =
            |name: &str, p: &Param<B>, l: TorchLayout| out.push((name.to_string(), p.clone(), l));
        let mut v = ParamVisitor::with_layout(&mut f);
        self.visit_params(&mut v);
        out
    }

    /// All parameters, in visiting order.
    fn params(&self) -> Vec<Param<B>> {
        self.named_params().into_iter().map(|(_, p)| p).collect()
    }

    /// Total number of trainable scalars.
    fn num_params(&self) -> usize {
        self.params().iter().map(|p| p.numel()).sum()
    }
}
