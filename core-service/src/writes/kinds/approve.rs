//! `POST /token/approve`: an ERC20 allowance for a spender.

use alloy::primitives::Address;
use walletops_proto::v1 as pb;

use super::{Kind, Makers, ParsedWrite};
use crate::{
    auth::{Caller, Operation},
    error::Result,
    idempotency::{Canonical, absent_if_empty},
    requests::ApproveRequest,
    transfers::Prepared,
};
use walletops_chains::Chain;
use walletops_domain::{DelegatedWallet, Spend, WalletAddress};

/// The approval kind.
#[derive(Debug)]
pub struct ApproveWrite;

impl Canonical for pb::ApproveTokenRequest {
    fn canonical(&self) -> Self {
        Self {
            from: absent_if_empty(&self.from),
            ..self.clone()
        }
    }
}

impl Kind for ApproveWrite {
    type Message = pb::ApproveTokenRequest;
    const PATH: &'static str = "/token/approve";
    const OPERATION: Operation = Operation::ApproveToken;

    async fn parse(
        message: &Self::Message,
        makers: Makers<'_>,
        _: &Caller,
        _: bool,
    ) -> Result<Box<dyn ParsedWrite>> {
        Ok(Box::new(ApproveRequest::parse(makers.chains, message)?))
    }

    fn summary(message: &Self::Message, spend: &Spend, from: &WalletAddress) -> String {
        let (amount, asset, chain) = (spend.amount, &spend.asset, &spend.chain);
        format!(
            "allow {} to spend {amount} of {asset} from {from} on {chain}",
            message.spender
        )
    }
}

#[async_trait::async_trait]
impl ParsedWrite for ApproveRequest {
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
        watch: Option<&[Address]>,
    ) -> Result<Prepared> {
        makers.transfers.prepare_approve(self, wallet, watch).await
    }
}
