//! The [`Module`] trait: named parameters and train/eval mode.

use crate::autograd::Param;
use crate::backend::Backend;

/// Walks a module tree's parameters with stable, PyG-like dotted names
/// (`conv1.lins.0.weight`).
pub struct ParamVisitor<'a, B: Backend> {
    prefix: Vec<String>,
    f: &'a mut dyn FnMut(&str, &Param<B>),
}

impl<'a, B: Backend> ParamVisitor<'a, B> {
    /// A visitor calling `f(name, param)` for every parameter.
    pub fn new(f: &'a mut dyn FnMut(&str, &Param<B>)) -> Self {
        ParamVisitor {
            prefix: Vec::new(),
            f,
        }
    }

    /// Reports a parameter under `name` (relative to the current prefix).
    pub fn param(&mut self, name: &str, p: &Param<B>) {
        if self.prefix.is_empty() {
            (self.f)(name, p);
        } else {
            let full = format!("{}.{}", self.prefix.join("."), name);
            (self.f)(&full, p);
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

    /// All parameters, in visiting order.
    fn params(&self) -> Vec<Param<B>> {
        self.named_params().into_iter().map(|(_, p)| p).collect()
    }

    /// Total number of trainable scalars.
    fn num_params(&self) -> usize {
        self.params().iter().map(|p| p.numel()).sum()
    }
}
