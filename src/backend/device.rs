//! Choosing a backend at run time.
//!
//! Backends are distinct types, so code that must run on a device picked at
//! run time (a `--device` flag, say) is written once as a [`WithBackend`]
//! task, generic over the backend, and [`Device::run`] instantiates it for
//! the chosen one.

use super::{Backend, Cpu};
use crate::error::Result;
use crate::named::named_enum;

/// A compute device, as chosen by a user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// The CPU backend, [`Cpu<f32>`].
    #[default]
    Cpu,
    /// The wgpu backend (feature `wgpu`), on the adapter chosen by wgpu's
    /// environment variables (`WGPU_BACKEND`, `WGPU_ADAPTER_NAME`,
    /// `WGPU_POWER_PREF`).
    Wgpu,
}

named_enum!(Device, "device", {
    Cpu => "cpu",
    Wgpu => "wgpu" | "gpu",
});

impl Device {
    /// Opens the device and runs `task` on its backend.
    ///
    /// # Errors
    /// [`Error::Backend`](crate::Error::Backend) when the wgpu backend is requested but the crate
    /// was built without the `wgpu` feature, or no adapter is available.
    ///
    /// ```
    /// use hdgcn::backend::{Backend, Device, WithBackend};
    ///
    /// struct Name;
    /// impl WithBackend for Name {
    ///     type Output = String;
    ///     fn run<B: Backend<Elem = f32>>(self, backend: B) -> String {
    ///         backend.name()
    ///     }
    /// }
    /// let device: Device = "cpu".parse()?;
    /// assert!(device.run(Name)?.starts_with("cpu"));
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    pub fn run<T: WithBackend>(self, task: T) -> Result<T::Output> {
        match self {
            Device::Cpu => Ok(task.run(Cpu::<f32>::new())),
            #[cfg(feature = "wgpu")]
            Device::Wgpu => Ok(task.run(super::Wgpu::new()?)),
            #[cfg(not(feature = "wgpu"))]
            Device::Wgpu => Err(crate::Error::Backend(
                "the wgpu device needs the crate's `wgpu` feature (cargo ... --features wgpu)"
                    .into(),
            )),
        }
    }
}

/// A computation generic over the backend, run by [`Device::run`].
pub trait WithBackend {
    /// What the computation returns.
    type Output;
    /// Runs on `backend`.
    fn run<B: Backend<Elem = f32>>(self, backend: B) -> Self::Output;
}
