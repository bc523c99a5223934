//! Landing under congestion, side by side in one run: Solana transfers on the busy test node
//! with WalletOps's fee estimate against the same transfers with no compute-unit price (time
//! from request to `CONFIRMED`, landed counts) and the compute units they asked over what
//! they used; EVM writes while the base fee climbs block after block past the cap (time to
//! mined, the share ended `FEE_CAPPED` against what the cap's arithmetic predicts, fees paid
//! over the cap); node requests per sweep with 5,000 open records stuck on a frozen head.

use std::{
    collections::HashMap,
    str::FromStr,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use futures::StreamExt as _;
use serde_json::{Value, json};
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_signature::Signature;
use solana_transaction_status_client_types::{
    UiTransactionEncoding, option_serializer::OptionSerializer,
};
use walletops_tests::{
    Backend, Rest, Service,
    anvil::{Anvil, quantity},
    poll_until_within,
    solana_node::{self as sol, SolanaNode},
};

use crate::{
    backlog::{Backlog, REQUESTS_PER_50_GOAL},
    report::{ms, rank, verdict},
};

const SOL: u64 = 1_000_000_000;
const GWEI: u128 = 1_000_000_000;
/// The busy node includes only transfers priced at least this, in micro-lamports per CU.
const THRESHOLD: u64 = 5_000;
/// Sends the busy node loses whatever their price, in percent.
const DROP_PERCENT: u64 = 30;
/// The chain's default resend interval: the estimated sends' p99 goal is three of them.
const RESEND_MS: f64 = 2_000.0;
/// Compute units asked over those used, at most.
const UNITS_GOAL: f64 = 1.15;
/// The EVM cap of the rising phase, in gwei, and the tip cap.
const CAP_GWEI: u128 = 20;
/// How long unpriced transfers are given to land.
const UNPRICED_WINDOW: Duration = Duration::from_secs(20);

/// What the congestion phases measured.
#[derive(Debug)]
pub(crate) struct Figures {
    solana: Solana,
    rising: Rising,
    frozen: Option<Backlog>,
}

#[derive(Debug)]
struct Solana {
    sends: usize,
    /// Request to `CONFIRMED` of each estimated transfer that landed, sorted.
    landed: Vec<Duration>,
    unpriced_landed: usize,
    /// Compute units asked and used, summed over the landed transfers.
    asked: u64,
    used: u64,
}

#[derive(Debug)]
struct Rising {
    blocks: usize,
    accepted: usize,
    refused: usize,
    /// Request to the block that included it, of each write mined, sorted.
    mined: Vec<Duration>,
    capped: usize,
    predicted_capped: usize,
    over_cap: usize,
    /// Records neither mined nor `FEE_CAPPED` at the end.
    other: usize,
}

impl Figures {
    fn solana_met(&self) -> bool {
        let s = &self.solana;
        s.landed.len() == s.sends
            && s.unpriced_landed == 0
            && !s.landed.is_empty()
            && ms(rank(&s.landed, 0.99)) <= 3.0 * RESEND_MS
    }

    fn units(&self) -> f64 {
        self.solana.asked as f64 / self.solana.used.max(1) as f64
    }

    fn rising_met(&self) -> bool {
        let r = &self.rising;
        r.capped == r.predicted_capped && r.over_cap == 0 && r.other == 0
    }

    /// Whether a transfer or write went wrong beyond a missed goal.
    pub(crate) fn failed(&self) -> bool {
        self.rising.over_cap > 0 || self.rising.other > 0
    }

    pub(crate) fn print(&self) {
        let s = &self.solana;
        let at = |p| {
            s.landed
                .get(..)
                .filter(|l| !l.is_empty())
                .map_or(0.0, |l| ms(rank(l, p)))
        };
        println!(
            "solana on a busy node (only {THRESHOLD} micro-lamports/CU and up included, {DROP_PERCENT} % of sends lost): with the fee estimate {}/{} landed, request to confirmed p50 {:.0} ms p99 {:.0} ms; without a compute-unit price {}/{} landed in {} s (goal: every estimated one lands, no unpriced one, p99 within 3 resend intervals ({:.0} ms): {})",
            s.landed.len(),
            s.sends,
            at(0.5),
            at(0.99),
            s.unpriced_landed,
            s.sends,
            UNPRICED_WINDOW.as_secs(),
            3.0 * RESEND_MS,
            verdict(self.solana_met())
        );
        println!(
            "solana compute units asked over used: {:.3} ({} over {}) (goal: at most {UNITS_GOAL}: {})",
            self.units(),
            s.asked,
            s.used,
            verdict(self.units() <= UNITS_GOAL)
        );
        let r = &self.rising;
        let mined = |p| {
            if r.mined.is_empty() {
                0.0
            } else {
                ms(rank(&r.mined, p))
            }
        };
        println!(
            "evm under a base fee rising 12.5 % a block over {} blocks past the {CAP_GWEI} gwei cap: {} writes accepted ({} refused at the door), mined p50 {:.0} ms p99 {:.0} ms, {} ended FEE_CAPPED against {} the cap's arithmetic predicts, {} paid over the cap, {} otherwise (goal: as predicted, 0 over the cap: {})",
            r.blocks,
            r.accepted,
            r.refused,
            mined(0.5),
            mined(0.99),
            r.capped,
            r.predicted_capped,
            r.over_cap,
            r.other,
            verdict(self.rising_met())
        );
        if let Some(frozen) = &self.frozen {
            println!(
                "frozen head: {} open records, stuck: {:.1} node requests a sweep, {:.2} per 50 records swept (goal: at most {:.0} a sweep: {})",
                frozen.open,
                frozen.requests,
                frozen.requests_per_50(),
                frozen.open as f64 / 50.0,
                verdict(frozen.requests <= frozen.open as f64 / 50.0 * REQUESTS_PER_50_GOAL)
            );
        }
    }

    pub(crate) fn json(&self) -> Value {
        let s = &self.solana;
        let r = &self.rising;
        let at = |l: &[Duration], p| {
            if l.is_empty() {
                None
            } else {
                Some(ms(rank(l, p)))
            }
        };
        json!({
            "solana": {
                "threshold_micro_lamports": THRESHOLD,
                "sends": s.sends,
                "landed": s.landed.len(),
                "p50_ms": at(&s.landed, 0.5),
                "p99_ms": at(&s.landed, 0.99),
                "unpriced_landed": s.unpriced_landed,
                "units_asked": s.asked,
                "units_used": s.used,
                "units_asked_over_used": self.units(),
                "met": self.solana_met(),
                "units_met": self.units() <= UNITS_GOAL,
            },
            "evm_rising_base_fee": {
                "blocks": r.blocks,
                "cap_gwei": CAP_GWEI,
                "accepted": r.accepted,
                "refused": r.refused,
                "mined_p50_ms": at(&r.mined, 0.5),
                "mined_p99_ms": at(&r.mined, 0.99),
                "fee_capped": r.capped,
                "fee_capped_predicted": r.predicted_capped,
                "over_cap": r.over_cap,
                "other": r.other,
                "met": self.rising_met(),
            },
            "frozen_head": self.frozen.as_ref().map(Backlog::json),
        })
    }
}

/// Every phase: `sends` Solana transfers of each kind, `blocks` rising EVM blocks, and the
/// frozen head at `frozen` open records (0: skipped).
pub(crate) async fn congestion(
    sends: usize,
    blocks: usize,
    frozen: u64,
    concurrency: usize,
) -> anyhow::Result<Figures> {
    println!(
        "  solana: {sends} transfers with the estimate and {sends} without a price on a busy node ..."
    );
    let solana = solana(sends).await?;
    println!("  evm: writes while the base fee climbs over {blocks} blocks ...");
    let rising = rising(blocks).await?;
    let frozen = if frozen > 0 {
        println!("  frozen head: {frozen} records, stuck ...");
        let window = Duration::from_secs(10);
        crate::backlog::monitor_at_scale(&[frozen], 100, concurrency, window, 2)
            .await?
            .pop()
    } else {
        None
    };
    Ok(Figures {
        solana,
        rising,
        frozen,
    })
}

/// A service on `node` with `chain_toml` for the chain, its Solana wallet funded.
async fn solana_service(node: &SolanaNode, chain_toml: &str) -> anyhow::Result<(Service, Rest)> {
    let mut options = node.service_options(chain_toml, "");
    options.env.push((
        "WALLETOPS_RATE_LIMITS__WRITES_PER_MINUTE".to_owned(),
        "1000000".to_owned(),
    ));
    let svc = Service::start_with(Backend::Sqlite, options).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = Pubkey::from_str(&api.default_wallet("solana").await?)?;
    node.airdrop(&wallet, 10 * SOL)?;
    Ok((svc, api))
}

/// Posts a transfer of `lamports` to a new account; its id and when it was asked.
async fn transfer(api: &Rest, lamports: u64) -> anyhow::Result<(String, Instant)> {
    let asked = Instant::now();
    let body = json!({"chain": "solana-devnet", "to": Pubkey::new_unique().to_string(),
                      "asset": "native", "amount": lamports.to_string()});
    let reply = api.post("/send", &body).await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    Ok((
        reply.body["id"].as_str().context("an id")?.to_owned(),
        asked,
    ))
}

async fn solana(sends: usize) -> anyhow::Result<Solana> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let rpc = RpcClient::new(node.url());
    let (_priced_svc, priced) = solana_service(&node, "").await?;
    let (_unpriced_svc, unpriced) =
        solana_service(&node, "max_priority_fee_micro_lamports = 0").await?;
    sol::set_congestion(&rpc, THRESHOLD, DROP_PERCENT).await?;
    let started = Instant::now();
    let timed = futures::stream::iter(0..sends)
        .map(|k| {
            let (priced, unpriced) = (&priced, &unpriced);
            async move {
                let lamports = SOL / 1000 + k as u64;
                let (id, asked) = transfer(priced, lamports).await?;
                let (other, _) = transfer(unpriced, lamports).await?;
                let done = priced.wait_for_status(&id, "CONFIRMED").await?;
                let took = asked.elapsed();
                let hash = done["hash"].as_str().context("a signature")?.to_owned();
                Ok::<_, anyhow::Error>((took, hash, other))
            }
        })
        .buffer_unordered(4)
        .collect::<Vec<_>>()
        .await;
    let mut landed = Vec::new();
    let (mut asked, mut used) = (0, 0);
    let mut others = Vec::new();
    for result in timed {
        let (took, hash, other) = result?;
        landed.push(took);
        let (limit, consumed) = units(&rpc, &hash).await?;
        asked += limit;
        used += consumed;
        others.push(other);
    }
    landed.sort_unstable();
    let rest = UNPRICED_WINDOW.saturating_sub(started.elapsed());
    tokio::time::sleep(rest).await;
    let mut unpriced_landed = 0;
    for id in &others {
        if unpriced.transaction(id).await?["status"] == "CONFIRMED" {
            unpriced_landed += 1;
        }
    }
    Ok(Solana {
        sends,
        landed,
        unpriced_landed,
        asked,
        used,
    })
}

/// The compute-unit limit the landed transaction `signature` asked for and the units it
/// consumed.
async fn units(rpc: &RpcClient, signature: &str) -> anyhow::Result<(u64, u64)> {
    let landed = rpc
        .get_transaction(
            &Signature::from_str(signature)?,
            UiTransactionEncoding::Base64,
        )
        .await?;
    let tx = landed.transaction.transaction.decode().context("base64")?;
    let keys = tx.message.static_account_keys();
    let limit = tx
        .message
        .instructions()
        .iter()
        .filter(|ix| keys[usize::from(ix.program_id_index)] == solana_compute_budget_interface::ID)
        .find_map(|ix| match ix.data.split_first() {
            Some((2, rest)) => rest.try_into().ok().map(u32::from_le_bytes),
            _ => None,
        })
        .context("no compute unit limit")?;
    let OptionSerializer::Some(consumed) = landed
        .transaction
        .meta
        .context("meta")?
        .compute_units_consumed
    else {
        anyhow::bail!("no compute units consumed");
    };
    Ok((u64::from(limit), consumed))
}

/// A quantity of the node's answer; unreadable: 0.
fn wei(v: &Value) -> u128 {
    quantity(v).unwrap_or(0)
}

/// One accepted EVM write of the rising phase.
struct Write {
    id: String,
    from: String,
    asked: Instant,
    /// The block after which it was sent (the next one could include it).
    after: usize,
    max_fee: u128,
}

async fn rising(blocks: usize) -> anyhow::Result<Rising> {
    let anvil =
        Anvil::start_with(&["--no-mining", "--block-base-fee-per-gas", "1000000000"]).await?;
    let options = anvil.service_options(
        &format!(
            "[monitor]\npoll_interval_ms = 200\nstuck_after_secs = 2\nmax_fee_per_gas_gwei = {CAP_GWEI}\nmax_priority_fee_per_gas_gwei = 1\n"
        ),
        &[("WALLETOPS_RATE_LIMITS__WRITES_PER_MINUTE", "1000000")],
    );
    let svc = Service::start_with(Backend::Sqlite, options).await?;
    let api = svc.rest(&svc.api_key);
    let wallets = crate::backlog::funded_wallets(&svc, &anvil, 8).await?;
    // The base fee of each block mined, and when it was.
    let mut bases = vec![GWEI];
    let mut mined_at = vec![Instant::now()];
    let mut writes = Vec::new();
    let mut refused = 0;
    // A block a second, the writes spread through it.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    for block in 0..blocks {
        tick.tick().await;
        for from in &wallets {
            let asked = Instant::now();
            let body = json!({"chain": "anvil", "from": from.to_string(),
                              "to": crate::sends::RECIPIENT, "asset": "native", "amount": "1"});
            let reply = api.post("/send", &body).await?;
            if reply.status == 503 {
                refused += 1;
                continue;
            }
            anyhow::ensure!(reply.status == 200, "{}", reply.text);
            let hash = reply.body["hash"].clone();
            let tx = anvil.rpc("eth_getTransactionByHash", json!([hash])).await?;
            writes.push(Write {
                id: reply.body["id"].as_str().context("an id")?.to_owned(),
                from: from.to_string(),
                asked,
                after: block,
                max_fee: wei(&tx["maxFeePerGas"]),
            });
            // Spread through the block's second, as writes arrive.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let next = bases[block] * 9 / 8;
        anvil
            .rpc(
                "anvil_setNextBlockBaseFeePerGas",
                json!([format!("{next:#x}")]),
            )
            .await?;
        anvil.mine().await?;
        bases.push(next);
        mined_at.push(Instant::now());
    }
    // Settled or capped: nothing more can be mined.
    let finals = poll_until_within(
        "every write mined or FEE_CAPPED",
        Duration::from_secs(120),
        || async {
            let mut states = Vec::new();
            for w in &writes {
                let tx = api.transaction(&w.id).await?;
                match tx["status"].as_str() {
                    Some("CONFIRMED" | "FEE_CAPPED" | "REVERTED" | "FAILED" | "DROPPED") => {
                        states.push(tx)
                    }
                    _ => return Ok(None),
                }
            }
            Ok(Some(states))
        },
    )
    .await?;
    // The cap's arithmetic: a write can be mined only by a block whose base fee is at most
    // what it offers (and a replacement offers no more than the cap); the base fee only
    // climbs, so one that misses the next block never lands, nor does any later write of
    // its wallet.
    let mut blocked: HashMap<&str, bool> = HashMap::new();
    let (mut mined, mut capped, mut predicted, mut over, mut other) = (Vec::new(), 0, 0, 0, 0);
    for (w, tx) in writes.iter().zip(&finals) {
        let stuck = blocked.entry(w.from.as_str()).or_default();
        *stuck |= w.max_fee < bases[w.after + 1];
        if *stuck {
            predicted += 1;
        }
        match tx["status"].as_str() {
            Some("CONFIRMED") => {
                let onchain = anvil
                    .rpc("eth_getTransactionByHash", json!([tx["hash"]]))
                    .await?;
                if wei(&onchain["maxFeePerGas"]) > CAP_GWEI * GWEI {
                    over += 1;
                }
                let block = usize::try_from(wei(&onchain["blockNumber"]))?;
                mined.push(
                    mined_at
                        .get(block)
                        .map_or(Duration::ZERO, |at| at.duration_since(w.asked)),
                );
            }
            Some("FEE_CAPPED") => capped += 1,
            _ => other += 1,
        }
    }
    mined.sort_unstable();
    Ok(Rising {
        blocks,
        accepted: writes.len(),
        refused,
        mined,
        capped,
        predicted_capped: predicted,
        over_cap: over,
        other,
    })
}
