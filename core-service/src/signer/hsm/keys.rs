//! What the HSM's answers mean, without the device: the curves' parameters, public points
//! unwrapped into addresses, and a raw ECDSA signature made an Ethereum one. And the `[hsm]`
//! settings.

use std::path::PathBuf;

use alloy::primitives::{Address, B256, U256, uint};
use serde::{Deserialize, Serialize};
use walletops_domain::{ChainFamily, WalletAddress, secret::Secret};

/// `CKA_EC_PARAMS` of secp256k1: OID 1.3.132.0.10.
pub(super) const SECP256K1_PARAMS: [u8; 7] = [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x0a];
/// `CKA_EC_PARAMS` of Ed25519: PrintableString "edwards25519", the form every module takes
/// (YubiHSM 2's only one).
pub(super) const ED25519_PARAMS: [u8; 14] = [
    0x13, 0x0c, b'e', b'd', b'w', b'a', b'r', b'd', b's', b'2', b'5', b'5', b'1', b'9',
];

/// secp256k1's group order n (SEC 2); EIP-2 refuses an s above n / 2.
const N: U256 = uint!(0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141_U256);

/// The `[hsm]` settings: a PKCS#11 module and the token in it that holds the keys.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HsmConfig {
    /// The PKCS#11 library, e.g. `/usr/lib/softhsm/libsofthsm2.so`.
    pub module: PathBuf,
    /// The label of the token that holds the keys.
    pub token_label: String,
    /// The user PIN (a secret: also `WALLETOPS_HSM__PIN`).
    #[serde(default)]
    pub pin: Option<Secret>,
    /// A file holding the PIN instead (its first line).
    #[serde(default)]
    pub pin_file: Option<PathBuf>,
    /// The slot id, when the label alone does not say.
    #[serde(default)]
    pub slot: Option<u64>,
    /// Sessions open at once, for concurrent signing.
    #[serde(default = "default_sessions")]
    pub sessions: u32,
}

fn default_sessions() -> u32 {
    4
}

impl HsmConfig {
    /// The PIN, from `pin` or `pin_file`.
    pub fn pin(&self) -> anyhow::Result<String> {
        match (&self.pin, &self.pin_file) {
            (Some(pin), None) => Ok(pin.expose().to_owned()),
            (None, Some(file)) => {
                crate::signer::warn_if_readable_by_others(file, "hsm.pin_file");
                let text = std::fs::read_to_string(file)
                    .map_err(|e| anyhow::anyhow!("hsm.pin_file {}: {e}", file.display()))?;
                Ok(text.lines().next().unwrap_or_default().to_owned())
            }
            (Some(_), Some(_)) => anyhow::bail!("set hsm.pin or hsm.pin_file, not both"),
            (None, None) => {
                anyhow::bail!("hsm.pin (or WALLETOPS_HSM__PIN, or hsm.pin_file) is required")
            }
        }
    }
}

/// `CKA_EC_POINT` without its DER OCTET STRING wrapping (modules that return the bare value
/// are taken as they are): 65 bytes of an uncompressed secp256k1 point, or 32 of an Ed25519
/// key.
pub(super) fn ec_point(der: &[u8]) -> Option<Vec<u8>> {
    match der {
        [0x04, len, rest @ ..] if usize::from(*len) == rest.len() => Some(rest.to_vec()),
        [0x04, 0x81, len, rest @ ..] if usize::from(*len) == rest.len() => Some(rest.to_vec()),
        bare if bare.len() == 65 || bare.len() == 32 => Some(bare.to_vec()),
        _ => None,
    }
}

/// The address of a key of `family` whose public point is `point` (unwrapped).
pub(super) fn address(family: ChainFamily, point: &[u8]) -> Option<WalletAddress> {
    match (family, point) {
        (ChainFamily::Evm, [0x04, xy @ ..]) if xy.len() == 64 => {
            Some(WalletAddress::Evm(Address::from_raw_public_key(xy)))
        }
        (ChainFamily::Solana, key) if key.len() == 32 => {
            let bytes: [u8; 32] = key.try_into().ok()?;
            Some(WalletAddress::Solana(solana_pubkey::Pubkey::from(bytes)))
        }
        _ => None,
    }
}

/// The Ethereum signature of digest `hash` from the device's raw `r‖s`: s made low (EIP-2),
/// and the recovery id the one that recovers `address`. None: it recovers no such address.
pub(super) fn evm_signature(
    raw: &[u8],
    hash: B256,
    address: Address,
) -> Option<alloy::primitives::Signature> {
    let (r, s) = raw.split_at_checked(32)?;
    let r = U256::try_from_be_slice(r)?;
    let mut s = U256::try_from_be_slice(s)?;
    if s > N >> 1 {
        s = N - s;
    }
    [false, true].into_iter().find_map(|parity| {
        let signature = alloy::primitives::Signature::new(r, s, parity);
        (signature.recover_address_from_prehash(&hash).ok()? == address).then_some(signature)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::SigningKey;

    #[test]
    fn a_high_s_signature_is_made_low_with_the_parity_that_recovers_the_wallet() {
        let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
        let address = Address::from_private_key(&key);
        let hash = B256::repeat_byte(0x42);
        let (signature, _) = key.sign_prehash_recoverable(hash.as_slice()).unwrap();
        let (r, s) = (signature.r().to_bytes(), signature.s().to_bytes());
        let s = U256::from_be_slice(&s);
        // Both the signature and its high-s twin, as a device may give either.
        for s in [s, N - s] {
            let raw = [r.as_slice(), &s.to_be_bytes::<32>()].concat();
            let made = evm_signature(&raw, hash, address).expect("recovers the wallet");
            assert!(made.s() <= N >> 1, "low s");
            assert_eq!(made.recover_address_from_prehash(&hash).unwrap(), address);
        }
        let other = Address::repeat_byte(1);
        assert!(evm_signature(&[0u8; 64], hash, other).is_none());
        assert!(evm_signature(&[0u8; 10], hash, other).is_none());
    }

    #[test]
    fn points_are_unwrapped_into_addresses() {
        let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
        let point = key.verifying_key().to_encoded_point(false);
        let der = [&[0x04, 0x41][..], point.as_bytes()].concat();
        let unwrapped = ec_point(&der).unwrap();
        assert_eq!(
            address(ChainFamily::Evm, &unwrapped),
            Some(WalletAddress::Evm(Address::from_private_key(&key)))
        );
        assert_eq!(
            ec_point(point.as_bytes()).unwrap(),
            unwrapped,
            "a bare point"
        );
        let ed = [&[0x04, 0x20][..], &[9u8; 32]].concat();
        let key = ec_point(&ed).unwrap();
        assert!(matches!(
            address(ChainFamily::Solana, &key),
            Some(WalletAddress::Solana(_))
        ));
        assert_eq!(
            address(ChainFamily::Evm, &key),
            None,
            "a point of the other curve"
        );
    }
}
