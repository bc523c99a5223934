//! What a final Solana transaction did to its wallet, read from the chain: `getTransaction`
//! gives the inner instructions it ran and its token balances before and after (whose
//! accounts name their mint and owner), read into effects as its simulation was.

use std::{collections::HashMap, str::FromStr};

use serde_json::{Value, json};
use solana_pubkey::Pubkey;
use solana_rpc_client_api::request::RpcRequest;
use solana_signature::Signature;
use solana_transaction::versioned::VersionedTransaction;

use super::{
    SolanaClient, rpc_failed,
    simulate::{read_effects, with_loaded},
};
use crate::{
    effects::{Foreseen, solana::TokenAccount},
    error::ChainError,
};
use walletops_domain::Effects;

impl SolanaClient {
    /// What `tx`, final as `signature`, did to `wallet`: nothing when it failed (its fee
    /// aside), `None` when the node no longer has it or its effects cannot be read.
    pub async fn landed(
        &self,
        wallet: &Pubkey,
        signature: &Signature,
        tx: &VersionedTransaction,
    ) -> Result<Option<Effects>, ChainError> {
        let found: Value = self
            .rpc
            .send(
                RpcRequest::GetTransaction,
                json!([signature.to_string(), {
                    "encoding": "json",
                    "commitment": "confirmed",
                    "maxSupportedTransactionVersion": 0,
                }]),
            )
            .await
            .map_err(|e| rpc_failed("read a final transaction", e))?;
        let meta = &found["meta"];
        if found.is_null() || meta.is_null() {
            return Ok(None);
        }
        if !meta["err"].is_null() {
            return Ok(Some(Effects::default()));
        }
        let loaded = ["writable", "readonly"]
            .iter()
            .filter_map(|k| meta["loadedAddresses"][k].as_array())
            .flatten()
            .filter_map(Value::as_str);
        let all = with_loaded(tx.message.static_account_keys().to_vec(), loaded)?;
        let mut accounts = HashMap::new();
        for balance in ["preTokenBalances", "postTokenBalances"]
            .iter()
            .flat_map(|k| meta[k].as_array().cloned().unwrap_or_default())
        {
            let account = balance["accountIndex"]
                .as_u64()
                .and_then(|i| all.get(i as usize).copied());
            let mint = balance["mint"]
                .as_str()
                .and_then(|m| Pubkey::from_str(m).ok());
            let owner = balance["owner"]
                .as_str()
                .and_then(|o| Pubkey::from_str(o).ok());
            if let (Some(account), Some(mint), Some(owner)) = (account, mint, owner) {
                accounts.insert(account, TokenAccount { mint, owner });
            }
        }
        let inner = meta.get("innerInstructions").filter(|v| !v.is_null());
        Ok(match read_effects(wallet, tx, &all, inner, &accounts)? {
            Foreseen::Known(effects) => Some(effects),
            Foreseen::Unknown(why) => {
                tracing::debug!(%signature, %why, "the final effects cannot be read");
                None
            }
        })
    }
}
