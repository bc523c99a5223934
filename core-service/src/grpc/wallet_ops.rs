//! `walletops.v1.WalletOpsService`: proto <-> domain, and the order every RPC follows:
//! authenticate and rate-limit (`Core::admit`), then parse every field (all violations in one
//! `INVALID_INPUT`), then resolve the wallet with its ownership and delegation checks.

use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, wallet_ops_service_server::WalletOpsService};

use super::convert;
use crate::{
    Core,
    chains::{AmountKind, Chain, ChainFamily, parse_amount},
    error::{Result, Violations, WalletOpsError},
    ratelimit::Budget,
    store::WalletFilter,
};

/// Most `tokens` one balance read may name.
const MAX_BALANCE_TOKENS: usize = 50;

/// The gRPC face of `WalletOpsService`.
#[derive(Debug, Clone)]
pub struct WalletOpsApi {
    core: Core,
}

impl WalletOpsApi {
    /// The service over `core`.
    pub fn new(core: Core) -> Self {
        Self { core }
    }

    /// The chain named by a request's `chain` field.
    fn chain(&self, slug: &str) -> Result<&Chain> {
        if slug.trim().is_empty() {
            return Err(WalletOpsError::invalid("chain", "required: a chain slug"));
        }
        self.core.chains.resolve(slug.trim())
    }

    /// The chain of an EVM-only write: a Solana slug is `INVALID_INPUT` on `chain`.
    fn evm_chain(&self, slug: &str) -> Result<&Chain> {
        let chain = self.chain(slug)?;
        if chain.family() != ChainFamily::Evm {
            return Err(WalletOpsError::invalid(
                "chain",
                format!(
                    "{} is not an EVM chain; this operation is EVM only",
                    chain.slug()
                ),
            ));
        }
        Ok(chain)
    }
}

/// The answer of every write whose chain work is not built yet.
fn not_built(chain: &Chain, what: &str) -> WalletOpsError {
    let pipeline = match chain.family() {
        ChainFamily::Evm => "the EVM signer, nonce ledger and broadcast pipeline",
        ChainFamily::Solana => "the Solana signer and broadcast pipeline",
    };
    WalletOpsError::ServiceUnavailable(format!(
        "{what} on {} is not available yet: this build does not include {pipeline}",
        chain.slug()
    ))
}

fn non_empty(v: Option<&String>) -> Option<&str> {
    v.map(|s| s.trim()).filter(|s| !s.is_empty())
}

#[tonic::async_trait]
impl WalletOpsService for WalletOpsApi {
    async fn list_wallets(
        &self,
        request: Request<pb::ListWalletsRequest>,
    ) -> Result<Response<pb::ListWalletsResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Budget::Read).await?;
        let req = request.into_inner();
        let family = match non_empty(req.chain.as_ref()) {
            Some(raw) => Some(
                raw.parse::<ChainFamily>()
                    .map_err(|e| WalletOpsError::invalid("chain", e))?,
            ),
            None => None,
        };
        let filter = WalletFilter {
            family,
            default_only: req.default_only.unwrap_or(false),
            automation_only: req.automation_only.unwrap_or(false),
        };
        let wallets = self.core.wallets.list(caller.user_id, filter).await?;
        Ok(Response::new(pb::ListWalletsResponse {
            wallets: wallets.into_iter().map(convert::wallet).collect(),
        }))
    }

    async fn get_balances(
        &self,
        request: Request<pb::GetBalancesRequest>,
    ) -> Result<Response<pb::GetBalancesResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Budget::Read).await?;
        let req = request.into_inner();
        let chain = self.chain(&req.chain)?;
        let family = chain.family();
        let mut v = Violations::default();
        if req.tokens.len() > MAX_BALANCE_TOKENS {
            v.push(
                "tokens",
                format!(
                    "at most {MAX_BALANCE_TOKENS} entries, got {}",
                    req.tokens.len()
                ),
            );
        } else {
            for (i, token) in req.tokens.iter().enumerate() {
                v.check(&format!("tokens[{i}]"), family.parse_address(token.trim()));
            }
        }
        v.finish()?;
        let wallet = self
            .core
            .wallets
            .resolve_owned(
                caller.user_id,
                family,
                non_empty(req.address.as_ref()),
                "address",
            )
            .await?;
        tracing::debug!(wallet = %wallet.address, "balance read");
        Err(WalletOpsError::ServiceUnavailable(format!(
            "balance reads on {} are not available yet: this build does not include the {} chain client",
            chain.slug(),
            family
        ))
        .into())
    }

    async fn get_transaction(
        &self,
        request: Request<pb::GetTransactionRequest>,
    ) -> Result<Response<pb::GetTransactionResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Budget::Read).await?;
        let req = request.into_inner();
        let tx = self.core.transactions.get(caller.user_id, &req.id).await?;
        let chain = self.core.chains.resolve(&tx.chain).ok();
        let name = chain.map_or_else(|| tx.chain.clone(), |c| c.name().to_owned());
        let explorer = match (chain, &tx.hash) {
            (Some(c), Some(hash)) => c.explorer_url(hash),
            _ => None,
        };
        Ok(Response::new(pb::GetTransactionResponse {
            transaction: Some(convert::transaction(tx, name, explorer)),
        }))
    }

    async fn send(
        &self,
        request: Request<pb::SendRequest>,
    ) -> Result<Response<pb::SendResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Budget::Write).await?;
        self.core.idempotency_key(request.metadata())?;
        let req = request.into_inner();
        let chain = self.chain(&req.chain)?;
        let family = chain.family();
        let mut v = Violations::default();
        let asset = match (req.asset(), family) {
            (pb::Asset::Native, _) => Some(pb::Asset::Native),
            (pb::Asset::Erc20, ChainFamily::Evm) | (pb::Asset::Spl, ChainFamily::Solana) => {
                Some(req.asset())
            }
            (pb::Asset::Erc20, ChainFamily::Solana) => {
                v.push("asset", "erc20 is for EVM chains; use spl on Solana");
                None
            }
            (pb::Asset::Spl, ChainFamily::Evm) => {
                v.push("asset", "spl is for Solana; use erc20 on EVM chains");
                None
            }
            (pb::Asset::Unspecified, _) => {
                v.push("asset", "required: one of native, erc20, spl");
                None
            }
        };
        v.check("to", family.parse_address(req.to.trim()));
        let token = non_empty(req.token.as_ref());
        match (asset, token) {
            (Some(pb::Asset::Native), Some(_)) => v.push("token", "must be absent for native"),
            (Some(pb::Asset::Erc20 | pb::Asset::Spl), None) => {
                v.push("token", "required for token transfers")
            }
            (_, Some(t)) => {
                v.check("token", family.parse_address(t));
            }
            _ => {}
        }
        let kind = match family {
            ChainFamily::Evm => AmountKind::Uint256,
            ChainFamily::Solana => AmountKind::U64,
        };
        v.check("amount", parse_amount(&req.amount, kind));
        v.finish()?;
        self.core
            .wallets
            .resolve_delegated(caller.user_id, family, non_empty(req.from.as_ref()), "from")
            .await?;
        Err(not_built(chain, "sending").into())
    }

    async fn approve_token(
        &self,
        request: Request<pb::ApproveTokenRequest>,
    ) -> Result<Response<pb::ApproveTokenResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Budget::Write).await?;
        self.core.idempotency_key(request.metadata())?;
        let req = request.into_inner();
        let chain = self.evm_chain(&req.chain)?;
        let mut v = Violations::default();
        v.check("token", ChainFamily::Evm.parse_address(req.token.trim()));
        v.check(
            "spender",
            ChainFamily::Evm.parse_address(req.spender.trim()),
        );
        v.check("amount", parse_amount(&req.amount, AmountKind::Uint256));
        v.finish()?;
        self.core
            .wallets
            .resolve_delegated(
                caller.user_id,
                ChainFamily::Evm,
                non_empty(req.from.as_ref()),
                "from",
            )
            .await?;
        Err(not_built(chain, "token approval").into())
    }

    async fn call_contract(
        &self,
        request: Request<pb::CallContractRequest>,
    ) -> Result<Response<pb::CallContractResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Budget::Write).await?;
        self.core.idempotency_key(request.metadata())?;
        let req = request.into_inner();
        let chain = self.evm_chain(&req.chain)?;
        let mut v = Violations::default();
        v.check("to", ChainFamily::Evm.parse_address(req.to.trim()));
        if let Some(value) = non_empty(req.value.as_ref()) {
            v.check("value", parse_amount(value, AmountKind::Uint256));
        }
        match (
            non_empty(req.data.as_ref()),
            non_empty(req.function.as_ref()),
        ) {
            (Some(_), Some(_)) => v.push("data", "give either data or function, not both"),
            (None, None) => v.push("data", "required: calldata, or a function with args"),
            (Some(data), None) => {
                let ok = data
                    .strip_prefix("0x")
                    .is_some_and(|h| h.len() % 2 == 0 && h.bytes().all(|b| b.is_ascii_hexdigit()));
                if !ok {
                    v.push("data", "must be 0x-prefixed hex bytes");
                }
            }
            (None, Some(_)) => {}
        }
        v.finish()?;
        self.core
            .wallets
            .resolve_delegated(
                caller.user_id,
                ChainFamily::Evm,
                non_empty(req.from.as_ref()),
                "from",
            )
            .await?;
        Err(not_built(chain, "contract calls").into())
    }

    async fn get_quote(
        &self,
        request: Request<pb::GetQuoteRequest>,
    ) -> Result<Response<pb::GetQuoteResponse>, Status> {
        let _caller = self.core.admit(request.metadata(), Budget::Write).await?;
        let req = request.into_inner();
        let chain = self.chain(&req.chain)?;
        Err(WalletOpsError::ServiceUnavailable(format!(
            "quotes on {} are not available yet: no swap aggregator is configured in this build",
            chain.slug()
        ))
        .into())
    }

    async fn swap(
        &self,
        request: Request<pb::SwapRequest>,
    ) -> Result<Response<pb::SwapResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Budget::Write).await?;
        self.core.idempotency_key(request.metadata())?;
        let req = request.into_inner();
        let chain = self.chain(&req.chain)?;
        self.core
            .wallets
            .resolve_delegated(
                caller.user_id,
                chain.family(),
                non_empty(req.from.as_ref()),
                "from",
            )
            .await?;
        Err(WalletOpsError::ServiceUnavailable(format!(
            "swaps on {} are not available yet: no swap aggregator is configured in this build",
            chain.slug()
        ))
        .into())
    }
}
