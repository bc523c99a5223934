//! Chain families, their addresses and amounts: each parsed once, at the boundary, into the
//! typed value inner code works with.

use std::{fmt, str::FromStr};

use alloy::primitives::{Address, U256};
use solana_pubkey::Pubkey;

/// A chain family. Dispatch over families is a `match` on this, never a string comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ChainFamily {
    /// EVM chains; the contract calls this family `ethereum`.
    #[serde(rename = "ethereum")]
    Evm,
    /// Solana clusters.
    #[serde(rename = "solana")]
    Solana,
}

impl ChainFamily {
    /// The contract's `chainType` spelling: `ethereum` or `solana`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Evm => "ethereum",
            Self::Solana => "solana",
        }
    }

    /// Parses an address of this family: 0x-hex in any case for EVM (the spec's pattern),
    /// base58 for Solana.
    pub fn parse_address(self, raw: &str) -> Result<WalletAddress, String> {
        match self {
            Self::Evm => parse_evm_address(raw).map(WalletAddress::Evm),
            Self::Solana => Pubkey::from_str(raw)
                .map(WalletAddress::Solana)
                .map_err(|_| "must be a base58 Solana public key".to_owned()),
        }
    }
}

impl FromStr for ChainFamily {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ethereum" => Ok(Self::Evm),
            "solana" => Ok(Self::Solana),
            _ => Err("must be one of: ethereum, solana".to_owned()),
        }
    }
}

impl fmt::Display for ChainFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses `^0x[a-fA-F0-9]{40}$` exactly as the spec writes it (alloy alone would also take
/// the address without its `0x`).
/// Written in mixed case, it must carry a valid EIP-55 checksum: mixed case says it was
/// checksummed, and a typo in it would otherwise pass for another account.
pub(crate) fn parse_evm_address(raw: &str) -> Result<Address, String> {
    const RULE: &str = "must be a 0x-prefixed 40-hex-digit EVM address";
    let hex = raw.strip_prefix("0x").ok_or_else(|| RULE.to_owned())?;
    if hex.len() != 40 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(RULE.to_owned());
    }
    let mixed =
        hex.bytes().any(|b| b.is_ascii_uppercase()) && hex.bytes().any(|b| b.is_ascii_lowercase());
    if mixed {
        return Address::parse_checksummed(raw, None).map_err(|_| {
            "is in mixed case but its EIP-55 checksum is wrong: check the address (or write it all in lowercase)".to_owned()
        });
    }
    Address::from_str(raw).map_err(|_| RULE.to_owned())
}

/// An address of a known family. Its text (`Display`) is the canonical form the contract
/// answers with and the store keeps: EIP-55 checksummed 0x-hex, or base58.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum WalletAddress {
    /// An EVM account.
    Evm(Address),
    /// A Solana account.
    Solana(Pubkey),
}

impl WalletAddress {
    /// The family whose rules the address passed.
    pub fn family(&self) -> ChainFamily {
        match self {
            Self::Evm(_) => ChainFamily::Evm,
            Self::Solana(_) => ChainFamily::Solana,
        }
    }

    /// The EVM address, if it is one.
    pub fn evm(&self) -> Option<Address> {
        match self {
            Self::Evm(a) => Some(*a),
            Self::Solana(_) => None,
        }
    }

    /// The Solana key, if it is one.
    pub fn solana(&self) -> Option<Pubkey> {
        match self {
            Self::Solana(k) => Some(*k),
            Self::Evm(_) => None,
        }
    }

    /// Whether it is its family's zero address (all zero bytes), whose key no one holds.
    pub fn is_zero(&self) -> bool {
        match self {
            Self::Evm(a) => a.is_zero(),
            Self::Solana(k) => *k == Pubkey::default(),
        }
    }
}

impl FromStr for WalletAddress {
    type Err = String;

    /// An address of either family: an EVM one starts `0x`, a character base58 lacks.
    fn from_str(raw: &str) -> Result<Self, String> {
        let family = if raw.starts_with("0x") {
            ChainFamily::Evm
        } else {
            ChainFamily::Solana
        };
        family
            .parse_address(raw)
            .map_err(|_| "must be an EVM or Solana address".to_owned())
    }
}

/// The stored form: an EVM address in lowercase hex (a checksum costs a hash; answers
/// format addresses with `Display`), a Solana key in base58. `FromStr` reads either.
impl From<WalletAddress> for String {
    fn from(a: WalletAddress) -> Self {
        match a {
            WalletAddress::Evm(a) => format!("{a:#x}"),
            WalletAddress::Solana(k) => k.to_string(),
        }
    }
}

impl TryFrom<String> for WalletAddress {
    type Error = String;

    fn try_from(raw: String) -> Result<Self, String> {
        raw.parse()
    }
}

impl From<Address> for WalletAddress {
    fn from(a: Address) -> Self {
        Self::Evm(a)
    }
}

impl From<Pubkey> for WalletAddress {
    fn from(k: Pubkey) -> Self {
        Self::Solana(k)
    }
}

impl fmt::Display for WalletAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Evm(a) => f.write_str(&a.to_checksum(None)),
            Self::Solana(k) => write!(f, "{k}"),
        }
    }
}

/// Which kind of amount a field holds, for the value rules of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmountKind {
    /// EVM native value or ERC20 amount: must fit uint256.
    Uint256,
    /// Solana lamports or SPL base units: must fit u64.
    U64,
}

/// Parses a non-negative integer amount that fits `kind`: decimal, or on EVM also 0x-hex
/// (the spec gives Solana amounts as integer strings in base units only); the text as
/// given, with nothing around the digits.
pub fn parse_amount(raw: &str, kind: AmountKind) -> Result<U256, String> {
    let (digits, radix) = match (raw.strip_prefix("0x"), kind) {
        (Some(hex), AmountKind::Uint256) => (hex, 16),
        _ => (raw, 10),
    };
    let valid = !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix));
    if !valid {
        return Err(match kind {
            AmountKind::Uint256 => {
                "must be a non-negative integer in base units, decimal or 0x-hex"
            }
            AmountKind::U64 => "must be a non-negative decimal integer in base units",
        }
        .to_owned());
    }
    let value =
        U256::from_str_radix(digits, radix as u64).map_err(|_| "must fit uint256".to_owned())?;
    match kind {
        AmountKind::Uint256 => Ok(value),
        AmountKind::U64 if value <= U256::from(u64::MAX) => Ok(value),
        AmountKind::U64 => Err("must fit an unsigned 64-bit integer".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evm_addresses_follow_the_spec_pattern() {
        let a = ChainFamily::Evm
            .parse_address("0xd8da6bf26964af9d7eed9e03e53415d37aa96045")
            .expect("valid");
        assert_eq!(a.to_string(), "0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045");
        assert!(
            ChainFamily::Evm
                .parse_address("0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045")
                .is_ok()
        );
        assert!(
            ChainFamily::Evm
                .parse_address("0xD8DA6BF26964AF9D7EED9E03E53415D37AA96045")
                .is_ok()
        );
        let typo = ChainFamily::Evm.parse_address("0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96046");
        assert!(typo.is_err_and(|e| e.contains("EIP-55")));
        for bad in [
            "d8da6bf26964af9d7eed9e03e53415d37aa96045",
            "0xd8da6bf26964af9d7eed9e03e53415d37aa9604",
            "0xd8da6bf26964af9d7eed9e03e53415d37aa9604g",
            "0Xd8da6bf26964af9d7eed9e03e53415d37aa96045",
            " 0xd8da6bf26964af9d7eed9e03e53415d37aa96045",
            "0xd8da6bf26964af9d7eed9e03e53415d37aa96045\n",
        ] {
            assert!(ChainFamily::Evm.parse_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn solana_addresses_are_base58_keys() {
        assert!(
            ChainFamily::Solana
                .parse_address("So11111111111111111111111111111111111111112")
                .is_ok()
        );
        assert!(ChainFamily::Solana.parse_address("0OIl").is_err());
        assert!(ChainFamily::Solana.parse_address("abc").is_err());
    }

    #[test]
    fn amounts_follow_the_value_rules() {
        assert_eq!(
            parse_amount("1000", AmountKind::Uint256),
            Ok(U256::from(1000))
        );
        assert_eq!(
            parse_amount("0x3e8", AmountKind::Uint256),
            Ok(U256::from(1000))
        );
        assert!(parse_amount("-1", AmountKind::Uint256).is_err());
        assert!(parse_amount("1.5", AmountKind::Uint256).is_err());
        assert!(parse_amount("", AmountKind::Uint256).is_err());
        for loose in [" 1000", "1000 ", "0X3e8", "+1000", "0x"] {
            assert!(
                parse_amount(loose, AmountKind::Uint256).is_err(),
                "{loose:?}"
            );
        }
        assert!(parse_amount("0x", AmountKind::Uint256).is_err());
        let max = U256::MAX.to_string();
        assert!(parse_amount(&max, AmountKind::Uint256).is_ok());
        assert!(parse_amount(&format!("{max}0"), AmountKind::Uint256).is_err());
        assert!(parse_amount("18446744073709551615", AmountKind::U64).is_ok());
        assert!(parse_amount("18446744073709551616", AmountKind::U64).is_err());
        assert!(parse_amount("0x10", AmountKind::U64).is_err());
    }
}
