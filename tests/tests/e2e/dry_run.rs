//! The dry run: `?dryRun=true` on a write, gRPC `SimulateWrite` and the MCP `simulate` tool
//! answer what the write would do (its simulated effects), the verdict of the key's limits
//! with every reason, and its fee; nothing is signed, claimed or stored, and the verdict is
//! the real write's.

use alloy::{
    primitives::{Address, Bytes, U256},
    sol,
    sol_types::SolCall,
};
use serde_json::{Value, json};
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{
    Backend,
    anvil::KeyedWallet,
    mcp::{call, connect},
    on_both_backends, with_key,
};

const STRANGER: &str = "0x5555555555555555555555555555555555555555";

sol! {
    function transfer(address to, uint256 amount) returns (bool);
}

fn transfer_of(token: Address, amount: u64) -> Value {
    let data = transferCall {
        to: STRANGER.parse().expect("an address"),
        amount: U256::from(amount),
    }
    .abi_encode();
    json!({"chain": "anvil", "to": token.to_string(), "data": Bytes::from(data).to_string()})
}

/// A dry run over the key's limit names it, with the effects the simulation read; the write
/// then meets the same refusal. One within the limit is allowed, shows what it reserves,
/// and is made as shown. Neither dry run signs or claims anything.
async fn a_dry_run_answers_with_the_real_writes_verdict(b: Backend) -> anyhow::Result<()> {
    let keyed = KeyedWallet::start(b).await?;
    let token = keyed.token().await?;
    let KeyedWallet {
        anvil,
        svc,
        wallet,
        key,
        prefix,
    } = keyed;
    let lower = token.to_string().to_lowercase();
    svc.limit_key(
        &prefix,
        &[
            "--chain",
            "anvil",
            "--asset",
            &lower,
            "--max-per-tx",
            "1000",
            "--daily",
            "1000",
            "--approve-above",
            "700",
        ],
    )
    .await?;
    let api = svc.rest(&key);

    let over = transfer_of(token, 5_000);
    let dry = api.post("/contracts/send?dryRun=true", &over).await?;
    assert_eq!(dry.status, 200, "{}", dry.text);
    let body = &dry.body;
    assert_eq!(
        body["effects"]["outflows"],
        json!([{"asset": lower, "counterparty": STRANGER, "amount": "5000"}]),
        "{body}"
    );
    assert_eq!(body["verdict"]["allowed"], false, "{body}");
    let reasons = body["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("at most 1000") && reasons.contains("24-hour budget"),
        "{reasons}"
    );
    assert!(
        body["fee"]["maxFee"].as_str().is_some_and(|f| f != "0"),
        "{body}"
    );
    let real = api.post("/contracts/send", &over).await?;
    real.assert_error(403, "FORBIDDEN")?;
    for reason in body["verdict"]["reasons"].as_array().into_iter().flatten() {
        let reason = reason.as_str().unwrap_or_default();
        assert!(real.text.contains(reason), "{reason} / {}", real.text);
    }

    // Over the approval threshold: it would wait.
    let held = api
        .post("/contracts/send?dryRun=true", &transfer_of(token, 800))
        .await?;
    assert_eq!(held.body["verdict"]["needsApproval"], true, "{}", held.text);
    assert!(
        held.text.contains("approval threshold of 700"),
        "{}",
        held.text
    );

    let within = transfer_of(token, 600);
    let dry = api.post("/contracts/send?dryRun=true", &within).await?;
    assert_eq!(dry.body["verdict"]["allowed"], true, "{}", dry.text);
    // The token moved, and the most the write may pay in fees, against the key's fee
    // budget (the chain's default).
    assert_eq!(
        dry.body["verdict"]["reservations"],
        json!([
            {"chain": "anvil", "asset": "fees", "amount": dry.body["fee"]["maxFee"]},
            {"chain": "anvil", "asset": lower, "amount": "600"}
        ]),
        "{}",
        dry.text
    );
    assert_eq!(anvil.nonce(wallet).await?, 0, "no dry run signed anything");
    let shown = svc.cli(&["keys", "limits", &prefix]).await?;
    assert!(shown.stdout.contains("spent 0"), "{}", shown.stdout);
    let made = api.post("/contracts/send", &within).await?;
    assert_eq!(made.status, 200, "{}", made.text);

    // gRPC and MCP give the same verdict on a send of the coin, which this key has no
    // limit on.
    let send = pb::SendRequest {
        chain: "anvil".to_owned(),
        to: STRANGER.to_owned(),
        asset: pb::Asset::Native.into(),
        amount: "1".to_owned(),
        ..Default::default()
    };
    let mut grpc = WalletOpsServiceClient::new(svc.channel().await?);
    let answer = grpc
        .simulate_write(with_key(
            pb::SimulateWriteRequest {
                write: Some(pb::simulate_write_request::Write::Send(send)),
            },
            &key,
        )?)
        .await?
        .into_inner();
    let verdict = answer.verdict.unwrap_or_default();
    assert!(!verdict.allowed);
    assert!(
        verdict
            .reasons
            .iter()
            .any(|r| r.contains("native") && r.contains("has none")),
        "{verdict:?}"
    );
    let agent = connect(&svc, &key, true).await?;
    let (failed, body) = call(
        &agent,
        "simulate",
        json!({"send": {"chain": "anvil", "to": STRANGER, "asset": "native", "amount": "1"}}),
    )
    .await?;
    assert!(!failed, "{body}");
    assert_eq!(body["verdict"]["allowed"], false, "{body}");
    assert_eq!(body["effects"]["outflows"][0]["asset"], "native", "{body}");

    // A read-only key may simulate; the verdict names the scope the write needs.
    let reader = svc
        .cli(&["keys", "create", "--name", "reader", "--scopes", "read"])
        .await?
        .api_key()
        .ok_or_else(|| anyhow::anyhow!("no key"))?;
    let dry = svc
        .rest(&reader)
        .post("/contracts/send?dryRun=true", &within)
        .await?;
    assert_eq!(dry.status, 200, "{}", dry.text);
    assert_eq!(dry.body["verdict"]["allowed"], false, "{}", dry.text);
    assert!(
        dry.body["verdict"]["reasons"].to_string().contains("write"),
        "{}",
        dry.text
    );
    // A swap's dry run asks the aggregator, as a quote does: not with a read-only key.
    let swap = json!({"chain": "anvil", "fromToken": token.to_string(),
        "toToken": "native", "amount": "100"});
    let dry = svc
        .rest(&reader)
        .post("/trade/swap?dryRun=true", &swap)
        .await?;
    dry.assert_error(403, "FORBIDDEN")?;
    assert!(dry.text.contains("`trade`"), "{}", dry.text);
    Ok(())
}

on_both_backends!(a_dry_run_answers_with_the_real_writes_verdict);
