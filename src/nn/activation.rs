//! Activation functions as a configurable value.

use std::str::FromStr;

use crate::autograd::Var;
use crate::backend::Backend;
use crate::error::Error;

/// A choice of non-linearity for configurable layers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Activation {
    /// ReLU (default).
    #[default]
    Relu,
    /// Leaky ReLU with a negative slope.
    LeakyRelu(f64),
    /// ELU with alpha.
    Elu(f64),
    /// Sigmoid.
    Sigmoid,
    /// Tanh.
    Tanh,
    /// Exact GELU.
    Gelu,
    /// Identity.
    Identity,
}

impl Activation {
    /// The name [`FromStr`] parses into this kind of activation: `relu`,
    /// `leaky_relu`, `elu`, `sigmoid`, `tanh`, `gelu` or `identity`. The
    /// parameter (slope, alpha) is not part of the name.
    ///
    /// ```
    /// use hdgcn::nn::Activation;
    /// let a: Activation = "None".parse()?;
    /// assert_eq!(a, Activation::Identity);
    /// assert_eq!(a.name(), "identity");
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::LeakyRelu(_) => "leaky_relu",
            Activation::Elu(_) => "elu",
            Activation::Sigmoid => "sigmoid",
            Activation::Tanh => "tanh",
            Activation::Gelu => "gelu",
            Activation::Identity => "identity",
        }
    }

    /// Applies the activation.
    pub fn apply<B: Backend>(&self, x: &Var<B>) -> Var<B> {
        match *self {
            Activation::Relu => x.relu(),
            Activation::LeakyRelu(s) => x.leaky_relu(s),
            Activation::Elu(a) => x.elu(a),
            Activation::Sigmoid => x.sigmoid(),
            Activation::Tanh => x.tanh(),
            Activation::Gelu => x.gelu(),
            Activation::Identity => x.clone(),
        }
    }
}

impl FromStr for Activation {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "relu" => Activation::Relu,
            "leaky_relu" => Activation::LeakyRelu(0.01),
            "elu" => Activation::Elu(1.0),
            "sigmoid" => Activation::Sigmoid,
            "tanh" => Activation::Tanh,
            "gelu" => Activation::Gelu,
            "identity" | "none" => Activation::Identity,
            other => {
                return Err(Error::InvalidConfig(format!(
                    "unknown activation '{other}' (expected relu, leaky_relu, elu, sigmoid, tanh, gelu, identity)"
                )));
            }
        })
    }
}
