//! Input checks: every malformed request is INVALID_INPUT naming the field at fault, chain
//! writes need a UUID idempotency key, and unknown chains and wrong families are named.

use reqwest::Method;
use serde_json::json;
use walletops_tests::{Backend, Options, Service, on_one_backend};

use super::{SOME_EVM, dead_base_node, send_body};

async fn malformed_requests_are_invalid_input_naming_the_field(b: Backend) -> anyhow::Result<()> {
    // Every case counts against the write budget, as any request does.
    let svc = Service::start_with(
        b,
        Options::with_config("[rate_limits]\nwrites_per_minute = 1000\n"),
    )
    .await?;
    let api = svc.rest(&svc.api_key);
    let idem = uuid::Uuid::new_v4().to_string();
    // A send body as a client types it, its values exactly as given.
    let typed = |chain: &str, to: &str, asset: &str, amount: &str| {
        format!(r#"{{"chain":"{chain}","to":"{to}","asset":"{asset}","amount":"{amount}"}}"#)
    };
    let on_base = |to: &str, asset: &str, amount: &str| typed("base", to, asset, amount);
    let on_solana = |amount: &str| {
        typed(
            "solana",
            "So11111111111111111111111111111111111111112",
            "native",
            amount,
        )
    };
    let cases: Vec<(&str, String, &str)> = vec![
        ("not json", "{\"chain\": ".to_owned(), "body"),
        ("empty body", String::new(), "body"),
        (
            "wrong type",
            r#"{"chain":"base","to":"0x1111111111111111111111111111111111111111","asset":"native","amount":1000}"#
                .to_owned(),
            "amount",
        ),
        (
            "unknown field",
            r#"{"chain":"base","ammount":"1"}"#.to_owned(),
            "ammount",
        ),
        ("bad address", on_base("0x123", "native", "1"), "to"),
        (
            "the zero address",
            on_base("0x0000000000000000000000000000000000000000", "native", "1"),
            "to",
        ),
        (
            "a mixed-case address with a wrong checksum",
            on_base("0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96046", "native", "1"),
            "to",
        ),
        ("negative amount", on_base(SOME_EVM, "native", "-1"), "amount"),
        (
            "amount past uint256",
            on_base(
                SOME_EVM,
                "native",
                "0x10000000000000000000000000000000000000000000000000000000000000000",
            ),
            "amount",
        ),
        (
            "address with a blank",
            on_base(&format!(" {SOME_EVM}"), "native", "1"),
            "to",
        ),
        ("amount with a blank", on_base(SOME_EVM, "native", "1000 "), "amount"),
        ("amount with 0X", on_base(SOME_EVM, "native", "0X3e8"), "amount"),
        ("bad asset", on_base(SOME_EVM, "gold", "1"), "asset"),
        ("erc20 without token", on_base(SOME_EVM, "erc20", "1"), "token"),
        (
            "trailing data",
            format!("{} x", on_base(SOME_EVM, "native", "1")),
            "body",
        ),
        (
            "two objects",
            format!("{}{{}}", on_base(SOME_EVM, "native", "1")),
            "body",
        ),
        (
            "an array for the object",
            r#"["base",null,"0x1111111111111111111111111111111111111111","native",null,"1"]"#
                .to_owned(),
            "body",
        ),
        ("solana amount in hex", on_solana("0x10"), "amount"),
        ("spl amount past u64", on_solana("18446744073709551616"), "amount"),
    ];
    for (what, body, field) in cases {
        let reply = api.post_with_key("/send", &idem, &body).await?;
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
                &[("Idempotency-Key", &idem), ("content-type", content_type)],
                Some(&send_body("base").to_string()),
            )
            .await?;
        reply.assert_invalid("Content-Type")?;
    }
    // Every bad field is named at once.
    let reply = api
        .post_with_key("/send", &idem, &on_base("nope", "native", "x"))
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

on_one_backend!(
    malformed_requests_are_invalid_input_naming_the_field,
    contract_call_fields_are_named,
    writes_need_a_uuid_idempotency_key,
    unknown_chains_and_wrong_families,
);
