//! A transfer: what a send moves where, typed for its chain's family. A send request, a
//! payout's item and a pack's legs all carry one, from parse to signing.

use alloy::primitives::{Address, U256};
use solana_pubkey::Pubkey;

use crate::{AmountKind, ChainFamily, WalletAddress, parse_amount};

/// What a send moves, typed for its chain's family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// Native coin (`token: None`) or an ERC20 token.
    Evm {
        /// Recipient.
        to: Address,
        /// The ERC20 token; `None`: the native coin.
        token: Option<Address>,
        /// Wei or token base units.
        amount: U256,
    },
    /// SOL (`mint: None`) or an SPL token.
    Solana {
        /// Recipient (the owner, for SPL).
        to: Pubkey,
        /// The mint; `None`: SOL.
        mint: Option<Pubkey>,
        /// Lamports or token base units.
        amount: u64,
    },
}

impl Transfer {
    /// The recipient.
    pub fn to(&self) -> WalletAddress {
        match *self {
            Self::Evm { to, .. } => WalletAddress::Evm(to),
            Self::Solana { to, .. } => WalletAddress::Solana(to),
        }
    }

    /// The token or mint; `None`: the native coin.
    pub fn token(&self) -> Option<WalletAddress> {
        match *self {
            Self::Evm { token, .. } => token.map(WalletAddress::Evm),
            Self::Solana { mint, .. } => mint.map(WalletAddress::Solana),
        }
    }

    /// The amount in base units.
    pub fn amount(&self) -> U256 {
        match *self {
            Self::Evm { amount, .. } => amount,
            Self::Solana { amount, .. } => U256::from(amount),
        }
    }

    /// The asset's kind as the contract names it: `native`, `erc20` or `spl`.
    pub fn asset_name(&self) -> &'static str {
        match self {
            Self::Evm { token: None, .. } | Self::Solana { mint: None, .. } => "native",
            Self::Evm { .. } => "erc20",
            Self::Solana { .. } => "spl",
        }
    }

    /// The transfer of `family` kept as text (`to`, `token`, `amount`, as `to()`,
    /// `token()` and `amount()` write them): read back, or why not.
    pub fn read_back(
        family: ChainFamily,
        to: &str,
        token: Option<&str>,
        amount: &str,
    ) -> Result<Self, String> {
        let to = family.parse_address(to)?;
        let token = token.map(|t| family.parse_address(t)).transpose()?;
        Ok(match (to, token) {
            (WalletAddress::Evm(to), token) => Self::Evm {
                to,
                token: token.and_then(|t| t.evm()),
                amount: parse_amount(amount, AmountKind::Uint256)?,
            },
            (WalletAddress::Solana(to), mint) => Self::Solana {
                to,
                mint: mint.and_then(|m| m.solana()),
                amount: u64::try_from(parse_amount(amount, AmountKind::U64)?)
                    .map_err(|_| "must fit an unsigned 64-bit integer".to_owned())?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_reads_back_from_its_text() {
        let evm = Transfer::Evm {
            to: Address::repeat_byte(1),
            token: Some(Address::repeat_byte(2)),
            amount: U256::from(10).pow(U256::from(30)),
        };
        let sol = Transfer::Solana {
            to: Pubkey::new_from_array([3; 32]),
            mint: None,
            amount: u64::MAX,
        };
        for (t, family) in [(evm, ChainFamily::Evm), (sol, ChainFamily::Solana)] {
            let (to, token, amount) = (
                t.to().to_string(),
                t.token().map(|a| a.to_string()),
                t.amount().to_string(),
            );
            let back = Transfer::read_back(family, &to, token.as_deref(), &amount);
            assert_eq!(back, Ok(t));
        }
        assert_eq!(evm.asset_name(), "erc20");
        assert_eq!(sol.asset_name(), "native");
        assert!(Transfer::read_back(ChainFamily::Solana, "0x01", None, "1").is_err());
    }
}
