//! What each write asks of its chain: typed requests turned into the intents the pipelines
//! sign, with the request as received kept beside the record for audit.

use alloy::primitives::{Bytes, U256};

use super::{
    evm::EvmIntent,
    solana::{Leg, SolanaIntent},
};
use crate::requests::{ApproveRequest, CallRequest, SendRequest, Transfer, payouts::PackRequest};
use walletops_chains::evm::{erc20_approve, erc20_transfer};
use walletops_domain::{DelegatedWallet, TxKind};

/// The intent of a send on either family.
pub(crate) enum SendIntent {
    /// On an EVM chain.
    Evm(EvmIntent),
    /// On a Solana cluster.
    Solana(SolanaIntent),
}

/// The send `req` from `wallet`.
pub(crate) fn send(req: &SendRequest, wallet: &DelegatedWallet) -> SendIntent {
    let from = wallet.wallet().address.to_string();
    let slug = req.chain.slug();
    match req.transfer {
        Transfer::Solana { to, mint, amount } => SendIntent::Solana(SolanaIntent {
            legs: vec![Leg { to, amount }],
            mint,
            request: serde_json::json!({
                "chain": slug, "from": from, "to": to.to_string(),
                "asset": if mint.is_some() { "ASSET_SPL" } else { "ASSET_NATIVE" },
                "token": mint.map(|m| m.to_string()), "amount": amount.to_string(),
            }),
        }),
        Transfer::Evm { to, token, amount } => {
            let request = serde_json::json!({
                "chain": slug, "from": from, "to": to.to_checksum(None),
                "asset": if token.is_some() { "ASSET_ERC20" } else { "ASSET_NATIVE" },
                "token": token.map(|t| t.to_checksum(None)), "amount": amount.to_string(),
            });
            SendIntent::Evm(match token {
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
                    request,
                },
                Some(token) => EvmIntent {
                    kind: TxKind::Send,
                    to: token,
                    value: U256::ZERO,
                    input: erc20_transfer(to, amount),
                    asset: Some("erc20".to_owned()),
                    token: Some(token),
                    amount: Some(amount),
                    beneficiary: Some(to),
                    token_debit: Some((token, amount)),
                    request,
                },
            })
        }
    }
}

/// The payout items `req` packed in one transaction from `wallet`.
pub(crate) fn pack(req: &PackRequest, wallet: &DelegatedWallet) -> SolanaIntent {
    let items: Vec<serde_json::Value> = req
        .legs
        .iter()
        .map(|leg| serde_json::json!({"to": leg.to.to_string(), "amount": leg.amount.to_string()}))
        .collect();
    SolanaIntent {
        legs: req.legs.clone(),
        mint: req.mint,
        request: serde_json::json!({
            "chain": req.chain.slug(), "from": wallet.wallet().address.to_string(),
            "asset": if req.mint.is_some() { "ASSET_SPL" } else { "ASSET_NATIVE" },
            "token": req.mint.map(|m| m.to_string()), "items": items,
        }),
    }
}

/// The approval `req` from `wallet`.
pub(crate) fn approve(req: &ApproveRequest, wallet: &DelegatedWallet) -> EvmIntent {
    EvmIntent {
        kind: TxKind::Approve,
        to: req.token,
        value: U256::ZERO,
        input: erc20_approve(req.spender, req.amount),
        asset: None,
        token: Some(req.token),
        amount: Some(req.amount),
        beneficiary: Some(req.spender),
        token_debit: None,
        request: serde_json::json!({
            "chain": req.chain.slug(), "from": wallet.wallet().address.to_string(),
            "token": req.token.to_checksum(None), "spender": req.spender.to_checksum(None),
            "amount": req.amount.to_string(),
        }),
    }
}

/// The contract call `req` from `wallet`.
pub(crate) fn call(req: &CallRequest, wallet: &DelegatedWallet) -> EvmIntent {
    EvmIntent {
        kind: TxKind::ContractCall,
        to: req.to,
        value: req.value,
        request: serde_json::json!({
            "chain": req.chain.slug(), "from": wallet.wallet().address.to_string(),
            "to": req.to.to_checksum(None), "value": req.value.to_string(),
            "data": req.input.to_string(), "function": req.function,
        }),
        input: req.input.clone(),
        asset: None,
        token: None,
        amount: (!req.value.is_zero()).then_some(req.value),
        beneficiary: None,
        token_debit: None,
    }
}
