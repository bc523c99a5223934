//! A pack: a payout's items of one asset paid in one Solana transaction, as the payouts
//! runner asks for it (`writes::payouts`). It has no endpoint of its own.

use alloy::primitives::Address;
use walletops_proto::v1 as pb;

use super::{Kind, Makers, ParsedWrite};
use crate::{
    auth::{Caller, Operation},
    error::Result,
    requests::payouts::PackRequest,
    transfers::Prepared,
};
use walletops_chains::Chain;
use walletops_domain::{DelegatedWallet, Spend, WalletAddress};

/// The pack kind.
#[derive(Debug)]
pub struct PackWrite;

impl Kind for PackWrite {
    type Message = pb::CreatePayoutRequest;
    const PATH: &'static str = "/payouts/pack";
    const OPERATION: Operation = Operation::Send;

    async fn parse(
        message: &Self::Message,
        makers: Makers<'_>,
        _: &Caller,
        _: bool,
    ) -> Result<Box<dyn ParsedWrite>> {
        Ok(Box::new(PackRequest::parse(makers.chains, message)?))
    }

    fn summary(message: &Self::Message, spend: &Spend, from: &WalletAddress) -> String {
        let (amount, asset, chain) = (spend.amount, &spend.asset, &spend.chain);
        format!(
            "pay {} recipients {amount} {asset} in all from {from} on {chain}",
            message.items.len()
        )
    }
}

#[async_trait::async_trait]
impl ParsedWrite for PackRequest {
    fn chain(&self) -> &Chain {
        &self.chain
    }

    fn from(&self) -> Option<&WalletAddress> {
        self.from.as_ref()
    }

    async fn build(
        &self,
        makers: Makers<'_>,
        wallet: &DelegatedWallet,
        _: Option<&[Address]>,
    ) -> Result<Prepared> {
        makers.transfers.prepare_pack(self, wallet).await
    }
}
