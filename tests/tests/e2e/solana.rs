//! Solana balances and sends against the litesvm node behind JSON-RPC, through the real RPC
//! client on both sides: SOL and SPL (Token and Token-2022) move exactly the amount, the
//! recipient's token account is created when missing, shortfalls change nothing, one
//! idempotency key gives one transfer, and an expired blockhash is handled without a
//! duplicate.

use std::str::FromStr;

use anyhow::Context as _;

use serde_json::{Value, json};
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_signer::Signer;
use walletops_tests::{
    Backend, Options, Rest, Service, on_both_backends, poll_until,
    solana_node::{self as client, SolanaNode},
    webhooks::Receiver,
};

const SOL: u64 = 1_000_000_000;

struct Sol {
    node: SolanaNode,
    rpc: RpcClient,
    svc: Service,
    wallet: Pubkey,
    /// Pays for mints in tests; holds their mint authority.
    payer: Keypair,
}

impl Sol {
    async fn start(b: Backend, extra_toml: &str) -> anyhow::Result<Self> {
        Self::start_with(b, extra_toml, &[]).await
    }

    /// `start`, the service run with the environment variables `env` besides.
    async fn start_with(
        b: Backend,
        extra_toml: &str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
        let svc = Service::start_with(
            b,
            Options {
                log_file: None,
                config_toml: Some(format!(
                    "request_timeout_secs = 120\n[chains.solana-devnet]\nrpc_url = \"{}\"\n[rate_limits]\nwrites_per_minute = 1000\nreads_per_minute = 100000\n[monitor]\npoll_interval_ms = 100\n{extra_toml}",
                    node.url()
                )),
                env: env
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            },
        )
        .await?;
        let wallet = Pubkey::from_str(&svc.rest(&svc.api_key).default_wallet("solana").await?)?;
        node.airdrop(&wallet, 10 * SOL)?;
        let payer = Keypair::new();
        node.airdrop(&payer.pubkey(), 10 * SOL)?;
        let rpc = RpcClient::new(node.url());
        Ok(Self {
            node,
            rpc,
            svc,
            wallet,
            payer,
        })
    }

    fn api(&self) -> Rest {
        self.svc.rest(&self.svc.api_key)
    }

    async fn wait_for(&self, id: &str, status: &str) -> anyhow::Result<Value> {
        self.api().wait_for_status(id, status).await
    }

    async fn wait_for_note(&self, id: &str, note: &str) -> anyhow::Result<Value> {
        self.api().wait_for_note(id, note).await
    }

    /// Sends `lamports` SOL to `to`; the record's id.
    async fn send_native(&self, to: &Pubkey, lamports: u64) -> anyhow::Result<String> {
        self.send(
            json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "native",
                         "amount": lamports.to_string()}),
        )
        .await
    }

    async fn send(&self, body: Value) -> anyhow::Result<String> {
        let reply = self.api().post("/send", &body).await?;
        anyhow::ensure!(reply.status == 200, "{} {}", reply.status, reply.text);
        anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{}", reply.text);
        Ok(reply.body["id"].as_str().unwrap_or_default().to_owned())
    }
}

async fn balances_equal_the_nodes(b: Backend) -> anyhow::Result<()> {
    let s = Sol::start(b, "").await?;
    let usdc = client::create_mint(&s.rpc, &s.payer, &spl_token_interface::ID, 6).await?;
    let t22 = client::create_mint(&s.rpc, &s.payer, &spl_token_2022_interface::ID, 9).await?;
    let unheld = client::create_mint(&s.rpc, &s.payer, &spl_token_interface::ID, 2).await?;
    client::mint_to(&s.rpc, &s.payer, &usdc, &s.wallet, 1_500_000).await?;
    client::mint_to(&s.rpc, &s.payer, &t22, &s.wallet, 42).await?;
    let reply = s.api().get("/wallets/balances?chain=solana-devnet").await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let balances = reply.body["balances"].as_array().expect("balances").clone();
    assert_eq!(balances.len(), 3, "{balances:?}");
    assert_eq!(balances[0]["asset"], "native");
    assert_eq!(
        balances[0]["raw"],
        s.rpc.get_balance(&s.wallet).await?.to_string()
    );
    assert_eq!(balances[0]["decimals"], 9);
    assert_eq!(balances[0]["symbol"], "SOL");
    assert_eq!(balances[0]["chainId"], -3);
    assert_eq!(balances[0]["chainType"], "solana");
    let find = |mint: &Pubkey| {
        balances
            .iter()
            .find(|b| b["token"] == mint.to_string())
            .cloned()
            .expect("a balance of the mint")
    };
    assert_eq!(find(&usdc)["raw"], "1500000");
    assert_eq!(find(&usdc)["decimals"], 6);
    assert_eq!(find(&usdc)["asset"], "spl");
    assert_eq!(find(&usdc)["symbol"], "UNKNOWN");
    assert_eq!(find(&t22)["raw"], "42");
    assert_eq!(find(&t22)["decimals"], 9);
    // The tokens filter keeps the requested order; a mint not held shows only with
    // includeZero, with its decimals from the mint.
    let path = format!("/wallets/balances?chain=solana-devnet&tokens={t22},{unheld}");
    let filtered = s.api().get(&path).await?;
    assert_eq!(filtered.body["balances"].as_array().map(Vec::len), Some(2));
    assert_eq!(filtered.body["balances"][1]["token"], t22.to_string());
    let all = s.api().get(&format!("{path}&includeZero=true")).await?;
    assert_eq!(all.body["balances"][2]["raw"], "0");
    assert_eq!(all.body["balances"][2]["decimals"], 2);
    // Cached until fresh=true.
    s.node.airdrop(&s.wallet, SOL)?;
    let cached = s.api().get("/wallets/balances?chain=solana-devnet").await?;
    assert_eq!(cached.body["balances"][0]["raw"], balances[0]["raw"]);
    let fresh = s
        .api()
        .get("/wallets/balances?chain=solana-devnet&fresh=true")
        .await?;
    assert_eq!(
        fresh.body["balances"][0]["raw"],
        s.rpc.get_balance(&s.wallet).await?.to_string()
    );
    // Something that is not a mint is named.
    let bad = s
        .api()
        .get(&format!(
            "/wallets/balances?chain=solana-devnet&tokens={}",
            Keypair::new().pubkey()
        ))
        .await?;
    bad.assert_invalid("tokens[0]")?;
    Ok(())
}

async fn sol_and_spl_sends_move_exactly_the_amount(b: Backend) -> anyhow::Result<()> {
    let s = Sol::start(b, "").await?;
    let hook = Receiver::start().await?;
    hook.register(&s.api(), &[]).await?;
    let to = Keypair::new().pubkey();
    let id = s
        .send(json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "native", "amount": "12345678"}))
        .await?;
    let tx = s.wait_for(&id, "CONFIRMED").await?;
    hook.wait_for_event(&id, "transaction.submitted").await?;
    assert_eq!(
        hook.wait_for_event(&id, "transaction.confirmed")
            .await?
            .body,
        tx
    );
    assert_eq!(s.rpc.get_balance(&to).await?, 12_345_678);
    assert_eq!(tx["chainId"], -3);
    assert_eq!(tx["asset"], "native");
    // The record keeps its simulated effects and, final, those read from the chain.
    let outflow = &tx["simulatedEffects"]["outflows"][0];
    assert_eq!(
        (
            &outflow["asset"],
            &outflow["amount"],
            &outflow["counterparty"]
        ),
        (&json!("native"), &json!("12345678"), &json!(to.to_string())),
        "{tx}"
    );
    assert_eq!(tx["finalEffects"], tx["simulatedEffects"], "{tx}");
    assert!(tx["effectsDifference"].is_null(), "{tx}");
    let signature = tx["hash"].as_str().expect("signature");
    assert!(
        tx["explorerUrl"]
            .as_str()
            .unwrap_or_default()
            .ends_with(&format!("{signature}?cluster=devnet")),
        "{tx}"
    );
    // SPL: the recipient has no token account first, then has one; Token and Token-2022.
    for program in [spl_token_interface::ID, spl_token_2022_interface::ID] {
        let mint = client::create_mint(&s.rpc, &s.payer, &program, 6).await?;
        client::mint_to(&s.rpc, &s.payer, &mint, &s.wallet, 1_000_000).await?;
        for (amount, expected) in [(250_000u64, 250_000u64), (100_000, 350_000)] {
            let id = s
                .send(
                    json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "spl",
                              "token": mint.to_string(), "amount": amount.to_string()}),
                )
                .await?;
            let tx = s.wait_for(&id, "CONFIRMED").await?;
            assert_eq!(tx["token"], mint.to_string());
            let outflow = &tx["finalEffects"]["outflows"][0];
            assert_eq!(outflow["counterparty"], to.to_string(), "{tx}");
            assert_eq!(tx["finalEffects"], tx["simulatedEffects"], "{tx}");
            assert_eq!(client::token_balance(&s.rpc, &to, &mint).await?, expected);
        }
        assert_eq!(
            client::token_balance(&s.rpc, &s.wallet, &mint).await?,
            650_000
        );
    }
    Ok(())
}

/// The recent blockhash the landed transaction `signature` was signed with.
async fn blockhash_of(rpc: &RpcClient, signature: &str) -> anyhow::Result<solana_hash::Hash> {
    let (tx, _) = client::landed(rpc, signature).await?;
    Ok(*tx.message.recent_blockhash())
}

async fn two_equal_payments_signed_with_one_blockhash_both_land(b: Backend) -> anyhow::Result<()> {
    // Both requests read the blockhash before either transfer lands (each waits a second and
    // a half between storing and sending). Signatures are deterministic: the two transfers
    // must still differ, or the second would be the first one again, landing once for two
    // records. The race is checked to have happened (both landed with one blockhash); a
    // machine slow enough to let one land before the other read the blockhash gets another
    // pair, up to five.
    let s = Sol::start_with(b, "", &[("FAILPOINTS", "solana-before-send=sleep(1500)")]).await?;
    let signed_with = |tx: &Value| {
        let hash = tx["hash"].as_str().unwrap_or_default().to_owned();
        let rpc = &s.rpc;
        async move { blockhash_of(rpc, &hash).await }
    };
    for _ in 0..5 {
        let to = Keypair::new().pubkey();
        let (first, second) =
            tokio::join!(s.send_native(&to, 1_000_000), s.send_native(&to, 1_000_000));
        let (first, second) = (first?, second?);
        let first = s.wait_for(&first, "CONFIRMED").await?;
        let second = s.wait_for(&second, "CONFIRMED").await?;
        assert_ne!(first["hash"], second["hash"]);
        assert_eq!(s.rpc.get_balance(&to).await?, 2_000_000);
        if signed_with(&first).await? == signed_with(&second).await? {
            return Ok(());
        }
    }
    anyhow::bail!("the race never happened: five pairs were signed with different blockhashes")
}

async fn shortfalls_change_nothing(b: Backend) -> anyhow::Result<()> {
    let s = Sol::start(b, "").await?;
    let to = Keypair::new().pubkey();
    let before = s.rpc.get_balance(&s.wallet).await?;
    s.api()
        .post("/send", &json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "native", "amount": (100 * SOL).to_string()}))
        .await?
        .assert_error(400, "INSUFFICIENT_FUNDS")?;
    let mint = client::create_mint(&s.rpc, &s.payer, &spl_token_interface::ID, 6).await?;
    client::mint_to(&s.rpc, &s.payer, &mint, &s.wallet, 10).await?;
    s.api()
        .post("/send", &json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "spl", "token": mint.to_string(), "amount": "11"}))
        .await?
        .assert_error(400, "INSUFFICIENT_FUNDS")?;
    assert_eq!(
        s.rpc.get_balance(&s.wallet).await?,
        before,
        "no fee was paid"
    );
    assert_eq!(s.rpc.get_balance(&to).await?, 0);
    assert_eq!(client::token_balance(&s.rpc, &s.wallet, &mint).await?, 10);
    // An SPL amount past u64 is refused as input.
    let reply = s
        .api()
        .post("/send", &json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "spl", "token": mint.to_string(), "amount": "18446744073709551616"}))
        .await?;
    reply.assert_invalid("amount")?;
    Ok(())
}

async fn one_idempotency_key_gives_one_transfer(b: Backend) -> anyhow::Result<()> {
    let s = Sol::start(b, "").await?;
    let to = Keypair::new().pubkey();
    let key = uuid::Uuid::new_v4().to_string();
    let body = json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "native", "amount": "5000000"})
        .to_string();
    let api = s.api();
    let replies = futures::future::join_all((0..20).map(|_| {
        let (api, key, body) = (api.clone(), key.clone(), body.clone());
        async move { api.post_with_key("/send", &key, &body).await }
    }))
    .await;
    let mut ids = std::collections::BTreeSet::new();
    for reply in replies {
        let reply = reply?;
        anyhow::ensure!(reply.status == 200, "{}", reply.text);
        ids.insert(reply.body["id"].as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
    let id = ids.into_iter().next().expect("one id");
    s.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(
        s.rpc.get_balance(&to).await?,
        5_000_000,
        "exactly one transfer"
    );
    Ok(())
}

async fn expired_blockhash_is_re_signed_without_a_duplicate(b: Backend) -> anyhow::Result<()> {
    let s = Sol::start(b, "").await?;
    let to = Keypair::new().pubkey();
    // The cluster loses the transfer, every send of it (one lost send is sent again to
    // every route at once), until its blockhash expires.
    client::drop_transactions(&s.rpc, 1_000_000).await?;
    let reply = s
        .api()
        .post("/send", &json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "native", "amount": "1000000"}))
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let id = reply.body["id"].as_str().expect("id").to_owned();
    let first = reply.body["hash"].as_str().expect("signature").to_owned();
    client::expire_blockhash(&s.rpc).await?;
    s.wait_for_note(&id, "re-signed").await?;
    client::drop_transactions(&s.rpc, 0).await?;
    let tx = s.wait_for(&id, "CONFIRMED").await?;
    assert_ne!(tx["hash"], first, "the transfer was signed again");
    assert!(tx["statusHistory"].to_string().contains("expired"), "{tx}");
    assert_eq!(
        s.rpc.get_balance(&to).await?,
        1_000_000,
        "exactly one transfer"
    );
    let statuses = s.rpc.get_signature_statuses(&[first.parse()?]).await?;
    assert!(
        statuses.value[0].is_none(),
        "the first signature never landed"
    );
    Ok(())
}

/// A mint is known per cluster: one read on the cluster that has it does not make it a
/// mint on another.
async fn a_mint_of_one_cluster_is_no_mint_on_another(b: Backend) -> anyhow::Result<()> {
    let other = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let s = Sol::start(
        b,
        &format!(
            "[chains.solana-testnet]\nrpc_url = \"{0}\"\n[chains.solana]\nrpc_url = \"{0}\"\n",
            other.url()
        ),
    )
    .await?;
    let mint = client::create_mint(&s.rpc, &s.payer, &spl_token_interface::ID, 6).await?;
    let here = s
        .api()
        .get(&format!(
            "/wallets/balances?chain=solana-devnet&tokens={mint}&includeZero=true"
        ))
        .await?;
    assert_eq!(here.status, 200, "{}", here.text);
    assert_eq!(here.body["balances"][1]["decimals"], 6);
    // Each cluster reads with its own chain id: the contract's sentinels.
    for (chain, id) in [("solana-devnet", -3), ("solana-testnet", -2), ("solana", 0)] {
        let read = s
            .api()
            .get(&format!("/wallets/balances?chain={chain}&includeZero=true"))
            .await?;
        assert_eq!(read.status, 200, "{chain}: {}", read.text);
        for balance in read.body["balances"].as_array().expect("balances") {
            assert_eq!(balance["chainId"], id, "{chain}: {balance}");
        }
    }
    let there = s
        .api()
        .get(&format!(
            "/wallets/balances?chain=solana-testnet&tokens={mint}&includeZero=true"
        ))
        .await?;
    there.assert_invalid("tokens[0]")?;
    Ok(())
}

/// A send is failed only for the node's refusal of a transfer it does not hold. An error that
/// says nothing of the transfer (the node unhealthy) leaves it to the monitor, which sends it
/// again; a refusal of a transfer that landed all the same (a relay's) counts as sent. Either
/// way it lands once and its record follows it: a caller told it failed would pay again.
async fn a_transfer_is_failed_only_for_a_refusal_of_what_the_node_does_not_hold(
    b: Backend,
) -> anyhow::Result<()> {
    let s = Sol::start(b, "").await?;
    for fault in ["unhealthy", "refusal"] {
        client::fault_sends(&s.rpc, 1, fault).await?;
        let to = Keypair::new().pubkey();
        let id = s.send_native(&to, 1_000_000).await.context(fault)?;
        s.wait_for(&id, "CONFIRMED").await?;
        assert_eq!(s.rpc.get_balance(&to).await?, 1_000_000, "{fault}");
    }
    Ok(())
}

/// A transfer the cluster never sees (every send lost) is signed again with a fresh
/// blockhash each time its last one expires, but not for ever: after five versions, all
/// expired unseen, it ends DROPPED, and nothing moved.
async fn a_transfer_the_cluster_never_sees_ends_dropped(b: Backend) -> anyhow::Result<()> {
    let s = Sol::start(b, "").await?;
    let hook = Receiver::start().await?;
    hook.register(&s.api(), &["transaction.dropped"]).await?;
    client::drop_transactions(&s.rpc, 1_000).await?;
    let to = Keypair::new().pubkey();
    let id = s.send_native(&to, 1_000_000).await?;
    let tx = poll_until("the transfer to end DROPPED", || async {
        client::expire_blockhash(&s.rpc).await?;
        let tx = s.api().transaction(&id).await?;
        Ok((tx["status"] == "DROPPED").then_some(tx))
    })
    .await?;
    let history = tx["statusHistory"].as_array().expect("a history");
    let resigned = history
        .iter()
        .filter(|c| c["note"].as_str().is_some_and(|n| n.contains("re-signed")))
        .count();
    assert_eq!(resigned, 4, "{tx}");
    assert!(
        tx["error"]
            .as_str()
            .is_some_and(|e| e.contains("5 signed versions")),
        "{tx}"
    );
    assert_eq!(s.rpc.get_balance(&to).await?, 0, "nothing moved");
    assert_eq!(
        hook.wait_for_event(&id, "transaction.dropped").await?.body,
        tx
    );
    Ok(())
}

/// The monitor's send of a transfer whose first send got no verdict is refused (by a node
/// behind the others, say): the first send may still land, so the record waits for its
/// blockhash to expire, unseen, before it ends FAILED.
async fn a_refused_resend_fails_a_transfer_only_once_its_blockhash_expired(
    b: Backend,
) -> anyhow::Result<()> {
    let s = Sol::start(b, "").await?;
    let hook = Receiver::start().await?;
    hook.register(&s.api(), &["transaction.failed"]).await?;
    client::fault_sends(&s.rpc, 1, "unhealthy").await?;
    client::fault_sends(&s.rpc, 1_000, "rejected").await?;
    let to = Keypair::new().pubkey();
    let id = s.send_native(&to, 1_000_000).await?;
    let waiting = s
        .wait_for_note(&id, "ends FAILED if its blockhash expires unseen")
        .await?;
    assert_eq!(waiting["status"], "SUBMITTED", "{waiting}");
    client::expire_blockhash(&s.rpc).await?;
    let failed = s.wait_for(&id, "FAILED").await?;
    assert_eq!(
        hook.wait_for_event(&id, "transaction.failed").await?.body,
        failed
    );
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("expired unseen")),
        "{failed}"
    );
    assert_eq!(s.rpc.get_balance(&to).await?, 0, "nothing moved");
    Ok(())
}

/// A lost transfer of a wallet no longer delegated cannot be signed again once its
/// blockhash expires: it ends DROPPED, rather than wait to be paid whenever the wallet is
/// delegated again.
async fn an_expired_transfer_of_a_wallet_no_longer_delegated_ends_dropped(
    b: Backend,
) -> anyhow::Result<()> {
    let s = Sol::start(b, "").await?;
    // Every send is lost: a resend before the delegation is off must not land it.
    client::drop_transactions(&s.rpc, 1_000).await?;
    let to = Keypair::new().pubkey();
    let id = s.send_native(&to, 1_000_000).await?;
    let wallet = s.wallet.to_string();
    s.svc.delegate(&wallet, false).await?;
    client::expire_blockhash(&s.rpc).await?;
    let dropped = s.wait_for(&id, "DROPPED").await?;
    assert!(
        dropped["error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot be signed again")),
        "{dropped}"
    );
    s.svc.delegate(&wallet, true).await?;
    assert_eq!(s.rpc.get_balance(&to).await?, 0, "nothing moved");
    Ok(())
}

on_both_backends!(
    balances_equal_the_nodes,
    a_mint_of_one_cluster_is_no_mint_on_another,
    a_transfer_is_failed_only_for_a_refusal_of_what_the_node_does_not_hold,
    sol_and_spl_sends_move_exactly_the_amount,
    shortfalls_change_nothing,
    two_equal_payments_signed_with_one_blockhash_both_land,
    a_refused_resend_fails_a_transfer_only_once_its_blockhash_expired,
    an_expired_transfer_of_a_wallet_no_longer_delegated_ends_dropped,
    one_idempotency_key_gives_one_transfer,
    expired_blockhash_is_re_signed_without_a_duplicate,
    a_transfer_the_cluster_never_sees_ends_dropped,
);
