//! The throughput runs: native transfers through WalletOps (over REST or straight to the
//! gRPC core) and pre-signed raw transfers to the node, and what the chain shows of them.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use alloy::{
    consensus::{SignableTransaction, Transaction as _, TxEip1559, TxEnvelope},
    eips::eip2718::Encodable2718,
    primitives::{Address, B256, TxKind, U256},
    providers::Provider,
    signers::{SignerSync, local::PrivateKeySigner},
};
use anyhow::{Context, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};
use tonic::transport::Channel;
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{Rest, Service, anvil::Anvil, poll_until, write_request};

use crate::{
    ETH,
    cpu::Probe,
    drive::{all_ok, drive},
    report::{ChainView, SendRun},
};

/// Where every benchmark transfer goes.
pub(crate) const RECIPIENT: Address =
    alloy::primitives::address!("1111111111111111111111111111111111111111");

/// Wei moved by each benchmark transfer.
pub(crate) const AMOUNT_WEI: u64 = 1000;

/// Gas of a plain transfer to an account without code.
const TRANSFER_GAS: u64 = 21_000;

/// Waits until the monitor has taken every send of `svc` to a final state.
pub(crate) async fn all_settled(svc: &Service) -> anyhow::Result<()> {
    poll_until("the monitor to settle every send", || async {
        let open = svc
            .stored_statuses("send")
            .await?
            .into_iter()
            .filter(|s| s == "submitted" || s == "fee_capped")
            .count();
        Ok((open == 0).then_some(()))
    })
    .await
}

/// One native transfer of `AMOUNT_WEI` to `RECIPIENT` through WalletOps, under a fresh
/// Idempotency-Key; returns its hash.
#[derive(Debug, Clone)]
pub(crate) enum Sender {
    /// `POST /api/v1/send` through the REST edge.
    Rest(Rest),
    /// `WalletOpsService.Send` straight to the gRPC core.
    Grpc {
        client: WalletOpsServiceClient<Channel>,
        key: String,
    },
}

impl Sender {
    pub(crate) async fn send(&self) -> anyhow::Result<(String, B256)> {
        let (id, hash) = match self {
            Self::Rest(api) => {
                let body = json!({"chain": "anvil", "to": RECIPIENT, "asset": "native",
                                  "amount": AMOUNT_WEI.to_string()});
                // `Rest::post` gives every request a fresh Idempotency-Key.
                let reply = api.post("/send", &body).await?;
                ensure!(reply.status == 200, "{} {}", reply.status, reply.text);
                let field = |name: &str| {
                    reply.body[name]
                        .as_str()
                        .map(str::to_owned)
                        .with_context(|| format!("no {name} in {}", reply.text))
                };
                (field("id")?, field("hash")?)
            }
            Self::Grpc { client, key } => {
                let req = write_request(
                    pb::SendRequest {
                        chain: "anvil".to_owned(),
                        from: None,
                        to: RECIPIENT.to_string(),
                        asset: pb::Asset::Native.into(),
                        token: None,
                        amount: AMOUNT_WEI.to_string(),
                    },
                    key,
                    &uuid::Uuid::new_v4().to_string(),
                )?;
                let reply = client.clone().send(req).await?.into_inner();
                let submission = reply.submission.context("no submission")?;
                (
                    submission.id,
                    submission.hash.context("no hash in the submission")?,
                )
            }
        };
        Ok((id, hash.parse()?))
    }
}

/// A throughput run: `n` native sends by `sender` from `wallet`, whose nonce is `first` when
/// it starts; then the chain's view of them.
pub(crate) async fn walletops_sends(
    anvil: &Anvil,
    api: &Rest,
    sender: Sender,
    wallet: Address,
    (first, n): (u64, u64),
    concurrency: usize,
    probe: Probe,
) -> anyhow::Result<SendRun> {
    ensure!(
        anvil.nonce(wallet).await? == first,
        "the wallet's nonce is not {first} before the run"
    );
    let run = drive(n, concurrency, move |_| {
        let sender = sender.clone();
        async move { sender.send().await }
    });
    let (run, cpu) = probe.measure(run).await;
    let (elapsed, results) = run?;
    let sent = all_ok(results, "sends")?;
    let end = first + n;
    anvil
        .wait_for_nonce(&format!("the wallet's nonce to reach {end}"), wallet, end)
        .await?;
    let chain = chain_view(anvil, api, wallet, sent, first..end, concurrency).await?;
    Ok(SendRun {
        sends: n,
        elapsed,
        cpu,
        chain,
    })
}

/// What the chain shows of `sent` (each accepted write's record id and returned hash), the
/// writes of `wallet` that took nonces `range`, each hash looked up once, `concurrency` at a
/// time.
pub(crate) async fn chain_view(
    anvil: &Anvil,
    api: &Rest,
    wallet: Address,
    sent: Vec<(String, B256)>,
    range: std::ops::Range<u64>,
    concurrency: usize,
) -> anyhow::Result<ChainView> {
    let on_chain = anvil.nonce(wallet).await?;
    let hashes: Vec<B256> = sent.iter().map(|(_, hash)| *hash).collect();
    // Look every returned hash up once: the mined transaction's nonce, if it is the wallet's.
    let distinct: BTreeSet<B256> = hashes.iter().copied().collect();
    let mined = |hash: B256| async move {
        let tx = anvil.provider().get_transaction_by_hash(hash).await?;
        Ok::<_, anyhow::Error>(tx.and_then(|tx| {
            (tx.block_number.is_some() && tx.inner.signer() == wallet).then(|| tx.inner.nonce())
        }))
    };
    // A hash not mined may have been replaced by the monitor: its record holds the mined one.
    let lookups: Vec<(Option<u64>, bool)> =
        futures::stream::iter(sent.into_iter().collect::<BTreeSet<_>>())
            .map(|(id, hash)| async move {
                if let Some(nonce) = mined(hash).await? {
                    return Ok::<_, anyhow::Error>((Some(nonce), false));
                }
                let record = api.get(&format!("/tx/{id}")).await?;
                let now: Option<B256> = record.body["hash"].as_str().and_then(|h| h.parse().ok());
                match now {
                    Some(now) if now != hash => Ok((mined(now).await?, true)),
                    _ => Ok((None, false)),
                }
            })
            .buffer_unordered(concurrency)
            .try_collect()
            .await?;
    let missing = lookups.iter().filter(|(l, _)| l.is_none()).count();
    let replaced = lookups.iter().filter(|(l, r)| l.is_some() && *r).count();
    let mut per_nonce: BTreeMap<u64, usize> = BTreeMap::new();
    for nonce in lookups.into_iter().filter_map(|(l, _)| l) {
        *per_nonce.entry(nonce).or_default() += 1;
    }
    let gaps = range.clone().filter(|k| !per_nonce.contains_key(k)).count();
    let duplicates = (hashes.len() - distinct.len())
        + per_nonce.values().map(|c| c - 1).sum::<usize>()
        + per_nonce.keys().filter(|k| !range.contains(*k)).count()
        + usize::try_from(on_chain.saturating_sub(range.end))?;
    Ok(ChainView {
        gaps,
        duplicates,
        missing,
        replaced,
    })
}

/// What one send's signature costs on this machine, the floor of the service's CPU per send:
/// an EIP-1559 transfer signed (k256, RFC 6979 nonce) and encoded as the service does each,
/// averaged over `n` after a warm-up, in this process.
pub(crate) fn signing_floor(n: u32) -> anyhow::Result<std::time::Duration> {
    let signer = PrivateKeySigner::random();
    let sign = |nonce: u64| -> anyhow::Result<usize> {
        let tx = TxEip1559 {
            chain_id: 31337,
            nonce,
            gas_limit: TRANSFER_GAS,
            max_fee_per_gas: 2_000_000_000,
            max_priority_fee_per_gas: 1_000_000_000,
            to: TxKind::Call(RECIPIENT),
            value: U256::from(AMOUNT_WEI),
            access_list: Default::default(),
            input: Default::default(),
        };
        let signature = signer.sign_hash_sync(&tx.signature_hash())?;
        Ok(TxEnvelope::from(tx.into_signed(signature))
            .encoded_2718()
            .len())
    };
    for nonce in 0..100 {
        sign(nonce)?;
    }
    let started = std::time::Instant::now();
    for nonce in 0..u64::from(n) {
        std::hint::black_box(sign(nonce)?);
    }
    Ok(started.elapsed() / n)
}

/// `n` transfers from a fresh funded key, signed and encoded as whole
/// `eth_sendRawTransaction` request bodies before any clock starts: the key's address, the
/// bodies, and the hashes the node should answer with.
pub(crate) async fn presigned(
    anvil: &Anvil,
    n: u64,
) -> anyhow::Result<(Address, Vec<String>, Vec<B256>)> {
    let signer = PrivateKeySigner::random();
    let from = signer.address();
    anvil.set_balance(from, U256::from(1000 * ETH)).await?;
    let chain_id = anvil.provider().get_chain_id().await?;
    let fees = anvil.provider().estimate_eip1559_fees().await?;
    let mut bodies = Vec::new();
    let mut expected = Vec::new();
    for nonce in 0..n {
        let tx = TxEip1559 {
            chain_id,
            nonce,
            gas_limit: TRANSFER_GAS,
            max_fee_per_gas: fees.max_fee_per_gas,
            max_priority_fee_per_gas: fees.max_priority_fee_per_gas,
            to: TxKind::Call(RECIPIENT),
            value: U256::from(AMOUNT_WEI),
            access_list: Default::default(),
            input: Default::default(),
        };
        let signature = signer.sign_hash_sync(&tx.signature_hash())?;
        let signed = tx.into_signed(signature);
        expected.push(*signed.hash());
        let raw = TxEnvelope::from(signed).encoded_2718();
        bodies.push(
            json!({"jsonrpc": "2.0", "id": nonce, "method": "eth_sendRawTransaction",
                   "params": [alloy::primitives::hex::encode_prefixed(raw)]})
            .to_string(),
        );
    }
    Ok((from, bodies, expected))
}

/// Throughput B: `n` transfers from a fresh local key, signed and encoded before the clock
/// starts (`presigned`), sent with `eth_sendRawTransaction`.
pub(crate) async fn raw_sends(
    anvil: &Anvil,
    n: u64,
    concurrency: usize,
    probe: Probe,
) -> anyhow::Result<SendRun> {
    let (from, bodies, expected) = presigned(anvil, n).await?;
    let bodies = Arc::new(bodies);
    let http = walletops_tests::http::client();
    let url = anvil.url().to_owned();
    let send = move |i: usize| {
        http.post(&url)
            .header("content-type", "application/json")
            .body(bodies[i].clone())
            .send()
    };
    let run = drive(n, concurrency, {
        let send = send.clone();
        move |i| {
            let send = send.clone();
            async move {
                let reply: Value = send(i).await?.json().await?;
                if let Some(err) = reply.get("error") {
                    bail!("eth_sendRawTransaction: {err}");
                }
                Ok(reply["result"]
                    .as_str()
                    .context("no hash in the answer")?
                    .parse::<B256>()?)
            }
        }
    });
    let (run, cpu) = probe.measure(run).await;
    let (elapsed, results) = run?;
    let hashes = all_ok(results, "raw sends")?;
    ensure!(
        hashes == expected,
        "the node answered other hashes than the signed ones"
    );
    // anvil now and then loses a transaction that reached it out of nonce order
    // (foundry-rs/foundry#10122), and the later ones wait for it in its queue for ever. A
    // nonce that stops moving for 2 s gets its transaction sent again, after the clock
    // stopped, as WalletOps' monitor sends again a transaction its node lost.
    let stall = Arc::new(Mutex::new((0, Instant::now(), 0)));
    poll_until(&format!("the raw sender's nonce to reach {n}"), || {
        let (stall, send) = (stall.clone(), send.clone());
        async move {
            let mined = anvil.nonce(from).await?;
            if mined >= n {
                return Ok(Some(()));
            }
            let resend = {
                let mut stall = stall.lock().unwrap_or_else(PoisonError::into_inner);
                if stall.0 != mined {
                    (stall.0, stall.1) = (mined, Instant::now());
                    false
                } else if stall.1.elapsed() >= Duration::from_secs(2) {
                    (stall.1, stall.2) = (Instant::now(), stall.2 + 1);
                    true
                } else {
                    false
                }
            };
            if resend {
                send(usize::try_from(mined)?).await?;
            }
            Ok(None)
        }
    })
    .await?;
    let lost = stall.lock().unwrap_or_else(PoisonError::into_inner).2;
    if lost > 0 {
        println!(
            "  anvil lost {lost} raw transaction(s) (foundry-rs/foundry#10122); sent again after the run"
        );
    }
    Ok(SendRun {
        sends: n,
        elapsed,
        cpu,
        chain: ChainView::default(),
    })
}
