//! (filled in by its kernels' change)
