//! The Solana chain client over the Solana RPC client: SOL and SPL balances (Token and
//! Token-2022, one `getTokenAccountsByOwner` per token program), mints, blockhashes, fees,
//! a write's simulation read into its effects (`simulate.rs`), sending with its outcome
//! classified, and signature statuses.

use std::{
    collections::{BTreeMap, HashMap},
    str::FromStr,
    sync::{Arc, Mutex},
    time::Duration,
};

use solana_commitment_config::CommitmentConfig;
use solana_hash::Hash;
use solana_pubkey::Pubkey;
use solana_rpc_client::{nonblocking::rpc_client::RpcClient, rpc_client::RpcClientConfig};
use solana_rpc_client_api::{
    client_error::{Error as ClientError, ErrorKind},
    config::RpcSendTransactionConfig,
    custom_error::{
        JSON_RPC_SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
        JSON_RPC_SERVER_ERROR_TRANSACTION_SIGNATURE_LEN_MISMATCH,
        JSON_RPC_SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE,
        JSON_RPC_SERVER_ERROR_UNSUPPORTED_TRANSACTION_VERSION,
    },
    request::{RpcError, RpcResponseErrorData, TokenAccountsFilter},
};
use solana_signature::Signature;
use solana_transaction::{Transaction, versioned::VersionedTransaction};
use spl_token_2022_interface::{extension::StateWithExtensions, state::Mint};

use super::failover::solana::Failover;

mod landed;
mod scan;
mod simulate;
use crate::ChainError;
pub use scan::{BalanceChanges, SeenSignature};

/// The two SPL token programs.
pub const TOKEN_PROGRAMS: [Pubkey; 2] = [spl_token_interface::ID, spl_token_2022_interface::ID];

/// How long one node call may take before it counts as failed.
const RPC_TIMEOUT: Duration = Duration::from_secs(15);

/// What the node said to a sent transaction.
#[derive(Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// Accepted for processing.
    Accepted,
    /// Its blockhash is unknown or expired: it can never be processed as signed.
    BlockhashExpired,
    /// Refused for good (preflight failed): why, with the program logs.
    Rejected {
        /// The node's message and logs.
        why: String,
        /// The failure looks like a shortfall of lamports or tokens.
        insufficient: bool,
    },
    /// No answer: it may or may not have arrived.
    Unknown(String),
}

/// A signature's status as the node reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureState {
    /// Never seen (or long forgotten).
    Unseen,
    /// Processed, not yet confirmed.
    Processed,
    /// Confirmed or finalized without error.
    Succeeded,
    /// Confirmed or finalized with this error.
    Failed(String),
}

/// A mint's program and decimals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MintInfo {
    /// SPL Token or Token-2022.
    pub program: Pubkey,
    /// Decimals.
    pub decimals: u8,
}

/// The balance of one mint held by an owner, over all its token accounts of that mint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    /// The mint.
    pub mint: Pubkey,
    /// Base units.
    pub amount: u64,
    /// Decimals of the mint.
    pub decimals: u8,
}

/// One token account of an owner.
#[derive(Debug, Clone, Copy)]
struct Owned {
    account: Pubkey,
    mint: Pubkey,
    amount: u64,
    decimals: u8,
}

/// A client of one Solana cluster.
#[derive(Clone)]
pub struct SolanaClient {
    rpc: Arc<RpcClient>,
    /// A client of each RPC URL of the chain and of each of its send URLs: a transfer sent
    /// again goes to every one.
    routes: Arc<Vec<RpcClient>>,
}

impl std::fmt::Debug for SolanaClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SolanaClient({})", self.rpc.url())
    }
}

/// Solana clients by RPC URL, made on first use.
#[derive(Debug, Default)]
pub struct SolanaClients {
    clients: Mutex<HashMap<String, SolanaClient>>,
}

impl SolanaClients {
    /// The client for `chain`, over its RPC URLs (tried in order, see `failover`).
    pub fn get(&self, chain: &super::Chain) -> SolanaClient {
        let rpc_urls = chain.rpc_urls();
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        clients
            .entry(format!(
                "{} {} {}",
                chain.slug(),
                rpc_urls.join(" "),
                chain.send_urls().join(" ")
            ))
            .or_insert_with(|| SolanaClient {
                rpc: Arc::new(RpcClient::new_sender(
                    Failover::new(chain.slug(), rpc_urls, RPC_TIMEOUT),
                    RpcClientConfig::with_commitment(CommitmentConfig::confirmed()),
                )),
                routes: Arc::new(
                    rpc_urls
                        .iter()
                        .chain(chain.send_urls())
                        .map(|url| {
                            RpcClient::new_with_timeout_and_commitment(
                                url.clone(),
                                RPC_TIMEOUT,
                                CommitmentConfig::confirmed(),
                            )
                        })
                        .collect(),
                ),
            })
            .clone()
    }
}

fn rpc_failed(what: &str, err: impl std::fmt::Display) -> ChainError {
    ChainError::Node(format!("the Solana node failed to {what}: {err}"))
}

/// JSON-RPC 2.0's "invalid params": the sent bytes do not decode.
const JSON_RPC_INVALID_PARAMS: i64 = -32602;

/// JSON-RPC codes by which a node refuses the transaction it was sent, whatever the node's
/// state: preflight simulation failed, a signature does not verify or has the wrong length,
/// an unsupported version, or bytes that do not decode.
const REFUSALS: [i64; 5] = [
    JSON_RPC_SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
    JSON_RPC_SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE,
    JSON_RPC_SERVER_ERROR_TRANSACTION_SIGNATURE_LEN_MISMATCH,
    JSON_RPC_SERVER_ERROR_UNSUPPORTED_TRANSACTION_VERSION,
    JSON_RPC_INVALID_PARAMS,
];

/// Whether `err` refuses the transaction itself, as opposed to no answer or an error that says
/// nothing of it (a node unhealthy or behind, a rate limit, an internal error), after which
/// it may have been forwarded all the same and land.
fn refused(err: &ClientError) -> bool {
    match err.kind() {
        ErrorKind::TransactionError(_) => true,
        ErrorKind::RpcError(RpcError::RpcResponseError { code, data, .. }) => {
            matches!(
                data,
                RpcResponseErrorData::SendTransactionPreflightFailure(_)
            ) || REFUSALS.contains(code)
        }
        _ => false,
    }
}

impl SolanaClient {
    /// Lamports held by `owner`.
    pub async fn balance(&self, owner: &Pubkey) -> Result<u64, ChainError> {
        self.rpc
            .get_balance(owner)
            .await
            .map_err(|e| rpc_failed("read a balance", e))
    }

    /// Every token holding of `owner` under both token programs, summed per mint.
    pub async fn holdings(&self, owner: &Pubkey) -> Result<Vec<Holding>, ChainError> {
        let mut by_mint: BTreeMap<Pubkey, (u64, u8)> = BTreeMap::new();
        for owned in self.token_accounts_of(owner).await? {
            let entry = by_mint.entry(owned.mint).or_insert((0, owned.decimals));
            entry.0 = entry.0.saturating_add(owned.amount);
        }
        Ok(by_mint
            .into_iter()
            .map(|(mint, (amount, decimals))| Holding {
                mint,
                amount,
                decimals,
            })
            .collect())
    }

    /// Every token account of `owner` under both token programs: one
    /// `getTokenAccountsByOwner` (jsonParsed) per program.
    async fn token_accounts_of(&self, owner: &Pubkey) -> Result<Vec<Owned>, ChainError> {
        let mut found = Vec::new();
        for program in TOKEN_PROGRAMS {
            let accounts = self
                .rpc
                .get_token_accounts_by_owner(owner, TokenAccountsFilter::ProgramId(program))
                .await
                .map_err(|e| rpc_failed("read token accounts", e))?;
            for keyed in accounts {
                let bad = |what: &str| rpc_failed("decode a token account", what);
                let data =
                    serde_json::to_value(&keyed.account.data).map_err(|e| bad(&e.to_string()))?;
                let info = data
                    .pointer("/parsed/info")
                    .ok_or_else(|| bad("not jsonParsed"))?;
                let key = |v: &serde_json::Value| v.as_str().and_then(|m| Pubkey::from_str(m).ok());
                found.push(Owned {
                    account: Pubkey::from_str(&keyed.pubkey).map_err(|_| bad("no address"))?,
                    mint: key(&info["mint"]).ok_or_else(|| bad("no mint"))?,
                    amount: info["tokenAmount"]["amount"]
                        .as_str()
                        .and_then(|a| a.parse().ok())
                        .ok_or_else(|| bad("no amount"))?,
                    decimals: info["tokenAmount"]["decimals"].as_u64().unwrap_or(0) as u8,
                });
            }
        }
        Ok(found)
    }

    /// The program and decimals of each of `mints` (`None` where it is not a mint), in one
    /// `getMultipleAccounts`.
    pub async fn mints(&self, mints: &[Pubkey]) -> Result<Vec<Option<MintInfo>>, ChainError> {
        if mints.is_empty() {
            return Ok(Vec::new());
        }
        let accounts = self
            .rpc
            .get_multiple_accounts(mints)
            .await
            .map_err(|e| rpc_failed("read mints", e))?;
        Ok(accounts
            .into_iter()
            .map(|a| {
                let a = a?;
                if !TOKEN_PROGRAMS.contains(&a.owner) {
                    return None;
                }
                let state = StateWithExtensions::<Mint>::unpack(&a.data).ok()?;
                Some(MintInfo {
                    program: a.owner,
                    decimals: state.base.decimals,
                })
            })
            .collect())
    }

    /// How many of `accounts` do not exist, read 100 at a time with `getMultipleAccounts`.
    pub async fn missing(&self, accounts: &[Pubkey]) -> Result<u64, ChainError> {
        let mut missing = 0;
        for chunk in accounts.chunks(100) {
            let found = self
                .rpc
                .get_multiple_accounts_with_commitment(chunk, CommitmentConfig::confirmed())
                .await
                .map_err(|e| rpc_failed("read accounts", e))?;
            missing += found.value.iter().filter(|a| a.is_none()).count() as u64;
        }
        Ok(missing)
    }

    /// Lamports that make an account of `len` bytes rent-exempt.
    pub async fn rent_exempt(&self, len: usize) -> Result<u64, ChainError> {
        self.rpc
            .get_minimum_balance_for_rent_exemption(len)
            .await
            .map_err(|e| rpc_failed("read the rent", e))
    }

    /// The latest blockhash and the last block height at which it is valid.
    pub async fn blockhash(&self) -> Result<(Hash, u64), ChainError> {
        self.rpc
            .get_latest_blockhash_with_commitment(CommitmentConfig::confirmed())
            .await
            .map_err(|e| rpc_failed("read a blockhash", e))
    }

    /// Whether `hash` may still be a transaction's blockhash.
    pub async fn blockhash_valid(&self, hash: &Hash) -> Result<bool, ChainError> {
        self.rpc
            .is_blockhash_valid(hash, CommitmentConfig::confirmed())
            .await
            .map_err(|e| rpc_failed("check a blockhash", e))
    }

    /// The current block height and the slot it was read at, from one answer.
    pub async fn block_height(&self) -> Result<(u64, u64), ChainError> {
        self.rpc
            .get_epoch_info()
            .await
            .map(|info| (info.block_height, info.absolute_slot))
            .map_err(|e| rpc_failed("read the block height", e))
    }

    /// The compute-unit prices (micro-lamports) recent blocks took from transactions that
    /// write `accounts` (at most 128 are asked about), oldest first.
    pub async fn priority_prices(&self, accounts: &[Pubkey]) -> Result<Vec<u64>, ChainError> {
        let mut fees = self
            .rpc
            .get_recent_prioritization_fees(&accounts[..accounts.len().min(128)])
            .await
            .map_err(|e| rpc_failed("read recent prioritization fees", e))?;
        fees.sort_by_key(|f| f.slot);
        Ok(fees.into_iter().map(|f| f.prioritization_fee).collect())
    }

    /// The fee of `tx`'s message.
    pub async fn fee(&self, tx: &Transaction) -> Result<u64, ChainError> {
        self.rpc
            .get_fee_for_message(&tx.message)
            .await
            .map_err(|e| rpc_failed("read a fee", e))
    }

    /// Sends `tx` with preflight simulation, so a doomed transaction is refused here.
    pub async fn send(&self, tx: &VersionedTransaction) -> SendOutcome {
        let config = RpcSendTransactionConfig {
            skip_preflight: false,
            preflight_commitment: Some(CommitmentConfig::confirmed().commitment),
            max_retries: Some(0),
            ..RpcSendTransactionConfig::default()
        };
        match self.rpc.send_transaction_with_config(tx, config).await {
            Ok(_) => SendOutcome::Accepted,
            Err(e) if refused(&e) => classify(&e),
            Err(e) => SendOutcome::Unknown(e.to_string()),
        }
    }

    /// Sends `tx` again to every RPC URL and send URL of the chain at once, preflight
    /// skipped and no retries by the node (the service retries): taken when one route took
    /// it, refused when none did and one refused it.
    pub async fn resend(&self, tx: &VersionedTransaction) -> SendOutcome {
        let config = RpcSendTransactionConfig {
            skip_preflight: true,
            max_retries: Some(0),
            ..RpcSendTransactionConfig::default()
        };
        let answers = futures::future::join_all(
            self.routes
                .iter()
                .map(|route| route.send_transaction_with_config(tx, config)),
        )
        .await;
        let mut outcome = None;
        for answer in answers {
            let this = match answer {
                Ok(_) => return SendOutcome::Accepted,
                Err(e) if refused(&e) => classify(&e),
                Err(e) => SendOutcome::Unknown(e.to_string()),
            };
            match (&outcome, this) {
                (_, SendOutcome::Accepted) => return SendOutcome::Accepted,
                (None | Some(SendOutcome::Unknown(_)), this) => outcome = Some(this),
                _ => {}
            }
        }
        outcome.unwrap_or_else(|| SendOutcome::Unknown("the chain has no route".to_owned()))
    }

    /// The state of each of `signatures`, searching the history, and the slot the node
    /// answered at.
    pub async fn statuses(
        &self,
        signatures: &[Signature],
    ) -> Result<(u64, Vec<SignatureState>), ChainError> {
        let answer = self
            .rpc
            .get_signature_statuses_with_history(signatures)
            .await
            .map_err(|e| rpc_failed("read signature statuses", e))?;
        let states = answer
            .value
            .into_iter()
            .map(|s| match s {
                None => SignatureState::Unseen,
                Some(s) => match (
                    &s.err,
                    s.satisfies_commitment(CommitmentConfig::confirmed()),
                ) {
                    (_, false) => SignatureState::Processed,
                    (None, true) => SignatureState::Succeeded,
                    (Some(err), true) => SignatureState::Failed(err.to_string()),
                },
            })
            .collect();
        Ok((answer.context.slot, states))
    }
}

/// Classifies a node's refusal of a sent transaction.
fn classify(err: &ClientError) -> SendOutcome {
    let mut why = err.to_string();
    if let ErrorKind::RpcError(RpcError::RpcResponseError {
        data: RpcResponseErrorData::SendTransactionPreflightFailure(sim),
        ..
    }) = err.kind()
        && let Some(logs) = &sim.logs
    {
        why = format!("{why}; logs: {}", logs.join(" | "));
    }
    let lower = why.to_ascii_lowercase();
    // The cluster has this very transaction: it was sent before, and landed.
    if lower.contains("already been processed") || lower.contains("alreadyprocessed") {
        SendOutcome::Accepted
    } else if lower.contains("blockhash not found") || lower.contains("blockhashnotfound") {
        SendOutcome::BlockhashExpired
    } else {
        SendOutcome::Rejected {
            insufficient: lower.contains("insufficient"),
            why,
        }
    }
}
