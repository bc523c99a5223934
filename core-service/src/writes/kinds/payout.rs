//! A payout's unit: what the payouts runner (`writes::payouts`) pays in one transaction, an
//! item, or on Solana a pack of items of one asset. It has no endpoint of its own: its
//! request is made by the runner from the payout's typed items, kept under the payouts'
//! path with a key derived from the payout's, and stored as its own JSON when held.

use alloy::primitives::Address;
use serde_json::{Value, json};

use super::{Kind, Makers, ParsedWrite, Stored};
use crate::{
    auth::{Caller, Operation},
    error::Result,
    policy::Act,
    requests::{SendRequest, chain, payouts::PackRequest},
    transfers::Prepared,
};
use walletops_chains::Chain;
use walletops_domain::{DelegatedWallet, Spend, Transfer, WalletAddress};

/// The payout unit kind.
#[derive(Debug)]
pub struct PayoutUnitWrite;

/// A payout's unit as the runner asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayoutUnit {
    /// The payout's chain (its slug).
    pub chain: String,
    /// The payout's wallet.
    pub from: WalletAddress,
    /// What it pays: one transfer, or on Solana the legs of a pack, one asset.
    pub transfers: Vec<Transfer>,
}

impl Stored for PayoutUnit {
    fn stored_bytes(&self) -> Vec<u8> {
        let transfers: Vec<Value> = self
            .transfers
            .iter()
            .map(|t| {
                json!({
                    "to": String::from(t.to()),
                    "token": t.token().map(String::from),
                    "amount": t.amount().to_string(),
                })
            })
            .collect();
        json!({"chain": self.chain, "from": String::from(self.from), "transfers": transfers})
            .to_string()
            .into_bytes()
    }

    fn read_back(bytes: &[u8]) -> std::result::Result<Self, String> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let text = |v: &Value, field: &str| {
            v[field]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("no {field}"))
        };
        let from: WalletAddress = text(&value, "from")?.parse()?;
        let transfers = value["transfers"]
            .as_array()
            .ok_or("no transfers")?
            .iter()
            .map(|t| {
                Transfer::read_back(
                    from.family(),
                    &text(t, "to")?,
                    t["token"].as_str(),
                    &text(t, "amount")?,
                )
            })
            .collect::<std::result::Result<Vec<_>, String>>()?;
        Ok(Self {
            chain: text(&value, "chain")?,
            from,
            transfers,
        })
    }
}

/// A unit, parsed: the send of one item, or a Solana pack.
#[derive(Debug)]
enum ParsedUnit {
    /// One item, paid as a send is.
    Send(SendRequest),
    /// Several Solana items of one asset in one transaction.
    Pack(PackRequest),
}

impl Kind for PayoutUnitWrite {
    type Message = PayoutUnit;
    const PATH: &'static str = "/payouts";
    const OPERATION: Operation = Operation::Send;

    async fn parse(
        message: &Self::Message,
        makers: Makers<'_>,
        _: &Caller,
        _: bool,
    ) -> Result<Box<dyn ParsedWrite>> {
        let chain = chain(makers.chains, &message.chain)?.clone();
        let from = Some(message.from);
        let unit = match message.transfers.as_slice() {
            [one] => ParsedUnit::Send(SendRequest {
                chain,
                from,
                transfer: *one,
            }),
            legs => ParsedUnit::Pack(PackRequest::of(chain, from, legs)?),
        };
        Ok(Box::new(unit))
    }

    fn summary(message: &Self::Message, spend: &Spend, from: &WalletAddress) -> String {
        let (amount, asset, chain) = (spend.amount, &spend.asset, &spend.chain);
        match message.transfers.as_slice() {
            [one] => format!(
                "send {amount} {asset} from {from} to {} on {chain} (a payout's item)",
                one.to()
            ),
            legs => format!(
                "pay {} recipients {amount} {asset} in all from {from} on {chain}",
                legs.len()
            ),
        }
    }
}

#[async_trait::async_trait]
impl ParsedWrite for ParsedUnit {
    fn chain(&self) -> &Chain {
        match self {
            Self::Send(send) => send.chain(),
            Self::Pack(pack) => &pack.chain,
        }
    }

    fn from(&self) -> Option<&WalletAddress> {
        match self {
            Self::Send(send) => ParsedWrite::from(send),
            Self::Pack(pack) => pack.from.as_ref(),
        }
    }

    async fn build(
        &self,
        makers: Makers<'_>,
        wallet: &DelegatedWallet,
        watch: Option<&[Address]>,
    ) -> Result<Prepared> {
        match self {
            Self::Send(send) => send.build(makers, wallet, watch).await,
            Self::Pack(pack) => makers.transfers.prepare_pack(pack, wallet).await,
        }
    }

    fn act(&self, prepared: &Prepared) -> Act {
        match self {
            Self::Send(send) => send.act(prepared),
            Self::Pack(_) => Act::Transfer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::U256;
    use solana_pubkey::Pubkey;

    #[test]
    fn a_unit_reads_back_from_its_stored_form() {
        let pack = PayoutUnit {
            chain: "solana-devnet".to_owned(),
            from: WalletAddress::Solana(Pubkey::new_from_array([1; 32])),
            transfers: (2..5)
                .map(|i| Transfer::Solana {
                    to: Pubkey::new_from_array([i; 32]),
                    mint: Some(Pubkey::new_from_array([9; 32])),
                    amount: u64::from(i) * 1_000,
                })
                .collect(),
        };
        let item = PayoutUnit {
            chain: "anvil".to_owned(),
            from: WalletAddress::Evm(Address::repeat_byte(1)),
            transfers: vec![Transfer::Evm {
                to: Address::repeat_byte(2),
                token: None,
                amount: U256::MAX,
            }],
        };
        for unit in [pack, item] {
            let bytes = unit.stored_bytes();
            assert_eq!(PayoutUnit::read_back(&bytes), Ok(unit.clone()));
            assert_eq!(
                bytes,
                PayoutUnit::read_back(&bytes).expect("reads").stored_bytes()
            );
        }
        assert!(PayoutUnit::read_back(b"{}").is_err());
    }
}
