//! `POST /send`: native coin or a token from a wallet to an address.

use alloy::primitives::Address;
use walletops_proto::v1 as pb;

use super::{Kind, Makers, ParsedWrite};
use crate::{
    auth::{Caller, Operation},
    error::Result,
    idempotency::{Canonical, absent_if_empty},
    requests::SendRequest,
    transfers::Prepared,
};
use walletops_chains::Chain;
use walletops_domain::{DelegatedWallet, Spend, WalletAddress};

/// The send kind.
#[derive(Debug)]
pub struct SendWrite;

impl Canonical for pb::SendRequest {
    fn canonical(&self) -> Self {
        Self {
            from: absent_if_empty(&self.from),
            token: absent_if_empty(&self.token),
            ..self.clone()
        }
    }
}

impl Kind for SendWrite {
    type Message = pb::SendRequest;
    const PATH: &'static str = "/send";
    const OPERATION: Operation = Operation::Send;

    async fn parse(
        message: &Self::Message,
        makers: Makers<'_>,
        _: &Caller,
        _: bool,
    ) -> Result<Box<dyn ParsedWrite>> {
        Ok(Box::new(SendRequest::parse(makers.chains, message)?))
    }

    fn summary(message: &Self::Message, spend: &Spend, from: &WalletAddress) -> String {
        let (amount, asset, chain) = (spend.amount, &spend.asset, &spend.chain);
        format!(
            "send {amount} {asset} from {from} to {} on {chain}",
            message.to
        )
    }
}

#[async_trait::async_trait]
impl ParsedWrite for SendRequest {
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
        makers.transfers.prepare_send(self, wallet, watch).await
    }
}
