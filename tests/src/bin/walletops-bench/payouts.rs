//! Payouts: how fast one payout of N items pays its recipients against N single `POST /send`
//! calls to other recipients, in the same run, on one service over a fresh anvil; and
//! whether every recipient was paid exactly once (balances read on the node).
//!
//! Both are timed until the wallet's last transaction is mined (anvil mines each at once):
//! the payout from its `POST /payouts`, the singles from their first call, sent 8 at a time
//! (as many as a payout makes at once) by a client that waits for each answer.

use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256};
use futures::StreamExt as _;
use serde_json::{Value, json};
use walletops_tests::{Backend, Service, anvil::Anvil, poll_until_within};

use crate::report::verdict;

/// Singles in flight at once.
const AT_ONCE: usize = 8;

/// What the payout runs measured.
#[derive(Debug, Clone)]
pub(crate) struct Figures {
    /// Items of the payout, and of the singles.
    pub(crate) items: u64,
    /// How long the payout took to pay every item.
    pub(crate) payout: Duration,
    /// How long the single sends took.
    pub(crate) singles: Duration,
    /// Recipients paid twice, or not at all, or the wrong amount, in both runs.
    pub(crate) wrong: usize,
}

impl Figures {
    fn rate(&self, took: Duration) -> f64 {
        self.items as f64 / took.as_secs_f64()
    }

    /// Prints the figures and their goal line.
    pub(crate) fn print(&self) {
        let (payout, singles) = (self.rate(self.payout), self.rate(self.singles));
        println!(
            "payout of {} items {payout:.1} items/s against {} single POST /send {singles:.1}/s ({AT_ONCE} at a time), recipients paid wrongly {} (goal: at least as fast, 0 wrong: {})",
            self.items,
            self.items,
            self.wrong,
            verdict(payout >= singles && self.wrong == 0)
        );
    }

    /// The figures, for `--json`.
    pub(crate) fn json(&self) -> Value {
        json!({
            "items": self.items,
            "payout_seconds": self.payout.as_secs_f64(),
            "payout_per_second": self.rate(self.payout),
            "singles_seconds": self.singles.as_secs_f64(),
            "singles_per_second": self.rate(self.singles),
            "singles_at_once": AT_ONCE,
            "wrong": self.wrong,
        })
    }
}

/// The `n`-th recipient of this run (`0x7a…`).
fn recipient(n: u64) -> Address {
    Address::left_padding_from(&(0x7a00_0000_0000u64 + n).to_be_bytes())
}

/// What recipient `n` is paid.
fn amount(n: u64) -> u64 {
    1_000 + n
}

/// A payout of `items` items, then `items` single sends, from one funded wallet.
pub(crate) async fn payouts(items: u64) -> anyhow::Result<Figures> {
    let anvil = Anvil::start().await?;
    // The singles are a thousand writes in well under a minute.
    let options = anvil.service_options(
        "",
        &[("WALLETOPS_RATE_LIMITS__WRITES_PER_MINUTE", "100000")],
    );
    let svc = Service::start_with(Backend::Sqlite, options).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil
        .fund_default_wallet(&api, U256::from(10u64).pow(U256::from(18u64)))
        .await?;
    let mined = |count: u64| {
        let anvil = &anvil;
        async move {
            poll_until_within(
                "the wallet's transactions to be mined",
                Duration::from_secs(600),
                || async { Ok((anvil.nonce(wallet).await? >= count).then_some(())) },
            )
            .await
        }
    };
    let body: Vec<Value> = (0..items)
        .map(|n| json!({"to": recipient(n).to_string(), "asset": "native", "amount": amount(n).to_string()}))
        .collect();
    let started = Instant::now();
    let made = api
        .post("/payouts", &json!({"chain": "anvil", "items": body}))
        .await?;
    anyhow::ensure!(made.status == 202, "POST /payouts: {}", made.text);
    mined(items).await?;
    let payout = started.elapsed();
    let started = Instant::now();
    let replies: Vec<anyhow::Result<walletops_tests::Reply>> =
        futures::stream::iter(items..2 * items)
            .map(|n| {
                let api = &api;
                async move {
                    api.post(
                        "/send",
                        &json!({"chain": "anvil", "to": recipient(n).to_string(), "asset": "native", "amount": amount(n).to_string()}),
                    )
                    .await
                }
            })
            .buffer_unordered(AT_ONCE)
            .collect()
            .await;
    for reply in replies {
        let reply = reply?;
        anyhow::ensure!(reply.status == 200, "POST /send: {}", reply.text);
    }
    mined(2 * items).await?;
    let singles = started.elapsed();
    let mut wrong = usize::try_from(anvil.nonce(wallet).await?.abs_diff(2 * items))?;
    for n in 0..2 * items {
        if anvil.balance(recipient(n)).await? != U256::from(amount(n)) {
            wrong += 1;
        }
    }
    Ok(Figures {
        items,
        payout,
        singles,
        wrong,
    })
}
