//! The Privy wallet API client: `GET {base}/v1/users/{id}` for a user's linked wallets, and
//! `POST {base}/v1/wallets/{id}/rpc` with `eth_signTransaction` and Solana `signTransaction`
//! only: the provider signs, the service stores the signed bytes and broadcasts them itself.
//! Every call carries `Authorization: Basic <app id:app secret>` and `privy-app-id`; a wallet
//! RPC also `privy-idempotency-key` and, with an authorization key configured,
//! `privy-authorization-signature`.
//!
//! **Invariant:** what the provider signed is checked before it is returned: the same
//! transaction, signed by the wallet. A provider (or whoever answers at its address) cannot
//! have the service store and broadcast anything else.

use std::collections::BTreeMap;

use alloy::{
    consensus::{Transaction as _, TxEip1559, TxEnvelope},
    eips::eip2718::{Decodable2718 as _, Encodable2718 as _},
    primitives::{Address, B256, Bytes},
};
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use reqwest::{RequestBuilder, Url};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use solana_pubkey::Pubkey;
use solana_transaction::versioned::VersionedTransaction;

use super::{auth::AuthorizationKey, config::ProviderConfig};
use crate::upstream::{HttpPolicy, Upstream, UpstreamError};
use walletops_domain::secret::Secret;
use walletops_domain::{ChainFamily, ProviderWallet, WalletAddress};

/// The option whose credentials the provider refuses, named when it does.
const SECRET_OPTION: &str = "provider.app_secret";

/// A Privy client.
#[derive(Debug, Clone)]
pub struct Privy {
    upstream: Upstream,
    base_url: Url,
    app_id: String,
    app_secret: Secret,
    authorization: Option<AuthorizationKey>,
}

/// Privy's error body: `{"error": "<message>", "code": "<snake_case code>"}`.
fn read_error(body: &Value) -> Option<(Option<String>, String)> {
    let text = body
        .get("error")
        .or_else(|| body.get("message"))
        .and_then(Value::as_str)?;
    let code = body.get("code").and_then(Value::as_str).map(str::to_owned);
    Some((code, text.to_owned()))
}

#[derive(Deserialize)]
struct UserAnswer {
    #[serde(default)]
    linked_accounts: Vec<Value>,
}

#[derive(Deserialize)]
struct RpcAnswer {
    method: String,
    data: SignedAnswer,
}

#[derive(Deserialize)]
struct SignedAnswer {
    signed_transaction: String,
}

/// A `0x` hex quantity, as the RPC body takes them.
fn quantity(n: impl std::fmt::LowerHex) -> String {
    format!("{n:#x}")
}

impl Privy {
    /// The client `config` describes, or none without an app id.
    pub fn from_config(
        config: &ProviderConfig,
        policy: HttpPolicy,
    ) -> anyhow::Result<Option<Self>> {
        if !config.is_configured() {
            return Ok(None);
        }
        let authorization = if config.authorization_key.is_empty() {
            None
        } else {
            Some(AuthorizationKey::parse(config.authorization_key.expose())?)
        };
        Ok(Some(Self {
            upstream: Upstream::new("Privy", SECRET_OPTION, policy, read_error)?
                .forbidden_refuses_request(),
            base_url: config.base_url.clone(),
            app_id: config.app_id.clone(),
            app_secret: config.app_secret.clone(),
            authorization,
        }))
    }

    /// `{base}/v1/{segments...}`.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base_url.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().push("v1").extend(segments);
        }
        url
    }

    /// `request` with the app's credentials.
    fn authorized(&self, request: RequestBuilder) -> RequestBuilder {
        request
            .basic_auth(&self.app_id, Some(self.app_secret.expose()))
            .header("privy-app-id", &self.app_id)
    }

    /// The wallets linked to provider user `user_id`, or `None` when the provider has no
    /// such user.
    pub async fn linked_wallets(
        &self,
        user_id: &str,
    ) -> Result<Option<Vec<ProviderWallet>>, UpstreamError> {
        let url = self.url(&["users", user_id]);
        let answer = self
            .upstream
            .read("users", || {
                self.authorized(self.upstream.http().get(url.clone()))
            })
            .await;
        let (user, _): (UserAnswer, _) = match answer {
            Ok(user) => user,
            Err(UpstreamError::Rejected { status: 404, .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(
            user.linked_accounts
                .iter()
                .filter_map(linked_wallet)
                .collect(),
        ))
    }

    /// Calls `method` on wallet `wallet_id` with `params`; retried on 429, 5xx and timeouts
    /// under one `privy-idempotency-key`, derived from the wallet, the method and the params:
    /// a retry (or a second request for the same unsigned transaction) is the same request to
    /// the provider, which answers it with the same signature.
    async fn rpc(
        &self,
        wallet_id: &str,
        method: &str,
        params: Value,
    ) -> Result<String, UpstreamError> {
        let body = json!({"method": method, "params": params});
        let key = idempotency_key(wallet_id, &body);
        let url = self.url(&["wallets", wallet_id, "rpc"]);
        let signature = self.authorization.as_ref().map(|auth| {
            let headers = BTreeMap::from([
                ("privy-app-id", self.app_id.as_str()),
                ("privy-idempotency-key", key.as_str()),
            ]);
            auth.sign(url.as_str(), &body, &headers)
        });
        let (answer, _): (RpcAnswer, _) = self
            .upstream
            .read("rpc", || {
                let request = self
                    .authorized(self.upstream.http().post(url.clone()))
                    .header("privy-idempotency-key", &key)
                    .json(&body);
                match &signature {
                    Some(signature) => request.header("privy-authorization-signature", signature),
                    None => request,
                }
            })
            .await?;
        if answer.method != method {
            return Err(self
                .upstream
                .nonsense("rpc", "answered another method than the one asked"));
        }
        Ok(answer.data.signed_transaction)
    }

    /// Has wallet `wallet_id` (address `from`) sign `tx` (`eth_signTransaction`): the signed
    /// envelope's bytes (EIP-2718) and its hash, checked to be `tx` signed by `from`.
    pub async fn sign_eip1559(
        &self,
        wallet_id: &str,
        from: Address,
        tx: &TxEip1559,
    ) -> Result<(Vec<u8>, B256), UpstreamError> {
        let mut transaction = json!({
            "type": 2,
            "chain_id": quantity(tx.chain_id),
            "nonce": quantity(tx.nonce),
            "gas_limit": quantity(tx.gas_limit),
            "max_fee_per_gas": quantity(tx.max_fee_per_gas),
            "max_priority_fee_per_gas": quantity(tx.max_priority_fee_per_gas),
            "value": quantity(tx.value),
            "data": Bytes::clone(&tx.input).to_string(),
        });
        if let Some(to) = tx.to.to() {
            transaction["to"] = json!(to.to_checksum(None));
        }
        let signed = self
            .rpc(
                wallet_id,
                "eth_signTransaction",
                json!({"transaction": transaction}),
            )
            .await?;
        let bytes = alloy::hex::decode(signed.trim()).map_err(|_| {
            self.upstream
                .nonsense("rpc", "sent a signed transaction that is not hex")
        })?;
        let envelope = TxEnvelope::decode_2718(&mut bytes.as_slice()).map_err(|_| {
            self.upstream
                .nonsense("rpc", "sent a signed transaction that does not decode")
        })?;
        let TxEnvelope::Eip1559(signed) = &envelope else {
            return Err(self
                .upstream
                .nonsense("rpc", "signed another kind of transaction"));
        };
        let same = signed.tx() == tx;
        let by_wallet = signed
            .signature()
            .recover_address_from_prehash(&signed.signature_hash())
            .is_ok_and(|signer| signer == from);
        if !same || !by_wallet {
            return Err(self.upstream.nonsense(
                "rpc",
                "sent back a transaction other than the one to sign, or not signed by the wallet",
            ));
        }
        debug_assert_eq!(envelope.chain_id(), Some(tx.chain_id));
        Ok((envelope.encoded_2718(), *envelope.tx_hash()))
    }

    /// Has wallet `wallet_id` (public key `signer`) sign Solana `tx` (`signTransaction`): the
    /// transaction with the wallet's signature filled in, checked to be `tx` with only that
    /// signature added, and valid.
    pub async fn sign_solana(
        &self,
        wallet_id: &str,
        signer: &Pubkey,
        tx: &VersionedTransaction,
    ) -> Result<VersionedTransaction, UpstreamError> {
        let unsigned = wincode::serialize(tx).map_err(|_| {
            self.upstream
                .nonsense("rpc", "could not be sent the transaction")
        })?;
        let signed = self
            .rpc(
                wallet_id,
                "signTransaction",
                json!({"transaction": BASE64.encode(unsigned), "encoding": "base64"}),
            )
            .await?;
        let refused = || {
            self.upstream.nonsense(
                "rpc",
                "sent back a transaction other than the one to sign, or not signed by the wallet",
            )
        };
        let signed: VersionedTransaction = BASE64
            .decode(signed.trim())
            .ok()
            .and_then(|bytes| wincode::deserialize(&bytes).ok())
            .ok_or_else(refused)?;
        let keys = tx.message.static_account_keys();
        let slot = keys
            .iter()
            .take(usize::from(tx.message.header().num_required_signatures))
            .position(|k| k == signer)
            .ok_or_else(refused)?;
        let message = tx.message.serialize();
        let others_kept = signed
            .signatures
            .iter()
            .zip(&tx.signatures)
            .enumerate()
            .all(|(i, (new, old))| i == slot || new == old);
        let ok = signed.message.serialize() == message
            && signed.signatures.len() == tx.signatures.len()
            && others_kept
            && signed.signatures[slot].verify(signer.as_ref(), &message);
        if !ok {
            return Err(refused());
        }
        Ok(signed)
    }
}

/// The `privy-idempotency-key` of RPC `body` on wallet `wallet_id`: the same request, the
/// same key; another request (another nonce, fee or blockhash), another key.
fn idempotency_key(wallet_id: &str, body: &Value) -> String {
    let mut hash = Sha256::new();
    hash.update(wallet_id.as_bytes());
    hash.update([0]);
    hash.update(serde_jcs::to_vec(body).unwrap_or_default());
    format!("walletops-{}", hex::encode(&hash.finalize()[..20]))
}

/// The wallet a `linked_accounts` entry describes, if it is one on a chain family the service
/// knows (`type: "wallet"`, `chain_type` `ethereum` or `solana`).
fn linked_wallet(account: &Value) -> Option<ProviderWallet> {
    if account.get("type").and_then(Value::as_str) != Some("wallet") {
        return None;
    }
    let family = match account.get("chain_type").and_then(Value::as_str)? {
        "ethereum" => ChainFamily::Evm,
        "solana" => ChainFamily::Solana,
        _ => return None,
    };
    let text = |key: &str| account.get(key).and_then(Value::as_str).map(str::to_owned);
    let address: WalletAddress = match family.parse_address(&text("address")?) {
        Ok(address) => address,
        Err(_) => {
            tracing::warn!("the provider listed a wallet whose address does not parse; skipped");
            return None;
        }
    };
    Some(ProviderWallet {
        address,
        wallet_id: text("id").filter(|id| !id.is_empty()),
        connector_type: text("connector_type").unwrap_or_default(),
        client_type: text("wallet_client_type").unwrap_or_default(),
        delegated: account.get("delegated").and_then(Value::as_bool) == Some(true),
        wallet_index: account
            .get("wallet_index")
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok()),
    })
}
