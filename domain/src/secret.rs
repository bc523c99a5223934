//! Configured secrets (API keys of upstreams, the master key, the admin token, URLs with
//! passwords): usable, never printed, wiped from memory when dropped.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A configured secret: usable, but never printed by `Debug`, nor by an error about it.
/// The default is empty: not set.
#[derive(Clone, Default, Serialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

/// A secret's text is wiped from memory when the secret is dropped (each clone wipes its
/// own copy).
impl Drop for Secret {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Serde's own errors quote a value of the wrong type: this one does not.
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Secret;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string (quote it in TOML)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Secret, E> {
                Ok(Secret(v.to_owned()))
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Secret, E> {
                Err(E::invalid_type(
                    serde::de::Unexpected::Other("a number"),
                    &self,
                ))
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Secret, E> {
                Err(E::invalid_type(
                    serde::de::Unexpected::Other("a number"),
                    &self,
                ))
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Secret, E> {
                Err(E::invalid_type(
                    serde::de::Unexpected::Other("a number"),
                    &self,
                ))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Secret, E> {
                Err(E::invalid_type(
                    serde::de::Unexpected::Other("a boolean"),
                    &self,
                ))
            }
        }
        deserializer.deserialize_string(Text)
    }
}

impl Secret {
    /// The secret's value.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether no value was given (an empty one counts as none).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}
