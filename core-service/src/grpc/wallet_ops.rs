//! `walletops.v1.WalletOpsService`: proto <-> domain, and the order every RPC follows:
//! authenticate and rate-limit (`Core::admit`); for writes, look the idempotency key up, so
//! that a retry gets the answer its key stands for even if the wallet, its delegation or the
//! chain configuration changed since; then parse every field (all violations in one
//! `INVALID_INPUT`), resolve the wallet with its ownership and delegation checks, and only
//! then (for writes) claim the key and act.

use alloy::primitives::{Address, Bytes, U256};
use prost::Message;
use tonic::{Request, Response, Status};
use walletops_proto::v1::{self as pb, wallet_ops_service_server::WalletOpsService};

use super::convert;
use crate::{
    Core,
    auth::Caller,
    chains::{AmountKind, Chain, ChainFamily, WalletAddress, parse_amount},
    error::{Result, Violations, WalletOpsError},
    idempotency::Ticket,
    ratelimit::Budget,
    store::WalletFilter,
    transactions::TxKind,
    transfers::{Keyed, Submission, calldata, evm::EvmIntent, solana::SolanaIntent},
    wallets::DelegatedWallet,
};

/// Most `tokens` one balance read may name.
const MAX_BALANCE_TOKENS: usize = 50;

/// The gRPC face of `WalletOpsService`.
#[derive(Debug, Clone)]
pub struct WalletOpsApi {
    core: Core,
}

/// A validated write, ready for its idempotency claim.
struct Write<'a> {
    ticket: Ticket,
    chain: &'a Chain,
    wallet: DelegatedWallet,
}

impl WalletOpsApi {
    /// The service over `core`.
    pub fn new(core: Core) -> Self {
        Self { core }
    }

    /// The chain named by a request's `chain` field.
    fn chain(&self, slug: &str) -> Result<&Chain> {
        if slug.is_empty() {
            return Err(WalletOpsError::invalid("chain", "required: a chain slug"));
        }
        self.core.chains.resolve(slug)
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

    /// Opens `request`, a write of `caller` at `path`, under its Idempotency-Key, before any
    /// of its fields is looked at: the submission the key already stands for, or the ticket
    /// to run the write under. The key stands for the request's protobuf encoding.
    async fn open_write<M: Canonical>(
        &self,
        caller: &Caller,
        request: &Request<M>,
        path: &str,
    ) -> Result<Keyed> {
        let key = self.core.idempotency_key(request.metadata())?;
        let canonical = request.get_ref().canonical().encode_to_vec();
        self.core
            .writes
            .open(caller.user_id, key, path, &canonical, &self.core.chains)
            .await
    }

    /// Runs a validated write under its ticket: `act` signs and sends it, and claims the key
    /// with the ticket it is given.
    async fn submit<F>(&self, write: Write<'_>, act: F) -> Result<pb::Submission>
    where
        F: AsyncFnOnce(&Chain, &DelegatedWallet, &Ticket) -> Result<Submission>,
    {
        let Write {
            ticket,
            chain,
            wallet,
        } = write;
        let submission = self
            .core
            .writes
            .run(ticket, &self.core.chains, async |ticket| {
                act(chain, &wallet, ticket).await
            })
            .await?;
        Ok(to_pb(submission))
    }

    /// Runs a validated EVM write.
    async fn submit_evm(&self, write: Write<'_>, intent: EvmIntent) -> Result<pb::Submission> {
        self.submit(write, async |chain, wallet, ticket| {
            self.core
                .evm
                .submit(chain, wallet, intent, Some(ticket))
                .await
        })
        .await
    }

    /// Runs a validated Solana send.
    async fn submit_solana(
        &self,
        write: Write<'_>,
        intent: SolanaIntent,
    ) -> Result<pb::Submission> {
        self.submit(write, async |chain, wallet, ticket| {
            self.core
                .solana
                .submit(chain, wallet, intent, Some(ticket))
                .await
        })
        .await
    }
}

fn to_pb(s: Submission) -> pb::Submission {
    pb::Submission {
        id: s.id.to_string(),
        status: pb::SubmissionStatus::Submitted.into(),
        hash: s.hash,
        explorer_url: s.explorer_url,
        chain_name: s.chain_name,
    }
}

/// A write request as its idempotency key stands for it: what the handlers read the same is
/// the same request. An empty optional field counts as absent (a gRPC client that sets every
/// field sends `from: ""` where REST leaves `from` out), and so does an empty `args` list.
trait Canonical: Message + Sized {
    /// The request with every field the handlers read alike written one way.
    fn canonical(&self) -> Self;
}

/// `v`, or nothing when it is empty.
fn absent_if_empty(v: &Option<String>) -> Option<String> {
    v.clone().filter(|s| !s.is_empty())
}

impl Canonical for pb::SendRequest {
    fn canonical(&self) -> Self {
        Self {
            from: absent_if_empty(&self.from),
            token: absent_if_empty(&self.token),
            ..self.clone()
        }
    }
}

impl Canonical for pb::ApproveTokenRequest {
    fn canonical(&self) -> Self {
        Self {
            from: absent_if_empty(&self.from),
            ..self.clone()
        }
    }
}

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

/// An optional field's value; empty counts as absent (proto3 cannot tell them apart for a
/// client that sets every field).
fn non_empty(v: Option<&String>) -> Option<&str> {
    v.map(String::as_str).filter(|s| !s.is_empty())
}

fn evm_address(a: &WalletAddress) -> Result<Address> {
    a.as_str()
        .parse()
        .map_err(|_| WalletOpsError::Internal(anyhow::anyhow!("parsed address {a} unreadable")))
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
        }
        // A token named twice (in two spellings, say) would be answered twice.
        let mut seen = std::collections::HashMap::new();
        let tokens: Vec<WalletAddress> = req
            .tokens
            .iter()
            .take(MAX_BALANCE_TOKENS)
            .enumerate()
            .filter_map(|(i, t)| {
                let field = format!("tokens[{i}]");
                let token = v.check(&field, family.parse_address(t))?;
                match seen.insert(token.clone(), i) {
                    Some(earlier) => {
                        v.push(&field, format!("repeats tokens[{earlier}]"));
                        None
                    }
                    None => Some(token),
                }
            })
            .collect();
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
        let balances = self
            .core
            .balances
            .read(
                chain,
                &wallet,
                &tokens,
                req.include_zero.unwrap_or(false),
                req.fresh.unwrap_or(false),
            )
            .await?;
        Ok(Response::new(pb::GetBalancesResponse {
            balances: balances.into_iter().map(convert::balance).collect(),
        }))
    }

    async fn get_transaction(
        &self,
        request: Request<pb::GetTransactionRequest>,
    ) -> Result<Response<pb::GetTransactionResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Budget::Read).await?;
        let req = request.into_inner();
        let tx = self.core.transactions.get(caller.user_id, &req.id).await?;
        let (name, explorer) = self.core.chains.label(&tx.chain, tx.hash.as_deref());
        Ok(Response::new(pb::GetTransactionResponse {
            transaction: Some(convert::transaction(tx, name, explorer)),
        }))
    }

    async fn send(
        &self,
        request: Request<pb::SendRequest>,
    ) -> Result<Response<pb::SendResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Budget::Write).await?;
        let ticket = match self.open_write(&caller, &request, "/send").await? {
            Keyed::Answered(s) => {
                return Ok(Response::new(pb::SendResponse {
                    submission: Some(to_pb(s)),
                }));
            }
            Keyed::Fresh(ticket) => ticket,
        };
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
                v.push("asset", "must be one of native, erc20, spl");
                None
            }
        };
        let to = v.check("to", family.parse_address(&req.to));
        let token = match (asset, non_empty(req.token.as_ref())) {
            (Some(pb::Asset::Native), Some(_)) => {
                v.push("token", "must be absent for native");
                None
            }
            (Some(pb::Asset::Erc20 | pb::Asset::Spl), None) => {
                v.push("token", "required for token transfers");
                None
            }
            (_, Some(t)) => v.check("token", family.parse_address(t)),
            _ => None,
        };
        let kind = match family {
            ChainFamily::Evm => AmountKind::Uint256,
            ChainFamily::Solana => AmountKind::U64,
        };
        let amount = v.check("amount", parse_amount(&req.amount, kind));
        v.finish()?;
        let wallet = self
            .core
            .wallets
            .resolve_delegated(caller.user_id, family, non_empty(req.from.as_ref()), "from")
            .await?;
        let (Some(asset), Some(to), Some(amount)) = (asset, to, amount) else {
            return Err(
                WalletOpsError::Internal(anyhow::anyhow!("validated fields missing")).into(),
            );
        };
        let write = Write {
            ticket,
            chain,
            wallet,
        };
        if family == ChainFamily::Solana {
            let solana_key = |a: &WalletAddress| {
                a.as_str().parse::<solana_pubkey::Pubkey>().map_err(|_| {
                    WalletOpsError::Internal(anyhow::anyhow!("parsed address {a} unreadable"))
                })
            };
            let amount = u64::try_from(amount).map_err(|_| {
                WalletOpsError::invalid("amount", "must fit an unsigned 64-bit integer")
            })?;
            let intent = SolanaIntent {
                to: solana_key(&to)?,
                mint: token.as_ref().map(solana_key).transpose()?,
                amount,
                request: serde_json::json!({
                    "chain": chain.slug(), "from": write.wallet.wallet().address,
                    "to": to.as_str(), "asset": asset.as_str_name(),
                    "token": token.as_ref().map(WalletAddress::as_str), "amount": amount.to_string(),
                }),
            };
            return Ok(Response::new(pb::SendResponse {
                submission: Some(self.submit_solana(write, intent).await?),
            }));
        }
        let to = evm_address(&to)?;
        let token = token.as_ref().map(evm_address).transpose()?;
        let request_json = serde_json::json!({
            "chain": chain.slug(), "from": write.wallet.wallet().address, "to": to.to_checksum(None),
            "asset": asset.as_str_name(), "token": token.map(|t| t.to_checksum(None)),
            "amount": amount.to_string(),
        });
        let intent = match token {
            None => EvmIntent {
                kind: TxKind::Send,
                to,
                value: amount,
                input: Bytes::new(),
                asset: Some("native".to_owned()),
                token: None,
                amount: Some(amount),
                beneficiary: None,
                token_debit: None,
                request: request_json,
            },
            Some(token) => EvmIntent {
                kind: TxKind::Send,
                to: token,
                value: U256::ZERO,
                input: crate::chains::evm::erc20_transfer(to, amount),
                asset: Some("erc20".to_owned()),
                token: Some(token),
                amount: Some(amount),
                beneficiary: Some(to),
                token_debit: Some((token, amount)),
                request: request_json,
            },
        };
        Ok(Response::new(pb::SendResponse {
            submission: Some(self.submit_evm(write, intent).await?),
        }))
    }

    async fn approve_token(
        &self,
        request: Request<pb::ApproveTokenRequest>,
    ) -> Result<Response<pb::ApproveTokenResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Budget::Write).await?;
        let ticket = match self.open_write(&caller, &request, "/token/approve").await? {
            Keyed::Answered(s) => {
                return Ok(Response::new(pb::ApproveTokenResponse {
                    submission: Some(to_pb(s)),
                }));
            }
            Keyed::Fresh(ticket) => ticket,
        };
        let req = request.into_inner();
        let chain = self.evm_chain(&req.chain)?;
        let mut v = Violations::default();
        let token = v.check("token", ChainFamily::Evm.parse_address(&req.token));
        let spender = v.check("spender", ChainFamily::Evm.parse_address(&req.spender));
        let amount = v.check("amount", parse_amount(&req.amount, AmountKind::Uint256));
        v.finish()?;
        let wallet = self
            .core
            .wallets
            .resolve_delegated(
                caller.user_id,
                ChainFamily::Evm,
                non_empty(req.from.as_ref()),
                "from",
            )
            .await?;
        let (Some(token), Some(spender), Some(amount)) = (token, spender, amount) else {
            return Err(
                WalletOpsError::Internal(anyhow::anyhow!("validated fields missing")).into(),
            );
        };
        let (token, spender) = (evm_address(&token)?, evm_address(&spender)?);
        let intent = EvmIntent {
            kind: TxKind::Approve,
            to: token,
            value: U256::ZERO,
            input: crate::chains::evm::erc20_approve(spender, amount),
            asset: None,
            token: Some(token),
            amount: Some(amount),
            beneficiary: Some(spender),
            token_debit: None,
            request: serde_json::json!({
                "chain": chain.slug(), "from": wallet.wallet().address,
                "token": token.to_checksum(None), "spender": spender.to_checksum(None),
                "amount": amount.to_string(),
            }),
        };
        let write = Write {
            ticket,
            chain,
            wallet,
        };
        Ok(Response::new(pb::ApproveTokenResponse {
            submission: Some(self.submit_evm(write, intent).await?),
        }))
    }

    async fn call_contract(
        &self,
        request: Request<pb::CallContractRequest>,
    ) -> Result<Response<pb::CallContractResponse>, Status> {
        let caller = self.core.admit(request.metadata(), Budget::Write).await?;
        let ticket = match self
            .open_write(&caller, &request, "/contracts/send")
            .await?
        {
            Keyed::Answered(s) => {
                return Ok(Response::new(pb::CallContractResponse {
                    submission: Some(to_pb(s)),
                }));
            }
            Keyed::Fresh(ticket) => ticket,
        };
        let req = request.into_inner();
        let chain = self.evm_chain(&req.chain)?;
        let mut v = Violations::default();
        let to = v.check("to", ChainFamily::Evm.parse_address(&req.to));
        let value = match non_empty(req.value.as_ref()) {
            Some(value) => v.check("value", parse_amount(value, AmountKind::Uint256)),
            None => Some(U256::ZERO),
        };
        let args = req
            .args
            .as_ref()
            .map(|l| l.values.as_slice())
            .unwrap_or_default();
        let input = match (
            non_empty(req.data.as_ref()),
            non_empty(req.function.as_ref()),
        ) {
            (Some(_), Some(_)) => {
                v.push("data", "give either data or function, not both");
                None
            }
            (None, None) => {
                v.push("data", "required: calldata, or a function with args");
                None
            }
            (Some(data), None) => {
                if !args.is_empty() {
                    v.push("args", "args go with function, not with data");
                }
                // One prefix: `hex::decode` takes none, where alloy's would strip a second.
                v.check(
                    "data",
                    data.strip_prefix("0x")
                        .and_then(|h| hex::decode(h).ok())
                        .map(Bytes::from)
                        .ok_or_else(|| "must be 0x-prefixed hex bytes".to_owned()),
                )
            }
            (None, Some(function)) => v
                .check("function", calldata::parse(function))
                .and_then(|function| v.check("args", calldata::encode(&function, args))),
        };
        v.finish()?;
        let wallet = self
            .core
            .wallets
            .resolve_delegated(
                caller.user_id,
                ChainFamily::Evm,
                non_empty(req.from.as_ref()),
                "from",
            )
            .await?;
        let (Some(to), Some(value), Some(input)) = (to, value, input) else {
            return Err(
                WalletOpsError::Internal(anyhow::anyhow!("validated fields missing")).into(),
            );
        };
        let to = evm_address(&to)?;
        let intent = EvmIntent {
            kind: TxKind::ContractCall,
            to,
            value,
            request: serde_json::json!({
                "chain": chain.slug(), "from": wallet.wallet().address, "to": to.to_checksum(None),
                "value": value.to_string(), "data": input.to_string(),
                "function": req.function,
            }),
            input,
            asset: None,
            token: None,
            amount: (!value.is_zero()).then_some(value),
            beneficiary: None,
            token_debit: None,
        };
        let write = Write {
            ticket,
            chain,
            wallet,
        };
        Ok(Response::new(pb::CallContractResponse {
            submission: Some(self.submit_evm(write, intent).await?),
        }))
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
