//! The reads of a deposit scan: an address's signatures newer than the last one seen, and
//! what a transaction credited, from its balances before and after (lamports per account,
//! token amounts per account with their owner and mint).

use std::{collections::BTreeMap, str::FromStr};

use serde_json::{Value, json};
use solana_pubkey::Pubkey;
use solana_rpc_client_api::request::RpcRequest;

use super::{SolanaClient, rpc_failed};
use crate::ChainError;

/// A signature an address took part in.
#[derive(Debug, Clone)]
pub struct SeenSignature {
    /// The signature, base58.
    pub signature: String,
    /// Its slot.
    pub slot: u64,
    /// It failed (so moved nothing but its fee).
    pub failed: bool,
}

/// What one transaction changed, by account.
#[derive(Debug, Clone, Default)]
pub struct BalanceChanges {
    /// Its slot.
    pub slot: u64,
    /// It failed.
    pub failed: bool,
    /// Its fee payer.
    pub fee_payer: Option<Pubkey>,
    /// Lamports gained (or lost) per account.
    pub lamports: BTreeMap<Pubkey, i128>,
    /// Token base units gained (or lost) per (owner, mint).
    pub tokens: BTreeMap<(Pubkey, Pubkey), i128>,
}

/// Signatures read at once.
const SIGNATURES_AT_ONCE: usize = 1000;

impl SolanaClient {
    /// `address`'s signatures newer than `until` (all kept, when `None`, at most `limit`),
    /// newest first.
    pub async fn signatures_for(
        &self,
        address: &Pubkey,
        until: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SeenSignature>, ChainError> {
        let mut config = json!({
            "commitment": "confirmed",
            "limit": limit.min(SIGNATURES_AT_ONCE),
        });
        if let Some(until) = until {
            config["until"] = json!(until);
        }
        let found: Value = self
            .rpc
            .send(
                RpcRequest::GetSignaturesForAddress,
                json!([address.to_string(), config]),
            )
            .await
            .map_err(|e| rpc_failed("read an address's signatures", e))?;
        Ok(found
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| {
                Some(SeenSignature {
                    signature: s["signature"].as_str()?.to_owned(),
                    slot: s["slot"].as_u64()?,
                    failed: !s["err"].is_null(),
                })
            })
            .collect())
    }

    /// What transaction `signature` changed; `None`: the node does not have it.
    pub async fn balance_changes(
        &self,
        signature: &str,
    ) -> Result<Option<BalanceChanges>, ChainError> {
        let found: Value = self
            .rpc
            .send(
                RpcRequest::GetTransaction,
                json!([signature, {
                    "encoding": "json",
                    "commitment": "confirmed",
                    "maxSupportedTransactionVersion": 0,
                }]),
            )
            .await
            .map_err(|e| rpc_failed("read a transaction", e))?;
        let meta = &found["meta"];
        if found.is_null() || meta.is_null() {
            return Ok(None);
        }
        let key = |v: &Value| v.as_str().and_then(|k| Pubkey::from_str(k).ok());
        let loaded = ["writable", "readonly"]
            .iter()
            .filter_map(|k| meta["loadedAddresses"][k].as_array())
            .flatten();
        let accounts: Vec<Option<Pubkey>> = found["transaction"]["message"]["accountKeys"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(loaded)
            .map(key)
            .collect();
        let mut changes = BalanceChanges {
            slot: found["slot"].as_u64().unwrap_or_default(),
            failed: !meta["err"].is_null(),
            fee_payer: accounts.first().copied().flatten(),
            ..BalanceChanges::default()
        };
        let lamports = |k: &str| -> Vec<i128> {
            meta[k]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| i128::from(v.as_u64().unwrap_or_default()))
                .collect()
        };
        let (pre, post) = (lamports("preBalances"), lamports("postBalances"));
        for (i, account) in accounts.iter().enumerate() {
            if let (Some(account), Some(pre), Some(post)) = (account, pre.get(i), post.get(i))
                && pre != post
            {
                *changes.lamports.entry(*account).or_default() += post - pre;
            }
        }
        for (k, sign) in [("preTokenBalances", -1), ("postTokenBalances", 1)] {
            for b in meta[k].as_array().into_iter().flatten() {
                let (Some(owner), Some(mint)) = (key(&b["owner"]), key(&b["mint"])) else {
                    continue;
                };
                let amount: i128 = b["uiTokenAmount"]["amount"]
                    .as_str()
                    .and_then(|a| a.parse().ok())
                    .unwrap_or_default();
                *changes.tokens.entry((owner, mint)).or_default() += sign * amount;
            }
        }
        changes.tokens.retain(|_, delta| *delta != 0);
        Ok(Some(changes))
    }

    /// The newest finalized slot.
    pub async fn finalized_slot(&self) -> Result<u64, ChainError> {
        self.rpc
            .get_slot_with_commitment(solana_commitment_config::CommitmentConfig::finalized())
            .await
            .map_err(|e| rpc_failed("read the finalized slot", e))
    }

    /// The token accounts of `owner` under both token programs.
    pub async fn token_accounts_owned_by(&self, owner: &Pubkey) -> Result<Vec<Pubkey>, ChainError> {
        Ok(self
            .token_accounts_of(owner)
            .await?
            .into_iter()
            .map(|o| o.account)
            .collect())
    }
}
