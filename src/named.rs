//! `named_enum!`: one convention for the options users pick by name.
//!
//! The crate's fieldless option enums ([`crate::attention::Routing`],
//! [`crate::backend::Device`], [`crate::graph::Normalization`],
//! [`crate::models::NodeWeighting`], [`crate::train::GraphOptimizer`],
//! [`crate::train::AdversarialNorm`], [`crate::train::SelectBy`]) are chosen on command lines and
//! written to JSON reports. The macro gives each the same three pieces:
//!
//! - `as_str(self) -> &'static str`: the variant's lower-case name;
//! - `FromStr`: reads a name (or an alias) in any case; anything else is
//!   [`crate::Error::InvalidConfig`] naming the option, the input and the
//!   names it accepts;
//! - `Display`: writes `as_str`, so `x.to_string().parse()` gives `x` back.
//!
//! ```ignore
//! named_enum!(Routing, "routing", {
//!     Attention => "attention",
//!     Votes => "votes" | "vote",   // an alias FromStr also accepts
//! });
//! ```

/// Implements `as_str`, `FromStr` and `Display` for a fieldless enum from a
/// table `Variant => "name" | "alias" ...` (see the module docs).
macro_rules! named_enum {
    ($ty:ident, $what:literal, { $($variant:ident => $name:literal $(| $alias:literal)*),+ $(,)? }) => {
        impl $ty {
            #[doc = concat!(
                "The lower-case name of this ", $what,
                " that [`FromStr`](std::str::FromStr) reads back and `Display` writes: ",
                $("`", $name, "` "),+
            )]
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::error::Error;

            #[doc = concat!(
                "Parses a ", $what, " by name, in any case: ",
                $("`", $name, "` " $(, "(or `", $alias, "`) ")*),+
            )]
            fn from_str(s: &str) -> $crate::error::Result<Self> {
                let lower = s.to_ascii_lowercase();
                $(
                    if lower == $name $(|| lower == $alias)* {
                        return Ok($ty::$variant);
                    }
                )+
                Err($crate::error::Error::InvalidConfig(format!(
                    "unknown {} '{}' ({})",
                    $what,
                    s,
                    [$($name),+].join(" | ")
                )))
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        $crate::named::serde_by_name!($ty);
    };
}

/// `serde` for a type with `FromStr` and `Display`: written as its name,
/// read from a string through `FromStr` (whose error, naming the option
/// and the names it accepts, becomes the deserialiser's).
macro_rules! serde_by_name {
    ($ty:ty) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(
                &self,
                s: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(
                d: D,
            ) -> std::result::Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use named_enum;
pub(crate) use serde_by_name;

#[cfg(test)]
mod tests {
    use crate::error::Error;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Colour {
        Red,
        DarkBlue,
    }

    named_enum!(Colour, "colour", {
        Red => "red",
        DarkBlue => "dark_blue" | "navy",
    });

    #[test]
    fn names_round_trip_in_any_case_with_aliases() {
        for c in [Colour::Red, Colour::DarkBlue] {
            assert_eq!(c.to_string().parse::<Colour>().unwrap(), c);
            assert_eq!(c.as_str().to_uppercase().parse::<Colour>().unwrap(), c);
        }
        assert_eq!(Colour::DarkBlue.as_str(), "dark_blue");
        assert_eq!("Navy".parse::<Colour>().unwrap(), Colour::DarkBlue);
        // An alias is read, never written.
        assert_eq!(Colour::DarkBlue.to_string(), "dark_blue");
    }

    #[test]
    fn an_unknown_name_is_an_error_naming_the_option_input_and_choices() {
        match "green".parse::<Colour>() {
            Err(Error::InvalidConfig(m)) => {
                assert_eq!(m, "unknown colour 'green' (red | dark_blue)")
            }
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
        assert!("".parse::<Colour>().is_err());
        assert!("red ".parse::<Colour>().is_err());
    }
}
