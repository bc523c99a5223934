//! Rows read back into domain values: every stored text (status, kind, addresses, hashes)
//! is parsed here, once, so code above the store never meets an unreadable value.

use crate::error::{Result, StoreError};
use walletops_domain::{
    ChainFamily, Effects, OpenTransaction, SealedKey, TransactionRecord, TxHash, TxKind, TxStatus,
    WalletAddress,
};

use uuid::Uuid;

use super::entities::{signer_keys, transactions as txs};

fn corrupt(id: Uuid, what: &str) -> StoreError {
    StoreError::Corrupt(anyhow::anyhow!("transaction {id} has a bad {what}"))
}

/// The stored status and kind of `m`, read back into their enums.
fn status_and_kind(m: &txs::Model) -> Result<(TxStatus, TxKind)> {
    let status = serde_json::from_value(serde_json::Value::String(m.status.clone()))
        .map_err(|_| corrupt(m.id, "status"))?;
    let kind = serde_json::from_value(serde_json::Value::String(m.kind.clone()))
        .map_err(|_| corrupt(m.id, "kind"))?;
    Ok((status, kind))
}

/// Stored effects of record `id`, if any. What a write did is shown beside the record, not
/// part of it: an unreadable one is logged and shown as none, the record still read.
fn effects(id: Uuid, what: &str, text: Option<&str>) -> Option<Effects> {
    serde_json::from_str(text?)
        .inspect_err(|e| tracing::error!(%id, error = %e, "unreadable {what}; shown as none"))
        .ok()
}

impl TryFrom<txs::Model> for TransactionRecord {
    type Error = StoreError;

    fn try_from(m: txs::Model) -> Result<Self> {
        let id = m.id;
        let corrupt = |what: &str| corrupt(id, what);
        let (status, kind) = status_and_kind(&m)?;
        let history =
            serde_json::from_value(m.status_history.clone()).map_err(|_| corrupt("history"))?;
        Ok(Self {
            id: m.id,
            chain: m.chain,
            chain_id: m.chain_id,
            kind,
            from: m.from_address,
            to: m.to_address,
            asset: m.asset,
            token: m.token,
            amount: m.amount,
            // Kept in the request as stored; a record of another kind has none.
            swap: (kind == TxKind::Swap)
                .then(|| serde_json::from_value(m.request.clone()).ok())
                .flatten(),
            status,
            history,
            hash: m.hash,
            error: m.error,
            created_at: m.created_at,
            updated_at: m.updated_at,
            simulated_effects: effects(id, "simulated effects", m.simulated_effects.as_deref()),
            final_effects: effects(id, "final effects", m.final_effects.as_deref()),
            effects_difference: m.effects_difference,
            guarded: m.guarded,
        })
    }
}

impl TryFrom<txs::Model> for OpenTransaction {
    type Error = StoreError;

    fn try_from(m: txs::Model) -> Result<Self> {
        let id = m.id;
        let corrupt = |what: &str| corrupt(id, what);
        let (status, kind) = status_and_kind(&m)?;
        let hashes = serde_json::from_value::<Vec<String>>(m.hashes.clone())
            .ok()
            .and_then(|list| list.iter().map(|h| h.parse::<TxHash>().ok()).collect())
            .ok_or_else(|| corrupt("hashes"))?;
        let from = m
            .from_address
            .parse::<WalletAddress>()
            .map_err(|_| corrupt("from_address"))?;
        Ok(Self {
            id: m.id,
            user_id: m.user_id,
            wallet_id: m.wallet_id,
            chain: m.chain,
            chain_id: m.chain_id,
            kind,
            status,
            from,
            nonce: m
                .nonce
                .map(|n| u64::try_from(n).map_err(|_| corrupt("nonce")))
                .transpose()?,
            signed_payload: m.signed_payload.unwrap_or_default(),
            hashes,
            history: m.status_history,
            last_broadcast_at: m.last_broadcast_at,
            created_at: m.created_at,
            valid_until: m
                .valid_until_height
                .map(|n| u64::try_from(n).map_err(|_| corrupt("valid_until_height")))
                .transpose()?,
            revision: m.revision,
            simulated_effects: m.simulated_effects,
        })
    }
}

/// A wallet's stored family and address, read back.
pub(super) fn stored_address(
    chain_type: &str,
    address: &str,
) -> std::result::Result<WalletAddress, String> {
    let family = chain_type
        .parse::<ChainFamily>()
        .map_err(|e| format!("chain_type: {e}"))?;
    family
        .parse_address(address)
        .map_err(|e| format!("stored address {address} unreadable: {e}"))
}

/// A signer key row read back: the address its key was sealed for, and the sealed key.
pub(super) fn sealed_row(m: signer_keys::Model) -> Result<(WalletAddress, SealedKey)> {
    let address = stored_address(&m.chain_type, &m.address)
        .map_err(|e| StoreError::Corrupt(anyhow::anyhow!("signer key: {e}")))?;
    Ok((
        address,
        SealedKey {
            nonce: m.nonce,
            ciphertext: m.ciphertext,
        },
    ))
}
