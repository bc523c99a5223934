//! An API key's value, `wops_<prefix>_<random>`: drawn from the CSPRNG, parsed strictly,
//! hashed for storage and zeroized on drop, so the value itself is never kept or logged.

use rand::{Rng, distr::Alphanumeric};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// The vendor part of every key value.
pub const VENDOR: &str = "wops";
const PREFIX_LEN: usize = 4;
const RANDOM_LEN: usize = 32;

/// A key's value, `wops_<prefix>_<random>`. Zeroized on drop; `Debug` shows only the prefix.
pub struct ApiKeySecret {
    value: Zeroizing<String>,
}

impl ApiKeySecret {
    /// Draws a new key from the thread CSPRNG (ChaCha seeded from the OS).
    pub fn generate() -> Self {
        let mut rng = rand::rng();
        let mut draw = |n: usize| -> String {
            (&mut rng)
                .sample_iter(Alphanumeric)
                .take(n)
                .map(char::from)
                .collect()
        };
        let prefix = draw(PREFIX_LEN);
        let random = Zeroizing::new(draw(RANDOM_LEN));
        Self {
            value: Zeroizing::new(format!("{VENDOR}_{prefix}_{}", random.as_str())),
        }
    }

    /// Accepts only the exact shape `wops_` + 4 alphanumerics + `_` + 32 alphanumerics.
    pub fn parse(presented: &str) -> Option<Self> {
        let rest = presented.strip_prefix(VENDOR)?.strip_prefix('_')?;
        let (prefix, random) = rest.split_once('_')?;
        let ok = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_alphanumeric());
        (ok(prefix, PREFIX_LEN) && ok(random, RANDOM_LEN)).then(|| Self {
            value: Zeroizing::new(presented.to_owned()),
        })
    }

    /// The 4-character lookup prefix.
    pub fn prefix(&self) -> &str {
        &self.value[VENDOR.len() + 1..VENDOR.len() + 1 + PREFIX_LEN]
    }

    /// Hex SHA-256 of the whole value, as stored. The value has 190 bits of entropy, so a
    /// fast hash is enough: nothing can be guessed from it.
    pub fn hash(&self) -> String {
        hex::encode(Sha256::digest(self.value.as_bytes()))
    }

    /// The value, to show the caller once.
    pub fn expose(&self) -> &str {
        &self.value
    }
}

impl std::fmt::Debug for ApiKeySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKeySecret({VENDOR}_{}_…)", self.prefix())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_have_the_contract_shape() {
        let a = ApiKeySecret::generate();
        let b = ApiKeySecret::generate();
        assert_ne!(a.expose(), b.expose());
        let parts: Vec<&str> = a.expose().split('_').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0], VENDOR);
        assert_eq!(parts[1].len(), 4);
        assert_eq!(parts[2].len(), 32);
        let parsed = ApiKeySecret::parse(a.expose()).expect("round trip");
        assert_eq!(parsed.prefix(), parts[1]);
        assert_eq!(parsed.hash(), a.hash());
        assert!(!format!("{a:?}").contains(parts[2]));
    }

    #[test]
    fn rejects_other_shapes() {
        for bad in [
            "",
            "wops_abcd",
            "wops_abc_0123456789abcdef0123456789abcdef",
            "wops_abcd_0123456789abcdef0123456789abcde",
            "xxxx_abcd_0123456789abcdef0123456789abcdef",
            "wops_ab-d_0123456789abcdef0123456789abcdef",
            "wops_abcd_0123456789abcdef0123456789abcdef_",
        ] {
            assert!(ApiKeySecret::parse(bad).is_none(), "{bad}");
        }
        assert!(ApiKeySecret::parse("wops_abcd_0123456789abcdef0123456789abcdef").is_some());
    }
}
