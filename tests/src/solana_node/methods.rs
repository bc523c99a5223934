//! The JSON-RPC methods, answering in the real node's shapes, wrappers and error codes.

use base64::{Engine, prelude::BASE64_STANDARD};
use litesvm::types::TransactionMetadata;
use serde::Serialize;
use serde_json::{Value, json};
use solana_account_decoder::parse_token::token_amount_to_ui_amount_v3;
use solana_account_decoder::{UiAccount, UiAccountEncoding};
use solana_epoch_schedule::EpochSchedule;
use solana_message::VersionedMessage;
use solana_pubkey::Pubkey;
use solana_rpc_client_api::{
    config::{
        CommitmentConfig, RpcAccountInfoConfig, RpcEncodingConfigWrapper, RpcSendTransactionConfig,
        RpcSimulateTransactionConfig, RpcTokenAccountsFilter, RpcTransactionConfig,
        UiTransactionEncoding,
    },
    custom_error::{
        JSON_RPC_SERVER_ERROR_MIN_CONTEXT_SLOT_NOT_REACHED, JSON_RPC_SERVER_ERROR_NODE_UNHEALTHY,
        JSON_RPC_SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
        JSON_RPC_SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE,
        JSON_RPC_SERVER_ERROR_UNSUPPORTED_TRANSACTION_VERSION,
    },
    request::{MAX_GET_SIGNATURE_STATUSES_QUERY_ITEMS, MAX_MULTIPLE_ACCOUNTS},
    response::{RpcBlockhash, RpcKeyedAccount},
};
use solana_signature::Signature;
use solana_transaction::{
    TransactionError,
    versioned::{TransactionVersion, VersionedTransaction},
};
use solana_transaction_status_client_types::{
    TransactionBinaryEncoding, TransactionConfirmationStatus, TransactionStatus,
};

use super::{
    chain::Chain,
    encoding,
    rpc::{Params, RpcError, RpcResult, parse_hash, parse_pubkey, parse_signature},
};

/// The node version reported by `getVersion` and in every response context.
const NODE_VERSION: &str = "2.2.1";

/// The feature-set id reported by `getVersion`.
const FEATURE_SET_ID: u32 = 3_294_202_862;

/// Largest transaction on the wire (`PACKET_DATA_SIZE`).
const PACKET_DATA_SIZE: usize = 1232;

/// Largest encoded transaction the node accepts, per encoding.
const MAX_BASE58_SIZE: usize = 1683;
const MAX_BASE64_SIZE: usize = 1644;

/// Dispatches one call.
pub(crate) fn call(chain: &mut Chain, method: &str, params: &Params) -> RpcResult {
    if let Some(min) = params.min_context_slot()
        && min > chain.slot()
    {
        return Err(RpcError::new(
            JSON_RPC_SERVER_ERROR_MIN_CONTEXT_SLOT_NOT_REACHED,
            "Minimum context slot has not been reached",
        )
        .with_data(json!({ "contextSlot": chain.slot() })));
    }
    match method {
        "getHealth" => Ok(json!("ok")),
        "getVersion" => Ok(json!({ "solana-core": NODE_VERSION, "feature-set": FEATURE_SET_ID })),
        "getGenesisHash" => Ok(json!(chain.genesis_hash().to_string())),
        "getSlot" => Ok(json!(chain.slot())),
        "getBlockHeight" => Ok(json!(chain.block_height())),
        "getTransactionCount" => Ok(json!(chain.transaction_count())),
        "getEpochInfo" => Ok(epoch_info(chain)),
        "getLatestBlockhash" => {
            let (blockhash, last_valid_block_height) = chain.latest_blockhash();
            with_context(
                chain,
                RpcBlockhash {
                    blockhash: blockhash.to_string(),
                    last_valid_block_height,
                },
            )
        }
        "isBlockhashValid" => {
            let hash = parse_hash(&params.required::<String>(0)?)?;
            with_context(chain, chain.is_blockhash_valid(&hash))
        }
        "getBalance" => {
            let pubkey = parse_pubkey(&params.required::<String>(0)?)?;
            with_context(chain, chain.svm.get_balance(&pubkey).unwrap_or(0))
        }
        "getAccountInfo" => get_account_info(chain, params),
        "getMultipleAccounts" => get_multiple_accounts(chain, params),
        "getMinimumBalanceForRentExemption" => {
            let len: usize = params.required(0)?;
            Ok(json!(chain.svm.minimum_balance_for_rent_exemption(len)))
        }
        "getFeeForMessage" => get_fee_for_message(chain, params),
        "getTokenAccountsByOwner" => get_token_accounts_by_owner(chain, params),
        "getTokenAccountBalance" => get_token_account_balance(chain, params),
        "sendTransaction" => send_transaction(chain, params),
        "simulateTransaction" => simulate_transaction(chain, params),
        "getSignatureStatuses" => get_signature_statuses(chain, params),
        "getTransaction" => get_transaction(chain, params),
        "getSignaturesForAddress" => super::history::get_signatures_for_address(chain, params),
        "getRecentPrioritizationFees" => super::fees::get_recent_prioritization_fees(chain, params),
        "requestAirdrop" => {
            let pubkey = parse_pubkey(&params.required::<String>(0)?)?;
            let lamports: u64 = params.required(1)?;
            // The real node reports any faucet failure as a bare internal error.
            let signature = chain
                .airdrop(&pubkey, lamports)
                .map_err(|_| RpcError::internal())?;
            Ok(json!(signature.to_string()))
        }
        "litesvm_expireBlockhash" => {
            chain.expire_blockhashes();
            Ok(Value::Null)
        }
        "litesvm_dropTransactions" => {
            chain.drop_next = params.required(0)?;
            Ok(Value::Null)
        }
        "litesvm_setRecentFees" => {
            chain.recent_fees = params.required(0)?;
            Ok(Value::Null)
        }
        "litesvm_setCongestion" => super::fees::set_congestion(chain, params),
        "litesvm_faultSends" => {
            let (count, kind): (usize, String) = (params.required(0)?, params.required(1)?);
            chain.fault_next.extend(std::iter::repeat_n(kind, count));
            Ok(Value::Null)
        }
        _ => Err(RpcError::method_not_found()),
    }
}

/// The `{context: {slot, apiVersion}, value}` wrapper.
fn with_context(chain: &Chain, value: impl Serialize) -> RpcResult {
    Ok(json!({
        "context": { "slot": chain.slot(), "apiVersion": NODE_VERSION },
        "value": value,
    }))
}

fn epoch_info(chain: &Chain) -> Value {
    let schedule = chain.svm.get_sysvar::<EpochSchedule>();
    let (epoch, slot_index) = schedule.get_epoch_and_slot_index(chain.slot());
    json!({
        "absoluteSlot": chain.slot(),
        "blockHeight": chain.block_height(),
        "epoch": epoch,
        "slotIndex": slot_index,
        "slotsInEpoch": schedule.get_slots_in_epoch(epoch),
        "transactionCount": chain.transaction_count(),
    })
}

fn get_account_info(chain: &Chain, params: &Params) -> RpcResult {
    let pubkey = parse_pubkey(&params.required::<String>(0)?)?;
    let config: RpcAccountInfoConfig = params.optional(1)?.unwrap_or_default();
    let encoding = config.encoding.unwrap_or(UiAccountEncoding::Binary);
    let account = live_account(chain, &pubkey, encoding, &config)?;
    with_context(chain, account)
}

/// The account at `pubkey` encoded as `config` asks, if it exists: an account without
/// lamports does not, as on the real node.
fn live_account(
    chain: &Chain,
    pubkey: &Pubkey,
    encoding: UiAccountEncoding,
    config: &RpcAccountInfoConfig,
) -> Result<Option<UiAccount>, RpcError> {
    chain
        .svm
        .get_account(pubkey)
        .filter(|account| account.lamports > 0)
        .map(|account| {
            encoding::encode_account(chain, pubkey, &account, encoding, config.data_slice)
        })
        .transpose()
}

fn get_multiple_accounts(chain: &Chain, params: &Params) -> RpcResult {
    let keys: Vec<String> = params.required(0)?;
    if keys.len() > MAX_MULTIPLE_ACCOUNTS {
        return Err(RpcError::invalid_params(format!(
            "Too many inputs provided; max {MAX_MULTIPLE_ACCOUNTS}"
        )));
    }
    let config: RpcAccountInfoConfig = params.optional(1)?.unwrap_or_default();
    let encoding = config.encoding.unwrap_or(UiAccountEncoding::Base64);
    let mut accounts = Vec::with_capacity(keys.len());
    for key in &keys {
        let pubkey = parse_pubkey(key)?;
        accounts.push(live_account(chain, &pubkey, encoding, &config)?);
    }
    with_context(chain, accounts)
}

fn get_fee_for_message(chain: &mut Chain, params: &Params) -> RpcResult {
    let encoded: String = params.required(0)?;
    let bytes = decode_wire(
        &encoded,
        TransactionBinaryEncoding::Base64,
        "solana_message::versions::VersionedMessage",
    )?;
    let message: VersionedMessage = wincode::deserialize(&bytes).map_err(|e| {
        RpcError::invalid_params(format!(
            "failed to deserialize solana_message::versions::VersionedMessage: {e}"
        ))
    })?;
    message
        .sanitize()
        .map_err(|e| RpcError::invalid_params(format!("invalid transaction message: {e}")))?;
    // An unknown or expired blockhash has no fee: the node answers `null`.
    let probe = VersionedTransaction {
        signatures: vec![
            Signature::default();
            usize::from(message.header().num_required_signatures)
        ],
        message,
    };
    if chain.check_age(&probe).is_err() {
        return with_context(chain, Value::Null);
    }
    // The fee is what the bank would charge: run the message unsigned and read the fee.
    let fee = chain.simulate(probe, false).meta.fee;
    with_context(chain, fee)
}

fn get_token_accounts_by_owner(chain: &Chain, params: &Params) -> RpcResult {
    let owner = parse_pubkey(&params.required::<String>(0)?)?;
    let filter: RpcTokenAccountsFilter = params.required(1)?;
    let config: RpcAccountInfoConfig = params.optional(2)?.unwrap_or_default();
    let encoding = config.encoding.unwrap_or(UiAccountEncoding::Binary);
    let (program_id, mint) = match filter {
        RpcTokenAccountsFilter::ProgramId(program_id) => {
            let program_id = parse_pubkey(&program_id)?;
            if !encoding::is_token_program(&program_id) {
                return Err(RpcError::invalid_params(
                    "Invalid param: unrecognized Token program id",
                ));
            }
            (program_id, None)
        }
        RpcTokenAccountsFilter::Mint(mint) => {
            let mint = parse_pubkey(&mint)?;
            let account = chain
                .svm
                .get_account(&mint)
                .ok_or_else(|| RpcError::invalid_params("Invalid param: could not find mint"))?;
            if !encoding::is_token_program(&account.owner) {
                return Err(RpcError::invalid_params("Invalid param: not a Token mint"));
            }
            (account.owner, Some(mint))
        }
    };
    let mut found: Vec<_> = chain
        .svm
        .get_program_accounts(&program_id)
        .into_iter()
        .filter(|(_, account)| {
            encoding::token_account(&account.owner, &account.data).is_some_and(|token| {
                token.owner == owner && mint.is_none_or(|mint| token.mint == mint)
            })
        })
        .collect();
    found.sort_by_key(|(pubkey, _)| *pubkey);
    let mut keyed = Vec::with_capacity(found.len());
    for (pubkey, account) in &found {
        keyed.push(RpcKeyedAccount {
            pubkey: pubkey.to_string(),
            account: encoding::encode_account(chain, pubkey, account, encoding, config.data_slice)?,
        });
    }
    with_context(chain, keyed)
}

fn get_token_account_balance(chain: &Chain, params: &Params) -> RpcResult {
    let pubkey = parse_pubkey(&params.required::<String>(0)?)?;
    let account = chain
        .svm
        .get_account(&pubkey)
        .ok_or_else(|| RpcError::invalid_params("Invalid param: could not find account"))?;
    let token = encoding::token_account(&account.owner, &account.data)
        .ok_or_else(|| RpcError::invalid_params("Invalid param: not a Token account"))?;
    let mint = encoding::mint_data(chain, &token.mint)
        .ok_or_else(|| RpcError::invalid_params("Invalid param: could not find mint"))?;
    with_context(chain, token_amount_to_ui_amount_v3(token.amount, &mint))
}

/// Decodes a transaction or message from the wire, with the real node's limits and texts.
fn decode_wire(
    encoded: &str,
    encoding: TransactionBinaryEncoding,
    type_name: &str,
) -> Result<Vec<u8>, RpcError> {
    let bytes = match encoding {
        TransactionBinaryEncoding::Base58 => {
            if encoded.len() > MAX_BASE58_SIZE {
                return Err(RpcError::invalid_params(format!(
                    "base58 encoded {type_name} too large: {} bytes (max: encoded/raw {MAX_BASE58_SIZE}/{PACKET_DATA_SIZE})",
                    encoded.len()
                )));
            }
            bs58::decode(encoded)
                .into_vec()
                .map_err(|e| RpcError::invalid_params(format!("invalid base58 encoding: {e:?}")))?
        }
        TransactionBinaryEncoding::Base64 => {
            if encoded.len() > MAX_BASE64_SIZE {
                return Err(RpcError::invalid_params(format!(
                    "base64 encoded {type_name} too large: {} bytes (max: encoded/raw {MAX_BASE64_SIZE}/{PACKET_DATA_SIZE})",
                    encoded.len()
                )));
            }
            BASE64_STANDARD
                .decode(encoded)
                .map_err(|e| RpcError::invalid_params(format!("invalid base64 encoding: {e:?}")))?
        }
    };
    if bytes.len() > PACKET_DATA_SIZE {
        return Err(RpcError::invalid_params(format!(
            "decoded {type_name} too large: {} bytes (max: {PACKET_DATA_SIZE} bytes)",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// Decodes and sanitizes a transaction sent with `encoding` (base58 when not given, the
/// node's legacy default).
fn decode_transaction(
    encoded: &str,
    encoding: Option<UiTransactionEncoding>,
) -> Result<VersionedTransaction, RpcError> {
    let encoding = encoding.unwrap_or(UiTransactionEncoding::Base58);
    let binary = encoding.into_binary_encoding().ok_or_else(|| {
        RpcError::invalid_params(format!(
            "unsupported encoding: {encoding}. Supported encodings: base58, base64"
        ))
    })?;
    const TYPE_NAME: &str = "solana_transaction::versioned::VersionedTransaction";
    let bytes = decode_wire(encoded, binary, TYPE_NAME)?;
    let tx: VersionedTransaction = wincode::deserialize(&bytes)
        .map_err(|e| RpcError::invalid_params(format!("failed to deserialize {TYPE_NAME}: {e}")))?;
    tx.sanitize().map_err(|_| {
        RpcError::invalid_params(format!(
            "invalid transaction: {}",
            TransactionError::SanitizeFailure
        ))
    })?;
    Ok(tx)
}

fn signature_failure() -> RpcError {
    RpcError::new(
        JSON_RPC_SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE,
        "Transaction signature verification failure",
    )
}

fn send_transaction(chain: &mut Chain, params: &Params) -> RpcResult {
    let encoded: String = params.required(0)?;
    let config: RpcSendTransactionConfig = params.optional(1)?.unwrap_or_default();
    let tx = decode_transaction(&encoded, config.encoding)?;
    let Some(signature) = tx.signatures.first().copied() else {
        return Err(signature_failure());
    };
    if !config.skip_preflight {
        if tx.verify_with_results().iter().any(|ok| !ok) {
            return Err(signature_failure());
        }
        let (err, meta) = if chain.landed(&signature).is_some() {
            (
                Some(TransactionError::AlreadyProcessed),
                TransactionMetadata::default(),
            )
        } else {
            let simulated = chain.simulate(tx.clone(), true);
            (simulated.err, simulated.meta)
        };
        if let Some(err) = err {
            let message = format!("Transaction simulation failed: {err}");
            let data = encoding::simulation_result(Some(err), &meta, None, false, None, None);
            return Err(RpcError::new(
                JSON_RPC_SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
                message,
            )
            .with_data(serde_json::to_value(data).map_err(|_| RpcError::internal())?));
        }
    }
    if let Some(fault) = chain.fault_next.pop_front() {
        // An unhealthy node answers without taking the transaction; a `refusal` is a
        // relay's, in words no client knows, after it forwarded it and it landed; `rejected`
        // is a preflight failure of a node that sees the fee payer's account otherwise (one
        // behind the others, say), and takes nothing.
        if fault == "rejected" {
            let data = encoding::simulation_result(
                Some(TransactionError::AccountNotFound),
                &TransactionMetadata::default(),
                None,
                false,
                None,
                None,
            );
            return Err(RpcError::new(
                JSON_RPC_SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
                "Transaction simulation failed: Attempt to debit an account but found no record of a prior credit.",
            )
            .with_data(serde_json::to_value(data).map_err(|_| RpcError::internal())?));
        }
        return Err(if fault == "refusal" {
            let _ = chain.process(tx);
            let data = encoding::simulation_result(
                Some(TransactionError::AccountInUse),
                &TransactionMetadata::default(),
                None,
                false,
                None,
                None,
            );
            RpcError::new(
                JSON_RPC_SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
                "Transaction simulation failed: rejected by relay policy",
            )
            .with_data(serde_json::to_value(data).map_err(|_| RpcError::internal())?)
        } else {
            RpcError::new(JSON_RPC_SERVER_ERROR_NODE_UNHEALTHY, "Node is unhealthy")
        });
    }
    if super::fees::lost(chain, &tx) {
        // Accepted, then lost on the way to the leader, or skipped by a busy one.
        return Ok(json!(signature.to_string()));
    }
    // A transaction no block would include (bad signature, expired blockhash, fee payer
    // unable to pay, duplicate) is accepted here and silently never lands, as with
    // `skipPreflight` on the real cluster.
    let _ = chain.process(tx);
    Ok(json!(signature.to_string()))
}

fn simulate_transaction(chain: &mut Chain, params: &Params) -> RpcResult {
    let encoded: String = params.required(0)?;
    let config: RpcSimulateTransactionConfig = params.optional(1)?.unwrap_or_default();
    let mut tx = decode_transaction(&encoded, config.encoding)?;
    if config.sig_verify {
        if config.replace_recent_blockhash {
            return Err(RpcError::invalid_params(
                "sigVerify may not be used with replaceRecentBlockhash",
            ));
        }
        if tx.verify_with_results().iter().any(|ok| !ok) {
            return Err(signature_failure());
        }
    }
    let replacement_blockhash = if config.replace_recent_blockhash {
        let (blockhash, last_valid_block_height) = chain.latest_blockhash();
        tx.message.set_recent_blockhash(blockhash);
        Some(RpcBlockhash {
            blockhash: blockhash.to_string(),
            last_valid_block_height,
        })
    } else {
        None
    };
    let addresses = match &config.accounts {
        Some(accounts) => {
            let encoding = accounts.encoding.unwrap_or(UiAccountEncoding::Base64);
            if matches!(
                encoding,
                UiAccountEncoding::Binary | UiAccountEncoding::Base58
            ) {
                return Err(RpcError::invalid_params("base58 encoding not supported"));
            }
            let max = tx.message.static_account_keys().len();
            if accounts.addresses.len() > max {
                return Err(RpcError::invalid_params(format!(
                    "Too many accounts provided; max {max}"
                )));
            }
            let keys = accounts
                .addresses
                .iter()
                .map(|address| parse_pubkey(address))
                .collect::<Result<Vec<_>, _>>()?;
            Some((keys, encoding))
        }
        None => None,
    };
    let (simulated, balances) = chain.simulate_with_balances(tx, config.sig_verify);
    let (err, meta, post_accounts) = (simulated.err, simulated.meta, simulated.post_accounts);
    let accounts = match addresses {
        Some((keys, encoding)) => {
            let mut accounts = Vec::with_capacity(keys.len());
            for key in &keys {
                let account = match post_accounts.iter().find(|(address, _)| address == key) {
                    Some((_, account)) => Some(solana_account::Account::from(account.clone())),
                    None => chain.svm.get_account(key),
                };
                let encoded = account
                    .filter(|account| account.lamports > 0)
                    .map(|account| encoding::encode_account(chain, key, &account, encoding, None))
                    .transpose()?;
                accounts.push(encoded);
            }
            Some(accounts)
        }
        None => None,
    };
    let result = encoding::simulation_result(
        err,
        &meta,
        accounts,
        config.inner_instructions,
        replacement_blockhash,
        balances,
    );
    with_context(chain, result)
}

fn get_signature_statuses(chain: &Chain, params: &Params) -> RpcResult {
    let signatures: Vec<String> = params.required(0)?;
    if signatures.len() > MAX_GET_SIGNATURE_STATUSES_QUERY_ITEMS {
        return Err(RpcError::invalid_params(format!(
            "Too many inputs provided; max {MAX_GET_SIGNATURE_STATUSES_QUERY_ITEMS}"
        )));
    }
    // `searchTransactionHistory` is accepted and changes nothing: the node keeps every
    // status it ever recorded.
    let _config: Option<Value> = params.optional(1)?;
    let mut statuses = Vec::with_capacity(signatures.len());
    for signature in &signatures {
        let signature = parse_signature(signature)?;
        statuses.push(chain.landed(&signature).map(|landed| TransactionStatus {
            slot: landed.slot,
            // Landed transactions are rooted at once: `null` confirmations, finalized.
            confirmations: None,
            status: match &landed.err {
                None => Ok(()),
                Some(err) => Err(err.clone()),
            },
            err: landed.err.clone(),
            confirmation_status: Some(TransactionConfirmationStatus::Finalized),
        }));
    }
    with_context(chain, statuses)
}

fn get_transaction(chain: &Chain, params: &Params) -> RpcResult {
    let signature = parse_signature(&params.required::<String>(0)?)?;
    let config = params
        .optional::<RpcEncodingConfigWrapper<RpcTransactionConfig>>(1)?
        .map(|wrapper| wrapper.convert_to_current())
        .unwrap_or_default();
    if config
        .commitment
        .is_some_and(|commitment: CommitmentConfig| commitment.is_processed())
    {
        return Err(RpcError::invalid_params(
            "Method does not support commitment below `confirmed`",
        ));
    }
    let Some(landed) = chain.landed(&signature) else {
        return Ok(Value::Null);
    };
    let version = match landed.transaction.version() {
        TransactionVersion::Legacy(_) => config
            .max_supported_transaction_version
            .map(|_| TransactionVersion::LEGACY),
        TransactionVersion::Number(version) => {
            if config
                .max_supported_transaction_version
                .is_none_or(|max| max < version)
            {
                return Err(RpcError::new(
                    JSON_RPC_SERVER_ERROR_UNSUPPORTED_TRANSACTION_VERSION,
                    format!(
                        "Transaction version ({version}) is not supported by the requesting \
                         client. Please try the request again with the following \
                         configuration parameter: \"maxSupportedTransactionVersion\": {version}"
                    ),
                ));
            }
            Some(TransactionVersion::Number(version))
        }
    };
    let encoded = encoding::landed_transaction(
        landed,
        config.encoding.unwrap_or(UiTransactionEncoding::Json),
        version,
    )?;
    serde_json::to_value(encoded).map_err(|_| RpcError::internal())
}
