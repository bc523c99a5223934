//! `POST /trade/swap`: a swap through an aggregator, bound by its named quote.

use alloy::primitives::Address;
use walletops_proto::v1 as pb;

use super::{Kind, Makers, ParsedWrite};
use crate::{
    auth::{Caller, Operation},
    error::Result,
    idempotency::{Canonical, absent_if_empty},
    policy::Act,
    requests::SwapRequest,
    transfers::Prepared,
};
use walletops_chains::Chain;
use walletops_domain::{DelegatedWallet, Spend, WalletAddress};

/// The swap kind.
#[derive(Debug)]
pub struct SwapWrite;

impl Canonical for pb::SwapRequest {
    fn canonical(&self) -> Self {
        Self {
            from: absent_if_empty(&self.from),
            protocols: absent_if_empty(&self.protocols),
            exclude_protocols: absent_if_empty(&self.exclude_protocols),
            quote_id: absent_if_empty(&self.quote_id),
            min_dst_amount: absent_if_empty(&self.min_dst_amount),
            // Absent and false build the same swap.
            include_gas: self.include_gas.filter(|on| *on),
            ..self.clone()
        }
    }
}

impl Kind for SwapWrite {
    type Message = pb::SwapRequest;
    const PATH: &'static str = "/trade/swap";
    const OPERATION: Operation = Operation::Swap;
    /// A swap's dry run asks the aggregator as a quote does: a `read` key reaches the
    /// aggregators no more through it than through `POST /trade/quote`.
    const DRY_RUN_NEEDS: Option<Operation> = Some(Operation::GetQuote);

    async fn parse(
        message: &Self::Message,
        makers: Makers<'_>,
        caller: &Caller,
        held: bool,
    ) -> Result<Box<dyn ParsedWrite>> {
        let mut swap = SwapRequest::parse(makers.chains, message)?;
        // An approved swap is judged after its quote's minute: its quote still binds.
        swap.quoted = makers.quotes.named_by(caller, &swap, held).await?;
        Ok(Box::new(swap))
    }

    fn summary(message: &Self::Message, spend: &Spend, from: &WalletAddress) -> String {
        let (amount, asset, chain) = (spend.amount, &spend.asset, &spend.chain);
        format!(
            "swap {amount} {asset} for {} from {from} on {chain}",
            message.to_token
        )
    }
}

#[async_trait::async_trait]
impl ParsedWrite for SwapRequest {
    fn chain(&self) -> &Chain {
        &self.trade.chain
    }

    fn from(&self) -> Option<&WalletAddress> {
        self.trade.from.as_ref()
    }

    async fn build(
        &self,
        makers: Makers<'_>,
        wallet: &DelegatedWallet,
        watch: Option<&[Address]>,
    ) -> Result<Prepared> {
        makers.swaps.prepare(self, wallet, watch).await
    }

    fn act(&self, _: &Prepared) -> Act {
        Act::Swap {
            bought: self.bought(),
        }
    }
}
