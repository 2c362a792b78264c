//! The fast gradient method's step on weights (Goodfellow et al.; Miyato
//! et al. on embeddings), shared by the node and graph trainers: move a
//! group of parameters by `ε g / ‖g‖`, run the loss there, add that pass's
//! gradients to the plain ones, put the parameters back.

use std::rc::Rc;

use crate::autograd::{Gradients, Param};
use crate::backend::{Backend, BinaryOp, UnaryOp};
use crate::error::{Error, Result, check_positive};

/// Checks an adversarial setting: `eps` (if any) finite and positive, and
/// a warm-up of `warmup` epochs that leaves at least one of `epochs`.
pub(super) fn check_settings(eps: Option<f64>, warmup: usize, epochs: usize) -> Result<()> {
    let Some(eps) = eps else {
        return Ok(());
    };
    check_positive("adversarial_epsilon", eps)?;
    if warmup >= epochs {
        return Err(Error::InvalidConfig(format!(
            "adversarial_warmup_epochs of {warmup} leaves none of the {epochs} epochs \
             for the adversarial step: it must be below the epochs"
        )));
    }
    Ok(())
}

/// Parameters moved by [`move_along_gradient`]; dropping it puts their
/// values back (also when the pass in between fails).
pub(super) struct Moved<B: Backend> {
    saved: Vec<(Param<B>, Rc<B::Tensor>)>,
}

impl<B: Backend> Drop for Moved<B> {
    fn drop(&mut self) {
        for (p, original) in self.saved.drain(..) {
            p.set_shared(original);
        }
    }
}

/// Moves each of `params` that has a gradient in `grads` by
/// `eps g / ‖g‖`, with one norm over all of those gradients. `None` (and
/// nothing moved) when that norm is zero or not finite.
pub(super) fn move_along_gradient<B: Backend>(
    backend: &B,
    params: &[Param<B>],
    grads: &Gradients<B>,
    eps: f64,
) -> Option<Moved<B>> {
    let used: Vec<(&Param<B>, &B::Tensor)> = params
        .iter()
        .filter_map(|p| grads.get(p).map(|g| (p, g)))
        .collect();
    let tensors: Vec<&B::Tensor> = used.iter().map(|(_, g)| *g).collect();
    let norm = backend
        .sum_squares_many(&tensors)
        .iter()
        .sum::<f64>()
        .sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return None;
    }
    let saved = used
        .into_iter()
        .map(|(p, g)| {
            let original = p.shared_value();
            let r = backend.unary(UnaryOp::Affine(eps / norm, 0.0), g);
            p.set(backend.binary(BinaryOp::Add, &original, &r));
            (p.clone(), original)
        })
        .collect();
    Some(Moved { saved })
}

/// Adds the gradients of a second pass, `more`, to `grads`, for each of
/// `params` that has one.
pub(super) fn add_gradients<B: Backend>(
    backend: &B,
    params: &[Param<B>],
    grads: &mut Gradients<B>,
    more: &Gradients<B>,
) {
    for p in params {
        if let Some(g2) = more.get(p) {
            match grads.get_mut(p) {
                Some(g) => backend.add_assign(g, g2),
                None => grads.insert(p, g2.clone()),
            }
        }
    }
}
