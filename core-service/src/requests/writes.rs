//! The writes: sends, approvals and contract calls, parsed for their chain's family.

use alloy::primitives::{Address, Bytes, U256};
use walletops_proto::v1 as pb;

use super::{chain, evm_chain, non_empty, not_zero, optional_address};
use crate::error::{Result, Violations};
use walletops_chains::{Chain, Registry};
use walletops_domain::{AmountKind, ChainFamily, WalletAddress, parse_amount};

use super::calldata;

pub use walletops_domain::Transfer;

/// `POST /send`.
#[derive(Debug, Clone)]
pub struct SendRequest {
    /// The chain.
    pub chain: Chain,
    /// The sending wallet; `None`: the caller's default.
    pub from: Option<WalletAddress>,
    /// What moves where.
    pub transfer: Transfer,
}

impl SendRequest {
    /// Parses `req` against `chains`.
    pub fn parse(chains: &Registry, req: &pb::SendRequest) -> Result<Self> {
        let chain = chain(chains, &req.chain)?;
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
        let to = v.check("to", not_zero(family.parse_address(&req.to)));
        // `Some(None)`: the native coin; `None`: not known (a violation is recorded).
        let token = match (asset, non_empty(req.token.as_ref())) {
            (Some(pb::Asset::Native), Some(_)) => {
                v.push("token", "must be absent for native");
                None
            }
            (Some(pb::Asset::Erc20 | pb::Asset::Spl), None) => {
                v.push("token", "required for token transfers");
                None
            }
            (_, Some(t)) => v.check("token", family.parse_address(t)).map(Some),
            (_, None) => Some(None),
        };
        let kind = match family {
            ChainFamily::Evm => AmountKind::Uint256,
            ChainFamily::Solana => AmountKind::U64,
        };
        let amount = v.check("amount", parse_amount(&req.amount, kind));
        let from = optional_address(&mut v, family, "from", req.from.as_ref());
        let transfer = match (to, token, amount) {
            (Some(WalletAddress::Evm(to)), Some(token), Some(amount)) => Some(Transfer::Evm {
                to,
                token: token.and_then(|t| t.evm()),
                amount,
            }),
            (Some(WalletAddress::Solana(to)), Some(token), Some(amount)) => {
                // `parse_amount` held it to u64 for Solana.
                u64::try_from(amount).ok().map(|amount| Transfer::Solana {
                    to,
                    mint: token.and_then(|t| t.solana()),
                    amount,
                })
            }
            _ => None,
        };
        v.conclude(transfer.map(|transfer| Self {
            chain: chain.clone(),
            from,
            transfer,
        }))
    }
}

/// `POST /token/approve`: an ERC20 allowance.
#[derive(Debug, Clone)]
pub struct ApproveRequest {
    /// The chain (EVM).
    pub chain: Chain,
    /// The owner wallet; `None`: the caller's default.
    pub from: Option<WalletAddress>,
    /// The token.
    pub token: Address,
    /// Who may spend.
    pub spender: Address,
    /// The allowance, in base units.
    pub amount: U256,
}

impl ApproveRequest {
    /// Parses `req` against `chains`.
    pub fn parse(chains: &Registry, req: &pb::ApproveTokenRequest) -> Result<Self> {
        let chain = evm_chain(chains, &req.chain)?;
        let mut v = Violations::default();
        let evm = |raw: &str| ChainFamily::Evm.parse_address(raw).map(|a| a.evm());
        let token = v.check("token", evm(&req.token)).flatten();
        let spender = v
            .check(
                "spender",
                not_zero(ChainFamily::Evm.parse_address(&req.spender)),
            )
            .and_then(|a| a.evm());
        let amount = v.check("amount", parse_amount(&req.amount, AmountKind::Uint256));
        let from = optional_address(&mut v, ChainFamily::Evm, "from", req.from.as_ref());
        let built = token
            .zip(spender)
            .zip(amount)
            .map(|((token, spender), amount)| Self {
                chain: chain.clone(),
                from,
                token,
                spender,
                amount,
            });
        v.conclude(built)
    }
}

/// `POST /contracts/send`: a call with calldata given raw or built from a function and its
/// arguments.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The chain (EVM).
    pub chain: Chain,
    /// The calling wallet; `None`: the caller's default.
    pub from: Option<WalletAddress>,
    /// The contract.
    pub to: Address,
    /// Wei sent with the call.
    pub value: U256,
    /// The calldata.
    pub input: Bytes,
    /// The function signature the calldata was built from, if it was.
    pub function: Option<String>,
}

impl CallRequest {
    /// Parses `req` against `chains`.
    pub fn parse(chains: &Registry, req: &pb::CallContractRequest) -> Result<Self> {
        let chain = evm_chain(chains, &req.chain)?;
        let mut v = Violations::default();
        let to = v
            .check("to", not_zero(ChainFamily::Evm.parse_address(&req.to)))
            .and_then(|a| a.evm());
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
        let from = optional_address(&mut v, ChainFamily::Evm, "from", req.from.as_ref());
        let built = to.zip(value).zip(input).map(|((to, value), input)| Self {
            chain: chain.clone(),
            from,
            to,
            value,
            input,
            function: req.function.clone(),
        });
        v.conclude(built)
    }
}
