//! POST /trade/quote and /trade/swap on Solana, against the service with the Jupiter fake
//! over a pool on the Solana test node, the node configured as chain `solana` (mainnet's
//! slug, which is the only one Solana trades on): quotes resolve NATIVE to wrapped SOL, a
//! swap moves exactly the quoted amounts and its replay sends nothing, Jupiter's refusals are
//! QUOTE_FAILED in its words, the guard's caps and allow list refuse before signing, and a
//! swap whose blockhash expires unseen ends FAILED without being signed again. On SQLite and
//! PostgreSQL.

use std::str::FromStr;

use serde_json::{Value, json};
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use walletops_chains::trade::WRAPPED_SOL_MINT;
use walletops_tests::{
    Backend, Options, Rest, Service,
    fakes::jupiter::{Extra, JupiterFake, STRANGER},
    on_both_backends,
    solana_node::{self as node, SolanaNode},
};

const SOL: u64 = 1_000_000_000;
/// The pool's token: 6 decimals, 1,000,000 of them in the pool.
const POOL_TOKENS: u64 = 1_000_000_000_000;

/// A pool of SOL and a token on the node behind the Jupiter fake, and the service pointed at
/// both, its caller's Solana wallet holding 10 SOL.
struct SolDesk {
    _node: SolanaNode,
    rpc: RpcClient,
    fake: JupiterFake,
    mint: Pubkey,
    svc: Service,
    wallet: Pubkey,
}

impl SolDesk {
    /// `trade_toml`: more keys of the `[trade.solana]` table.
    async fn open(b: Backend, trade_toml: &str) -> anyhow::Result<Self> {
        let solana = SolanaNode::start("127.0.0.1:0".parse()?).await?;
        let rpc = RpcClient::new(solana.url());
        let (fake, mint) = JupiterFake::with_new_pool(&solana, 100 * SOL, POOL_TOKENS, 6).await?;
        let svc = Service::start_with(b, Options {
            log_file: None,
            config_toml: Some(format!(
                "request_timeout_secs = 120\n[chains.solana]\nrpc_url = \"{}\"\n[rate_limits]\nwrites_per_minute = 1000\nreads_per_minute = 100000\n[monitor]\npoll_interval_ms = 100\n[trade.solana]\nbase_url = \"{}\"\n{trade_toml}\n",
                solana.url(),
                fake.url(),
            )),
            env: Vec::new(),
        })
        .await?;
        let wallet = Pubkey::from_str(&svc.rest(&svc.api_key).default_wallet("solana").await?)?;
        solana.airdrop(&wallet, 10 * SOL)?;
        Ok(Self {
            _node: solana,
            rpc,
            fake,
            mint,
            svc,
            wallet,
        })
    }

    fn api(&self) -> Rest {
        self.svc.rest(&self.svc.api_key)
    }

    /// Selling `amount` lamports of SOL for the token, NATIVE written as `native`.
    fn buy(&self, native: &str, amount: u64) -> Value {
        json!({"chain": "solana", "fromToken": native, "toToken": self.mint.to_string(),
               "amount": amount.to_string()})
    }

    /// (lamports, tokens) of `owner`.
    async fn balances(&self, owner: &Pubkey) -> anyhow::Result<(u64, u64)> {
        Ok((
            self.rpc.get_balance(owner).await?,
            node::token_balance(&self.rpc, owner, &self.mint).await?,
        ))
    }
}

async fn a_solana_quote_resolves_native_and_prices_as_jupiter(b: Backend) -> anyhow::Result<()> {
    let desk = SolDesk::open(b, "").await?;
    let mut quoted = Vec::new();
    for native in ["NATIVE", "native", "Native"] {
        let reply = desk
            .api()
            .post("/trade/quote", &desk.buy(native, SOL))
            .await?;
        anyhow::ensure!(reply.status == 200, "{native}: {reply:?}");
        let quote = &reply.body["quote"];
        assert_eq!(quote["fromToken"], WRAPPED_SOL_MINT.to_string());
        assert_eq!(quote["toToken"], desk.mint.to_string());
        assert_eq!(quote["srcAmount"], SOL.to_string());
        assert_eq!(quote["dstAmount"], quote["raw"]["outAmount"], "{quote}");
        assert!(quote.get("approvalNeeded").is_none(), "{quote}");
        quoted.push(quote["dstAmount"].clone());
    }
    quoted.dedup();
    assert_eq!(quoted.len(), 1, "one price: {quoted:?}");
    let back = desk
        .api()
        .post(
            "/trade/quote",
            &json!({"chain": "solana", "fromToken": desk.mint.to_string(),
                    "toToken": "NATIVE", "amount": "1000000"}),
        )
        .await?;
    anyhow::ensure!(back.status == 200, "{back:?}");
    assert_eq!(back.body["quote"]["toToken"], WRAPPED_SOL_MINT.to_string());
    Ok(())
}

async fn a_solana_swap_moves_the_quoted_amounts_and_replays_without_sending(
    b: Backend,
) -> anyhow::Result<()> {
    let desk = SolDesk::open(b, "").await?;
    let quote = desk
        .api()
        .post("/trade/quote", &desk.buy("NATIVE", SOL))
        .await?;
    let quoted: u64 = quote.body["quote"]["dstAmount"]
        .as_str()
        .unwrap_or_default()
        .parse()?;
    let pool = desk.fake.pool();
    let (wallet_sol, _) = desk.balances(&desk.wallet).await?;
    let (pool_sol, pool_tokens) = desk.balances(&pool).await?;
    let vault_sol = desk.rpc.get_balance(&desk.fake.vault()).await?;
    let key = uuid::Uuid::new_v4().to_string();
    let body = desk.buy("NATIVE", SOL).to_string();
    let reply = desk.api().post_with_key("/trade/swap", &key, &body).await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default();
    let record = desk.api().wait_for_status(id, "CONFIRMED").await?;
    assert_eq!(record["type"], "swap", "{record}");
    assert_eq!(
        record["finalEffects"], record["simulatedEffects"],
        "{record}"
    );
    assert!(
        record["finalEffects"]["inflows"][0]["amount"].is_string(),
        "{record}"
    );
    assert_eq!(
        record["fromToken"],
        WRAPPED_SOL_MINT.to_string(),
        "{record}"
    );
    assert_eq!(record["toToken"], desk.mint.to_string(), "{record}");
    assert_eq!(record["srcAmount"], SOL.to_string(), "{record}");
    assert_eq!(record["dstAmount"], quoted.to_string(), "{record}");
    assert_eq!(
        record["minDstAmount"], quote.body["quote"]["raw"]["otherAmountThreshold"],
        "{record}"
    );
    // The pool took exactly the SOL and paid exactly the quoted tokens; the wallet paid the
    // SOL, its new token account's rent and a fee under the default cap.
    let (wallet_sol_after, wallet_tokens) = desk.balances(&desk.wallet).await?;
    let (pool_sol_after, pool_tokens_after) = desk.balances(&pool).await?;
    assert_eq!(wallet_tokens, quoted);
    assert_eq!(pool_tokens - pool_tokens_after, quoted);
    assert_eq!(pool_sol_after, pool_sol, "the SOL went to the vault");
    assert_eq!(
        desk.rpc.get_balance(&desk.fake.vault()).await? - vault_sol,
        SOL
    );
    let rent = desk.rpc.get_minimum_balance_for_rent_exemption(165).await?;
    let paid = wallet_sol - wallet_sol_after - SOL - rent;
    assert!((10_000..=5_000_000).contains(&paid), "fee {paid}");
    // The replay answers the same body and sends nothing.
    let asked = desk.fake.faults().requests();
    let replay = desk.api().post_with_key("/trade/swap", &key, &body).await?;
    assert_eq!(replay.body, reply.body);
    assert_eq!(desk.fake.faults().requests(), asked, "nothing built");
    assert_eq!(
        desk.balances(&desk.wallet).await?,
        (wallet_sol_after, quoted)
    );
    Ok(())
}

async fn jupiters_refusals_are_quote_failed_in_its_words(b: Backend) -> anyhow::Result<()> {
    let desk = SolDesk::open(b, "").await?;
    let faults = desk.fake.faults();
    faults.not_tradable(desk.mint);
    for path in ["/trade/quote", "/trade/swap"] {
        let reply = desk.api().post(path, &desk.buy("NATIVE", SOL)).await?;
        reply.assert_error(400, "QUOTE_FAILED")?;
        let said = reply.body["error"].as_str().unwrap_or_default();
        assert!(
            said.contains("not tradable") && said.contains(&desk.mint.to_string()),
            "{path}: {said}"
        );
    }
    faults.clear();
    faults.no_route(true);
    desk.api()
        .post("/trade/quote", &desk.buy("NATIVE", SOL))
        .await?
        .assert_error(400, "QUOTE_FAILED")?;
    faults.clear();
    let circular = json!({"chain": "solana", "fromToken": "NATIVE",
                          "toToken": WRAPPED_SOL_MINT.to_string(), "amount": "1000"});
    desk.api()
        .post("/trade/quote", &circular)
        .await?
        .assert_error(400, "QUOTE_FAILED")?;
    faults.fail_next(10);
    let failed = desk
        .api()
        .post("/trade/quote", &desk.buy("NATIVE", SOL))
        .await?;
    failed.assert_error(400, "QUOTE_FAILED")?;
    assert!(failed.text.contains("retry"), "{}", failed.text);
    faults.clear();
    for cluster in ["solana-devnet", "solana-testnet"] {
        let mut body = desk.buy("NATIVE", SOL);
        body["chain"] = json!(cluster);
        desk.api()
            .post("/trade/swap", &body)
            .await?
            .assert_invalid("chain")?;
    }
    assert_eq!(
        node::token_balance(&desk.rpc, &desk.wallet, &desk.mint).await?,
        0,
        "nothing was swapped"
    );
    Ok(())
}

async fn the_guard_refuses_a_swap_over_its_caps_or_allow_list(b: Backend) -> anyhow::Result<()> {
    // Two signatures alone cost 10,000 lamports: over this cap.
    let desk = SolDesk::open(b, "max_fee_lamports = 10000").await?;
    let before = desk.balances(&desk.wallet).await?;
    let reply = desk
        .api()
        .post("/trade/swap", &desk.buy("NATIVE", SOL))
        .await?;
    reply.assert_error(502, "SEND_FAILED")?;
    assert!(reply.text.contains("fee check"), "{}", reply.text);
    // Without the Associated Token Account program, the fake's swap (which creates the
    // wallet's token account) invokes a program off the list.
    let mut desk = desk;
    desk.svc.kill().await?;
    let mut options = desk.svc.options().clone();
    options.config_toml = options.config_toml.map(|toml| {
        toml.replace(
            "max_fee_lamports = 10000",
            "allowed_programs = [\"11111111111111111111111111111111\", \"TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA\", \"ComputeBudget111111111111111111111111111111\"]",
        )
    });
    desk.svc.relaunch(options).await?;
    let reply = desk
        .api()
        .post("/trade/swap", &desk.buy("NATIVE", SOL))
        .await?;
    reply.assert_error(502, "SEND_FAILED")?;
    assert!(reply.text.contains("programs check"), "{}", reply.text);
    assert_eq!(desk.balances(&desk.wallet).await?, before, "nothing signed");
    Ok(())
}

async fn a_swap_whose_blockhash_expires_unseen_ends_failed(b: Backend) -> anyhow::Result<()> {
    let desk = SolDesk::open(b, "").await?;
    let before = desk.balances(&desk.wallet).await?;
    // The cluster loses every send of the swap, then its blockhash expires.
    node::drop_transactions(&desk.rpc, 1_000_000).await?;
    let reply = desk
        .api()
        .post("/trade/swap", &desk.buy("NATIVE", SOL))
        .await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default();
    node::expire_blockhash(&desk.rpc).await?;
    let record = desk.api().wait_for_status(id, "FAILED").await?;
    assert!(
        record["error"]
            .as_str()
            .unwrap_or_default()
            .contains("request a new swap"),
        "{record}"
    );
    assert_eq!(record["hash"], reply.body["hash"], "never signed again");
    assert_eq!(desk.balances(&desk.wallet).await?, before, "nothing moved");
    Ok(())
}

async fn twenty_identical_solana_swaps_give_one_swap(b: Backend) -> anyhow::Result<()> {
    let desk = SolDesk::open(b, "").await?;
    let key = uuid::Uuid::new_v4().to_string();
    let body = desk.buy("NATIVE", SOL).to_string();
    let api = desk.api();
    let replies = futures::future::join_all((0..20).map(|_| {
        let (api, key, body) = (api.clone(), key.clone(), body.clone());
        async move { api.post_with_key("/trade/swap", &key, &body).await }
    }))
    .await;
    let mut bodies = std::collections::BTreeSet::new();
    for reply in replies {
        let reply = reply?;
        anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
        bodies.insert(reply.body.to_string());
    }
    assert_eq!(bodies.len(), 1, "every twin answers alike: {bodies:?}");
    let reply: Value = serde_json::from_str(bodies.first().expect("one"))?;
    let record = desk
        .api()
        .wait_for_status(reply["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    let quoted: u64 = record["dstAmount"].as_str().unwrap_or_default().parse()?;
    assert_eq!(
        node::token_balance(&desk.rpc, &desk.wallet, &desk.mint).await?,
        quoted,
        "one swap landed"
    );
    Ok(())
}

/// A route that does more than the swap (pays a stranger from the wallet in SOL or in the
/// token, delegates or hands over the wallet's token account, closes it to a stranger, or
/// assigns the wallet to another program) passes the programs check, since it uses only
/// System and Token; its simulated effects refuse it, and nothing is signed.
async fn a_route_that_does_more_than_the_swap_is_refused(b: Backend) -> anyhow::Result<()> {
    let desk = SolDesk::open(b, "").await?;
    // An honest swap first, so the wallet holds the token and its account.
    let reply = desk
        .api()
        .post("/trade/swap", &desk.buy("NATIVE", SOL))
        .await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default().to_owned();
    desk.api().wait_for_status(&id, "CONFIRMED").await?;
    // Enough SOL for the 10 MiB account's rent, so that only the guard stands in the way.
    desk._node.airdrop(&desk.wallet, 100 * SOL)?;
    let before = desk.balances(&desk.wallet).await?;
    for (extra, words) in [
        (Extra::SolTransfer, "it takes 1001000000 of native"),
        (Extra::TokenTransfer, "also sends"),
        (Extra::Approve, "lets"),
        // Read from the balances after it, a token account handed over is tokens gone.
        (Extra::SetOwner, "also sends"),
        (Extra::Close, ""),
        (Extra::Assign, "lets"),
        (Extra::FundAccount, "it takes"),
    ] {
        desk.fake.faults().add_to_swaps(extra);
        let reply = desk
            .api()
            .post("/trade/swap", &desk.buy("NATIVE", SOL))
            .await?;
        reply
            .assert_error(502, "SEND_FAILED")
            .map_err(|e| e.context(format!("{extra:?}")))?;
        // Closing an account that holds tokens fails on the node itself: refused all the same.
        assert!(
            (reply.text.contains("effects check") && reply.text.contains(words))
                || (extra == Extra::Close && reply.text.contains("would fail")),
            "{extra:?}: {}",
            reply.text
        );
        assert_eq!(
            desk.balances(&desk.wallet).await?,
            before,
            "{extra:?}: nothing signed"
        );
    }
    assert_eq!(desk.rpc.get_balance(&STRANGER).await?, 0);
    Ok(())
}

/// A hostile Jupiter: a quote whose `otherAmountThreshold` is 0 is refused before any route
/// is built, whatever the route would do; a route that sends the SOL sold to a stranger and
/// pays 1 base unit back is refused on its simulated effects against the bound; a
/// `minDstAmount` above what the route pays refuses it too; so does a route that pays the
/// wallet in full but sends what it sells, SOL or the token, to an account a key holds
/// rather than to its pool's program-derived vault. Nothing leaves the wallet.
async fn a_hostile_route_is_held_to_an_independent_minimum(b: Backend) -> anyhow::Result<()> {
    let desk = SolDesk::open(b, "").await?;
    let before = desk.balances(&desk.wallet).await?;
    // The swap of `body` is refused by the guard, in words that say all of `words`.
    let refused = async |body: &Value, words: &[&str]| -> anyhow::Result<()> {
        let reply = desk.api().post("/trade/swap", body).await?;
        reply.assert_error(502, "SEND_FAILED")?;
        anyhow::ensure!(
            words.iter().all(|w| reply.text.contains(w)),
            "{}",
            reply.text
        );
        Ok(())
    };
    let faults = desk.fake.faults();
    faults.zero_threshold(true);
    faults.divert_input(true);
    let sale = desk.buy("NATIVE", SOL);
    refused(&sale, &["minimum check", "otherAmountThreshold is 0"]).await?;
    faults.zero_threshold(false);
    refused(&sale, &["effects check", "less than the minimum"]).await?;
    faults.divert_input(false);
    let quoted = desk.api().post("/trade/quote", &sale).await?;
    let out: u64 = quoted.body["quote"]["dstAmount"]
        .as_str()
        .unwrap_or_default()
        .parse()?;
    let mut greedy = sale.clone();
    greedy["minDstAmount"] = json!((out + 1).to_string());
    refused(&greedy, &["minimum check"]).await?;
    faults.input_to_key(true);
    refused(&sale, &["route check", "an account a key holds"]).await?;
    assert_eq!(desk.balances(&desk.wallet).await?, before, "nothing signed");
    assert_eq!(desk.rpc.get_balance(&STRANGER).await?, 0);
    Ok(())
}

on_both_backends!(
    a_hostile_route_is_held_to_an_independent_minimum,
    a_route_that_does_more_than_the_swap_is_refused,
    twenty_identical_solana_swaps_give_one_swap,
    a_solana_quote_resolves_native_and_prices_as_jupiter,
    a_solana_swap_moves_the_quoted_amounts_and_replays_without_sending,
    jupiters_refusals_are_quote_failed_in_its_words,
    the_guard_refuses_a_swap_over_its_caps_or_allow_list,
    a_swap_whose_blockhash_expires_unseen_ends_failed,
);
