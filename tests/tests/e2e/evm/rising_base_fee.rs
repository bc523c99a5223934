//! A base fee that climbs past what writes offered, then past the cap: every write lands or
//! ends `FEE_CAPPED` exactly as the caps say, none offers more than the cap, and each
//! replacement raises both fees by at least the 10 % nodes require.

use serde_json::{Value, json};
use walletops_tests::{Backend, anvil::quantity, on_both_backends, poll_until};

use super::{Evm, RECIPIENT};

const GWEI: u128 = 1_000_000_000;
/// `monitor.max_fee_per_gas_gwei` and `monitor.max_priority_fee_per_gas_gwei` here.
const CAP: u128 = 20 * GWEI;
const TIP_CAP: u128 = GWEI;
/// Writes of each phase.
const WRITES: usize = 4;

/// The fees (max fee, tip) of the transaction `hash` as the node has it.
async fn fees_of(e: &Evm, hash: &str) -> anyhow::Result<(u128, u128)> {
    let tx = e
        .anvil
        .rpc("eth_getTransactionByHash", json!([hash]))
        .await?;
    Ok((
        quantity(&tx["maxFeePerGas"])?,
        quantity(&tx["maxPriorityFeePerGas"])?,
    ))
}

/// Mines one block whose base fee is `base` wei.
async fn mine_at(e: &Evm, base: u128) -> anyhow::Result<()> {
    e.anvil
        .rpc(
            "anvil_setNextBlockBaseFeePerGas",
            json!([format!("{base:#x}")]),
        )
        .await?;
    e.anvil.mine().await
}

/// One write: its record's id, its first hash and the fees that version offered.
type Sent = (String, String, (u128, u128));

/// `WRITES` sends.
async fn sends(e: &Evm) -> anyhow::Result<Vec<Sent>> {
    let mut sent = Vec::new();
    for _ in 0..WRITES {
        // A fee reading is reused for a second: right after the base fee jumped, a write
        // priced by the one before is refused, and nothing of it kept.
        let reply = poll_until("a send priced at the current fees", || async {
            let reply = e.post_native(RECIPIENT, "1").await?;
            Ok((reply.status == 200).then_some(reply))
        })
        .await?;
        let id = reply.body["id"].as_str().unwrap_or_default().to_owned();
        let hash = reply.body["hash"].as_str().unwrap_or_default().to_owned();
        let fees = fees_of(e, &hash).await?;
        assert!(fees.0 <= CAP && fees.1 <= TIP_CAP, "{fees:?}");
        sent.push((id, hash, fees));
    }
    Ok(sent)
}

/// The max fees a record's history says its replacements went from and to.
fn steps(tx: &Value) -> Vec<(u128, u128)> {
    let history = tx["statusHistory"].as_array().cloned().unwrap_or_default();
    history
        .iter()
        .filter_map(|change| {
            let note = change["note"].as_str()?;
            let rest = note.strip_prefix("replaced: maxFeePerGas ")?;
            let (from, to) = rest.trim_end_matches(" wei").split_once(" -> ")?;
            Some((from.parse().ok()?, to.parse().ok()?))
        })
        .collect()
}

async fn writes_under_a_rising_base_fee_land_or_stop_at_the_cap(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\nmax_fee_per_gas_gwei = 20\nmax_priority_fee_per_gas_gwei = 1\n",
        &["--no-mining", "--block-base-fee-per-gas", "1000000000"],
    )
    .await?;
    // Phase one: the base fee climbs past what the writes offered (about 3 gwei), under the
    // cap. Each is replaced, raised by at least 10 % a step, until it fits the next block.
    let first = sends(&e).await?;
    mine_at(&e, 5 * GWEI).await?;
    let next = 6 * GWEI;
    poll_until(
        "every write raised over the next block's base fee",
        || async {
            for (id, _, _) in &first {
                let tx = e.tx(id).await?;
                if fees_of(&e, tx["hash"].as_str().unwrap_or_default())
                    .await?
                    .0
                    < next
                {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        },
    )
    .await?;
    mine_at(&e, next).await?;
    for (id, _, (first_max, first_tip)) in &first {
        let tx = e.wait_for(id, "CONFIRMED").await?;
        let (max, tip) = fees_of(&e, tx["hash"].as_str().unwrap_or_default()).await?;
        assert!(
            max <= CAP && tip <= TIP_CAP,
            "paid under the caps: {max} {tip}"
        );
        let steps = steps(&tx);
        assert!(!steps.is_empty(), "replaced: {tx}");
        assert_eq!(steps[0].0, *first_max, "{tx}");
        for (from, to) in &steps {
            assert!(
                *to >= (from * 110).div_ceil(100),
                "a 10 % step: {from} -> {to}"
            );
            assert!(*to <= CAP, "{to}");
        }
        assert!(
            tip >= (first_tip * 110).div_ceil(100).min(TIP_CAP) && tip > *first_tip,
            "the tip raised too: {first_tip} -> {tip}"
        );
    }
    // Phase two: the base fee passes the cap. Raised while a raise fits (a reading from
    // before the jump), then no replacement does: each write ends FEE_CAPPED at a fee under
    // the cap (the node drops it from its pool meanwhile), and a new one is refused; once the
    // base fee falls, they land.
    let second = sends(&e).await?;
    mine_at(&e, 25 * GWEI).await?;
    let mut capped = Vec::new();
    for (id, _, (first_max, _)) in &second {
        let tx = e.wait_for(id, "FEE_CAPPED").await?;
        let steps = steps(&tx);
        for (from, to) in &steps {
            assert!(
                *to >= (from * 110).div_ceil(100) && *to <= CAP,
                "{from} -> {to}"
            );
        }
        let offered = steps.last().map_or(*first_max, |(_, to)| *to);
        capped.push((id, offered));
    }
    // Refused at the door once the service reads the base fee over the cap (a reading of
    // the second before still signs, and the node refuses that: nothing kept either way).
    let refused = poll_until("a write refused for the cap", || async {
        let reply = e.post_native(RECIPIENT, "1").await?;
        Ok((reply.status == 503).then_some(reply))
    })
    .await?;
    assert!(refused.text.contains("20 gwei"), "{}", refused.text);
    // The base fee falls under what they offer: sent again, or replaced now that a raise
    // fits, they land, every step still a 10 % raise under the cap.
    let lowest = capped.iter().map(|(_, max)| *max).min().unwrap_or(0);
    mine_at(&e, lowest).await?;
    poll_until("every capped write back in the pool", || async {
        let pool = e.anvil.pool_hashes().await?;
        for (id, _) in &capped {
            let tx = e.tx(id).await?;
            if !pool.iter().any(|h| tx["hash"] == h.as_str()) {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await?;
    e.anvil.mine().await?;
    for (id, _) in &capped {
        let tx = e.wait_for(id, "CONFIRMED").await?;
        for (from, to) in steps(&tx) {
            assert!(
                to >= (from * 110).div_ceil(100) && to <= CAP,
                "{from} -> {to}"
            );
        }
        let (max, tip) = fees_of(&e, tx["hash"].as_str().unwrap_or_default()).await?;
        assert!(max <= CAP && tip <= TIP_CAP, "{max} {tip}");
    }
    e.assert_paid(2 * WRITES as u64, 2 * WRITES as u64).await?;
    Ok(())
}

on_both_backends!(writes_under_a_rising_base_fee_land_or_stop_at_the_cap);
