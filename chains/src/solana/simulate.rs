//! A Solana write's simulation before it is signed: the token accounts the transaction names
//! read first (one `getMultipleAccounts`, the pre-state), then `simulateTransaction` with the
//! wallet and its token accounts as `accounts` and `innerInstructions`, and every instruction
//! it runs, top level and CPI, read into its effects on the wallet (`effects::solana`), held
//! against the wallet's balances before and after where the node answers with them.

use std::{collections::HashMap, str::FromStr};

use serde_json::Value;
use solana_pubkey::Pubkey;
use solana_rpc_client_api::{
    config::{
        CommitmentConfig, RpcSimulateTransactionAccountsConfig, RpcSimulateTransactionConfig,
        UiAccountEncoding, UiTransactionEncoding,
    },
    response::RpcSimulateTransactionResult,
};
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_status_client_types::{
    UiTransactionTokenBalance, option_serializer::OptionSerializer,
};
use spl_token_2022_interface::{extension::StateWithExtensions, state::Account};
use walletops_domain::Asset;

use super::{SolanaClient, TOKEN_PROGRAMS, rpc_failed};
use crate::{
    effects::{
        Foreseen,
        solana::{Op, TokenAccount, asset, effects_of, op_of, op_of_parsed, reconcile},
    },
    error::ChainError,
};

/// How many log lines of a failed simulation its refusal quotes.
const LOG_LINES: usize = 5;

impl SolanaClient {
    /// Simulates `tx` (its signatures need not be in place) and reads what it does to
    /// `wallet`, and the compute units it consumed when the node says. A transaction that
    /// would fail is SEND_FAILED with the node's error and the end of its logs; nothing has
    /// been signed at this point.
    pub async fn simulate(
        &self,
        wallet: &Pubkey,
        tx: &VersionedTransaction,
    ) -> Result<(Foreseen, Option<u64>), ChainError> {
        let keys = tx.message.static_account_keys().to_vec();
        let mut pre = self.token_accounts(&keys).await?;
        // Every token account of the wallet, not only those the transaction names outright:
        // one loaded from a lookup table would otherwise pass for somebody else's.
        for owned in self.token_accounts_of(wallet).await? {
            pre.insert(
                owned.account,
                TokenAccount {
                    mint: owned.mint,
                    owner: *wallet,
                },
            );
        }
        // The node takes at most as many addresses as the transaction names.
        let mut watched = vec![wallet.to_string()];
        watched.extend(
            pre.iter()
                .filter(|(k, a)| a.owner == *wallet && keys.contains(k))
                .map(|(k, _)| k.to_string()),
        );
        watched.truncate(keys.len());
        let config = RpcSimulateTransactionConfig {
            sig_verify: false,
            replace_recent_blockhash: false,
            commitment: Some(CommitmentConfig::confirmed()),
            encoding: Some(UiTransactionEncoding::Base64),
            accounts: Some(RpcSimulateTransactionAccountsConfig {
                encoding: Some(UiAccountEncoding::Base64),
                addresses: watched,
            }),
            min_context_slot: None,
            inner_instructions: true,
        };
        let result = self
            .rpc
            .simulate_transaction_with_config(tx, config)
            .await
            .map_err(|e| rpc_failed("simulate the transaction", e))?
            .value;
        if let Some(err) = result.err {
            let logs = result.logs.unwrap_or_default();
            let tail = &logs[logs.len().saturating_sub(LOG_LINES)..];
            // Program logs are the programs' own words: bounded and cleaned.
            return Err(ChainError::WouldFail(format!(
                "the transaction would fail: {err}{}",
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (logs: {})",
                        walletops_domain::chain_text(
                            &tail.join(" | "),
                            walletops_domain::MESSAGE_CHARS
                        )
                    )
                }
            )));
        }
        let loaded = result.loaded_addresses.as_ref().map(|l| {
            l.writable
                .iter()
                .chain(&l.readonly)
                .map(String::as_str)
                .collect::<Vec<_>>()
        });
        let falls = falls(wallet, &keys, &result);
        let all = with_loaded(keys, loaded.into_iter().flatten())?;
        let inner = result
            .inner_instructions
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| rpc_failed("read inner instructions", e))?;
        let foreseen = match read_effects(wallet, tx, &all, inner.as_ref(), &pre)? {
            Foreseen::Known(mut effects) => {
                let called = tx
                    .message
                    .instructions()
                    .iter()
                    .filter_map(|ix| all.get(usize::from(ix.program_id_index)))
                    .find(|p| **p != solana_compute_budget_interface::ID)
                    .copied()
                    .unwrap_or(solana_system_interface::program::ID);
                reconcile(&mut effects, called, &falls);
                Foreseen::Known(effects)
            }
            unknown => unknown,
        };
        Ok((foreseen, result.units_consumed))
    }

    /// The token accounts among `keys`, with their mint and owner, read in one call.
    async fn token_accounts(
        &self,
        keys: &[Pubkey],
    ) -> Result<HashMap<Pubkey, TokenAccount>, ChainError> {
        let accounts = self
            .rpc
            .get_multiple_accounts(keys)
            .await
            .map_err(|e| rpc_failed("read accounts", e))?;
        Ok(keys
            .iter()
            .zip(accounts)
            .filter_map(|(key, account)| {
                let account = account.filter(|a| TOKEN_PROGRAMS.contains(&a.owner))?;
                let state = StateWithExtensions::<Account>::unpack(&account.data).ok()?;
                Some((
                    *key,
                    TokenAccount {
                        mint: state.base.mint,
                        owner: state.base.owner,
                    },
                ))
            })
            .collect())
    }
}

/// What `wallet`'s accounts among `keys` (a transaction's static accounts) lost across the
/// simulation `result`, by asset, where the node answers with balances before and after
/// (current nodes do; none otherwise). The coin: the lamports of the wallet and of every
/// token account it owns (rent moved into its own new account stays its own; wrapped SOL is
/// lamports too), less the fee it pays. Each other mint: its token accounts' amounts. Read
/// in the same simulation, so no write of the wallet's landing between two reads is taken
/// for this one's.
fn falls(
    wallet: &Pubkey,
    keys: &[Pubkey],
    result: &RpcSimulateTransactionResult,
) -> Vec<(Asset, u64)> {
    let owned = |balances: &Option<Vec<UiTransactionTokenBalance>>| {
        let mut held: HashMap<u8, (Pubkey, u64)> = HashMap::new();
        for b in balances.iter().flatten() {
            let mine = matches!(&b.owner, OptionSerializer::Some(o) if Pubkey::from_str(o).ok() == Some(*wallet));
            if let (true, Ok(mint), Ok(amount)) = (
                mine,
                Pubkey::from_str(&b.mint),
                b.ui_token_amount.amount.parse::<u64>(),
            ) {
                held.insert(b.account_index, (mint, amount));
            }
        }
        held
    };
    let (Some(_), Some(_)) = (&result.pre_token_balances, &result.post_token_balances) else {
        return Vec::new();
    };
    let (before, after) = (
        owned(&result.pre_token_balances),
        owned(&result.post_token_balances),
    );
    let mut falls = Vec::new();
    if let (Some(pre), Some(post), Some(payer), Some(fee)) = (
        &result.pre_balances,
        &result.post_balances,
        keys.iter().position(|k| k == wallet),
        result.fee,
    ) {
        let mut accounts: Vec<usize> = before
            .keys()
            .chain(after.keys())
            .map(|&i| usize::from(i))
            .collect();
        accounts.push(payer);
        accounts.sort_unstable();
        accounts.dedup();
        let sum = |lamports: &[u64]| -> u128 {
            accounts
                .iter()
                .map(|&i| u128::from(lamports.get(i).copied().unwrap_or(0)))
                .sum()
        };
        // Only the fee payer pays the fee.
        let fee = if payer == 0 { u128::from(fee) } else { 0 };
        let fell = sum(pre).saturating_sub(sum(post)).saturating_sub(fee);
        falls.push((Asset::Native, u64::try_from(fell).unwrap_or(u64::MAX)));
    }
    for (index, (mint, held)) in before {
        if asset(mint) == Asset::Native {
            continue;
        }
        // An account gone after it (closed) holds nothing.
        let left = after.get(&index).map_or(0, |&(_, amount)| amount);
        falls.push((asset(mint), held.saturating_sub(left)));
    }
    falls
}

/// A transaction's account list: its static `keys`, then those `loaded` from lookup tables
/// as the node names them (the order its account indexes count).
pub(super) fn with_loaded<'a>(
    mut keys: Vec<Pubkey>,
    loaded: impl Iterator<Item = &'a str>,
) -> Result<Vec<Pubkey>, ChainError> {
    for key in loaded {
        keys.push(Pubkey::from_str(key).map_err(|e| rpc_failed("list loaded accounts", e))?);
    }
    Ok(keys)
}

/// What `tx` does to `wallet`, read from its instructions (account indexes counting `all`,
/// as `with_loaded` lists them) and the `inner` instructions the node ran for it (`None`: the
/// node did not say), with the token accounts `pre` knows.
pub(super) fn read_effects(
    wallet: &Pubkey,
    tx: &VersionedTransaction,
    all: &[Pubkey],
    inner: Option<&Value>,
    pre: &HashMap<Pubkey, TokenAccount>,
) -> Result<Foreseen, ChainError> {
    let mut ops = Vec::new();
    for ix in tx.message.instructions() {
        ops.push(compiled(
            all,
            usize::from(ix.program_id_index),
            ix.accounts.iter().map(|&i| usize::from(i)),
            &ix.data,
        ));
    }
    let Some(inner) = inner else {
        // Without them, what the programs it calls do in turn is not seen.
        return Ok(Foreseen::Unknown(
            "the Solana node answered without the inner instructions".to_owned(),
        ));
    };
    for ix in inner
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|group| group["instructions"].as_array())
        .flatten()
    {
        ops.push(inner_op(all, ix));
    }
    Ok(match effects_of(wallet, pre, &ops) {
        Ok(effects) => Foreseen::Known(effects),
        Err(why) => Foreseen::Unknown(why.to_string()),
    })
}

/// The op of a compiled instruction, its indexes resolved against `keys`; one naming an
/// account the node did not list cannot be read.
fn compiled(
    keys: &[Pubkey],
    program: usize,
    accounts: impl Iterator<Item = usize>,
    data: &[u8],
) -> Op {
    let resolved: Option<Vec<Pubkey>> = accounts.map(|i| keys.get(i).copied()).collect();
    match (keys.get(program), resolved) {
        (Some(program), Some(accounts)) => op_of(program, &accounts, data),
        (_, accounts) => Op::Unreadable {
            program: "unresolved",
            what: "an instruction naming accounts the node did not list".to_owned(),
            // Unresolved: taken as touching every account the transaction names, so it
            // refuses rather than passes.
            accounts: accounts.unwrap_or_else(|| keys.to_vec()),
        },
    }
}

/// The op of an inner instruction as the node gave it: compiled (account indexes), or
/// `jsonParsed` / partially decoded (addresses).
fn inner_op(keys: &[Pubkey], ix: &Value) -> Op {
    let Some(program) = ix["programIdIndex"].as_u64() else {
        return op_of_parsed(ix);
    };
    let data = ix["data"]
        .as_str()
        .and_then(|d| bs58::decode(d).into_vec().ok());
    let accounts: Option<Vec<usize>> = ix["accounts"].as_array().map(|a| {
        a.iter()
            .filter_map(|i| i.as_u64())
            .map(|i| i as usize)
            .collect()
    });
    match (data, accounts) {
        (Some(data), Some(accounts)) => {
            compiled(keys, program as usize, accounts.into_iter(), &data)
        }
        _ => Op::Unreadable {
            program: "unresolved",
            what: "an inner instruction in no known form".to_owned(),
            accounts: keys.to_vec(),
        },
    }
}

#[cfg(test)]
#[path = "simulate_tests.rs"]
mod tests;
