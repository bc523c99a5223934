//! The Privy client against a scripted local server answering in Privy's wire format:
//! credentials and headers, the user's linked wallets, signatures checked before they are
//! used, retries under one idempotency key, and errors that carry no credentials.

use std::collections::BTreeMap;

use alloy::{
    consensus::{SignableTransaction as _, TxEip1559, TxEnvelope},
    eips::eip2718::Encodable2718 as _,
    primitives::{Bytes, TxKind, U256, address},
    signers::{SignerSync as _, local::PrivateKeySigner},
};
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use p256::{
    ecdsa::{Signature as P256Signature, signature::Verifier as _},
    pkcs8::EncodePrivateKey as _,
};
use serde_json::{Value, json};
use solana_keypair::Keypair;
use solana_message::{VersionedMessage, v0};
use solana_signer::Signer as _;

use super::{Privy, ProviderConfig, auth};
use crate::{
    testing::{Reply, policy, serve},
    upstream::UpstreamError,
};
use walletops_domain::secret::Secret;
use walletops_domain::{ProviderWallet, WalletAddress};

const APP_ID: &str = "app-walletops-test";
const APP_SECRET: &str = "privy-secret-never-shown";

/// A P-256 authorization key, base64 PKCS#8 as the option takes it.
fn authorization_key() -> String {
    let key = p256::SecretKey::from_bytes(&[7u8; 32].into()).expect("a P-256 scalar");
    let der = key.to_pkcs8_der().expect("PKCS#8");
    format!("wallet-auth:{}", BASE64.encode(der.as_bytes()))
}

async fn client(
    replies: Vec<Reply>,
    signed: bool,
) -> (Privy, std::sync::Arc<crate::testing::Script>, url::Url) {
    let (url, script) = serve("", replies).await;
    let config = ProviderConfig {
        base_url: url.clone(),
        app_id: APP_ID.to_owned(),
        app_secret: Secret::from(APP_SECRET.to_owned()),
        authorization_key: Secret::from(if signed {
            authorization_key()
        } else {
            String::new()
        }),
        sync_interval_secs: 300,
    };
    config.validate().expect("a valid config");
    let privy = Privy::from_config(&config, policy())
        .expect("a client")
        .expect("configured");
    (privy, script, url)
}

fn user() -> Value {
    json!({
        "id": "did:privy:cm3np4u9j001rc8b73seqmqqk", "created_at": 1731974895,
        "has_accepted_terms": true, "is_guest": false, "mfa_methods": [],
        "linked_accounts": [
            {"type": "email", "address": "user@example.com", "verified_at": 1731974895},
            {"type": "wallet", "id": "jf4mev19seymsqulciv8on0c",
             "address": "0x7Ef5363308127128969618240eDcB9F8f61e90F6",
             "chain_type": "ethereum", "chain_id": "eip155:1", "wallet_client": "privy",
             "wallet_client_type": "privy", "connector_type": "embedded", "imported": false,
             "delegated": true, "wallet_index": 0, "recovery_method": "privy-v2",
             "verified_at": 1731974895},
            {"type": "wallet", "address": "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin",
             "chain_type": "solana", "wallet_client": "privy", "wallet_client_type": "privy",
             "connector_type": "embedded", "imported": false, "delegated": false,
             "wallet_index": 0, "verified_at": 1731974895},
            {"type": "wallet", "address": "0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045",
             "chain_type": "ethereum", "wallet_client": "unknown",
             "wallet_client_type": "metamask", "connector_type": "injected",
             "verified_at": 1731974000},
            {"type": "smart_wallet", "address": "0x1111111111111111111111111111111111111111",
             "smart_wallet_type": "kernel"},
            {"type": "wallet", "address": "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
             "chain_type": "bitcoin-segwit", "wallet_client_type": "privy",
             "connector_type": "embedded", "delegated": true, "wallet_index": 0}
        ]
    })
}

#[tokio::test]
async fn linked_wallets_are_read_from_the_users_linked_accounts() {
    let (privy, script, _) = client(
        vec![
            Reply::Json(200, user()),
            Reply::Json(404, json!({"error": "User not found"})),
        ],
        false,
    )
    .await;
    let wallets = privy
        .linked_wallets("did:privy:cm3np4u9j001rc8b73seqmqqk")
        .await
        .expect("read")
        .expect("a user");
    let evm: WalletAddress = "0x7Ef5363308127128969618240eDcB9F8f61e90F6"
        .parse()
        .expect("evm");
    assert_eq!(
        wallets,
        vec![
            ProviderWallet {
                address: evm,
                wallet_id: Some("jf4mev19seymsqulciv8on0c".to_owned()),
                connector_type: "embedded".to_owned(),
                client_type: "privy".to_owned(),
                delegated: true,
                wallet_index: Some(0),
            },
            ProviderWallet {
                address: "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin"
                    .parse()
                    .expect("sol"),
                wallet_id: None,
                connector_type: "embedded".to_owned(),
                client_type: "privy".to_owned(),
                delegated: false,
                wallet_index: Some(0),
            },
            ProviderWallet {
                address: "0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045"
                    .parse()
                    .expect("evm"),
                wallet_id: None,
                connector_type: "injected".to_owned(),
                client_type: "metamask".to_owned(),
                delegated: false,
                wallet_index: None,
            },
        ],
        "email, smart wallet and bitcoin entries are skipped"
    );
    assert!(wallets[0].is_default() && wallets[0].is_embedded());
    assert!(!wallets[2].is_embedded() && !wallets[2].is_default());
    let seen = &script.seen()[0];
    assert_eq!(seen.path, "/v1/users/did:privy:cm3np4u9j001rc8b73seqmqqk");
    let basic = format!("Basic {}", BASE64.encode(format!("{APP_ID}:{APP_SECRET}")));
    assert_eq!(seen.headers["authorization"], basic.as_str());
    assert_eq!(seen.headers["privy-app-id"], APP_ID);
    assert!(
        !seen.headers.contains_key("privy-authorization-signature"),
        "GETs are not signed"
    );
    assert_eq!(
        privy.linked_wallets("did:privy:gone").await.expect("read"),
        None
    );
}

fn eip1559() -> TxEip1559 {
    TxEip1559 {
        chain_id: 8453,
        nonce: 7,
        gas_limit: 21_000,
        max_fee_per_gas: 3_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: TxKind::Call(address!("d8dA6BF26964aF9D7eEd9e03E53415D37aA96045")),
        value: U256::from(10_000_000_000_000_000u64),
        access_list: Default::default(),
        input: Bytes::new(),
    }
}

/// `tx` signed by `key`, as Privy's `eth_signTransaction` answers it.
fn signed_answer(key: &PrivateKeySigner, tx: TxEip1559) -> Value {
    let signature = key.sign_hash_sync(&tx.signature_hash()).expect("signs");
    let envelope = TxEnvelope::from(tx.into_signed(signature));
    json!({"method": "eth_signTransaction", "data": {
        "signed_transaction": alloy::hex::encode_prefixed(envelope.encoded_2718()),
        "encoding": "rlp"}})
}

#[tokio::test]
async fn an_evm_transaction_is_signed_once_under_one_key_and_checked() {
    let wallet = PrivateKeySigner::from_bytes(&[9u8; 32].into()).expect("a key");
    let (privy, script, url) = client(
        vec![
            Reply::Json(500, json!({"error": "internal"})),
            Reply::Json(200, signed_answer(&wallet, eip1559())),
        ],
        true,
    )
    .await;
    let (bytes, hash) = privy
        .sign_eip1559("jf4mev19seymsqulciv8on0c", wallet.address(), &eip1559())
        .await
        .expect("signed");
    assert_eq!(alloy::primitives::keccak256(&bytes), hash);
    let seen = script.seen();
    assert_eq!(seen.len(), 2, "retried once after the 500");
    let key = &seen[0].headers["privy-idempotency-key"];
    assert_eq!(
        key, &seen[1].headers["privy-idempotency-key"],
        "one key for the retry"
    );
    let body = seen[0].body.clone().expect("a JSON body");
    assert_eq!(seen[0].path, "/v1/wallets/jf4mev19seymsqulciv8on0c/rpc");
    assert_eq!(body["method"], "eth_signTransaction");
    let tx = &body["params"]["transaction"];
    assert_eq!(tx["nonce"], "0x7");
    assert_eq!(tx["chain_id"], "0x2105");
    assert_eq!(tx["to"], "0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045");
    // The authorization signature covers the canonical request, key header included.
    let signature = seen[0].headers["privy-authorization-signature"]
        .to_str()
        .expect("ASCII");
    let der = BASE64.decode(signature).expect("base64");
    let signature = P256Signature::from_der(&der).expect("DER");
    let headers = BTreeMap::from([
        ("privy-app-id", APP_ID),
        ("privy-idempotency-key", key.to_str().expect("ASCII")),
    ]);
    let rpc_url = format!("{}v1/wallets/jf4mev19seymsqulciv8on0c/rpc", url);
    let signed = auth::signed_bytes(&rpc_url, &body, &headers);
    let verifier = auth::AuthorizationKey::parse(&authorization_key())
        .expect("parses")
        .verifying_key();
    verifier
        .verify(&signed, &signature)
        .expect("a valid authorization signature");
}

#[tokio::test]
async fn a_signature_the_wallet_did_not_make_is_refused() {
    let wallet = PrivateKeySigner::from_bytes(&[9u8; 32].into()).expect("a key");
    let other = PrivateKeySigner::from_bytes(&[10u8; 32].into()).expect("a key");
    let changed = TxEip1559 {
        nonce: 8,
        ..eip1559()
    };
    for answer in [
        signed_answer(&other, eip1559()),
        signed_answer(&wallet, changed),
    ] {
        let (privy, _, _) = client(vec![Reply::Json(200, answer)], false).await;
        let err = privy
            .sign_eip1559("w", wallet.address(), &eip1559())
            .await
            .expect_err("refused");
        assert!(
            matches!(&err, UpstreamError::Failed { message } if message.contains("not signed by the wallet")),
            "{err:?}"
        );
    }
}

#[tokio::test]
async fn the_providers_refusals_are_passed_on_without_credentials() {
    let policy_refusal =
        json!({"error": "RPC request denied due to policy violation", "code": "policy_violation"});
    let (privy, script, _) = client(vec![Reply::Json(403, policy_refusal)], true).await;
    let wallet = PrivateKeySigner::from_bytes(&[9u8; 32].into()).expect("a key");
    let err = privy
        .sign_eip1559("w", wallet.address(), &eip1559())
        .await
        .expect_err("refused");
    assert_eq!(script.seen().len(), 1, "a refusal is not retried");
    let message = err.to_string();
    assert!(message.contains("policy violation"), "{message}");
    assert!(!message.contains(APP_SECRET), "{message}");
    let (privy, _, _) = client(
        vec![Reply::Json(401, json!({"error": "Invalid app secret"}))],
        false,
    )
    .await;
    let err = privy
        .sign_eip1559("w", wallet.address(), &eip1559())
        .await
        .expect_err("refused");
    let message = err.to_string();
    assert!(
        message.contains("provider.app_secret") && !message.contains(APP_SECRET),
        "{message}"
    );
    assert!(!format!("{privy:?}").contains(APP_SECRET));
}

#[tokio::test]
async fn a_provider_that_does_not_answer_fails_within_the_timeouts() {
    let (privy, script, _) = client(vec![Reply::Stall], false).await;
    let wallet = PrivateKeySigner::from_bytes(&[9u8; 32].into()).expect("a key");
    let err = privy
        .sign_eip1559("w", wallet.address(), &eip1559())
        .await
        .expect_err("no answer");
    assert!(
        matches!(&err, UpstreamError::Failed { message } if message.contains("did not answer")),
        "{err:?}"
    );
    let seen = script.seen();
    assert_eq!(seen.len(), 3, "every attempt timed out and was retried");
    assert!(
        seen.iter()
            .all(|s| s.headers["privy-idempotency-key"] == seen[0].headers["privy-idempotency-key"]),
        "under one idempotency key"
    );
}

#[tokio::test]
async fn a_solana_transaction_gets_the_wallets_signature_and_nothing_else() {
    let wallet = Keypair::new();
    let to = Keypair::new().pubkey();
    let message = v0::Message::try_compile(
        &wallet.pubkey(),
        &[solana_system_interface::instruction::transfer(
            &wallet.pubkey(),
            &to,
            5,
        )],
        &[],
        solana_hash::Hash::new_unique(),
    )
    .expect("compiles");
    let unsigned = solana_transaction::versioned::VersionedTransaction {
        signatures: vec![Default::default()],
        message: VersionedMessage::V0(message),
    };
    let mut signed = unsigned.clone();
    signed.signatures[0] = wallet.sign_message(&unsigned.message.serialize());
    let answer = |tx: &solana_transaction::versioned::VersionedTransaction| {
        json!({"method": "signTransaction", "data": {
            "signed_transaction": BASE64.encode(wincode::serialize(tx).expect("encodes")),
            "encoding": "base64"}})
    };
    let (privy, script, _) = client(vec![Reply::Json(200, answer(&signed))], false).await;
    let got = privy
        .sign_solana("k2n7", &wallet.pubkey(), &unsigned)
        .await
        .expect("signed");
    assert_eq!(got, signed);
    let body = script.seen()[0].body.clone().expect("a body");
    assert_eq!(body["method"], "signTransaction");
    assert_eq!(body["params"]["encoding"], "base64");
    // Signed by another key: refused.
    let mut forged = unsigned.clone();
    forged.signatures[0] = Keypair::new().sign_message(&unsigned.message.serialize());
    let (privy, _, _) = client(vec![Reply::Json(200, answer(&forged))], false).await;
    privy
        .sign_solana("k2n7", &wallet.pubkey(), &unsigned)
        .await
        .expect_err("refused");
}

#[test]
fn provider_options_are_checked_without_quoting_them() {
    let config = |id: &str, secret: &str, key: &str| ProviderConfig {
        app_id: id.to_owned(),
        app_secret: Secret::from(secret.to_owned()),
        authorization_key: Secret::from(key.to_owned()),
        ..ProviderConfig::default()
    };
    assert!(config("", "", "").validate().is_ok(), "no provider");
    assert!(
        config("app", "secret", &authorization_key())
            .validate()
            .is_ok()
    );
    let half = config("app", "", "")
        .validate()
        .expect_err("secret missing");
    assert!(half.to_string().contains("provider.app_secret"), "{half}");
    let bad = config("app", "secret", "not-a-key-material")
        .validate()
        .expect_err("bad key");
    assert!(
        bad.to_string().contains("provider.authorization_key")
            && !bad.to_string().contains("not-a-key-material"),
        "{bad}"
    );
}
