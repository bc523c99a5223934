//! A fake of the Privy wallet API (`GET /v1/users/{id}`, `POST /v1/wallets/{id}/rpc` with
//! `eth_signTransaction` and Solana `signTransaction`) that holds real keys: what it signs is
//! mined on anvil and lands on the Solana test node. It checks `Authorization: Basic`
//! against the app id and secret, `privy-app-id`, and, when given the public key,
//! `privy-authorization-signature` (P-256 over the RFC 8785 canonical request); a wallet
//! that is not delegated, or unknown, cannot sign. Failures in Privy's body
//! (`{"error", "code"}`), and on request a 500, a 429 or a stall.

use std::{
    collections::{BTreeMap, HashMap},
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use alloy::{
    consensus::{SignableTransaction as _, TxEip1559, TxEnvelope},
    eips::eip2718::Encodable2718 as _,
    primitives::{Address, Bytes, TxKind, U256},
    signers::{SignerSync as _, local::PrivateKeySigner},
};
use axum::{
    Json, Router,
    body::Bytes as Body,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use p256::ecdsa::{Signature as P256Signature, VerifyingKey, signature::Verifier as _};
use serde_json::{Value, json};
use solana_keypair::Keypair;
use solana_signer::Signer as _;
use solana_transaction::versioned::VersionedTransaction;
use tokio::task::JoinHandle;

/// A wallet's key.
enum Key {
    Evm(PrivateKeySigner),
    Solana(Keypair),
}

/// One linked account of a user, and the key behind it for the provider's own wallets.
struct Account {
    entry: Value,
    key: Option<Key>,
}

#[derive(Default)]
struct Faults {
    /// Statuses the next calls (of either endpoint) answer with.
    failures: Vec<u16>,
    /// RPC calls left that get no answer for a minute.
    stalls: u32,
    rpc_calls: u64,
    /// Every `privy-idempotency-key` seen, in order.
    idempotency_keys: Vec<String>,
}

struct Inner {
    app_id: String,
    app_secret: String,
    authorization: Option<VerifyingKey>,
    base: Mutex<String>,
    users: Mutex<HashMap<String, Vec<Account>>>,
    faults: Mutex<Faults>,
}

/// A running fake, stopped when dropped.
pub struct PrivyFake {
    addr: SocketAddr,
    inner: Arc<Inner>,
    server: JoinHandle<()>,
}

impl Drop for PrivyFake {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn error(status: StatusCode, message: &str, code: &str) -> Response {
    (status, Json(json!({"error": message, "code": code}))).into_response()
}

impl PrivyFake {
    /// Serves on 127.0.0.1 for app `app_id` with `app_secret`, checking authorization
    /// signatures against `authorization` when given.
    pub async fn start(
        app_id: &str,
        app_secret: &str,
        authorization: Option<VerifyingKey>,
    ) -> anyhow::Result<Self> {
        let inner = Arc::new(Inner {
            app_id: app_id.to_owned(),
            app_secret: app_secret.to_owned(),
            authorization,
            base: Mutex::default(),
            users: Mutex::default(),
            faults: Mutex::default(),
        });
        let app = Router::new()
            .route("/v1/users/{id}", get(user))
            .route("/v1/wallets/{id}/rpc", post(rpc))
            .with_state(inner.clone());
        let (addr, server) = super::serve_on_loopback(app).await?;
        *lock(&inner.base) = format!("http://{addr}");
        Ok(Self {
            addr,
            inner,
            server,
        })
    }

    /// The base URL (`provider.base_url`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds user `did` with no linked accounts.
    pub fn add_user(&self, did: &str) {
        lock(&self.inner.users).entry(did.to_owned()).or_default();
    }

    /// Removes user `did`: the provider no longer knows it.
    pub fn remove_user(&self, did: &str) {
        lock(&self.inner.users).remove(did);
    }

    fn push(&self, did: &str, entry: Value, key: Option<Key>) {
        lock(&self.inner.users)
            .entry(did.to_owned())
            .or_default()
            .push(Account { entry, key });
    }

    /// Gives `did` an embedded EVM wallet (HD index `index`), delegated or not, with a
    /// server wallet id or not; returns its address and id.
    pub fn add_embedded_evm(
        &self,
        did: &str,
        index: u32,
        delegated: bool,
        with_id: bool,
    ) -> (Address, String) {
        let key = PrivateKeySigner::random();
        let address = key.address();
        let id = format!(
            "evm{index}{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let mut entry = json!({
            "type": "wallet", "address": address.to_checksum(None), "chain_type": "ethereum",
            "chain_id": "eip155:1", "wallet_client": "privy", "wallet_client_type": "privy",
            "connector_type": "embedded", "imported": false, "delegated": delegated,
            "wallet_index": index, "recovery_method": "privy-v2", "verified_at": 1731974895,
        });
        if with_id {
            entry["id"] = json!(id);
        }
        self.push(did, entry, Some(Key::Evm(key)));
        (address, id)
    }

    /// Gives `did` an embedded Solana wallet; returns its address and id.
    pub fn add_embedded_solana(
        &self,
        did: &str,
        index: u32,
        delegated: bool,
    ) -> (solana_pubkey::Pubkey, String) {
        let key = Keypair::new();
        let address = key.pubkey();
        let id = format!(
            "sol{index}{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let entry = json!({
            "type": "wallet", "id": id, "address": address.to_string(), "chain_type": "solana",
            "wallet_client": "privy", "wallet_client_type": "privy",
            "connector_type": "embedded", "imported": false, "delegated": delegated,
            "wallet_index": index, "public_key": address.to_string(), "verified_at": 1731974895,
        });
        self.push(did, entry, Some(Key::Solana(key)));
        (address, id)
    }

    /// Unlinks the account at `address` from its user: the provider lists it no more.
    pub fn remove_account(&self, address: &str) {
        for accounts in lock(&self.inner.users).values_mut() {
            accounts.retain(|a| {
                !a.entry["address"]
                    .as_str()
                    .is_some_and(|x| x.eq_ignore_ascii_case(address))
            });
        }
    }

    /// Gives `did` a linked account as given (an external wallet, a smart wallet, an email…).
    pub fn add_account(&self, did: &str, entry: Value) {
        self.push(did, entry, None);
    }

    /// Sets the delegation (and gives the server wallet id, when `delegated`) of the wallet
    /// at `address`.
    pub fn set_delegated(&self, address: &str, delegated: bool) {
        for accounts in lock(&self.inner.users).values_mut() {
            for account in accounts.iter_mut() {
                if account.entry["address"]
                    .as_str()
                    .is_some_and(|a| a.eq_ignore_ascii_case(address))
                {
                    account.entry["delegated"] = json!(delegated);
                    if delegated && account.entry.get("id").is_none() {
                        account.entry["id"] =
                            json!(format!("late{}", uuid::Uuid::new_v4().simple()));
                    }
                }
            }
        }
    }

    /// The next calls (user reads and RPCs alike) answer with these statuses, one each.
    pub fn fail_next(&self, statuses: &[u16]) {
        lock(&self.inner.faults).failures = statuses.to_vec();
    }

    /// The next `count` RPC calls get no answer for a minute.
    pub fn stall_rpc(&self, count: u32) {
        lock(&self.inner.faults).stalls = count;
    }

    /// RPC calls so far, failed ones included.
    pub fn rpc_calls(&self) -> u64 {
        lock(&self.inner.faults).rpc_calls
    }

    /// Every `privy-idempotency-key` the RPC calls carried, in order.
    pub fn idempotency_keys(&self) -> Vec<String> {
        lock(&self.inner.faults).idempotency_keys.clone()
    }
}

/// The failure the next call was told to answer with, if any.
fn take_failure(inner: &Inner) -> Option<Response> {
    let mut faults = lock(&inner.faults);
    if faults.failures.is_empty() {
        return None;
    }
    let status = StatusCode::from_u16(faults.failures.remove(0))
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    Some(error(
        status,
        "The provider failed, as it was told to",
        "internal_error",
    ))
}

/// Checks the app's credentials; the refusal when they are wrong.
fn refuse_credentials(inner: &Inner, headers: &HeaderMap) -> Option<Response> {
    let expected = format!(
        "Basic {}",
        BASE64.encode(format!("{}:{}", inner.app_id, inner.app_secret))
    );
    let basic = headers.get("authorization").and_then(|v| v.to_str().ok());
    let app = headers.get("privy-app-id").and_then(|v| v.to_str().ok());
    if basic != Some(expected.as_str()) || app != Some(inner.app_id.as_str()) {
        return Some(error(
            StatusCode::UNAUTHORIZED,
            "Invalid app ID or app secret",
            "invalid_credentials",
        ));
    }
    None
}

async fn user(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(refusal) = refuse_credentials(&inner, &headers) {
        return refusal;
    }
    if let Some(failure) = take_failure(&inner) {
        return failure;
    }
    let users = lock(&inner.users);
    let Some(accounts) = users.get(&id) else {
        return error(StatusCode::NOT_FOUND, "User not found", "not_found");
    };
    Json(json!({
        "id": id, "created_at": 1731974895, "has_accepted_terms": true, "is_guest": false,
        "mfa_methods": [],
        "linked_accounts": accounts.iter().map(|a| a.entry.clone()).collect::<Vec<_>>(),
    }))
    .into_response()
}

/// A quantity as the RPC body may write it: `0x` hex or a JSON integer.
fn quantity(v: &Value) -> Option<U256> {
    match v {
        Value::String(s) => s
            .strip_prefix("0x")
            .and_then(|h| U256::from_str_radix(h, 16).ok()),
        Value::Number(n) => n.as_u64().map(U256::from),
        _ => None,
    }
}

async fn rpc(
    State(inner): State<Arc<Inner>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Some(refusal) = refuse_credentials(&inner, &headers) {
        return refusal;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "Invalid JSON body", "invalid_data");
    };
    let key_header = headers
        .get("privy-idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let stall = {
        let mut faults = lock(&inner.faults);
        faults.rpc_calls += 1;
        if let Some(key) = &key_header {
            faults.idempotency_keys.push(key.clone());
        }
        let stall = faults.stalls > 0;
        if stall {
            faults.stalls -= 1;
        }
        stall
    };
    if stall {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    if let Some(failure) = take_failure(&inner) {
        return failure;
    }
    if let Some(verifier) = &inner.authorization {
        let url = format!("{}/v1/wallets/{id}/rpc", lock(&inner.base));
        let mut signed_headers = BTreeMap::from([("privy-app-id", inner.app_id.clone())]);
        if let Some(key) = &key_header {
            signed_headers.insert("privy-idempotency-key", key.clone());
        }
        let payload = json!({"version": 1, "method": "POST", "url": url, "body": body, "headers": signed_headers});
        let canonical = serde_jcs::to_vec(&payload).unwrap_or_default();
        let valid = headers
            .get("privy-authorization-signature")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| BASE64.decode(s).ok())
            .and_then(|der| P256Signature::from_der(&der).ok())
            .is_some_and(|sig| verifier.verify(&canonical, &sig).is_ok());
        if !valid {
            return error(
                StatusCode::UNAUTHORIZED,
                "No valid authorization signature",
                "zero_correct_authorization_signatures",
            );
        }
    }
    let users = lock(&inner.users);
    let account = users
        .values()
        .flatten()
        .find(|a| a.entry["id"].as_str() == Some(id.as_str()));
    let Some(account) = account else {
        return error(StatusCode::NOT_FOUND, "Wallet not found", "not_found");
    };
    if account.entry["delegated"] != json!(true) {
        return error(
            StatusCode::FORBIDDEN,
            "The wallet is not delegated to this app",
            "policy_violation",
        );
    }
    let method = body["method"].as_str().unwrap_or_default();
    let params = &body["params"];
    match (method, &account.key) {
        ("eth_signTransaction", Some(Key::Evm(key))) => {
            let t = &params["transaction"];
            let q = |name: &str| quantity(&t[name]);
            let (Some(chain_id), Some(nonce), Some(gas), Some(max_fee), Some(tip)) = (
                q("chain_id"),
                q("nonce"),
                q("gas_limit"),
                q("max_fee_per_gas"),
                q("max_priority_fee_per_gas"),
            ) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Invalid transaction",
                    "invalid_data",
                );
            };
            let to = t["to"].as_str().and_then(|a| a.parse::<Address>().ok());
            let data: Bytes = t["data"]
                .as_str()
                .and_then(|d| d.parse().ok())
                .unwrap_or_default();
            let tx = TxEip1559 {
                chain_id: chain_id.to::<u64>(),
                nonce: nonce.to::<u64>(),
                gas_limit: gas.to::<u64>(),
                max_fee_per_gas: max_fee.to::<u128>(),
                max_priority_fee_per_gas: tip.to::<u128>(),
                to: to.map_or(TxKind::Create, TxKind::Call),
                value: q("value").unwrap_or_default(),
                access_list: Default::default(),
                input: data,
            };
            let Ok(signature) = key.sign_hash_sync(&tx.signature_hash()) else {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Signing failed",
                    "internal_error",
                );
            };
            let signed = TxEnvelope::from(tx.into_signed(signature)).encoded_2718();
            Json(json!({"method": method, "data": {
                "signed_transaction": alloy::hex::encode_prefixed(signed), "encoding": "rlp"}}))
            .into_response()
        }
        ("signTransaction", Some(Key::Solana(key))) => {
            let tx: Option<VersionedTransaction> = params["transaction"]
                .as_str()
                .and_then(|b| BASE64.decode(b).ok())
                .and_then(|bytes| wincode::deserialize(&bytes).ok());
            let Some(mut tx) = tx else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Invalid transaction",
                    "invalid_data",
                );
            };
            let Some(slot) = tx
                .message
                .static_account_keys()
                .iter()
                .position(|k| *k == key.pubkey())
            else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "The wallet does not sign this transaction",
                    "invalid_data",
                );
            };
            let Some(signature) = tx.signatures.get_mut(slot) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Invalid transaction",
                    "invalid_data",
                );
            };
            *signature = key.sign_message(&tx.message.serialize());
            let bytes = wincode::serialize(&tx).unwrap_or_default();
            Json(json!({"method": method, "data": {
                "signed_transaction": BASE64.encode(bytes), "encoding": "base64"}}))
            .into_response()
        }
        _ => error(
            StatusCode::BAD_REQUEST,
            "Unsupported method for this wallet",
            "invalid_data",
        ),
    }
}
