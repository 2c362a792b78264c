//! [`Loader`]: where the training batches of each epoch come from.

use crate::error::Result;

/// The training batches of every epoch, in the order to train on them.
///
/// A loader may reshuffle per epoch (graph classification does, from its
/// own seeded stream) and build each batch only when the loop asks for it,
/// so an epoch never holds more than one batch on the device. A `Vec` of
/// batches is a loader that yields clones of its batches in order every
/// epoch (full-batch training: one batch).
pub trait Loader<T> {
    /// How many batches an epoch yields (for progress display only).
    fn num_batches(&self) -> usize;

    /// The batches of `epoch` (0-based).
    fn epoch(&mut self, epoch: usize) -> Box<dyn Iterator<Item = Result<T>> + '_>;
}

impl<T: Clone> Loader<T> for Vec<T> {
    fn num_batches(&self) -> usize {
        self.len()
    }

    fn epoch(&mut self, _epoch: usize) -> Box<dyn Iterator<Item = Result<T>> + '_> {
        Box::new(self.iter().cloned().map(Ok))
    }
}
