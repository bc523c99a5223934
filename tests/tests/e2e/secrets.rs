//! No secret lands where it can be read back. A full run (every write kind from a local and
//! a provider wallet, refusals and failures, keys made, used and revoked, the dashboard's
//! sign-in) with the service logging everything at `debug`; then every log line and every
//! database row is searched for each API key value, the master key, the dashboard password,
//! the session and sign-in link tokens, the provider's app secret and authorization key, and
//! any private key of the run's wallets (each 64-hex-digit run found is tried as a key).

use alloy::{
    primitives::{Address, U256, utils::parse_ether},
    signers::local::PrivateKeySigner,
};
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use p256::pkcs8::EncodePrivateKey as _;
use sea_orm::{ConnectionTrait, Statement};
use serde_json::json;
use walletops_proto::v1::{
    self as pb, api_key_service_client::ApiKeyServiceClient,
    dashboard_service_client::DashboardServiceClient,
};
use walletops_tests::{
    Backend, Service, anvil::Anvil, fakes::privy::PrivyFake, on_both_backends, with_key,
};

const APP_SECRET: &str = "privy-app-secret-never-logged";
const DID: &str = "did:privy:secretsscan0000000000000";
const PASSWORD: &str = "a dashboard password never logged";
const RECIPIENT: &str = "0x1111111111111111111111111111111111111111";

async fn no_secret_reaches_a_log_line_or_a_row(b: Backend) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("service.log");
    let anvil = Anvil::start().await?;
    let authorization = p256::SecretKey::from_bytes(&[7u8; 32].into())?;
    let authorization_key = BASE64.encode(authorization.to_pkcs8_der()?.as_bytes());
    let privy = PrivyFake::start(
        "app-secrets-scan",
        APP_SECRET,
        Some(authorization.public_key().into()),
    )
    .await?;
    let (provider_wallet, _) = privy.add_embedded_evm(DID, 0, true, true);
    let privy_url = privy.url();
    let env = [
        ("WALLETOPS_PROVIDER__BASE_URL", privy_url.as_str()),
        ("WALLETOPS_PROVIDER__APP_ID", "app-secrets-scan"),
        ("WALLETOPS_PROVIDER__APP_SECRET", APP_SECRET),
        (
            "WALLETOPS_PROVIDER__AUTHORIZATION_KEY",
            authorization_key.as_str(),
        ),
        ("RUST_LOG", "debug"),
    ];
    let svc = Service::start_with(b, anvil.service_options("", &env).logging_to(&log)).await?;
    let api = svc.rest(&svc.api_key);
    let local = anvil
        .fund_default_wallet(&api, U256::from(parse_ether("10")?))
        .await?;
    anvil
        .set_balance(provider_wallet, parse_ether("10")?)
        .await?;
    let linked = svc
        .cli(&["users", "link", "owner", "--provider-user", DID])
        .await?;
    anyhow::ensure!(linked.success, "{}", linked.stderr);
    let token = anvil.deploy_token("SCAN", 6).await?;
    anvil.mint(token, local, U256::from(1_000_000u64)).await?;
    let counter = anvil.deploy_counter().await?;

    // A key made, used and revoked; a bad key; a key refused for its scope.
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let made = keys
        .create_api_key(with_key(
            pb::CreateApiKeyRequest {
                name: "scan".to_owned(),
                ..Default::default()
            },
            &svc.api_key,
        )?)
        .await?
        .into_inner();
    let reader = keys
        .create_api_key(with_key(
            pb::CreateApiKeyRequest {
                name: "reader".to_owned(),
                scopes: vec![pb::ApiKeyScope::Read.into()],
                ..Default::default()
            },
            &svc.api_key,
        )?)
        .await?
        .into_inner();
    assert_eq!(svc.rest(&made.secret).get("/wallets").await?.status, 200);
    svc.rest(&reader.secret)
        .post("/send", &json!({}))
        .await?
        .assert_error(403, "FORBIDDEN")?;
    let wrong_secret = format!("{}{}", &made.secret[..10], uuid::Uuid::new_v4().simple());
    svc.rest(&wrong_secret)
        .get("/wallets")
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    keys.revoke_api_key(with_key(
        pb::RevokeApiKeyRequest {
            id: made.secret[5..9].to_owned(),
        },
        &svc.api_key,
    )?)
    .await?;

    // Every write kind, from the local wallet and the provider's, and refusals.
    let from = local.to_string();
    let writes = [
        (
            "/send",
            json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "1000"}),
        ),
        (
            "/send",
            json!({"chain": "anvil", "from": provider_wallet.to_string(), "to": RECIPIENT, "asset": "native", "amount": "1000"}),
        ),
        (
            "/send",
            json!({"chain": "anvil", "from": from, "to": RECIPIENT, "asset": "erc20", "token": token.to_string(), "amount": "10"}),
        ),
        (
            "/token/approve",
            json!({"chain": "anvil", "from": from, "token": token.to_string(), "spender": RECIPIENT, "amount": "10"}),
        ),
        (
            "/contracts/send",
            json!({"chain": "anvil", "from": from, "to": counter.to_string(), "function": "add(uint256)", "args": [7]}),
        ),
    ];
    let mut ids = Vec::new();
    for (path, body) in writes {
        let reply = api.post(path, &body).await?;
        anyhow::ensure!(reply.status == 200, "{path}: {}", reply.text);
        ids.push(reply.body["id"].as_str().unwrap_or_default().to_owned());
    }
    for id in &ids {
        api.wait_for_status(id, "CONFIRMED").await?;
    }
    let too_much = json!({"chain": "anvil", "from": from, "to": RECIPIENT, "asset": "native", "amount": parse_ether("1000")?.to_string()});
    api.post("/send", &too_much)
        .await?
        .assert_error(400, "INSUFFICIENT_FUNDS")?;
    privy.fail_next(&[500; 8]);
    let by_provider = json!({"chain": "anvil", "from": provider_wallet.to_string(), "to": RECIPIENT, "asset": "native", "amount": "1"});
    assert_eq!(api.post("/send", &by_provider).await?.status, 502);

    // The dashboard: a password set with the link, a wrong one, a session.
    let mut dashboard = DashboardServiceClient::new(svc.channel().await?);
    let link_token = svc
        .sign_in_link
        .split_once("token=")
        .map(|(_, t)| t.to_owned())
        .unwrap_or_default();
    let form = "f".repeat(32);
    let session = dashboard
        .redeem_sign_in_link(pb::RedeemSignInLinkRequest {
            token: link_token.clone(),
            password: PASSWORD.to_owned(),
            form_token: form.clone(),
            form_cookie: form.clone(),
        })
        .await?
        .into_inner();
    let sign_in = |password: &str| pb::SignInRequest {
        user_name: "owner".to_owned(),
        password: password.to_owned(),
        form_token: form.clone(),
        form_cookie: form.clone(),
    };
    assert!(
        dashboard
            .sign_in(sign_in("a wrong password, never logged"))
            .await
            .is_err()
    );
    let second = dashboard.sign_in(sign_in(PASSWORD)).await?.into_inner();

    // What was written.
    let logged = std::fs::read_to_string(&log)?;
    assert!(logged.lines().count() > 100, "the run logged at debug");
    let stored = database_text(&svc).await?;
    assert!(
        stored.contains(&svc.api_key[5..9]),
        "the dump reads the keys' rows"
    );
    // The key detector finds a key where there is one.
    let control = PrivateKeySigner::random();
    let planted = format!("x{}y", alloy::hex::encode(control.to_bytes()));
    assert_eq!(
        private_key_of(&planted, &[control.address()]),
        Some(control.address())
    );
    let master_key = std::fs::read_to_string(svc.data_dir().join("master.key"))?;
    let secrets = [
        ("the first API key", svc.api_key.clone()),
        ("the first key's secret part", svc.api_key[10..].to_owned()),
        ("a made API key", made.secret.clone()),
        ("a read-only key", reader.secret.clone()),
        ("a wrong key's secret part", wrong_secret[10..].to_owned()),
        ("the master key", master_key.trim().to_owned()),
        ("the dashboard password", PASSWORD.to_owned()),
        (
            "a wrong password",
            "a wrong password, never logged".to_owned(),
        ),
        ("a session token", session.session_token.clone()),
        ("another session token", second.session_token.clone()),
        ("the sign-in link token", link_token),
        ("the provider app secret", APP_SECRET.to_owned()),
        ("the provider authorization key", authorization_key.clone()),
    ];
    for (what, secret) in &secrets {
        assert!(!secret.is_empty(), "{what} is empty");
        assert!(!logged.contains(secret.as_str()), "{what} is in the log");
        assert!(
            !stored.contains(secret.as_str()),
            "{what} is in the database"
        );
    }
    let wallets = [local, provider_wallet];
    for (place, text) in [("log", &logged), ("database", &stored)] {
        if let Some(found) = private_key_of(text, &wallets) {
            panic!("the private key of {found} is in the {place}");
        }
    }
    Ok(())
}

/// Every row of every table of the service's database, as text.
async fn database_text(svc: &Service) -> anyhow::Result<String> {
    let db = svc.database().await?;
    let backend = db.get_database_backend();
    let tables_sql = match svc.backend() {
        Backend::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'table'",
        Backend::Postgres => {
            "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()"
        }
    };
    let mut text = String::new();
    for row in db
        .query_all_raw(Statement::from_string(backend, tables_sql))
        .await?
    {
        let table: String = row.try_get("", "name")?;
        let rows_sql = match svc.backend() {
            // Every column, of every type, as text.
            Backend::Sqlite => {
                let columns = db
                    .query_all_raw(Statement::from_string(
                        backend,
                        format!("SELECT name FROM pragma_table_info('{table}')"),
                    ))
                    .await?
                    .iter()
                    .map(|c| {
                        c.try_get::<String>("", "name")
                            .map(|n| format!("quote(\"{n}\")"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                format!(
                    "SELECT {} AS row FROM \"{table}\"",
                    columns.join(" || ' ' || ")
                )
            }
            Backend::Postgres => format!("SELECT t::text AS row FROM \"{table}\" t"),
        };
        for r in db
            .query_all_raw(Statement::from_string(backend, rows_sql))
            .await?
        {
            let value: Option<String> = r.try_get("", "row")?;
            text.push_str(&value.unwrap_or_default());
            text.push('\n');
        }
    }
    Ok(text)
}

/// The wallet among `wallets` whose private key some 64-hex-digit run of `text` is.
fn private_key_of(text: &str, wallets: &[Address]) -> Option<Address> {
    let bytes = text.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let len = bytes[start..]
            .iter()
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        if len >= 64 {
            for offset in (0..=len - 64).step_by(2) {
                let candidate = &text[start + offset..start + offset + 64];
                if let Ok(signer) = candidate.parse::<PrivateKeySigner>()
                    && wallets.contains(&signer.address())
                {
                    return Some(signer.address());
                }
            }
        }
        start += len.max(1);
    }
    None
}

on_both_backends!(no_secret_reaches_a_log_line_or_a_row);
