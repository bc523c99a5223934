//! Turning ledger state into the node's JSON shapes: accounts (binary or jsonParsed, with
//! the mint data the SPL Token parsers need), token balances, landed transactions and
//! simulation results.

use base64::{Engine, prelude::BASE64_STANDARD};
use litesvm::types::TransactionMetadata;
use solana_account::Account;
use solana_account_decoder::{
    UiAccount, UiAccountEncoding, UiDataSliceConfig, encode_ui_account,
    parse_account_data::{AccountAdditionalDataV3, SplTokenAdditionalDataV2},
    parse_token::{get_token_account_mint, token_amount_to_ui_amount_v3},
};
use solana_clock::Clock;
use solana_message::v0::LoadedAddresses;
use solana_pubkey::Pubkey;
use solana_rpc_client_api::response::{RpcBlockhash, RpcSimulateTransactionResult};
use solana_transaction::versioned::TransactionVersion;
use solana_transaction::{TransactionError, versioned::VersionedTransaction};
use solana_transaction_status_client_types::{
    EncodedConfirmedTransactionWithStatusMeta, EncodedTransaction,
    EncodedTransactionWithStatusMeta, InnerInstruction, InnerInstructions,
    TransactionBinaryEncoding, TransactionStatusMeta, TransactionTokenBalance,
    UiAddressTableLookup, UiCompiledInstruction, UiInnerInstructions, UiMessage, UiRawMessage,
    UiTransaction, UiTransactionEncoding, UiTransactionReturnData, UiTransactionStatusMeta,
};
use spl_token_2022_interface::{
    extension::{
        BaseStateWithExtensions, StateWithExtensions, interest_bearing_mint::InterestBearingConfig,
        scaled_ui_amount::ScaledUiAmountConfig,
    },
    state::{Account as TokenAccount, Mint},
};

use super::{
    chain::{Chain, Landed},
    rpc::RpcError,
};

/// The most bytes the node encodes as base58.
const MAX_BASE58_BYTES: usize = 128;

/// Whether `program_id` is SPL Token or Token-2022.
pub(crate) fn is_token_program(program_id: &Pubkey) -> bool {
    *program_id == spl_token_interface::ID || *program_id == spl_token_2022_interface::ID
}

/// What the token parsers need to know about a mint: its decimals and the Token-2022
/// extensions that change how amounts display.
pub(crate) fn mint_data(chain: &Chain, mint: &Pubkey) -> Option<SplTokenAdditionalDataV2> {
    let account = chain.svm.get_account(mint)?;
    if !is_token_program(&account.owner) {
        return None;
    }
    let state = StateWithExtensions::<Mint>::unpack(&account.data).ok()?;
    let timestamp = chain.svm.get_sysvar::<Clock>().unix_timestamp;
    Some(SplTokenAdditionalDataV2 {
        decimals: state.base.decimals,
        interest_bearing_config: state
            .get_extension::<InterestBearingConfig>()
            .ok()
            .map(|config| (*config, timestamp)),
        scaled_ui_amount_config: state
            .get_extension::<ScaledUiAmountConfig>()
            .ok()
            .map(|config| (*config, timestamp)),
    })
}

/// The base fields of a token account, if `account` is one.
pub(crate) fn token_account(owner_program: &Pubkey, data: &[u8]) -> Option<TokenAccount> {
    if !is_token_program(owner_program) {
        return None;
    }
    StateWithExtensions::<TokenAccount>::unpack(data)
        .ok()
        .map(|state| state.base)
}

/// An account as the node encodes it. jsonParsed falls back to base64 when no parser
/// applies; base58 is refused for data over 128 bytes, as the real node does.
pub(crate) fn encode_account(
    chain: &Chain,
    pubkey: &Pubkey,
    account: &Account,
    encoding: UiAccountEncoding,
    data_slice: Option<UiDataSliceConfig>,
) -> Result<UiAccount, RpcError> {
    if matches!(
        encoding,
        UiAccountEncoding::Binary | UiAccountEncoding::Base58
    ) {
        let len = match data_slice {
            Some(slice) => account
                .data
                .len()
                .saturating_sub(slice.offset)
                .min(slice.length),
            None => account.data.len(),
        };
        if len > MAX_BASE58_BYTES {
            return Err(RpcError::invalid_params(format!(
                "Encoded binary (base 58) data should be less than {MAX_BASE58_BYTES} bytes, \
                 please use Base64 encoding."
            )));
        }
    }
    let additional_data =
        if encoding == UiAccountEncoding::JsonParsed && is_token_program(&account.owner) {
            get_token_account_mint(&account.data)
                .and_then(|mint| mint_data(chain, &mint))
                .map(|data| AccountAdditionalDataV3 {
                    spl_token_additional_data: Some(data),
                })
        } else {
            None
        };
    Ok(encode_ui_account(
        pubkey,
        account,
        encoding,
        additional_data,
        data_slice,
    ))
}

/// The token balances among `keys`, as `getTransaction` reports them before and after.
pub(crate) fn token_balances(chain: &Chain, keys: &[Pubkey]) -> Vec<TransactionTokenBalance> {
    token_balances_of(chain, keys, |key| chain.svm.get_account(key))
}

/// The token balances among `keys` as `account` gives their accounts (a simulation's post
/// state, say).
pub(crate) fn token_balances_of(
    chain: &Chain,
    keys: &[Pubkey],
    account: impl Fn(&Pubkey) -> Option<solana_account::Account>,
) -> Vec<TransactionTokenBalance> {
    keys.iter()
        .enumerate()
        .filter_map(|(index, key)| {
            let account = account(key)?;
            let token = token_account(&account.owner, &account.data)?;
            let mint = mint_data(chain, &token.mint)?;
            Some(TransactionTokenBalance {
                account_index: u8::try_from(index).ok()?,
                mint: token.mint.to_string(),
                ui_token_amount: token_amount_to_ui_amount_v3(token.amount, &mint),
                owner: token.owner.to_string(),
                program_id: account.owner.to_string(),
            })
        })
        .collect()
}

/// A transaction in the requested encoding. jsonParsed instruction parsing is not offered.
pub(crate) fn encode_transaction(
    tx: &VersionedTransaction,
    encoding: UiTransactionEncoding,
) -> Result<EncodedTransaction, RpcError> {
    let wire = || wincode::serialize(tx).map_err(|_| RpcError::internal());
    Ok(match encoding {
        UiTransactionEncoding::Json => EncodedTransaction::Json(UiTransaction {
            signatures: tx.signatures.iter().map(ToString::to_string).collect(),
            message: UiMessage::Raw(UiRawMessage {
                header: *tx.message.header(),
                account_keys: tx
                    .message
                    .static_account_keys()
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
                recent_blockhash: tx.message.recent_blockhash().to_string(),
                instructions: tx
                    .message
                    .instructions()
                    .iter()
                    .map(|ix| UiCompiledInstruction::from(ix, None))
                    .collect(),
                address_table_lookups: tx
                    .message
                    .address_table_lookups()
                    .map(|lookups| lookups.iter().map(UiAddressTableLookup::from).collect()),
                transaction_config: None,
            }),
        }),
        UiTransactionEncoding::Base64 => EncodedTransaction::Binary(
            BASE64_STANDARD.encode(wire()?),
            TransactionBinaryEncoding::Base64,
        ),
        UiTransactionEncoding::Base58 => EncodedTransaction::Binary(
            bs58::encode(wire()?).into_string(),
            TransactionBinaryEncoding::Base58,
        ),
        UiTransactionEncoding::Binary => {
            EncodedTransaction::LegacyBinary(bs58::encode(wire()?).into_string())
        }
        UiTransactionEncoding::JsonParsed => {
            return Err(RpcError::invalid_params(
                "Invalid params: encoding jsonParsed is not offered by this test node; use json, \
                 base58 or base64",
            ));
        }
    })
}

/// Inner instructions the way the node lists them: only top-level instructions that made
/// inner calls, with their index.
fn inner_instructions(meta: &TransactionMetadata) -> Vec<InnerInstructions> {
    meta.inner_instructions
        .iter()
        .enumerate()
        .filter(|(_, list)| !list.is_empty())
        .filter_map(|(index, list)| {
            Some(InnerInstructions {
                index: u8::try_from(index).ok()?,
                instructions: list
                    .iter()
                    .map(|inner| InnerInstruction {
                        instruction: inner.instruction.clone(),
                        stack_height: Some(u32::from(inner.stack_height)),
                    })
                    .collect(),
            })
        })
        .collect()
}

/// Return data is reported only when a program set some.
fn return_data(meta: &TransactionMetadata) -> Option<UiTransactionReturnData> {
    (!meta.return_data.data.is_empty()).then(|| meta.return_data.clone().into())
}

/// `getTransaction`'s answer for a landed transaction.
pub(crate) fn landed_transaction(
    landed: &Landed,
    encoding: UiTransactionEncoding,
    version: Option<TransactionVersion>,
) -> Result<EncodedConfirmedTransactionWithStatusMeta, RpcError> {
    let meta = TransactionStatusMeta {
        status: match &landed.err {
            None => Ok(()),
            Some(err) => Err(err.clone()),
        },
        fee: landed.meta.fee,
        pre_balances: landed.pre_balances.clone(),
        post_balances: landed.post_balances.clone(),
        inner_instructions: Some(inner_instructions(&landed.meta)),
        log_messages: Some(landed.meta.logs.clone()),
        pre_token_balances: Some(landed.pre_token_balances.clone()),
        post_token_balances: Some(landed.post_token_balances.clone()),
        rewards: Some(Vec::new()),
        loaded_addresses: LoadedAddresses::default(),
        return_data: (!landed.meta.return_data.data.is_empty())
            .then(|| landed.meta.return_data.clone()),
        compute_units_consumed: Some(landed.meta.compute_units_consumed),
        cost_units: None,
    };
    Ok(EncodedConfirmedTransactionWithStatusMeta {
        slot: landed.slot,
        transaction: EncodedTransactionWithStatusMeta {
            transaction: encode_transaction(&landed.transaction, encoding)?,
            meta: Some(UiTransactionStatusMeta::from(meta)),
            version,
        },
        block_time: Some(landed.block_time),
        transaction_index: None,
    })
}

/// The lamports and token balances of a simulated transaction's static accounts, before and
/// after, as a current node answers them beside its simulation.
pub(crate) struct SimulatedBalances {
    pub(crate) pre: Vec<u64>,
    pub(crate) post: Vec<u64>,
    pub(crate) pre_tokens: Vec<TransactionTokenBalance>,
    pub(crate) post_tokens: Vec<TransactionTokenBalance>,
}

/// A simulation's outcome in the shape of `simulateTransaction` (and of the `data` of a
/// preflight failure).
pub(crate) fn simulation_result(
    err: Option<TransactionError>,
    meta: &TransactionMetadata,
    accounts: Option<Vec<Option<UiAccount>>>,
    with_inner_instructions: bool,
    replacement_blockhash: Option<RpcBlockhash>,
    balances: Option<SimulatedBalances>,
) -> RpcSimulateTransactionResult {
    let (pre_balances, post_balances, pre_token_balances, post_token_balances) = match balances {
        Some(b) => (
            Some(b.pre),
            Some(b.post),
            Some(b.pre_tokens.into_iter().map(Into::into).collect()),
            Some(b.post_tokens.into_iter().map(Into::into).collect()),
        ),
        None => (None, None, None, None),
    };
    RpcSimulateTransactionResult {
        err: err.map(Into::into),
        logs: Some(meta.logs.clone()),
        accounts,
        units_consumed: Some(meta.compute_units_consumed),
        loaded_accounts_data_size: None,
        return_data: return_data(meta),
        inner_instructions: with_inner_instructions.then(|| {
            inner_instructions(meta)
                .into_iter()
                .map(UiInnerInstructions::from)
                .collect()
        }),
        replacement_blockhash,
        fee: Some(meta.fee),
        pre_balances,
        post_balances,
        pre_token_balances,
        post_token_balances,
        loaded_addresses: None,
    }
}
