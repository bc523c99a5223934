//! A record keeps both what its simulation showed it does to the wallet and what the chain
//! says it did once final; when the two differ (here, a swap simulated on the pending block
//! and overtaken in its block by a stranger's swap paying a higher tip, so that it buys less
//! than its simulation said) the record says how, and the difference is counted.

use alloy::{
    primitives::{U256, utils::parse_ether},
    sol,
    sol_types::SolCall,
};
use serde_json::{Value, json};
use walletops_tests::{Backend, anvil::DEV_ACCOUNT, metrics, on_both_backends};

sol! {
    function swapNativeForToken(uint256 minOut) returns (uint256 amountOut);
}

use super::desk::{API_KEY, Desk};

fn swap(desk: &Desk) -> Value {
    json!({
        "chain": "anvil", "fromToken": "NATIVE", "toToken": desk.token.to_string(),
        "amount": parse_ether("1").expect("1 ETH").to_string(), "slippage": 10,
    })
}

/// The outflow or inflow of `asset` in `effects`, `"none"` when there is none.
fn amount(effects: &Value, side: &str, asset: &str) -> String {
    effects[side]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["asset"] == asset)
        .and_then(|f| f["amount"].as_str())
        .unwrap_or("none")
        .to_owned()
}

async fn a_record_keeps_its_simulated_and_final_effects(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(
        b,
        &[("WALLETOPS_METRICS_ADDR", "127.0.0.1:0")],
        Some(API_KEY),
    )
    .await?;
    let token = format!("{:#x}", desk.token);
    let expected = desk.pool_out(true, parse_ether("1")?).await?;
    let api = desk.api();
    let reply = api.post("/trade/swap", &swap(&desk)).await?;
    let id = reply.body["id"].as_str().unwrap_or_default().to_owned();
    let record = api.wait_for_status(&id, "CONFIRMED").await?;
    let simulated = &record["simulatedEffects"];
    assert_eq!(
        amount(simulated, "outflows", "native"),
        parse_ether("1")?.to_string(),
        "{record}"
    );
    assert_eq!(
        amount(simulated, "inflows", &token),
        expected.to_string(),
        "{record}"
    );
    // Once final the record also shows what the chain says it did: the same here. The
    // monitor writes it in the change that settles the record.
    assert_eq!(&record["finalEffects"], simulated, "{record}");
    assert!(record["effectsDifference"].is_null(), "{record}");

    // Two swaps of the service in one block: the second is simulated on the pending block,
    // after the first, and buys what its simulation said.
    desk.anvil.set_automine(false).await?;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let reply = api.post("/trade/swap", &swap(&desk)).await?;
        anyhow::ensure!(reply.status == 200, "{reply:?}");
        ids.push(reply.body["id"].as_str().unwrap_or_default().to_owned());
    }
    desk.anvil.mine().await?;
    // A third, overtaken in its block by a stranger's swap on the same pool paying a higher
    // tip: it buys less than its simulation said.
    let reply = api.post("/trade/swap", &swap(&desk)).await?;
    anyhow::ensure!(reply.status == 200, "{reply:?}");
    ids.push(reply.body["id"].as_str().unwrap_or_default().to_owned());
    let gwei = |n: u64| format!("{:#x}", U256::from(n) * U256::from(1_000_000_000u64));
    let front = swapNativeForTokenCall { minOut: U256::ZERO }.abi_encode();
    desk.anvil
        .rpc(
            "eth_sendTransaction",
            json!([{"from": DEV_ACCOUNT, "to": desk.pool, "value": format!("{:#x}", parse_ether("5")?),
                "input": alloy::primitives::Bytes::from(front), "gas": "0x30000",
                "maxFeePerGas": gwei(1_000), "maxPriorityFeePerGas": gwei(500)}]),
        )
        .await?;
    desk.anvil.mine().await?;
    desk.anvil.set_automine(true).await?;
    let mut differences = Vec::new();
    for id in &ids {
        let record = api.wait_for_status(id, "CONFIRMED").await?;
        let simulated = amount(&record["simulatedEffects"], "inflows", &token);
        let landed = amount(&record["finalEffects"], "inflows", &token);
        if simulated != landed {
            let said = record["effectsDifference"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(
                said.contains(&format!(
                    "{token} in: simulated {simulated}, on chain {landed}"
                )),
                "{record}"
            );
            assert!(
                landed.parse::<U256>()? < simulated.parse::<U256>()?,
                "{record}"
            );
            differences.push((id.clone(), said));
        } else {
            assert!(record["effectsDifference"].is_null(), "{record}");
        }
    }
    assert_eq!(
        differences.iter().map(|(id, _)| id).collect::<Vec<_>>(),
        [&ids[2]],
        "only the overtaken swap: {differences:?}"
    );
    let url = desk.svc.metrics_url.clone().unwrap_or_default();
    let text = metrics::scrape_text(&url).await?;
    let counted = metrics::sum(
        &text,
        "walletops_effects_differed_total",
        Some(r#"kind="swap""#),
    );
    assert_eq!(counted, 1.0, "{text}");
    Ok(())
}

on_both_backends!(a_record_keeps_its_simulated_and_final_effects);
