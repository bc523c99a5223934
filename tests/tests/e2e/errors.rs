//! The contract's error body for every code reachable without chain work, over REST and gRPC,
//! and the order of the checks: authentication before anything else, then input, then the
//! wallet's ownership and delegation.

use reqwest::Method;
use serde_json::json;
use walletops_proto::v1::{
    self as pb, admin_service_client::AdminServiceClient,
    wallet_ops_service_client::WalletOpsServiceClient,
};
use walletops_tests::{
    ADMIN_TOKEN, Backend, Options, Service, WAIT_TIMEOUT, as_admin, on_both_backends, reason,
    with_key,
};

const SOME_EVM: &str = "0x1111111111111111111111111111111111111111";

/// The owner's default EVM wallet address.
async fn evm_wallet(svc: &Service, key: &str) -> anyhow::Result<String> {
    let reply = svc
        .rest(key)
        .get("/wallets?chain=ethereum&defaultOnly=true")
        .await?;
    Ok(reply.body["wallets"][0]["address"]
        .as_str()
        .expect("an EVM wallet")
        .to_owned())
}

/// Chain `base` pointed at a port where nothing listens, with a provider's API key in the
/// URL: requests that get as far as the node fail at once with PROVIDER_RPC_ERROR.
fn dead_base_node() -> Options {
    Options {
        config_toml: Some(format!(
            "[chains.base]\nrpc_url = \"http://127.0.0.1:1/v2/{PROVIDER_KEY}\"\n"
        )),
        ..Options::default()
    }
}

/// The API key in `dead_base_node`'s URL, which no answer may show.
const PROVIDER_KEY: &str = "provider-api-key-4f1c";

/// Asserts `reply` is a 502 PROVIDER_RPC_ERROR that does not show the node's URL.
fn assert_node_failed(reply: walletops_tests::Reply) -> anyhow::Result<()> {
    reply.assert_error(502, "PROVIDER_RPC_ERROR")?;
    anyhow::ensure!(!reply.text.contains(PROVIDER_KEY), "{}", reply.text);
    Ok(())
}

fn send_body(chain: &str) -> serde_json::Value {
    json!({"chain": chain, "to": SOME_EVM, "asset": "native", "amount": "1000"})
}

async fn malformed_requests_are_invalid_input_naming_the_field(b: Backend) -> anyhow::Result<()> {
    // Every case counts against the write budget, as any request does.
    let svc = Service::start_with(
        b,
        Options {
            config_toml: Some("[rate_limits]\nwrites_per_minute = 1000\n".to_owned()),
            ..Options::default()
        },
    )
    .await?;
    let api = svc.rest(&svc.api_key);
    let idem = uuid::Uuid::new_v4().to_string();
    let keyed = [("Idempotency-Key", idem.as_str())];
    let cases: Vec<(&str, Option<&str>, &str)> = vec![
        ("not json", Some("{\"chain\": "), "body"),
        ("empty body", Some(""), "body"),
        (
            "wrong type",
            Some(
                r#"{"chain":"base","to":"0x1111111111111111111111111111111111111111","asset":"native","amount":1000}"#,
            ),
            "amount",
        ),
        (
            "unknown field",
            Some(r#"{"chain":"base","ammount":"1"}"#),
            "ammount",
        ),
        (
            "bad address",
            Some(r#"{"chain":"base","to":"0x123","asset":"native","amount":"1"}"#),
            "to",
        ),
        (
            "negative amount",
            Some(
                r#"{"chain":"base","to":"0x1111111111111111111111111111111111111111","asset":"native","amount":"-1"}"#,
            ),
            "amount",
        ),
        (
            "amount past uint256",
            Some(
                r#"{"chain":"base","to":"0x1111111111111111111111111111111111111111","asset":"native","amount":"0x10000000000000000000000000000000000000000000000000000000000000000"}"#,
            ),
            "amount",
        ),
        (
            "address with a blank",
            Some(
                r#"{"chain":"base","to":" 0x1111111111111111111111111111111111111111","asset":"native","amount":"1"}"#,
            ),
            "to",
        ),
        (
            "amount with a blank",
            Some(
                r#"{"chain":"base","to":"0x1111111111111111111111111111111111111111","asset":"native","amount":"1000 "}"#,
            ),
            "amount",
        ),
        (
            "amount with 0X",
            Some(
                r#"{"chain":"base","to":"0x1111111111111111111111111111111111111111","asset":"native","amount":"0X3e8"}"#,
            ),
            "amount",
        ),
        (
            "bad asset",
            Some(
                r#"{"chain":"base","to":"0x1111111111111111111111111111111111111111","asset":"gold","amount":"1"}"#,
            ),
            "asset",
        ),
        (
            "erc20 without token",
            Some(
                r#"{"chain":"base","to":"0x1111111111111111111111111111111111111111","asset":"erc20","amount":"1"}"#,
            ),
            "token",
        ),
        (
            "trailing data",
            Some(
                r#"{"chain":"base","to":"0x1111111111111111111111111111111111111111","asset":"native","amount":"1"} x"#,
            ),
            "body",
        ),
        (
            "two objects",
            Some(
                r#"{"chain":"base","to":"0x1111111111111111111111111111111111111111","asset":"native","amount":"1"}{}"#,
            ),
            "body",
        ),
        (
            "an array for the object",
            Some(r#"["base",null,"0x1111111111111111111111111111111111111111","native",null,"1"]"#),
            "body",
        ),
        (
            "solana amount in hex",
            Some(
                r#"{"chain":"solana","to":"So11111111111111111111111111111111111111112","asset":"native","amount":"0x10"}"#,
            ),
            "amount",
        ),
        (
            "spl amount past u64",
            Some(
                r#"{"chain":"solana","to":"So11111111111111111111111111111111111111112","asset":"native","amount":"18446744073709551616"}"#,
            ),
            "amount",
        ),
    ];
    for (what, body, field) in cases {
        let reply = api.request(Method::POST, "/send", &keyed, body).await?;
        reply.assert_error(400, "INVALID_INPUT")?;
        let message = reply.body["error"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{what}: {message}");
    }
    // A body that does not say it is JSON.
    for content_type in ["text/plain", "application/x-www-form-urlencoded"] {
        let reply = api
            .request(
                Method::POST,
                "/send",
                &[keyed[0], ("content-type", content_type)],
                Some(&send_body("base").to_string()),
            )
            .await?;
        reply.assert_invalid("Content-Type")?;
    }
    // Every bad field is named at once.
    let reply = api
        .request(
            Method::POST,
            "/send",
            &keyed,
            Some(r#"{"chain":"base","to":"nope","asset":"native","amount":"x"}"#),
        )
        .await?;
    reply.assert_error(400, "INVALID_INPUT")?;
    let message = reply.body["error"].as_str().unwrap_or_default();
    assert!(
        message.contains("to:") && message.contains("amount:"),
        "{message}"
    );
    // Query values.
    for (path, field) in [
        ("/wallets?defaultOnly=yes", "defaultOnly"),
        ("/wallets?automationOnly=2", "automationOnly"),
        ("/wallets?chain=bitcoin", "chain"),
        ("/wallets/balances?chain=base&fresh=maybe", "fresh"),
        ("/wallets/balances?chain=base&tokens=0x12", "tokens[0]"),
        (
            "/wallets/balances?chain=base&tokens=0x1111111111111111111111111111111111111111,,0x2222222222222222222222222222222222222222",
            "tokens[1]",
        ),
        (
            "/wallets/balances?chain=base&tokens=0x1111111111111111111111111111111111111111,%200x2222222222222222222222222222222222222222",
            "tokens[1]",
        ),
        (
            "/wallets/balances?chain=base&tokens=0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,0x2222222222222222222222222222222222222222,0xAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            "tokens[2]: repeats tokens[0]",
        ),
        ("/wallets/balances?chain=base&address=0xzz", "address"),
        ("/wallets/balances", "chain"),
        ("/tx/not-a-uuid", "id"),
    ] {
        let reply = api.get(path).await?;
        reply.assert_error(400, "INVALID_INPUT")?;
        let message = reply.body["error"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{path}: {message}");
    }
    let fifty_one = (0..51)
        .map(|i| format!("0x{i:040x}"))
        .collect::<Vec<_>>()
        .join(",");
    let reply = api
        .get(&format!("/wallets/balances?chain=base&tokens={fifty_one}"))
        .await?;
    reply.assert_invalid("tokens")?;
    Ok(())
}

async fn contract_call_fields_are_named(b: Backend) -> anyhow::Result<()> {
    // Chain `base` has no node here: each case must be refused before any chain work.
    let svc = Service::start_with(b, dead_base_node()).await?;
    let api = svc.rest(&svc.api_key);
    let call = |fields: serde_json::Value| {
        let mut body = json!({"chain": "base", "to": SOME_EVM});
        body.as_object_mut()
            .expect("an object")
            .extend(fields.as_object().expect("an object").clone());
        body
    };
    for (fields, field) in [
        (
            json!({"function": "transfer(address,uint256", "args": []}),
            "function",
        ),
        (
            json!({"function": "transfer(address,uint256)", "args": [SOME_EVM]}),
            "args",
        ),
        (json!({"data": "0x0x1234"}), "data"),
        (json!({"data": "1234"}), "data"),
        (json!({"data": "0x1234", "args": [1]}), "args"),
        // Addresses and bytes must say they are hex: a bare address or a number would
        // otherwise be read as hex silently.
        (
            json!({"function": "f(address)", "args": [&SOME_EVM[2..]]}),
            "args",
        ),
        (json!({"function": "f(bytes2)", "args": [1234]}), "args"),
        (json!({"function": "f(bytes)", "args": ["1234"]}), "args"),
    ] {
        let reply = api.post("/contracts/send", &call(fields.clone())).await?;
        reply.assert_invalid(field).map_err(|e| e.context(fields))?;
    }
    assert_eq!(svc.stored_transactions().await?, 0);
    Ok(())
}

async fn writes_need_a_uuid_idempotency_key(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let api = svc.rest(&svc.api_key);
    let body = json!({"chain": "base"}).to_string();
    for path in ["/send", "/token/approve", "/contracts/send", "/trade/swap"] {
        let reply = api.request(Method::POST, path, &[], Some(&body)).await?;
        reply.assert_error(400, "INVALID_INPUT")?;
        assert!(
            reply.text.contains("Idempotency-Key"),
            "{path}: {}",
            reply.text
        );
        let reply = api
            .request(
                Method::POST,
                path,
                &[("Idempotency-Key", "not-a-uuid")],
                Some(&body),
            )
            .await?;
        reply.assert_error(400, "INVALID_INPUT")?;
        assert!(
            reply.text.contains("Idempotency-Key"),
            "{path}: {}",
            reply.text
        );
    }
    // The quote takes no idempotency key.
    let quote = json!({"chain": "base", "fromToken": "NATIVE", "toToken": SOME_EVM, "amount": "1"});
    let reply = api
        .request(Method::POST, "/trade/quote", &[], Some(&quote.to_string()))
        .await?;
    reply.assert_error(503, "SERVICE_UNAVAILABLE")?;
    Ok(())
}

async fn unknown_chains_and_wrong_families(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let api = svc.rest(&svc.api_key);
    api.get("/wallets/balances?chain=dogechain")
        .await?
        .assert_error_on(400, "CHAIN_UNKNOWN", "chain")?;
    api.post("/send", &send_body("not-a-chain"))
        .await?
        .assert_error_on(400, "CHAIN_UNKNOWN", "chain")?;
    let approve = json!({"chain": "solana", "token": SOME_EVM, "spender": SOME_EVM, "amount": "1"});
    let reply = api.post("/token/approve", &approve).await?;
    reply.assert_invalid("chain")?;
    let call = json!({"chain": "solana-devnet", "to": SOME_EVM, "data": "0x"});
    let reply = api.post("/contracts/send", &call).await?;
    reply.assert_invalid("chain")?;
    Ok(())
}

async fn wallets_of_others_are_forbidden_and_unknown_ones_not_found(
    b: Backend,
) -> anyhow::Result<()> {
    let svc = Service::start_with(b, dead_base_node()).await?;
    let bob = svc.create_user("bob").await?;
    let bobs_wallet = evm_wallet(&svc, &bob).await?;
    let api = svc.rest(&svc.api_key);
    api.get(&format!("/wallets/{bobs_wallet}/balances?chain=base"))
        .await?
        .assert_error_on(403, "FORBIDDEN", "address")?;
    api.get(&format!(
        "/wallets/balances?chain=base&address={bobs_wallet}"
    ))
    .await?
    .assert_error_on(403, "FORBIDDEN", "address")?;
    let mut from_bob = send_body("base");
    from_bob["from"] = json!(bobs_wallet);
    api.post("/send", &from_bob)
        .await?
        .assert_error_on(403, "FORBIDDEN", "from")?;
    api.get(&format!("/wallets/{SOME_EVM}/balances?chain=base"))
        .await?
        .assert_error_on(404, "WALLET_NOT_FOUND", "address")?;
    let mut from_nobody = send_body("base");
    from_nobody["from"] = json!(SOME_EVM);
    api.post("/send", &from_nobody)
        .await?
        .assert_error_on(404, "WALLET_NOT_FOUND", "from")?;
    api.get(&format!("/tx/{}", uuid::Uuid::new_v4()))
        .await?
        .assert_error(404, "NOT_FOUND")?;
    // Case does not matter for EVM addresses: the lowercase form is the same wallet, so
    // the read gets past the ownership check to the (dead) node.
    let own = evm_wallet(&svc, &svc.api_key).await?;
    assert_node_failed(
        api.get(&format!(
            "/wallets/{}/balances?chain=base",
            own.to_lowercase()
        ))
        .await?,
    )?;
    Ok(())
}

async fn idempotency_keys_are_scoped_per_user(b: Backend) -> anyhow::Result<()> {
    // The dead node refuses both sends before signing, so each request records its key as
    // failed: a key shared across users would answer bob with alice's outcome.
    let svc = Service::start_with(b, dead_base_node()).await?;
    let bob = svc.create_user("bob").await?;
    let key = uuid::Uuid::new_v4().to_string();
    let send = |api_key: &str| {
        let api = svc.rest(api_key);
        let key = key.clone();
        async move {
            api.request(
                Method::POST,
                "/send",
                &[("Idempotency-Key", key.as_str())],
                Some(&send_body("base").to_string()),
            )
            .await
        }
    };
    assert_node_failed(send(&svc.api_key).await?)?;
    assert_node_failed(send(&bob).await?)?;
    send(&svc.api_key)
        .await?
        .assert_error(409, "IDEMPOTENT_REPLAY")?;
    send(&bob).await?.assert_error(409, "IDEMPOTENT_REPLAY")?;
    Ok(())
}

/// The idempotency table holds on every chain write, not only /send: a key whose write
/// failed answers IDEMPOTENT_REPLAY for the same body and IDEMPOTENT_BODY_MISMATCH for
/// another, on the path it was used on.
async fn every_write_keeps_the_idempotency_rows(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start_with(b, dead_base_node()).await?;
    let api = svc.rest(&svc.api_key);
    for (path, body, other) in [
        (
            "/token/approve",
            json!({"chain": "base", "token": SOME_EVM, "spender": SOME_EVM, "amount": "1"}),
            json!({"chain": "base", "token": SOME_EVM, "spender": SOME_EVM, "amount": "2"}),
        ),
        (
            "/contracts/send",
            json!({"chain": "base", "to": SOME_EVM, "data": "0x1234"}),
            json!({"chain": "base", "to": SOME_EVM, "data": "0x5678"}),
        ),
    ] {
        let key = uuid::Uuid::new_v4().to_string();
        let keyed = [("Idempotency-Key", key.as_str())];
        let call = async |body: &serde_json::Value| {
            api.request(Method::POST, path, &keyed, Some(&body.to_string()))
                .await
        };
        assert_node_failed(call(&body).await?)?;
        call(&body)
            .await?
            .assert_error(409, "IDEMPOTENT_REPLAY")
            .map_err(|e| e.context(path))?;
        call(&other)
            .await?
            .assert_error(409, "IDEMPOTENT_BODY_MISMATCH")
            .map_err(|e| e.context(path))?;
    }
    Ok(())
}

async fn undelegated_wallets_cannot_write(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start_with(b, dead_base_node()).await?;
    let api = svc.rest(&svc.api_key);
    let own = evm_wallet(&svc, &svc.api_key).await?;
    // Delegated, the send reaches the (dead) node.
    assert_node_failed(api.post("/send", &send_body("base")).await?)?;
    // Not linked to the signing provider, it cannot write, and its key stays unclaimed.
    let link = async |linked: bool| -> anyhow::Result<()> {
        use sea_orm::ConnectionTrait;
        svc.database()
            .await?
            .execute_unprepared(&format!(
                "UPDATE wallets SET linked = {linked} WHERE address = '{own}'"
            ))
            .await?;
        Ok(())
    };
    link(false).await?;
    let key = uuid::Uuid::new_v4().to_string();
    let unlinked = api
        .request(
            Method::POST,
            "/send",
            &[("Idempotency-Key", key.as_str())],
            Some(&send_body("base").to_string()),
        )
        .await?;
    unlinked.assert_error(403, "USER_NOT_LINKED")?;
    link(true).await?;
    assert_node_failed(
        api.request(
            Method::POST,
            "/send",
            &[("Idempotency-Key", key.as_str())],
            Some(&send_body("base").to_string()),
        )
        .await?,
    )?;
    let mut admin = AdminServiceClient::new(svc.channel().await?);
    let mut req = tonic::Request::new(pb::UpdateWalletRequest {
        address: own.clone(),
        make_default: None,
        automation_enabled: Some(false),
    });
    req.metadata_mut()
        .insert("x-admin-token", ADMIN_TOKEN.parse()?);
    let updated = admin
        .update_wallet(req)
        .await?
        .into_inner()
        .wallet
        .expect("wallet");
    assert!(!updated.automation_enabled);
    let reply = api.post("/send", &send_body("base")).await?;
    reply.assert_error(403, "WALLET_NOT_DELEGATED")?;
    // Reads still work on an undelegated wallet.
    assert_eq!(
        api.get("/wallets?automationOnly=true&chain=ethereum")
            .await?
            .body["wallets"],
        json!([])
    );
    // The admin service refuses a wrong token.
    let mut req = tonic::Request::new(pb::ListUsersRequest {});
    req.metadata_mut().insert("x-admin-token", "wrong".parse()?);
    let err = admin.list_users(req).await.expect_err("wrong token");
    assert_eq!(reason(&err).as_deref(), Some("UNAUTHORIZED"));
    Ok(())
}

async fn authentication_comes_before_input_checks(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let anon = svc.anonymous();
    anon.post("/send", &send_body("not-a-chain"))
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    anon.post("/send", &json!({"amount": "-1"}))
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    anon.get("/wallets/balances?chain=nope")
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    // Also what the REST edge cannot read: it asks the core to admit the caller first.
    let valid = send_body("base").to_string();
    for (headers, body) in [
        (&[][..], "{\"chain\": "),
        (&[][..], "[]"),
        (&[("content-type", "text/plain")][..], valid.as_str()),
    ] {
        anon.request(Method::POST, "/send", headers, Some(body))
            .await?
            .assert_error(401, "UNAUTHORIZED")?;
    }
    for path in [
        "/wallets?defaultOnly=maybe",
        "/wallets/balances?chain=a&chain=b",
    ] {
        anon.get(path).await?.assert_error(401, "UNAUTHORIZED")?;
    }
    // And it counts against the caller's budget like any other write: 15 a minute.
    let api = svc.rest(&svc.api_key);
    for _ in 0..15 {
        api.request(Method::POST, "/send", &[], Some("{\"chain\": "))
            .await?
            .assert_error(400, "INVALID_INPUT")?;
    }
    api.request(Method::POST, "/send", &[], Some("{\"chain\": "))
        .await?
        .assert_error(429, "RATE_LIMITED")?;
    Ok(())
}

async fn grpc_errors_carry_error_info_and_field_violations(b: Backend) -> anyhow::Result<()> {
    use tonic_types::StatusExt;
    let svc = Service::start(b).await?;
    let mut client = WalletOpsServiceClient::new(svc.channel().await?);
    let mut req = with_key(
        pb::SendRequest {
            chain: "base".to_owned(),
            to: "nope".to_owned(),
            asset: pb::Asset::Native.into(),
            amount: "-5".to_owned(),
            ..Default::default()
        },
        &svc.api_key,
    )?;
    req.metadata_mut()
        .insert("idempotency-key", uuid::Uuid::new_v4().to_string().parse()?);
    let err = client.send(req).await.expect_err("bad input");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(reason(&err).as_deref(), Some("INVALID_INPUT"));
    let details = err.get_error_details();
    let mut fields: Vec<String> = details
        .bad_request()
        .expect("BadRequest")
        .field_violations
        .iter()
        .map(|v| v.field.clone())
        .collect();
    fields.sort();
    assert_eq!(fields, ["amount", "to"]);
    let err = err_unknown_chain(&mut client, &svc.api_key).await?;
    assert_eq!(reason(&err).as_deref(), Some("CHAIN_UNKNOWN"));
    let err = client
        .get_transaction(with_key(
            pb::GetTransactionRequest {
                id: uuid::Uuid::new_v4().to_string(),
            },
            &svc.api_key,
        )?)
        .await
        .expect_err("unknown transaction");
    assert_eq!(err.code(), tonic::Code::NotFound);
    assert_eq!(reason(&err).as_deref(), Some("NOT_FOUND"));
    // Fields are named as the contract spells them (grpcurl's JSON), not as Rust does.
    let violated = |err: &tonic::Status| -> Vec<String> {
        err.get_error_details()
            .bad_request()
            .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
            .unwrap_or_default()
    };
    let err = err_unknown_chain(&mut client, &svc.api_key).await?;
    assert_eq!(violated(&err), ["chain"]);
    let mut admin = AdminServiceClient::new(svc.channel().await?);
    let err = admin
        .create_wallet(as_admin(pb::CreateWalletRequest {
            user: "admin".to_owned(),
            chain_type: "dogecoin".to_owned(),
            make_default: None,
        })?)
        .await
        .expect_err("unknown chain type");
    assert_eq!(violated(&err), ["chainType"]);
    let own = evm_wallet(&svc, &svc.api_key).await?;
    let err = admin
        .update_wallet(as_admin(pb::UpdateWalletRequest {
            address: own,
            make_default: Some(false),
            automation_enabled: None,
        })?)
        .await
        .expect_err("makeDefault false");
    assert_eq!(violated(&err), ["makeDefault"]);
    Ok(())
}

/// The error of a balance read on an unknown chain.
async fn err_unknown_chain(
    client: &mut WalletOpsServiceClient<tonic::transport::Channel>,
    key: &str,
) -> anyhow::Result<tonic::Status> {
    Ok(client
        .get_balances(with_key(
            pb::GetBalancesRequest {
                chain: "nope".to_owned(),
                ..Default::default()
            },
            key,
        )?)
        .await
        .expect_err("unknown chain"))
}

async fn slow_clients_are_cut_off(b: Backend) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let svc = Service::start_with(
        b,
        Options {
            env: vec![
                (
                    "WALLETOPS_HEADER_READ_TIMEOUT_SECS".to_owned(),
                    "1".to_owned(),
                ),
                ("WALLETOPS_REQUEST_TIMEOUT_SECS".to_owned(), "2".to_owned()),
            ],
            ..Options::default()
        },
    )
    .await?;
    let addr = svc.http.trim_start_matches("http://").to_owned();
    // Everything the server sends until it closes the connection, within `wait`.
    let answer = async |written: &[u8], wait| -> anyhow::Result<String> {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await?;
        tcp.write_all(written).await?;
        let mut read = Vec::new();
        tokio::time::timeout(wait, tcp.read_to_end(&mut read)).await??;
        Ok(String::from_utf8_lossy(&read).into_owned())
    };
    // Nothing sent, or headers never finished: the connection is closed, nothing answered;
    // well before hyper's own default of 30 s, so the configured time is the one that counts.
    for written in [
        &b""[..],
        b"GET /api/v1/wallets HTTP/1.1\r\nhost: walletops\r\n",
    ] {
        let cut = answer(written, std::time::Duration::from_secs(20)).await?;
        assert!(cut.is_empty(), "{cut}");
    }
    // A body that stops short of its length: an answer naming the body, and nothing sent.
    let head = format!(
        "POST /api/v1/send HTTP/1.1\r\nhost: walletops\r\nconnection: close\r\nx-api-key: {}\r\nidempotency-key: {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"chain\":",
        svc.api_key,
        uuid::Uuid::new_v4()
    );
    let short = answer(head.as_bytes(), WAIT_TIMEOUT).await?;
    assert!(
        short.starts_with("HTTP/1.1 400")
            && short.contains("INVALID_INPUT")
            && short.contains("body"),
        "{short}"
    );
    // A body trickled a byte at a time, each byte well within the timeout: the whole body's
    // deadline cuts it off long before its last byte.
    let mut tcp = tokio::net::TcpStream::connect(&addr).await?;
    tcp.write_all(head.as_bytes()).await?;
    let (mut read, mut write) = tcp.into_split();
    // The head carries 9 of the body's 100 bytes.
    let (body_left, sent) = (
        91,
        std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)),
    );
    let counted = sent.clone();
    tokio::spawn(async move {
        for _ in 0..body_left {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            if write.write_all(b" ").await.is_err() {
                return;
            }
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT_TIMEOUT, read.read_to_end(&mut answer)).await??;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let sent = sent.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        sent < body_left / 2,
        "answered after {sent} of {body_left} bytes"
    );
    assert!(svc.stored_statuses("send").await?.is_empty());
    Ok(())
}

on_both_backends!(
    malformed_requests_are_invalid_input_naming_the_field,
    contract_call_fields_are_named,
    writes_need_a_uuid_idempotency_key,
    unknown_chains_and_wrong_families,
    wallets_of_others_are_forbidden_and_unknown_ones_not_found,
    undelegated_wallets_cannot_write,
    idempotency_keys_are_scoped_per_user,
    every_write_keeps_the_idempotency_rows,
    authentication_comes_before_input_checks,
    grpc_errors_carry_error_info_and_field_violations,
    slow_clients_are_cut_off,
);
