//! `POST /contracts/send`: a contract call, with calldata given raw or built from a function
//! and its arguments.

use alloy::primitives::{Address, Selector};
use walletops_proto::v1 as pb;

use super::{Kind, Makers, ParsedWrite};
use crate::{
    auth::{Caller, Operation},
    error::Result,
    idempotency::{Canonical, absent_if_empty},
    policy::Act,
    requests::CallRequest,
    transfers::Prepared,
};
use walletops_chains::Chain;
use walletops_domain::{DelegatedWallet, Spend, WalletAddress};

/// The contract call kind.
#[derive(Debug)]
pub struct CallWrite;

impl Canonical for pb::CallContractRequest {
    fn canonical(&self) -> Self {
        Self {
            from: absent_if_empty(&self.from),
            value: absent_if_empty(&self.value),
            data: absent_if_empty(&self.data),
            function: absent_if_empty(&self.function),
            args: self.args.clone().filter(|l| !l.values.is_empty()),
            ..self.clone()
        }
    }
}

impl Kind for CallWrite {
    type Message = pb::CallContractRequest;
    const PATH: &'static str = "/contracts/send";
    const OPERATION: Operation = Operation::CallContract;

    async fn parse(
        message: &Self::Message,
        makers: Makers<'_>,
        _: &Caller,
        _: bool,
    ) -> Result<Box<dyn ParsedWrite>> {
        Ok(Box::new(CallRequest::parse(makers.chains, message)?))
    }

    fn summary(message: &Self::Message, spend: &Spend, from: &WalletAddress) -> String {
        let (amount, asset, chain) = (spend.amount, &spend.asset, &spend.chain);
        let function = message
            .function
            .as_deref()
            .map(|f| format!(" ({f})"))
            .unwrap_or_default();
        format!(
            "call {}{function} with {amount} {asset} from {from} on {chain}",
            message.to
        )
    }
}

#[async_trait::async_trait]
impl ParsedWrite for CallRequest {
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
        makers.transfers.prepare_call(self, wallet, watch).await
    }

    fn act(&self, prepared: &Prepared) -> Act {
        Act::Call {
            contract: WalletAddress::Evm(self.to),
            selector: self.input.get(..4).map(Selector::from_slice),
            holds_allowance: prepared.holds_allowance(),
            unexplained: prepared.unexplained().map(str::to_owned),
        }
    }
}
