//! Parameter-free readouts: sum, mean, max and mean + max.

use super::{Readout, check_batch};
use crate::autograd::{Segments, Tape, Var};
use crate::backend::{Backend, SegmentReduce};
use crate::error::Result;
use crate::nn::{Module, ParamVisitor};

macro_rules! simple_readout {
    ($name:ident, $label:literal, $doc:literal, $op:expr) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name;

        impl<B: Backend> Module<B> for $name {
            fn visit_params(&self, _v: &mut ParamVisitor<'_, B>) {}
        }

        impl<B: Backend> Readout<B> for $name {
            fn forward(&self, _tape: &Tape<B>, h: &Var<B>, seg: &Segments<B>) -> Result<Var<B>> {
                check_batch($label, h, seg)?;
                h.segment_reduce(seg, $op)
            }

            fn out_channels(&self, in_channels: usize) -> usize {
                in_channels
            }
        }
    };
}

simple_readout!(
    SumReadout,
    "SumReadout",
    "`h_g = Σ_v h_v` over the nodes of each graph (PyG `global_add_pool`).",
    SegmentReduce::Sum
);
simple_readout!(
    MeanReadout,
    "MeanReadout",
    "`h_g = mean_v h_v` over the nodes of each graph (PyG `global_mean_pool`).",
    SegmentReduce::Mean
);
simple_readout!(
    MaxReadout,
    "MaxReadout",
    "`h_g = max_v h_v` per column over the nodes of each graph (PyG \
     `global_max_pool`); the gradient goes to the (first) arg-max node.",
    SegmentReduce::Max
);

/// `h_g = mean_v h_v + max_v h_v`: the **sum** of the mean and max pools,
/// as in HDGCN's and TextING's readout (the width stays `F`). For the
/// concatenation `[mean ‖ max]` used elsewhere, concatenate the outputs of
/// [`MeanReadout`] and [`MaxReadout`] along columns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MeanMaxReadout;

impl<B: Backend> Module<B> for MeanMaxReadout {
    fn visit_params(&self, _v: &mut ParamVisitor<'_, B>) {}
}

impl<B: Backend> Readout<B> for MeanMaxReadout {
    fn forward(&self, _tape: &Tape<B>, h: &Var<B>, seg: &Segments<B>) -> Result<Var<B>> {
        check_batch("MeanMaxReadout", h, seg)?;
        mean_plus_max(h, seg)
    }

    fn out_channels(&self, in_channels: usize) -> usize {
        in_channels
    }
}

/// `segment mean + segment max` (shared with the gated readout).
pub(crate) fn mean_plus_max<B: Backend>(h: &Var<B>, seg: &Segments<B>) -> Result<Var<B>> {
    let mean = h.segment_reduce(seg, SegmentReduce::Mean)?;
    let max = h.segment_reduce(seg, SegmentReduce::Max)?;
    mean.add(&max)
}
