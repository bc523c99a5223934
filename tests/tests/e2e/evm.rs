//! EVM writes and balances against a real anvil node: balances equal the node's, transfers,
//! approvals and contract calls move exactly what they say, idempotency holds under
//! concurrency, nonces stay contiguous, and the monitor recovers lost and stuck transactions.

use alloy::primitives::{Address, U256};
use anyhow::Context as _;
use serde_json::{Value, json};
use walletops_tests::{
    Backend, Options, Rest, Service,
    anvil::{Anvil, MIXED_MINING},
    on_both_backends, poll_until,
};

const ETH: u128 = 1_000_000_000_000_000_000;
/// Where the tests send native coin.
const RECIPIENT: &str = "0x1111111111111111111111111111111111111111";

/// A service with chain `anvil` and its funded default EVM wallet.
struct Evm {
    anvil: Anvil,
    svc: Service,
    wallet: Address,
    /// The gateway the service reaches anvil through, if it does.
    gateway: Option<Gateway>,
}

impl Evm {
    async fn start(b: Backend, extra_toml: &str, anvil_args: &[&str]) -> anyhow::Result<Self> {
        Self::start_with_env(b, extra_toml, anvil_args, &[]).await
    }

    /// `start`, with environment variables for the service.
    async fn start_with_env(
        b: Backend,
        extra_toml: &str,
        anvil_args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        Self::launch(b, extra_toml, anvil_args, env, false).await
    }

    /// `start_with_env`, the service reaching anvil through a `Gateway`.
    async fn behind_gateway(
        b: Backend,
        extra_toml: &str,
        anvil_args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        Self::launch(b, extra_toml, anvil_args, env, true).await
    }

    async fn launch(
        b: Backend,
        extra_toml: &str,
        anvil_args: &[&str],
        env: &[(&str, &str)],
        gated: bool,
    ) -> anyhow::Result<Self> {
        let anvil = Anvil::start_with(anvil_args).await?;
        let gateway = if gated {
            Some(Gateway::start(anvil.url()).await?)
        } else {
            None
        };
        let options = gated_options(&anvil, gateway.as_ref(), extra_toml, env);
        let svc = Service::start_with(b, options).await?;
        let reply = svc
            .rest(&svc.api_key)
            .get("/wallets?chain=ethereum&defaultOnly=true")
            .await?;
        let wallet: Address = reply.body["wallets"][0]["address"]
            .as_str()
            .expect("an EVM wallet")
            .parse()?;
        anvil.set_balance(wallet, U256::from(100 * ETH)).await?;
        Ok(Self {
            anvil,
            svc,
            wallet,
            gateway,
        })
    }

    /// Kills the service with SIGKILL and starts it again on the same database, through
    /// the same gateway if it had one.
    async fn restart(&mut self, extra_toml: &str, env: &[(&str, &str)]) -> anyhow::Result<()> {
        self.svc.kill().await?;
        let options = gated_options(&self.anvil, self.gateway.as_ref(), extra_toml, env);
        self.svc.relaunch(options).await?;
        Ok(())
    }

    fn gateway(&self) -> anyhow::Result<&Gateway> {
        self.gateway
            .as_ref()
            .context("not started behind a gateway")
    }

    fn api(&self) -> Rest {
        self.svc.rest(&self.svc.api_key)
    }

    async fn tx(&self, id: &str) -> anyhow::Result<Value> {
        let reply = self.api().get(&format!("/tx/{id}")).await?;
        anyhow::ensure!(reply.status == 200, "GET /tx/{id}: {}", reply.text);
        Ok(reply.body)
    }

    /// Sends `amount` wei to `to` over REST; returns the submission's id and hash.
    async fn send_native(&self, to: &str, amount: &str) -> anyhow::Result<(String, String)> {
        let reply = self
            .api()
            .post(
                "/send",
                &json!({"chain": "anvil", "to": to, "asset": "native", "amount": amount}),
            )
            .await?;
        let id = submitted_id(&reply)?;
        let hash = reply.body["hash"].as_str().unwrap_or_default().to_owned();
        Ok((id, hash))
    }

    /// The wallet's owner spends `nonce` outside the service (a zero-value self-transfer at
    /// 100 gwei, far over the service's fees), into the pool.
    async fn owner_takes_nonce(&self, nonce: u64) -> anyhow::Result<()> {
        self.anvil
            .rpc("anvil_impersonateAccount", json!([self.wallet]))
            .await?;
        let gwei = |n: u64| format!("{:#x}", u128::from(n) * 1_000_000_000);
        self.anvil
            .rpc(
                "eth_sendTransaction",
                json!([{"from": self.wallet, "to": self.wallet, "value": "0x0", "nonce": format!("{nonce:#x}"),
                        "gas": "0x5208", "maxFeePerGas": gwei(100), "maxPriorityFeePerGas": gwei(50)}]),
            )
            .await?;
        Ok(())
    }

    /// Waits until the status history of transaction `id` mentions `text`; returns the
    /// record then.
    async fn wait_for_note(&self, id: &str, text: &str) -> anyhow::Result<Value> {
        poll_until(&format!("transaction {id} to note {text:?}"), || async {
            let tx = self.tx(id).await?;
            Ok(tx["statusHistory"].to_string().contains(text).then_some(tx))
        })
        .await
    }

    /// Waits until transaction `id` reaches `status`.
    async fn wait_for(&self, id: &str, status: &str) -> anyhow::Result<Value> {
        poll_until(&format!("transaction {id} to become {status}"), || async {
            let tx = self.tx(id).await?;
            Ok((tx["status"] == status).then_some(tx))
        })
        .await
    }
}

/// The service's options over `anvil`, with `extra_toml` and `env`.
pub(crate) fn service_options(anvil: &Anvil, extra_toml: &str, env: &[(&str, &str)]) -> Options {
    Options {
        // These tests poll GET /tx; the rate limits have tests of their own.
        config_toml: Some(format!(
            "{}\n[rate_limits]\nwrites_per_minute = 1000\nreads_per_minute = 100000\n{extra_toml}",
            anvil.chain_toml()
        )),
        // A request's hold on its record outlasts every wait of the tests: a record its
        // request did not hand over when it was done would never be followed in time. (The
        // environment given after this overrides it.)
        env: [("WALLETOPS_REQUEST_TIMEOUT_SECS", "120")]
            .iter()
            .chain(env)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

/// `service_options`, with the chain reached through `gateway` when there is one.
fn gated_options(
    anvil: &Anvil,
    gateway: Option<&Gateway>,
    extra_toml: &str,
    env: &[(&str, &str)],
) -> Options {
    let mut options = service_options(anvil, extra_toml, env);
    if let Some(gateway) = gateway {
        options.config_toml = options
            .config_toml
            .map(|toml| toml.replace(anvil.url(), &gateway.url));
    }
    options
}

/// Asserts that record `tx` kept the nonce it was first signed with.
fn assert_never_re_signed(tx: &Value) {
    assert!(
        !tx["statusHistory"].to_string().contains("re-signed"),
        "{tx}"
    );
}

fn submitted_id(reply: &walletops_tests::Reply) -> anyhow::Result<String> {
    anyhow::ensure!(
        reply.status == 200,
        "expected 200, got {} {}",
        reply.status,
        reply.text
    );
    // The submission result, and nothing else.
    let keys: Vec<&str> = reply
        .body
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    anyhow::ensure!(
        keys == ["chainName", "explorerUrl", "hash", "id", "status"],
        "{}",
        reply.text
    );
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{}", reply.text);
    let hash = reply.body["hash"].as_str().unwrap_or_default();
    anyhow::ensure!(hash.len() == 66 && hash.starts_with("0x"), "{}", reply.text);
    anyhow::ensure!(
        reply.body["explorerUrl"]
            .as_str()
            .is_some_and(|url| url.ends_with(hash)),
        "{}",
        reply.text
    );
    anyhow::ensure!(reply.body["chainName"] == "Anvil", "{}", reply.text);
    Ok(reply.body["id"].as_str().unwrap_or_default().to_owned())
}

async fn balances_equal_the_nodes(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(b, "", &[]).await?;
    e.anvil.install_multicall().await?;
    let usdc = e.anvil.deploy_token("USDC", 6).await?;
    let wbtc = e.anvil.deploy_token("WBTC", 8).await?;
    let empty = e.anvil.deploy_token("ZERO", 18).await?;
    e.anvil
        .mint(usdc, e.wallet, U256::from(1_234_567u64))
        .await?;
    e.anvil.mint(wbtc, e.wallet, U256::from(99u64)).await?;
    let path = format!("/wallets/balances?chain=anvil&tokens={usdc},{wbtc},{empty}");
    let reply = e.api().get(&path).await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let balances = reply.body["balances"].as_array().expect("balances").clone();
    assert_eq!(
        balances.len(),
        3,
        "the zero balance is left out: {balances:?}"
    );
    let native = &balances[0];
    assert_eq!(native["asset"], "native");
    assert_eq!(native["token"], Value::Null);
    assert_eq!(native["raw"], e.anvil.balance(e.wallet).await?.to_string());
    assert_eq!(native["decimals"], 18);
    assert_eq!(native["symbol"], "ETH");
    assert_eq!(native["chainId"], 31337);
    assert_eq!(native["chainType"], "ethereum");
    assert_eq!(native["address"], e.wallet.to_checksum(None));
    let updated = native["updatedAt"].as_str().expect("updatedAt");
    assert!(
        updated.len() == 24 && updated.ends_with('Z') && updated.as_bytes()[19] == b'.',
        "ISO 8601 with milliseconds, UTC: {updated}"
    );
    assert_eq!(balances[1]["token"], usdc.to_checksum(None));
    assert_eq!(balances[1]["asset"], "erc20");
    assert_eq!(balances[1]["raw"], "1234567");
    assert_eq!(balances[1]["decimals"], 6);
    assert_eq!(balances[1]["symbol"], "USDC");
    assert_eq!(
        balances[2]["raw"],
        e.anvil.token_balance(wbtc, e.wallet).await?.to_string()
    );
    assert_eq!(balances[2]["decimals"], 8);
    // includeZero keeps the empty token.
    let all = e.api().get(&format!("{path}&includeZero=true")).await?;
    assert_eq!(all.body["balances"].as_array().map(Vec::len), Some(4));
    assert_eq!(all.body["balances"][3]["raw"], "0");
    // The per-address endpoint answers the same.
    let by_address = e
        .api()
        .get(&format!(
            "/wallets/{}/balances?chain=anvil&tokens={usdc},{wbtc},{empty}",
            e.wallet
        ))
        .await?;
    assert_eq!(by_address.body["balances"][1], balances[1]);
    // A fresh read of one token keeps the others' cached balances ...
    let one = e
        .api()
        .get(&format!(
            "/wallets/balances?chain=anvil&tokens={wbtc}&fresh=true"
        ))
        .await?;
    assert_eq!(one.status, 200, "{}", one.text);
    e.anvil.set_balance(e.wallet, U256::from(7 * ETH)).await?;
    e.anvil.mint(usdc, e.wallet, U256::from(1u64)).await?;
    // ... so within the cache window a change on chain is not seen, unless fresh=true.
    let cached = e.api().get(&path).await?;
    assert_eq!(cached.body["balances"][0]["raw"], balances[0]["raw"]);
    assert_eq!(cached.body["balances"][1]["raw"], "1234567");
    // A cached balance keeps the time of its chain read: USDC's is the first read's, the
    // native one the fresh read's.
    assert_eq!(
        cached.body["balances"][1]["updatedAt"],
        balances[1]["updatedAt"]
    );
    assert_eq!(
        cached.body["balances"][0]["updatedAt"],
        one.body["balances"][0]["updatedAt"]
    );
    let fresh = e.api().get(&format!("{path}&fresh=true")).await?;
    assert_eq!(fresh.body["balances"][0]["raw"], (7 * ETH).to_string());
    assert_eq!(fresh.body["balances"][1]["raw"], "1234568");
    // The cache runs out: the native balance after about 15 s, token balances after about
    // 45 s, so when the native change shows, the token's is still the cached one.
    e.anvil.set_balance(e.wallet, U256::from(8 * ETH)).await?;
    e.anvil.mint(usdc, e.wallet, U256::from(1u64)).await?;
    let expired = poll_until("the cached native balance to run out", || async {
        let reply = e.api().get(&path).await?;
        Ok((reply.body["balances"][0]["raw"] == (8 * ETH).to_string()).then_some(reply))
    })
    .await?;
    assert_eq!(expired.body["balances"][1]["raw"], "1234568");
    poll_until("the cached token balance to run out", || async {
        let reply = e.api().get(&path).await?;
        Ok((reply.body["balances"][1]["raw"] == "1234569").then_some(()))
    })
    .await?;
    // A token that is not a contract is named.
    let reply = e
        .api()
        .get("/wallets/balances?chain=anvil&tokens=0x000000000000000000000000000000000000dEaD")
        .await?;
    reply.assert_invalid("tokens[0]")?;
    Ok(())
}

async fn balances_fall_back_to_a_batch_without_multicall(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(b, "", &[]).await?;
    let usdc = e.anvil.deploy_token("USDC", 6).await?;
    e.anvil.mint(usdc, e.wallet, U256::from(42u64)).await?;
    let reply = e
        .api()
        .get(&format!("/wallets/balances?chain=anvil&tokens={usdc}"))
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["balances"][0]["raw"], (100 * ETH).to_string());
    assert_eq!(reply.body["balances"][1]["raw"], "42");
    assert_eq!(reply.body["balances"][1]["symbol"], "USDC");
    // A contract that is no ERC20 reverts its balanceOf: named, not a node failure.
    let counter = e.anvil.deploy_counter().await?;
    let reply = e
        .api()
        .get(&format!(
            "/wallets/balances?chain=anvil&tokens={usdc},{counter}"
        ))
        .await?;
    reply.assert_invalid("tokens[1]")?;
    Ok(())
}

/// Without Multicall3, balances are read in JSON-RPC batches no larger than a provider
/// takes, and a call the provider fails (a rate limit, not the token's revert) fails the read
/// instead of reporting the token without decimals, and remembering it so.
async fn balances_without_multicall_keep_within_a_providers_limits(
    b: Backend,
) -> anyhow::Result<()> {
    /// `decimals()`.
    const DECIMALS: &str = "0x313ce567";
    let e = Evm::behind_gateway(b, "", &[], &[]).await?;
    let gateway = e.gateway.as_ref().context("a gateway")?;
    gateway.limit(Limits {
        max_batch: Some(100),
        limited_call: Some(DECIMALS),
        ..Limits::default()
    });
    let usdc = e.anvil.deploy_token("USDC", 6).await?;
    let path = format!("/wallets/balances?chain=anvil&tokens={usdc}&includeZero=true");
    e.api()
        .get(&path)
        .await?
        .assert_error(502, "PROVIDER_RPC_ERROR")?;
    gateway.limit(Limits {
        max_batch: Some(100),
        ..Limits::default()
    });
    let reply = e.api().get(&path).await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["balances"][1]["decimals"], 6);
    assert_eq!(reply.body["balances"][1]["symbol"], "USDC");
    // 50 tokens: about 150 calls, over the provider's limit in one batch.
    let mut tokens = vec![usdc];
    for i in 1..50 {
        tokens.push(e.anvil.deploy_token(&format!("T{i:02}"), 18).await?);
    }
    let list = tokens
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let reply = e
        .api()
        .get(&format!(
            "/wallets/balances?chain=anvil&tokens={list}&includeZero=true&fresh=true"
        ))
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let balances = reply.body["balances"].as_array().context("balances")?;
    assert_eq!(balances.len(), 51);
    assert_eq!(balances[50]["symbol"], "T49");
    assert_eq!(balances[50]["decimals"], 18);
    Ok(())
}

async fn native_and_token_sends_move_exactly_the_amount(b: Backend) -> anyhow::Result<()> {
    use alloy::providers::Provider;
    let e = Evm::start(b, "", &[]).await?;
    let to: Address = "0x1111111111111111111111111111111111111111".parse()?;
    let reply = e
        .api()
        .post(
            "/send",
            &json!({"chain": "anvil", "to": to, "asset": "native", "amount": "1000000000000000"}),
        )
        .await?;
    let id = submitted_id(&reply)?;
    let hash = reply.body["hash"].as_str().expect("hash").to_owned();
    assert_eq!(reply.body["chainName"], "Anvil");
    let explorer = format!("{}/tx/{hash}", walletops_tests::anvil::EXPLORER);
    assert_eq!(reply.body["explorerUrl"], explorer.as_str());
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["explorerUrl"], explorer.as_str());
    assert_eq!(tx["chainName"], "Anvil");
    assert_eq!(
        e.anvil.balance(to).await?,
        U256::from(1_000_000_000_000_000u64)
    );
    assert_eq!(tx["hash"], hash);
    assert_eq!(tx["type"], "send");
    assert_eq!(tx["asset"], "native");
    assert_eq!(tx["amount"], "1000000000000000");
    assert_eq!(tx["chainId"], 31337);
    assert_eq!(tx["from"], e.wallet.to_checksum(None));
    assert_eq!(tx["to"], to.to_checksum(None));
    let history: Vec<&str> = tx["statusHistory"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|h| h["status"].as_str())
        .collect();
    assert_eq!(history, ["SUBMITTED", "CONFIRMED"]);
    // Another user cannot see it: the same 404 as an unknown id.
    let bob = e.svc.create_user("bob").await?;
    e.svc
        .rest(&bob)
        .get(&format!("/tx/{id}"))
        .await?
        .assert_error(404, "NOT_FOUND")?;
    // The sender paid the amount plus the fee, nothing more.
    let receipt = e
        .anvil
        .provider()
        .get_transaction_receipt(hash.parse()?)
        .await?
        .expect("receipt");
    let fee = U256::from(receipt.gas_used) * U256::from(receipt.effective_gas_price);
    assert_eq!(
        e.anvil.balance(e.wallet).await?,
        U256::from(100 * ETH) - U256::from(1_000_000_000_000_000u64) - fee
    );
    // An ERC20 transfer moves exactly the amount to the owner `to`.
    let token = e.anvil.deploy_token("USDC", 6).await?;
    e.anvil
        .mint(token, e.wallet, U256::from(5_000_000u64))
        .await?;
    let reply = e
        .api()
        .post(
            "/send",
            &json!({"chain": "anvil", "to": to, "asset": "erc20", "token": token, "amount": "1250000"}),
        )
        .await?;
    let id = submitted_id(&reply)?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(
        e.anvil.token_balance(token, to).await?,
        U256::from(1_250_000u64)
    );
    assert_eq!(
        e.anvil.token_balance(token, e.wallet).await?,
        U256::from(3_750_000u64)
    );
    assert_eq!(tx["token"], token.to_checksum(None));
    assert_eq!(tx["to"], to.to_checksum(None));
    assert_eq!(tx["asset"], "erc20");
    Ok(())
}

async fn doomed_writes_fail_before_signing_and_consume_no_nonce(b: Backend) -> anyhow::Result<()> {
    use alloy::providers::Provider;
    let e = Evm::start(b, "", &[]).await?;
    let counter = e.anvil.deploy_counter().await?;
    let token = e.anvil.deploy_token("USDC", 6).await?;
    let to = "0x1111111111111111111111111111111111111111";
    e.api()
        .post("/send", &json!({"chain": "anvil", "to": to, "asset": "native", "amount": (200 * ETH).to_string()}))
        .await?
        .assert_error(400, "INSUFFICIENT_FUNDS")?;
    e.api()
        .post(
            "/send",
            &json!({"chain": "anvil", "to": to, "asset": "erc20", "token": token, "amount": "1"}),
        )
        .await?
        .assert_error(400, "INSUFFICIENT_FUNDS")?;
    let reply = e
        .api()
        .post(
            "/contracts/send",
            &json!({"chain": "anvil", "to": counter, "function": "fail()", "args": []}),
        )
        .await?;
    reply.assert_error(502, "SEND_FAILED")?;
    assert!(
        reply.text.contains("Counter: told to fail"),
        "{}",
        reply.text
    );
    // A call to an address without code would be mined, succeed and do nothing.
    let no_code = "0x2222222222222222222222222222222222222222";
    for (path, body, field) in [
        (
            "/send",
            json!({"chain": "anvil", "to": to, "asset": "erc20", "token": no_code, "amount": "1"}),
            "token",
        ),
        (
            "/token/approve",
            json!({"chain": "anvil", "token": no_code, "spender": to, "amount": "1"}),
            "token",
        ),
        (
            "/contracts/send",
            json!({"chain": "anvil", "to": no_code, "function": "add(uint256)", "args": [1]}),
            "to",
        ),
    ] {
        e.api()
            .post(path, &body)
            .await?
            .assert_invalid(field)
            .map_err(|err| err.context(path))?;
    }
    // A token that answers false instead of reverting would do the same.
    e.anvil.mint(token, e.wallet, U256::from(10u64)).await?;
    e.anvil.freeze(token, e.wallet).await?;
    for (path, body) in [
        (
            "/send",
            json!({"chain": "anvil", "to": to, "asset": "erc20", "token": token, "amount": "1"}),
        ),
        (
            "/token/approve",
            json!({"chain": "anvil", "token": token, "spender": to, "amount": "1"}),
        ),
    ] {
        let reply = e.api().post(path, &body).await?;
        reply.assert_error(502, "SEND_FAILED")?;
        assert!(
            reply.text.contains("answers false"),
            "{path}: {}",
            reply.text
        );
    }
    assert_eq!(e.anvil.nonce(e.wallet).await?, 0);
    assert!(e.anvil.pool_hashes().await?.is_empty());
    assert_eq!(e.svc.stored_transactions().await?, 0, "nothing was signed");
    // The next write uses nonce 0: nothing was consumed.
    let reply = e
        .api()
        .post(
            "/send",
            &json!({"chain": "anvil", "to": to, "asset": "native", "amount": "1"}),
        )
        .await?;
    let id = submitted_id(&reply)?;
    e.wait_for(&id, "CONFIRMED").await?;
    let hash = reply.body["hash"].as_str().expect("hash").parse()?;
    let mined = e
        .anvil
        .provider()
        .get_transaction_by_hash(hash)
        .await?
        .expect("mined");
    assert_eq!(alloy::consensus::Transaction::nonce(&mined), 0);
    Ok(())
}

async fn approvals_and_contract_calls_execute(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(b, "", &[]).await?;
    let token = e.anvil.deploy_token("USDC", 6).await?;
    let spender: Address = "0x2222222222222222222222222222222222222222".parse()?;
    let key = uuid::Uuid::new_v4().to_string();
    let approve = json!({"chain": "anvil", "token": token, "spender": spender, "amount": "0xffff"})
        .to_string();
    let keyed = async || {
        e.api()
            .request(
                reqwest::Method::POST,
                "/token/approve",
                &[("Idempotency-Key", &key)],
                Some(&approve),
            )
            .await
    };
    let reply = keyed().await?;
    let id = submitted_id(&reply)?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    // Its key replays the stored answer; nothing is signed again.
    assert_eq!(keyed().await?.body, reply.body);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(tx["type"], "approve");
    assert_eq!(
        e.anvil.allowance(token, e.wallet, spender).await?,
        U256::from(0xffffu64)
    );
    // The largest amount, the usual unlimited approval, fits.
    let unlimited = format!("0x{}", "f".repeat(64));
    let reply = e
        .api()
        .post(
            "/token/approve",
            &json!({"chain": "anvil", "token": token, "spender": spender, "amount": unlimited}),
        )
        .await?;
    e.wait_for(&submitted_id(&reply)?, "CONFIRMED").await?;
    assert_eq!(
        e.anvil.allowance(token, e.wallet, spender).await?,
        U256::MAX
    );
    let counter = e.anvil.deploy_counter().await?;
    let reply = e
        .api()
        .post(
            "/contracts/send",
            // `uint` is `uint256`: the selector is the canonical signature's.
            &json!({"chain": "anvil", "to": counter, "function": "add(uint)", "args": [5]}),
        )
        .await?;
    e.wait_for(&submitted_id(&reply)?, "CONFIRMED").await?;
    let reply = e
        .api()
        .post(
            "/contracts/send",
            // add(uint256) with 7, as raw calldata.
            &json!({"chain": "anvil", "to": counter,
                    "data": "0x1003e2d20000000000000000000000000000000000000000000000000000000000000007"}),
        )
        .await?;
    e.wait_for(&submitted_id(&reply)?, "CONFIRMED").await?;
    let reply = e
        .api()
        .post(
            "/contracts/send",
            &json!({"chain": "anvil", "to": counter, "function": "deposit()", "value": "12345"}),
        )
        .await?;
    let tx = e.wait_for(&submitted_id(&reply)?, "CONFIRMED").await?;
    assert_eq!(tx["type"], "contract_call");
    let (count, received, last) = e.anvil.counter_state(counter).await?;
    assert_eq!(count, U256::from(12u64));
    assert_eq!(received, U256::from(12345u64));
    assert_eq!(last, e.wallet);
    let bad = e
        .api()
        .post(
            "/contracts/send",
            &json!({"chain": "anvil", "to": counter, "function": "add(uint256)", "args": ["x"]}),
        )
        .await?;
    bad.assert_invalid("args")?;
    Ok(())
}

async fn one_idempotency_key_gives_one_transaction(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(b, "", &[]).await?;
    let key = uuid::Uuid::new_v4().to_string();
    let body = json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111",
                      "asset": "native", "amount": "1000"})
    .to_string();
    let api = e.api();
    let replies = futures::future::join_all((0..20).map(|_| {
        let api = api.clone();
        let (key, body) = (key.clone(), body.clone());
        async move {
            api.request(
                reqwest::Method::POST,
                "/send",
                &[("Idempotency-Key", &key)],
                Some(&body),
            )
            .await
        }
    }))
    .await;
    // Every twin gets the one submission: the first to commit its claim wins, the others
    // roll back and answer with its transaction.
    let mut ids = std::collections::BTreeSet::new();
    let mut hashes = std::collections::BTreeSet::new();
    let mut bodies = std::collections::BTreeSet::new();
    for reply in replies {
        let reply = reply?;
        ids.insert(submitted_id(&reply)?);
        hashes.insert(reply.body["hash"].to_string());
        bodies.insert(reply.body.to_string());
    }
    assert_eq!(bodies.len(), 1, "every twin answers alike: {bodies:?}");
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(hashes.len(), 1, "{hashes:?}");
    let id = ids.into_iter().next().expect("one id");
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(
        e.anvil.nonce(e.wallet).await?,
        1,
        "exactly one transaction on chain"
    );
    // A later retry replays the stored response exactly; another body is refused.
    let replay = api
        .request(
            reqwest::Method::POST,
            "/send",
            &[("Idempotency-Key", &key)],
            Some(&body),
        )
        .await?;
    assert_eq!(replay.status, 200);
    assert_eq!(bodies.first(), Some(&replay.body.to_string()));
    let other = body.replace("1000", "1001");
    api.request(
        reqwest::Method::POST,
        "/send",
        &[("Idempotency-Key", &key)],
        Some(&other),
    )
    .await?
    .assert_error(409, "IDEMPOTENT_BODY_MISMATCH")?;
    // (Keys are per user: errors.rs has that test.)
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    // The twins that lost rolled back their nonces with their claims: the next send takes
    // nonce 1, so nothing is stranded behind a gap.
    let next = api.post("/send", &serde_json::from_str(&body)?).await?;
    e.wait_for(&submitted_id(&next)?, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    Ok(())
}

async fn concurrent_sends_mine_with_contiguous_nonces(b: Backend) -> anyhow::Result<()> {
    use alloy::providers::Provider;
    // Even with mixed mining, anvil now and then keeps a transaction whose nonce reached its
    // pool out of order in its queue for good (foundry-rs/foundry#10122). The monitor's
    // replacement of a stuck transaction is what then gets it mined, so the replacement
    // comes after 3 s here instead of a minute, and the chain is checked against each
    // record's final hash.
    let e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 200\nstuck_after_secs = 3\n",
        MIXED_MINING,
    )
    .await?;
    let api = e.api();
    let replies = futures::future::join_all((0..100).map(|i| {
        let api = api.clone();
        async move {
            api.post(
                "/send",
                &json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111",
                        "asset": "native", "amount": (1000 + i).to_string()}),
            )
            .await
        }
    }))
    .await;
    let mut ids = Vec::new();
    for reply in replies {
        ids.push(submitted_id(&reply?)?);
    }
    let mut nonces = Vec::new();
    for id in &ids {
        let record = e.wait_for(id, "CONFIRMED").await?;
        let hash = record["hash"]
            .as_str()
            .expect("a confirmed record has a hash");
        let tx = e
            .anvil
            .provider()
            .get_transaction_by_hash(hash.parse()?)
            .await?
            .expect("every confirmed hash is on chain");
        assert!(tx.block_number.is_some(), "{hash} is mined");
        nonces.push(alloy::consensus::Transaction::nonce(&tx));
    }
    nonces.sort_unstable();
    assert_eq!(nonces, (0..100).collect::<Vec<u64>>());
    assert_eq!(e.anvil.nonce(e.wallet).await?, 100);
    Ok(())
}

async fn sends_outside_the_service_do_not_jam_the_next(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(b, "", &[]).await?;
    let to = "0x1111111111111111111111111111111111111111";
    let first = e
        .api()
        .post(
            "/send",
            &json!({"chain": "anvil", "to": to, "asset": "native", "amount": "1"}),
        )
        .await?;
    e.wait_for(&submitted_id(&first)?, "CONFIRMED").await?;
    // Two transactions from the same wallet outside the service.
    e.anvil
        .rpc("anvil_impersonateAccount", json!([e.wallet]))
        .await?;
    for _ in 0..2 {
        e.anvil
            .send_as(
                e.wallet,
                Some(to.parse()?),
                Default::default(),
                U256::from(1u64),
            )
            .await?;
    }
    assert_eq!(e.anvil.nonce(e.wallet).await?, 3);
    let next = e
        .api()
        .post(
            "/send",
            &json!({"chain": "anvil", "to": to, "asset": "native", "amount": "2"}),
        )
        .await?;
    let tx = e.wait_for(&submitted_id(&next)?, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 4);
    let notes = tx["statusHistory"].to_string();
    assert!(notes.contains("re-signed with nonce 3"), "{notes}");
    Ok(())
}

async fn lost_transactions_are_rebroadcast(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 3600\n",
        &["--no-mining"],
    )
    .await?;
    let (id, hash) = e.send_native(RECIPIENT, "5").await?;
    assert_eq!(e.anvil.pool_hashes().await?, std::slice::from_ref(&hash));
    e.anvil.drop_transaction(&hash).await?;
    assert!(e.anvil.pool_hashes().await?.is_empty());
    poll_until("the monitor to send the same bytes again", || async {
        Ok((e.anvil.pool_hashes().await? == [hash.clone()]).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    Ok(())
}

async fn a_transaction_the_node_keeps_losing_is_replaced_in_time(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 2\n",
        &["--no-mining"],
    )
    .await?;
    let (id, first) = e.send_native(RECIPIENT, "5").await?;
    // The node keeps dropping it (as a pool evicts a transaction priced under its others):
    // the monitor sends the same bytes again each time, but the stuck time runs from the
    // first send, so it is replaced with a higher fee all the same.
    let replaced = poll_until(
        "a replacement of the version the node keeps losing",
        || async {
            let tx = e.tx(&id).await?;
            if tx["hash"] != first.as_str() {
                return Ok(Some(tx));
            }
            if e.anvil.pool_hashes().await?.contains(&first) {
                e.anvil.drop_transaction(&first).await?;
            }
            Ok(None)
        },
    )
    .await?;
    assert!(
        replaced["statusHistory"].to_string().contains("replaced"),
        "{replaced}"
    );
    let hash = replaced["hash"].as_str().context("a hash")?.to_owned();
    poll_until("the replacement in the node's pool", || async {
        Ok(e.anvil.pool_hashes().await?.contains(&hash).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

async fn a_transaction_outbid_at_its_nonce_is_raised_once_a_stuck_time(
    b: Backend,
) -> anyhow::Result<()> {
    let e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 3600\n",
        &["--no-mining"],
    )
    .await?;
    let (id, ours) = e.send_native(RECIPIENT, "5").await?;
    // The owner's own transaction at nonce 0, priced far higher, takes ours' place in the
    // pool; every send of ours is then refused as underpriced.
    e.owner_takes_nonce(0).await?;
    // One raise, then the record waits for the stuck time instead of outbidding the owner
    // sweep after sweep up to the cap.
    let waiting = e.wait_for_note(&id, "raised again").await?;
    let raises = waiting["statusHistory"]
        .to_string()
        .matches("replaced")
        .count();
    assert!(raises <= 1, "{waiting}");
    // The owner's transaction mined, ours is re-signed at the next nonce and mined once.
    e.anvil.mine().await?;
    let resigned = e.wait_for_note(&id, "re-signed with nonce 1").await?;
    let hash = resigned["hash"].as_str().context("a hash")?.to_owned();
    assert_ne!(hash, ours);
    poll_until("the re-signed transaction in the pool", || async {
        Ok(e.anvil.pool_hashes().await?.contains(&hash).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

async fn stuck_transactions_are_replaced_with_a_higher_fee(b: Backend) -> anyhow::Result<()> {
    use alloy::{consensus::Transaction as _, providers::Provider};
    let e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\n",
        &["--no-mining"],
    )
    .await?;
    let (id, first) = e.send_native(RECIPIENT, "5").await?;
    // Read at once: the node forgets the original when the replacement arrives, a second on.
    let first_fee = e
        .anvil
        .provider()
        .get_transaction_by_hash(first.parse()?)
        .await?
        .context("the node holds the first version when its send is answered")?
        .max_fee_per_gas();
    // Wait until the record names a replacement and the node holds it.
    let (replaced, new) = poll_until("a replacement in the node's pool", || async {
        let tx = e.tx(&id).await?;
        let hash = tx["hash"].as_str().unwrap_or_default().to_owned();
        if hash == first {
            return Ok(None);
        }
        let known = e
            .anvil
            .provider()
            .get_transaction_by_hash(hash.parse()?)
            .await?;
        Ok(known.map(|t| (tx, t)))
    })
    .await?;
    assert!(
        replaced["statusHistory"].to_string().contains("replaced"),
        "{replaced}"
    );
    assert_eq!(new.nonce(), 0);
    assert!(
        new.max_fee_per_gas() >= first_fee + first_fee / 10,
        "the replacement pays at least 10 % more: {} after {first_fee}",
        new.max_fee_per_gas()
    );
    assert_eq!(
        e.anvil.pool_hashes().await?.len(),
        1,
        "one transaction per nonce in the pool"
    );
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_ne!(tx["hash"], first);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(
        e.anvil
            .balance("0x1111111111111111111111111111111111111111".parse()?)
            .await?,
        U256::from(5u64)
    );
    Ok(())
}

async fn replacements_stop_at_the_fee_cap(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\nmax_fee_per_gas_gwei = 1\n",
        &["--no-mining"],
    )
    .await?;
    let (id, hash) = e.send_native(RECIPIENT, "5").await?;
    let tx = e.wait_for(&id, "FEE_CAPPED").await?;
    assert!(
        tx["statusHistory"].to_string().contains("above the cap"),
        "{tx}"
    );
    assert_eq!(tx["hash"], hash);
    // Still followed: once mined it is confirmed.
    e.anvil.mine().await?;
    e.wait_for(&id, "CONFIRMED").await?;
    Ok(())
}

async fn a_refused_replacement_leaves_the_original_to_mine(b: Backend) -> anyhow::Result<()> {
    use alloy::{consensus::Transaction as _, providers::Provider};
    let e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\n",
        &["--no-mining"],
    )
    .await?;
    let (id, first) = e.send_native(RECIPIENT, "5").await?;
    let sent = e
        .anvil
        .provider()
        .get_transaction_by_hash(first.parse()?)
        .await?
        .context("the send in the pool")?;
    // Just enough for the original: a replacement, which must pay more per gas, is refused
    // for insufficient funds while the original stays pending.
    let exact =
        U256::from(5u64) + U256::from(sent.gas_limit()) * U256::from(sent.max_fee_per_gas());
    e.anvil.set_balance(e.wallet, exact).await?;
    let tx = poll_until("the refused replacement in the record", || async {
        let tx = e.tx(&id).await?;
        let settled =
            !["SUBMITTED", "FEE_CAPPED"].contains(&tx["status"].as_str().unwrap_or_default());
        let noted = tx["statusHistory"]
            .to_string()
            .contains("refused the replacement");
        Ok((settled || noted).then_some(tx))
    })
    .await?;
    // Failing it would free nonce 0 while the original can still be mined.
    assert_eq!(tx["status"], "SUBMITTED", "{tx}");
    assert_eq!(e.anvil.pool_hashes().await?, std::slice::from_ref(&first));
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], first.as_str(), "the original was mined");
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    // The ledger kept nonce 0 taken: the next send takes nonce 1.
    e.anvil.set_balance(e.wallet, U256::from(ETH)).await?;
    let (_, next) = e.send_native(RECIPIENT, "1").await?;
    let next = e
        .anvil
        .provider()
        .get_transaction_by_hash(next.parse()?)
        .await?
        .context("the next send in the pool")?;
    assert_eq!(next.nonce(), 1);
    Ok(())
}

async fn a_stuck_transaction_of_a_withdrawn_wallet_says_why_it_waits(
    b: Backend,
) -> anyhow::Result<()> {
    let mut e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 3600\n",
        &["--no-mining"],
    )
    .await?;
    let (id, first) = e.send_native(RECIPIENT, "5").await?;
    let wallet = e.wallet.to_string();
    let off = e.svc.cli(&["wallets", "delegate", &wallet, "off"]).await?;
    anyhow::ensure!(off.success, "delegate off: {}", off.stderr);
    // Only now is the transaction due for a replacement: the service comes back with a
    // short stuck time.
    e.svc.kill().await?;
    let quick = "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\n";
    e.svc
        .relaunch(service_options(&e.anvil, quick, &[]))
        .await?;
    let tx = poll_until("the record to say why it is not replaced", || async {
        let tx = e.tx(&id).await?;
        let noted = tx["statusHistory"]
            .to_string()
            .contains("no longer delegated to the server signer");
        Ok(noted.then_some(tx))
    })
    .await?;
    assert_eq!(tx["status"], "SUBMITTED", "{tx}");
    assert_eq!(tx["hash"], first.as_str(), "nothing was signed: {tx}");
    assert_eq!(e.anvil.pool_hashes().await?, std::slice::from_ref(&first));
    // Delegated again, the replacement goes out and is mined.
    let on = e.svc.cli(&["wallets", "delegate", &wallet, "on"]).await?;
    anyhow::ensure!(on.success, "delegate on: {}", on.stderr);
    let replacement = poll_until("the replacement", || async {
        let tx = e.tx(&id).await?;
        Ok((tx["hash"] != first.as_str()).then(|| tx["hash"].as_str().map(str::to_owned)))
    })
    .await?
    .context("a hash")?;
    // Stored before it is sent: mined only once the node holds it.
    poll_until("the replacement in the node's pool", || async {
        Ok(e.anvil
            .pool_hashes()
            .await?
            .contains(&replacement)
            .then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_ne!(tx["hash"], first.as_str());
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

/// POSTs a native send of `amount` wei under Idempotency-Key `key`.
async fn keyed_send(e: &Evm, key: &str, amount: &str) -> anyhow::Result<walletops_tests::Reply> {
    let body = json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": amount});
    e.api()
        .request(
            reqwest::Method::POST,
            "/send",
            &[("Idempotency-Key", key)],
            Some(&body.to_string()),
        )
        .await
}

async fn a_twin_refused_for_the_payment_its_key_made_answers_with_it(
    b: Backend,
) -> anyhow::Result<()> {
    // The first of two twins to reach the pipeline waits there, so the other claims the key
    // and its payment is mined first; the waiting twin's simulation then finds the balance
    // spent. Its answer is the twin's transaction, not INSUFFICIENT_FUNDS: that would send
    // the caller to pay again under a new key.
    let e = Evm::start_with_env(
        b,
        "",
        &[],
        &[("FAILPOINTS", "write-before-run=1*sleep(3000)")],
    )
    .await?;
    let key = uuid::Uuid::new_v4().to_string();
    let amount = (60 * ETH).to_string();
    let (first, second) =
        tokio::join!(keyed_send(&e, &key, &amount), keyed_send(&e, &key, &amount));
    let (first, second) = (first?, second?);
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(second.status, 200, "{}", second.text);
    let id = submitted_id(&first)?;
    assert_eq!(submitted_id(&second)?, id);
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(
        e.anvil.balance(RECIPIENT.parse()?).await?,
        U256::from(60 * ETH)
    );
    // The key still stands for that transaction.
    let replay = keyed_send(&e, &key, &amount).await?;
    assert_eq!(submitted_id(&replay)?, id);
    Ok(())
}

async fn a_retry_gets_its_answer_even_after_the_wallet_is_withdrawn(
    b: Backend,
) -> anyhow::Result<()> {
    let e = Evm::start(b, "", &[]).await?;
    let key = uuid::Uuid::new_v4().to_string();
    let sent = keyed_send(&e, &key, "5").await?;
    let id = submitted_id(&sent)?;
    let wallet = e.wallet.to_string();
    let off = e.svc.cli(&["wallets", "delegate", &wallet, "off"]).await?;
    anyhow::ensure!(off.success, "delegate off: {}", off.stderr);
    // The retry of a send that went out is answered from its key, not refused by the
    // wallet's new state: the caller must not take it for a send that never happened.
    let retry = keyed_send(&e, &key, "5").await?;
    assert_eq!(retry.status, 200, "{}", retry.text);
    assert_eq!(retry.body, sent.body);
    keyed_send(&e, &key, "6")
        .await?
        .assert_error(409, "IDEMPOTENT_BODY_MISMATCH")?;
    // A new request is refused by the wallet's state, and nothing more is sent.
    keyed_send(&e, &uuid::Uuid::new_v4().to_string(), "5")
        .await?
        .assert_error(403, "WALLET_NOT_DELEGATED")?;
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

async fn keys_outlive_their_retention_only_while_their_transaction_is_open(
    b: Backend,
) -> anyhow::Result<()> {
    let e = Evm::start_with_env(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 3600\n",
        &["--no-mining"],
        &[("WALLETOPS_IDEMPOTENCY_RETENTION_SECS", "6")],
    )
    .await?;
    // A send the node holds unmined, then (later, so it expires later) a refused one.
    let open_key = uuid::Uuid::new_v4().to_string();
    let sent = keyed_send(&e, &open_key, "5").await?;
    let id = submitted_id(&sent)?;
    let failed_key = uuid::Uuid::new_v4().to_string();
    let too_much = (1000 * ETH).to_string();
    keyed_send(&e, &failed_key, &too_much)
        .await?
        .assert_error(400, "INSUFFICIENT_FUNDS")?;
    keyed_send(&e, &failed_key, &too_much)
        .await?
        .assert_error(409, "IDEMPOTENT_REPLAY")?;
    // Past its retention the failed key is free again: the request runs anew.
    poll_until("the failed key's retention to pass", || async {
        let reply = keyed_send(&e, &failed_key, &too_much).await?;
        Ok((reply.code() != Some("IDEMPOTENT_REPLAY")).then_some(reply))
    })
    .await?
    .assert_error(400, "INSUFFICIENT_FUNDS")?;
    // The older key is past its retention too, but its transaction is open: still bound.
    keyed_send(&e, &open_key, "6")
        .await?
        .assert_error(409, "IDEMPOTENT_BODY_MISMATCH")?;
    let again = keyed_send(&e, &open_key, "5").await?;
    assert_eq!(submitted_id(&again)?, id, "replayed, not sent again");
    assert_eq!(e.anvil.pool_hashes().await?.len(), 1);
    // Settled, it is kept for the retention once more, counted from its settling, then
    // expires like any other key.
    e.anvil.mine().await?;
    e.wait_for(&id, "CONFIRMED").await?;
    keyed_send(&e, &open_key, "6")
        .await?
        .assert_error(409, "IDEMPOTENT_BODY_MISMATCH")?;
    let reused = poll_until("the settled key's retention to pass", || async {
        let reply = keyed_send(&e, &open_key, "6").await?;
        Ok((reply.code() != Some("IDEMPOTENT_BODY_MISMATCH")).then_some(reply))
    })
    .await?;
    assert_ne!(
        submitted_id(&reused)?,
        id,
        "a new request under the freed key"
    );
    Ok(())
}

/// What a `Gateway` does with `eth_sendRawTransaction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sends {
    /// Passes it on.
    PassOn,
    /// Answers with the bare "Internal error" such gateways give, which says nothing of the
    /// transaction, without passing it on.
    Fail,
    /// Passes it on, then answers with a refusal in words no node is known to use: the node
    /// holds the transaction all the same.
    PassOnThenRefuse,
    /// Refuses it in those words without passing it on: a definite refusal.
    Refuse,
}

/// A gateway's refusal of a send, in words no node is known to use.
fn relay_refusal(id: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id,
           "error": {"code": -32000, "message": "transaction rejected by relay policy"}})
}

/// What a `Gateway` refuses besides sends, as hosted providers do.
#[derive(Debug, Clone, Default)]
struct Limits {
    /// A JSON-RPC batch of more calls is refused whole.
    max_batch: Option<usize>,
    /// An `eth_call` whose calldata starts with this is answered with a rate-limit error.
    limited_call: Option<&'static str>,
    /// Receipts and transactions by hash are answered with null, as by a node a block
    /// behind the one that answers the nonces.
    behind: bool,
}

/// A JSON-RPC gateway in front of a node, as hosted providers run them: it passes every call
/// on, `eth_sendRawTransaction` as its `Sends` mode says, within its `Limits`.
struct Gateway {
    url: String,
    sends: std::sync::Arc<std::sync::Mutex<Sends>>,
    limits: std::sync::Arc<std::sync::Mutex<Limits>>,
    /// The raw transactions refused without being passed on, oldest first.
    refused: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Gateway {
    async fn start(node: &str) -> anyhow::Result<Self> {
        let sends = std::sync::Arc::new(std::sync::Mutex::new(Sends::PassOn));
        let limits = std::sync::Arc::new(std::sync::Mutex::new(Limits::default()));
        let refused = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (node, http) = (node.to_owned(), reqwest::Client::new());
        let (mode, limited, kept) = (sends.clone(), limits.clone(), refused.clone());
        let one = move |call: Value| {
            let (node, http, kept) = (node.clone(), http.clone(), kept.clone());
            let mode = *mode.lock().expect("gateway mode");
            let (limited_call, behind) = {
                let limits = limited.lock().expect("gateway limits");
                (limits.limited_call, limits.behind)
            };
            async move {
                if behind
                    && (call["method"] == "eth_getTransactionReceipt"
                        || call["method"] == "eth_getTransactionByHash")
                {
                    return Ok(json!({"jsonrpc": "2.0", "id": call["id"], "result": null}));
                }
                let data = &call["params"][0];
                let data = data["input"].as_str().or(data["data"].as_str());
                if call["method"] == "eth_call"
                    && limited_call.is_some_and(|l| data.is_some_and(|d| d.starts_with(l)))
                {
                    return Ok::<_, reqwest::Error>(json!({"jsonrpc": "2.0", "id": call["id"],
                        "error": {"code": -32005, "message": "request rate exceeded"}}));
                }
                let is_send = call["method"] == "eth_sendRawTransaction";
                if is_send && mode == Sends::Fail {
                    return Ok(json!({"jsonrpc": "2.0", "id": call["id"],
                        "error": {"code": -32603, "message": "Internal error"}}));
                }
                if is_send && mode == Sends::Refuse {
                    if let Some(raw) = call["params"][0].as_str() {
                        kept.lock().expect("gateway refusals").push(raw.to_owned());
                    }
                    return Ok(relay_refusal(&call["id"]));
                }
                let answer = http
                    .post(&node)
                    .json(&call)
                    .send()
                    .await?
                    .json::<Value>()
                    .await?;
                if is_send && mode == Sends::PassOnThenRefuse {
                    return Ok(relay_refusal(&call["id"]));
                }
                Ok(answer)
            }
        };
        let max_batch = limits.clone();
        let app = axum::Router::new().route(
            "/",
            axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
                let one = one.clone();
                let max_batch = max_batch.lock().expect("gateway limits").max_batch;
                async move {
                    let answer = match body {
                        Value::Array(calls) if max_batch.is_some_and(|m| calls.len() > m) => {
                            Ok(json!({"jsonrpc": "2.0", "id": null,
                                "error": {"code": -32600, "message": "batch size too large"}}))
                        }
                        Value::Array(calls) => {
                            let mut answers = Vec::new();
                            for call in calls {
                                answers.push(one(call).await);
                            }
                            answers
                                .into_iter()
                                .collect::<Result<Vec<_>, _>>()
                                .map(Value::Array)
                        }
                        call => one(call).await,
                    };
                    axum::Json(answer.unwrap_or_else(|e| json!({"error": e.to_string()})))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Self {
            url,
            sends,
            limits,
            refused,
        })
    }

    fn set(&self, sends: Sends) {
        *self.sends.lock().expect("gateway mode") = sends;
    }

    fn limit(&self, limits: Limits) {
        *self.limits.lock().expect("gateway limits") = limits;
    }

    /// The raw transactions refused so far.
    fn refused(&self) -> Vec<String> {
        self.refused.lock().expect("gateway refusals").clone()
    }
}

async fn a_broadcast_without_verdict_is_sent_again_not_failed(b: Backend) -> anyhow::Result<()> {
    let e = Evm::behind_gateway(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\n",
        &[],
        &[],
    )
    .await?;
    e.gateway()?.set(Sends::Fail);
    let (id, hash) = e.send_native(RECIPIENT, "7").await?;
    // The transaction may have been passed on: not a refusal, so no error and no freed nonce.
    let tx = e.wait_for_note(&id, "no verdict").await?;
    assert_eq!(tx["status"], "SUBMITTED", "{tx}");
    assert_eq!(e.anvil.nonce(e.wallet).await?, 0);
    // Once the gateway passes sends on again, the monitor's next send of the same bytes lands.
    e.gateway()?.set(Sends::PassOn);
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash, "the same signed bytes");
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(7u64));
    Ok(())
}

async fn a_refused_send_the_node_holds_is_not_failed(b: Backend) -> anyhow::Result<()> {
    let e = Evm::behind_gateway(b, "[monitor]\npoll_interval_ms = 100\n", &[], &[]).await?;
    // The node takes the transaction, but the answer is a refusal in unknown words: the
    // node is asked whether it holds the transaction before the record is failed, its key
    // failed and its nonce freed, which would have the caller pay again.
    e.gateway()?.set(Sends::PassOnThenRefuse);
    let (id, hash) = e.send_native(RECIPIENT, "7").await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    // The same when the monitor makes the send: the first one got no verdict.
    e.gateway()?.set(Sends::Fail);
    let (id, hash) = e.send_native(RECIPIENT, "2").await?;
    e.gateway()?.set(Sends::PassOnThenRefuse);
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    // The ledger kept both nonces taken: the next send takes nonce 2 and is not refused.
    e.gateway()?.set(Sends::PassOn);
    let (next, _) = e.send_native(RECIPIENT, "3").await?;
    let next = e.wait_for(&next, "CONFIRMED").await?;
    assert_never_re_signed(&next);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 3);
    assert_eq!(
        e.anvil.balance(RECIPIENT.parse()?).await?,
        U256::from(12u64)
    );
    Ok(())
}

async fn a_refusal_fails_the_record_and_its_key_together(b: Backend) -> anyhow::Result<()> {
    // The service is killed after a definite refusal failed the record and before the
    // request answered: the key must not replay a success for a payment that never went out.
    let mut e = Evm::behind_gateway(
        b,
        "",
        &[],
        &[("FAILPOINTS", "write-before-failing-key=pause")],
    )
    .await?;
    e.gateway()?.set(Sends::Refuse);
    let key = uuid::Uuid::new_v4().to_string();
    let hung = {
        let (api, key) = (e.api(), key.clone());
        let body = json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "5"});
        tokio::spawn(async move {
            api.request(
                reqwest::Method::POST,
                "/send",
                &[("Idempotency-Key", &key)],
                Some(&body.to_string()),
            )
            .await
        })
    };
    poll_until("the refused record to be failed", || async {
        Ok((e.svc.stored_statuses("send").await? == ["failed"]).then_some(()))
    })
    .await?;
    e.restart("", &[]).await?;
    assert!(
        hung.await?.map(|r| r.status != 200).unwrap_or(true),
        "the killed request answered no success"
    );
    e.gateway()?.set(Sends::PassOn);
    keyed_send(&e, &key, "5")
        .await?
        .assert_error(409, "IDEMPOTENT_REPLAY")?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 0);
    assert!(e.anvil.pool_hashes().await?.is_empty());
    assert_eq!(e.svc.stored_statuses("send").await?, ["failed"]);
    // The freed nonce serves the next payment.
    let (id, _) = e.send_native(RECIPIENT, "5").await?;
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

async fn a_record_is_its_requests_until_its_first_send_is_answered(
    b: Backend,
) -> anyhow::Result<()> {
    // The node takes three seconds to answer the request's first send, and refuses it. The
    // monitor must not send or end the record meanwhile: its send could have the payment
    // made while the request fails the record, or it could fail the record while the request
    // answers SUBMITTED.
    let e = Evm::behind_gateway(
        b,
        "[monitor]\npoll_interval_ms = 100\n",
        &[],
        &[("FAILPOINTS", "evm-before-broadcast=sleep(3000)")],
    )
    .await?;
    e.gateway()?.set(Sends::Refuse);
    let reply = e
        .api()
        .post(
            "/send",
            &json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "5"}),
        )
        .await?;
    reply.assert_error(502, "SEND_FAILED")?;
    assert_eq!(e.svc.stored_statuses("send").await?, ["failed"]);
    // Signed, then failed by the request: nothing in between.
    let history: Vec<Value> = serde_json::from_str(&e.svc.stored_histories("send").await?[0])?;
    assert_eq!(history.len(), 2, "{history:?}");
    Ok(())
}

async fn a_write_that_timed_out_says_its_outcome_is_unknown_and_its_key_finds_it(
    b: Backend,
) -> anyhow::Result<()> {
    // The node's answer to the first send comes after the request's time is up: the record
    // is signed and stored, and the payment is made after all.
    let e = Evm::start_with_env(
        b,
        "[monitor]\npoll_interval_ms = 100\n",
        &[],
        &[
            ("WALLETOPS_REQUEST_TIMEOUT_SECS", "2"),
            ("FAILPOINTS", "evm-before-broadcast=1*sleep(4000)"),
        ],
    )
    .await?;
    let key = uuid::Uuid::new_v4().to_string();
    let reply = keyed_send(&e, &key, "5").await?;
    reply.assert_error(503, "SERVICE_UNAVAILABLE")?;
    // Not "unavailable": that reads as "not done", and a new key would pay twice.
    assert!(
        reply.text.contains("outcome is unknown") && reply.text.contains("same Idempotency-Key"),
        "{}",
        reply.text
    );
    let again = poll_until("the key to answer with its payment", || async {
        let reply = keyed_send(&e, &key, "5").await?;
        Ok((reply.status == 200).then_some(reply))
    })
    .await?;
    let id = submitted_id(&again)?;
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

async fn a_mined_transaction_a_lagging_node_hides_is_not_signed_again(
    b: Backend,
) -> anyhow::Result<()> {
    // A sight that lasts far longer than the test needs to look, however loaded the machine.
    let e = Evm::behind_gateway(
        b,
        "[monitor]\npoll_interval_ms = 100\nresign_after_secs = 60\n",
        &[],
        &[],
    )
    .await?;
    // Mined at once, but the node that answers about transactions is behind the one that
    // answers the nonce: the nonce is used and no version of the record is found.
    e.gateway()?.limit(Limits {
        behind: true,
        ..Limits::default()
    });
    let (id, hash) = e.send_native(RECIPIENT, "5").await?;
    poll_until("the transaction to be mined", || async {
        Ok((e.anvil.nonce(e.wallet).await? == 1).then_some(()))
    })
    .await?;
    // A new nonce now would pay twice: the record waits, checking again.
    let waiting = e.wait_for_note(&id, "checked again").await?;
    assert_eq!(waiting["hash"], hash.as_str(), "{waiting}");
    e.gateway()?.limit(Limits::default());
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash.as_str());
    assert_never_re_signed(&tx);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

async fn a_nonce_taken_outside_is_re_signed_only_once_that_block_is_deep(
    b: Backend,
) -> anyhow::Result<()> {
    let e = Evm::behind_gateway(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 3600\n",
        &["--no-mining"],
        &[("WALLETOPS_CHAINS__ANVIL__CONFIRMATIONS", "3")],
    )
    .await?;
    // Stored with nonce 0, but the gateway keeps it from the node.
    e.gateway()?.set(Sends::Fail);
    let (id, ours) = e.send_native(RECIPIENT, "5").await?;
    // The owner spends nonce 0 outside the service, and it is mined.
    e.anvil
        .rpc("anvil_impersonateAccount", json!([e.wallet]))
        .await?;
    e.anvil
        .rpc(
            "eth_sendTransaction",
            json!([{"from": e.wallet, "to": "0x2222222222222222222222222222222222222222", "value": "0x1"}]),
        )
        .await?;
    e.anvil.mine().await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    // One block deep, that block could still be reorganised away and ours mined instead:
    // no new nonce yet, and the record says why it waits.
    e.gateway()?.set(Sends::PassOn);
    let waiting = e.wait_for_note(&id, "blocks deep").await?;
    assert_eq!(waiting["hash"], ours.as_str(), "{waiting}");
    assert!(e.anvil.pool_hashes().await?.is_empty());
    // Three deep, it is re-signed with the next nonce and mined.
    e.anvil.mine().await?;
    e.anvil.mine().await?;
    let resigned = poll_until("the record to be re-signed", || async {
        let tx = e.tx(&id).await?;
        Ok((tx["hash"] != ours.as_str()).then_some(tx))
    })
    .await?;
    assert!(
        resigned["statusHistory"]
            .to_string()
            .contains("re-signed with nonce 1"),
        "{resigned}"
    );
    let hash = resigned["hash"].as_str().context("a hash")?.to_owned();
    poll_until("the re-signed transaction in the pool", || async {
        Ok(e.anvil.pool_hashes().await?.contains(&hash).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    e.anvil.mine().await?;
    e.anvil.mine().await?;
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

/// Over a node that does not mine: sends 1 ETH and then 1 wei to `FILLED_TO` from `e`'s
/// wallet, loses the first from the pool and leaves the wallet unable to pay for it, so that
/// its nonce 0 would strand the second one forever. Returns the first record once DROPPED
/// and the second one's id, with a filler for nonce 0 and the second send in the pool.
async fn strand_a_nonce(e: &Evm) -> anyhow::Result<(Value, String)> {
    let (big, big_hash) = e.send_native(FILLED_TO, &ETH.to_string()).await?;
    let (small, _) = e.send_native(FILLED_TO, "1").await?;
    e.anvil.set_balance(e.wallet, U256::from(ETH / 100)).await?;
    e.anvil.drop_transaction(&big_hash).await?;
    let dropped = e.wait_for(&big, "DROPPED").await?;
    poll_until(
        "a filler for nonce 0 and the second send in the pool",
        || async { Ok((e.anvil.pool_hashes().await?.len() == 2).then_some(())) },
    )
    .await?;
    Ok((dropped, small))
}

/// Where `strand_a_nonce` sends.
const FILLED_TO: &str = "0x1111111111111111111111111111111111111111";

/// `Evm::start` over a node that does not mine, with a monitor that never replaces.
async fn unmined(b: Backend) -> anyhow::Result<Evm> {
    Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 3600\n",
        &["--no-mining"],
    )
    .await
}

async fn a_refused_filler_is_raised_once_a_stuck_time(b: Backend) -> anyhow::Result<()> {
    let e = Evm::behind_gateway(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 3600\n",
        &["--no-mining"],
        &[],
    )
    .await?;
    let (_, small) = strand_a_nonce(&e).await?;
    let small_hash = e.tx(&small).await?["hash"]
        .as_str()
        .context("a hash")?
        .to_owned();
    // The node loses the filler and refuses every send of it, in words that say nothing
    // of its fee: it is raised once, then waits a stuck time, instead of climbing to the cap
    // a raise a sweep.
    e.gateway()?.set(Sends::Refuse);
    for hash in e.anvil.pool_hashes().await? {
        if hash != small_hash {
            e.anvil.drop_transaction(&hash).await?;
        }
    }
    let history = poll_until("the filler to wait for its next raise", || async {
        let histories = e.svc.stored_histories("nonce_fill").await?;
        Ok(histories
            .into_iter()
            .find(|h| h.contains("raised in fee at most once")))
    })
    .await?;
    assert!(history.matches("replaced").count() <= 1, "{history}");
    assert_eq!(e.svc.stored_statuses("nonce_fill").await?, ["submitted"]);
    // Once the node takes it, it fills nonce 0 and the wallet's next send is mined.
    e.gateway()?.set(Sends::PassOn);
    poll_until("the filler back in the pool", || async {
        Ok((e.anvil.pool_hashes().await?.len() == 2).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    e.wait_for(&small, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    Ok(())
}

/// Over a gateway to a node that does not mine, with `stuck_after_secs`: a send of 5 wei the
/// node takes, then loses, and refuses every time it is sent again (a full pool, a relay's
/// policy). Returns the service, the record's id and its hash.
async fn lost_then_refused(
    b: Backend,
    stuck_after_secs: u64,
) -> anyhow::Result<(Evm, String, String)> {
    let e = Evm::behind_gateway(
        b,
        &format!("[monitor]\npoll_interval_ms = 100\nstuck_after_secs = {stuck_after_secs}\n"),
        &["--no-mining"],
        &[],
    )
    .await?;
    let (id, hash) = e.send_native(RECIPIENT, "5").await?;
    e.gateway()?.set(Sends::Refuse);
    e.anvil.drop_transaction(&hash).await?;
    Ok((e, id, hash))
}

async fn a_transaction_a_node_took_is_not_ended_by_a_refusal(b: Backend) -> anyhow::Result<()> {
    // It may still sit in other nodes' pools and be mined, so it is neither dropped nor its
    // nonce given back; it is sent again until a node takes it.
    let (e, id, hash) = lost_then_refused(b, 3600).await?;
    let waiting = e.wait_for_note(&id, "sent again each sweep").await?;
    assert_eq!(waiting["status"], "SUBMITTED", "{waiting}");
    assert_eq!(e.svc.stored_statuses("nonce_fill").await?.len(), 0);
    e.gateway()?.set(Sends::PassOn);
    poll_until("the transaction back in the pool", || async {
        Ok((e.anvil.pool_hashes().await? == [hash.clone()]).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(tx["hash"], hash.as_str(), "the same signed bytes");
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    // Its nonce was not given back: the next send takes nonce 1.
    let (next, _) = e.send_native(RECIPIENT, "1").await?;
    e.anvil.mine().await?;
    let next = e.wait_for(&next, "CONFIRMED").await?;
    assert_never_re_signed(&next);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    Ok(())
}

async fn a_transaction_refused_for_five_stuck_times_is_dropped(b: Backend) -> anyhow::Result<()> {
    // Kept open for five stuck times, then taken as gone. A node may still hold it, so its
    // nonce is filled, never given back to the next payment.
    let (e, id, _) = lost_then_refused(b, 1).await?;
    let dropped = e.wait_for(&id, "DROPPED").await?;
    assert!(
        dropped["statusHistory"]
            .to_string()
            .contains("raised in fee at most once"),
        "{dropped}"
    );
    assert_eq!(e.svc.stored_statuses("nonce_fill").await?, ["submitted"]);
    e.gateway()?.set(Sends::PassOn);
    let (next, _) = e.send_native(RECIPIENT, "7").await?;
    poll_until("the filler and the next send pending", || async {
        Ok((e.anvil.pool_hashes().await?.len() == 2).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    let next = e.wait_for(&next, "CONFIRMED").await?;
    assert_never_re_signed(&next);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(7u64));
    Ok(())
}

async fn a_dropped_transaction_mined_after_all_is_settled(b: Backend) -> anyhow::Result<()> {
    use alloy::providers::Provider;
    // A node the service cannot reach any more still holds the transaction, taken as gone
    // after five stuck times of refusals, and mines it: its filler is not needed, and the
    // record must not stay DROPPED (its caller would pay again).
    let e = Evm::behind_gateway(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\n",
        &["--no-mining"],
        &[("WALLETOPS_IDEMPOTENCY_RETENTION_SECS", "1")],
    )
    .await?;
    let key = uuid::Uuid::new_v4().to_string();
    let sent = keyed_send(&e, &key, "5").await?;
    let (id, hash) = (
        submitted_id(&sent)?,
        sent.body["hash"].as_str().unwrap_or_default().to_owned(),
    );
    let raw: alloy::primitives::Bytes = e
        .anvil
        .provider()
        .raw_request("eth_getRawTransactionByHash".into(), (hash.as_str(),))
        .await?;
    e.gateway()?.set(Sends::Refuse);
    e.anvil.drop_transaction(&hash).await?;
    let dropped = e.wait_for(&id, "DROPPED").await?;
    assert_eq!(e.svc.stored_statuses("nonce_fill").await?, ["submitted"]);
    // Past its retention, counted from the record's ending too, the key still stands while
    // the filler is open: the record may yet turn out mined.
    let ended: chrono::DateTime<chrono::Utc> =
        dropped["updatedAt"].as_str().unwrap_or_default().parse()?;
    poll_until(
        "the key's retention to pass since the record ended",
        || async { Ok((chrono::Utc::now() - ended > chrono::Duration::seconds(2)).then_some(())) },
    )
    .await?;
    let replay = keyed_send(&e, &key, "5").await?;
    assert_eq!(submitted_id(&replay)?, id, "replayed, not sent again");
    // Finding the filler unneeded and settling the record takes no signing: it happens for
    // a wallet no longer delegated too.
    let wallet = e.wallet.to_string();
    let off = e.svc.cli(&["wallets", "delegate", &wallet, "off"]).await?;
    anyhow::ensure!(off.success, "delegate off: {}", off.stderr);
    let _pending = e.anvil.provider().send_raw_transaction(&raw).await?;
    e.anvil.mine().await?;
    e.gateway()?.set(Sends::PassOn);
    let settled = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(settled["hash"], hash.as_str(), "{settled}");
    assert!(
        settled["statusHistory"]
            .to_string()
            .contains("mined after all"),
        "{settled}"
    );
    poll_until("the filler to end", || async {
        Ok((e.svc.stored_statuses("nonce_fill").await? == ["dropped"]).then_some(()))
    })
    .await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

async fn a_failed_transaction_whose_nonce_was_reused_and_that_was_mined_is_settled(
    b: Backend,
) -> anyhow::Result<()> {
    use alloy::providers::Provider as _;
    // The gateway refuses the send for sure, so the record fails and gives its nonce back;
    // yet another node behind it had the transaction and mines it. The next payment, signed
    // with the same nonce, finds it used.
    let e = Evm::behind_gateway(b, "[monitor]\npoll_interval_ms = 100\n", &[], &[]).await?;
    e.gateway()?.set(Sends::Refuse);
    let key = uuid::Uuid::new_v4().to_string();
    keyed_send(&e, &key, "5")
        .await?
        .assert_error(502, "SEND_FAILED")?;
    keyed_send(&e, &key, "5")
        .await?
        .assert_error(409, "IDEMPOTENT_REPLAY")?;
    let raw: alloy::primitives::Bytes = e.gateway()?.refused()[0].parse()?;
    let _pending = e.anvil.provider().send_raw_transaction(&raw).await?;
    poll_until("the refused transaction to be mined", || async {
        Ok((e.anvil.nonce(e.wallet).await? == 1).then_some(()))
    })
    .await?;
    e.gateway()?.set(Sends::PassOn);
    let (next, _) = e.send_native(RECIPIENT, "7").await?;
    e.wait_for(&next, "CONFIRMED").await?;
    // The failed payment was made: its key answers with it, and its record says so.
    let replay = poll_until("the failed key to answer with its payment", || async {
        let reply = keyed_send(&e, &key, "5").await?;
        Ok((reply.status == 200).then_some(reply))
    })
    .await?;
    let settled = e.wait_for(&submitted_id(&replay)?, "CONFIRMED").await?;
    assert!(
        settled["statusHistory"]
            .to_string()
            .contains("after it had ended FAILED"),
        "{settled}"
    );
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    assert_eq!(
        e.anvil.balance(RECIPIENT.parse()?).await?,
        U256::from(12u64)
    );
    Ok(())
}

async fn a_call_that_reverts_when_mined_ends_reverted(b: Backend) -> anyhow::Result<()> {
    alloy::sol! {
        interface IAllowance {
            function approve(address spender, uint256 amount) external returns (bool);
        }
    }
    use alloy::sol_types::SolCall as _;
    use walletops_tests::anvil::DEV_ACCOUNT;
    // The wallet may pull 100 tokens from the dev account: the call passes simulation. Before
    // it is mined, the dev account withdraws the allowance with a far higher tip, so its
    // transaction is mined first in the same block and the call reverts.
    let e = Evm::start(b, "[monitor]\npoll_interval_ms = 100\n", &[]).await?;
    let token = e.anvil.deploy_token("PULL", 18).await?;
    e.anvil.mint(token, DEV_ACCOUNT, U256::from(100u64)).await?;
    let approve = |amount: u64| -> alloy::primitives::Bytes {
        IAllowance::approveCall {
            spender: e.wallet,
            amount: U256::from(amount),
        }
        .abi_encode()
        .into()
    };
    e.anvil.send_from_dev(Some(token), approve(100)).await?;
    e.anvil.set_automine(false).await?;
    let reply = e
        .api()
        .post(
            "/contracts/send",
            &json!({"chain": "anvil", "to": token,
                    "function": "transferFrom(address,address,uint256)",
                    "args": [DEV_ACCOUNT, e.wallet, "100"]}),
        )
        .await?;
    let id = submitted_id(&reply)?;
    let gwei = 1_000_000_000u64;
    e.anvil
        .rpc(
            "eth_sendTransaction",
            json!([{"from": DEV_ACCOUNT, "to": token, "input": approve(0),
                    "maxPriorityFeePerGas": format!("{:#x}", 500 * gwei),
                    "maxFeePerGas": format!("{:#x}", 1000 * gwei)}]),
        )
        .await?;
    poll_until("both transactions to be pooled", || async {
        Ok((e.anvil.pool_hashes().await?.len() == 2).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "REVERTED").await?;
    assert_eq!(tx["hash"], reply.body["hash"], "{tx}");
    // Mined: the nonce is used (the gas paid), and no token moved.
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(e.anvil.token_balance(token, e.wallet).await?, U256::ZERO);
    assert_eq!(
        e.anvil.token_balance(token, DEV_ACCOUNT).await?,
        U256::from(100u64)
    );
    Ok(())
}

async fn grpcurl_approves_and_calls_a_contract(b: Backend) -> anyhow::Result<()> {
    // The README's grpcurl writes, as a caller types them: JSON field names, enum-free bodies,
    // `args` as a JSON list.
    let e = Evm::start(b, "", &[]).await?;
    let token = e.anvil.deploy_token("GRPC", 18).await?;
    let counter = e.anvil.deploy_counter().await?;
    let spender: Address = "0x2222222222222222222222222222222222222222".parse()?;
    let call = async |method: &str, body: Value| -> anyhow::Result<String> {
        let out = walletops_tests::grpcurl([
            "-plaintext".to_owned(),
            "-H".to_owned(),
            format!("x-api-key: {}", e.svc.api_key),
            "-H".to_owned(),
            format!("idempotency-key: {}", uuid::Uuid::new_v4()),
            "-d".to_owned(),
            body.to_string(),
            e.svc.grpc_addr.clone(),
            format!("walletops.v1.WalletOpsService/{method}"),
        ])
        .await?;
        let reply: Value = serde_json::from_str(&out)?;
        Ok(reply["submission"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    };
    let approved = call(
        "ApproveToken",
        json!({"chain": "anvil", "token": token, "spender": spender, "amount": "1000000"}),
    )
    .await?;
    e.wait_for(&approved, "CONFIRMED").await?;
    assert_eq!(
        e.anvil.allowance(token, e.wallet, spender).await?,
        U256::from(1_000_000u64)
    );
    let called = call(
        "CallContract",
        json!({"chain": "anvil", "to": counter, "function": "add(uint256)", "args": [7]}),
    )
    .await?;
    e.wait_for(&called, "CONFIRMED").await?;
    let (count, _, caller) = e.anvil.counter_state(counter).await?;
    assert_eq!((count, caller), (U256::from(7u64), e.wallet));
    Ok(())
}

async fn a_core_that_stops_hands_its_records_to_the_others_at_once(
    b: Backend,
) -> anyhow::Result<()> {
    // Leases that would outlast the test: only a core that gives its up on stopping lets the
    // other follow its records in time.
    let mut e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nlease_secs = 3600\n",
        &["--no-mining"],
    )
    .await?;
    let (id, _) = e.send_native(RECIPIENT, "5").await?;
    poll_until("the core's monitor to lease the record", || async {
        Ok((e.svc.leased_transactions().await? == 1).then_some(()))
    })
    .await?;
    let other = e.svc.sibling().await?;
    e.svc.terminate().await?;
    e.anvil.mine().await?;
    let api = Rest::new(&other.http()?, &e.svc.api_key);
    poll_until("the other core to settle the record", || async {
        let tx = api.get(&format!("/tx/{id}")).await?.body;
        Ok((tx["status"] == "CONFIRMED").then_some(()))
    })
    .await?;
    Ok(())
}

async fn a_core_that_cannot_follow_a_record_gives_it_up(b: Backend) -> anyhow::Result<()> {
    let toml = "[monitor]\npoll_interval_ms = 100\nlease_secs = 5\n";
    let mut e = Evm::start(b, toml, &["--no-mining"]).await?;
    let (id, _) = e.send_native(RECIPIENT, "5").await?;
    poll_until("the core's monitor to lease the record", || async {
        Ok((e.svc.leased_transactions().await? == 1).then_some(()))
    })
    .await?;
    let first = e.svc.send_lease_owners().await?;
    // A second core whose node takes its calls and never answers (a network path that
    // drops packets): each try to follow the record fails only when it times out, so the
    // record is free for a moment only unless the core leaves it to the others for a while.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let silent_url = format!("http://{}", silent.local_addr()?);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let mut blind = service_options(&e.anvil, toml, &[]);
    blind.config_toml = blind
        .config_toml
        .map(|toml| toml.replace(e.anvil.url(), &silent_url));
    let _blind = e.svc.sibling_with(&blind).await?;
    e.svc.kill().await?;
    poll_until("the blind core to take the record", || async {
        Ok((e.svc.send_lease_owners().await? != first).then_some(()))
    })
    .await?;
    // A core that can follow it starts: the blind core, renewing its lease each sweep,
    // would keep the record (and every later nonce of the wallet) from it for good.
    e.svc
        .relaunch(gated_options(&e.anvil, None, toml, &[]))
        .await?;
    e.anvil.mine().await?;
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

async fn a_nonce_held_only_in_a_pool_is_not_skipped(b: Backend) -> anyhow::Result<()> {
    let e = unmined(b).await?;
    let (first, _) = e.send_native(RECIPIENT, "1").await?;
    e.anvil.mine().await?;
    e.wait_for(&first, "CONFIRMED").await?;
    // The owner's transaction at nonce 1 waits in the pool, priced far over ours: the
    // first send of ours, at nonce 1 by the ledger, is refused as underpriced.
    e.owner_takes_nonce(1).await?;
    let owners = e.anvil.pool_hashes().await?;
    assert_eq!(owners.len(), 1);
    let (id, _) = e.send_native(RECIPIENT, "5").await?;
    // Nonce 1 is only pooled, not mined: a new nonce would strand ours and every later
    // send behind a gap if the owner's transaction never is. The monitor has met the
    // refusal (its note) and kept the nonce.
    let tx = e.wait_for_note(&id, "the node refused it").await?;
    assert_never_re_signed(&tx);
    // It never is: it leaves the pool, and ours takes nonce 1.
    e.anvil.drop_transaction(&owners[0]).await?;
    poll_until("ours in the pool", || async {
        let pool = e.anvil.pool_hashes().await?;
        Ok((pool.len() == 1 && pool != owners).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "CONFIRMED").await?;
    assert_never_re_signed(&tx);
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(6u64));
    Ok(())
}

async fn a_gap_below_the_ledger_is_filled(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\n",
        &["--no-mining"],
    )
    .await?;
    // The owner's transaction at nonce 0 is in the pool when the service first sends from
    // the wallet: the ledger starts at the chain's pending nonce, past it.
    e.owner_takes_nonce(0).await?;
    let owners = e.anvil.pool_hashes().await?;
    assert_eq!(owners.len(), 1);
    let (id, _) = e.send_native(RECIPIENT, "5").await?;
    // It leaves the pool unmined: ours waits behind a nonce nothing holds, which a higher
    // fee does not help. The gap is filled, and ours is mined after it.
    e.anvil.drop_transaction(&owners[0]).await?;
    poll_until("a filler for the gap", || async {
        let fills = e.svc.stored_histories("nonce_fill").await?;
        Ok((fills.len() == 1 && fills[0].contains("a gap below")).then_some(()))
    })
    .await?;
    poll_until("the filler and ours pending", || async {
        Ok((e.anvil.pool_hashes().await?.len() == 2).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2);
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    poll_until("the filler to be confirmed", || async {
        Ok((e.svc.stored_statuses("nonce_fill").await? == ["confirmed"]).then_some(()))
    })
    .await?;
    Ok(())
}

async fn dropped_transactions_get_their_nonce_filled(b: Backend) -> anyhow::Result<()> {
    let e = unmined(b).await?;
    let (dropped, small) = strand_a_nonce(&e).await?;
    assert!(
        dropped["error"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase()
            .contains("insufficient funds"),
        "{dropped}"
    );
    e.anvil.mine().await?;
    e.wait_for(&small, "CONFIRMED").await?;
    assert_eq!(
        e.anvil.nonce(e.wallet).await?,
        2,
        "nonce 0 was filled, nonce 1 mined"
    );
    assert_eq!(
        e.anvil.balance(FILLED_TO.parse()?).await?,
        U256::from(1u64),
        "only the small send moved value"
    );
    Ok(())
}

async fn a_filler_whose_nonce_another_transaction_took_is_dropped(
    b: Backend,
) -> anyhow::Result<()> {
    let e = unmined(b).await?;
    let (_, small) = strand_a_nonce(&e).await?;
    // The owner fills nonce 0 first, from outside the service, outbidding the filler.
    e.owner_takes_nonce(0).await?;
    e.anvil.mine().await?;
    e.wait_for(&small, "CONFIRMED").await?;
    // The filler is not needed any more: dropped, not signed again at a new nonce.
    poll_until("the filler to be dropped", || async {
        Ok((e.svc.stored_statuses("nonce_fill").await? == ["dropped"]).then_some(()))
    })
    .await?;
    e.anvil.mine().await?;
    assert_eq!(e.anvil.nonce(e.wallet).await?, 2, "no third transaction");
    assert!(e.anvil.pool_hashes().await?.is_empty());
    Ok(())
}

async fn grpc_writes_share_the_pipeline(b: Backend) -> anyhow::Result<()> {
    use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
    let e = Evm::start(b, "", &[]).await?;
    let counter = e.anvil.deploy_counter().await?;
    let mut client = WalletOpsServiceClient::new(e.svc.channel().await?);
    let key = uuid::Uuid::new_v4().to_string();
    let call = || -> anyhow::Result<tonic::Request<pb::CallContractRequest>> {
        let mut req = walletops_tests::with_key(
            pb::CallContractRequest {
                chain: "anvil".to_owned(),
                to: counter.to_string(),
                function: Some("add(uint256)".to_owned()),
                args: Some(prost_types::ListValue {
                    values: vec![prost_types::Value {
                        kind: Some(prost_types::value::Kind::StringValue("40".to_owned())),
                    }],
                }),
                ..Default::default()
            },
            &e.svc.api_key,
        )?;
        req.metadata_mut().insert("idempotency-key", key.parse()?);
        Ok(req)
    };
    let first = client
        .call_contract(call()?)
        .await?
        .into_inner()
        .submission
        .expect("submission");
    assert_eq!(first.status(), pb::SubmissionStatus::Submitted);
    let again = client
        .call_contract(call()?)
        .await?
        .into_inner()
        .submission
        .expect("submission");
    assert_eq!(again, first, "a retry over gRPC replays the stored answer");
    // The same write over REST, or over gRPC with its empty optional fields set (as a client
    // that sets every field sends them), is the same request under the key.
    let body = json!({"chain": "anvil", "to": counter.to_string(),
                      "function": "add(uint256)", "args": ["40"]});
    let rest = e
        .api()
        .request(
            reqwest::Method::POST,
            "/contracts/send",
            &[("Idempotency-Key", &key)],
            Some(&body.to_string()),
        )
        .await?;
    assert_eq!(submitted_id(&rest)?, first.id);
    let mut every_field = call()?;
    let req = every_field.get_mut();
    req.from = Some(String::new());
    req.value = Some(String::new());
    req.data = Some(String::new());
    let again = client
        .call_contract(every_field)
        .await?
        .into_inner()
        .submission
        .expect("submission");
    assert_eq!(again, first);
    e.wait_for(&first.id, "CONFIRMED").await?;
    assert_eq!(e.anvil.counter_state(counter).await?.0, U256::from(40u64));
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    Ok(())
}

/// The history notes of record `tx` that say it waits in a block for its confirmations.
fn waiting_notes(tx: &Value) -> Vec<String> {
    tx["statusHistory"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["note"].as_str())
        .filter(|n| n.contains("waiting for 3 confirmations"))
        .map(str::to_owned)
        .collect()
}

async fn records_wait_for_their_confirmations_and_follow_a_reorg(b: Backend) -> anyhow::Result<()> {
    use alloy::providers::Provider;
    let e = Evm::start_with_env(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 3600\n",
        &[],
        &[("WALLETOPS_CHAINS__ANVIL__CONFIRMATIONS", "3")],
    )
    .await?;
    let recipient: Address = "0x3333333333333333333333333333333333333333".parse()?;
    let (id, hash) = e.send_native(&recipient.to_string(), "7").await?;
    let receipt = |hash: String| {
        let provider = e.anvil.provider().clone();
        async move { Ok::<_, anyhow::Error>(provider.get_transaction_receipt(hash.parse()?).await?) }
    };
    // Anvil mines it at once: one block deep, the record stays open and says why.
    let first = poll_until("the record to note the block it waits in", || async {
        let tx = e.tx(&id).await?;
        Ok((!waiting_notes(&tx).is_empty()).then_some(tx))
    })
    .await?;
    assert_eq!(first["status"], "SUBMITTED", "{first}");
    let first_block = receipt(hash.clone())
        .await?
        .and_then(|r| r.block_hash)
        .context("a receipt")?;
    assert!(
        waiting_notes(&first)[0].contains(&format!("{first_block:#x}")),
        "{first}"
    );
    // Two deep, then both blocks are replaced by empty ones: the transaction is gone from the
    // node, which the monitor sees at its next sweep.
    e.anvil.mine().await?;
    e.anvil.reorg(2).await?;
    // The monitor sends the same bytes again; mined anew, the record waits in the new block.
    let again = poll_until("the record to wait in another block", || async {
        let tx = e.tx(&id).await?;
        let notes = waiting_notes(&tx);
        Ok(notes
            .last()
            .is_some_and(|n| !n.contains(&format!("{first_block:#x}")))
            .then_some(tx))
    })
    .await?;
    assert_eq!(again["status"], "SUBMITTED", "{again}");
    assert_eq!(again["hash"], hash);
    let block = receipt(hash.clone())
        .await?
        .and_then(|r| r.block_hash)
        .context("a receipt after the reorg")?;
    assert_ne!(block, first_block);
    // Three deep: final.
    e.anvil.mine().await?;
    e.anvil.mine().await?;
    let done = e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(done["hash"], hash);
    assert!(
        done["statusHistory"]
            .to_string()
            .contains(&format!("{block:#x}")),
        "{done}"
    );
    assert_eq!(e.anvil.balance(recipient).await?, U256::from(7u64));
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    Ok(())
}

on_both_backends!(
    records_wait_for_their_confirmations_and_follow_a_reorg,
    dropped_transactions_get_their_nonce_filled,
    grpc_writes_share_the_pipeline,
    balances_equal_the_nodes,
    balances_fall_back_to_a_batch_without_multicall,
    balances_without_multicall_keep_within_a_providers_limits,
    native_and_token_sends_move_exactly_the_amount,
    doomed_writes_fail_before_signing_and_consume_no_nonce,
    approvals_and_contract_calls_execute,
    one_idempotency_key_gives_one_transaction,
    concurrent_sends_mine_with_contiguous_nonces,
    sends_outside_the_service_do_not_jam_the_next,
    lost_transactions_are_rebroadcast,
    a_transaction_the_node_keeps_losing_is_replaced_in_time,
    a_transaction_outbid_at_its_nonce_is_raised_once_a_stuck_time,
    stuck_transactions_are_replaced_with_a_higher_fee,
    replacements_stop_at_the_fee_cap,
    a_refused_replacement_leaves_the_original_to_mine,
    a_stuck_transaction_of_a_withdrawn_wallet_says_why_it_waits,
    keys_outlive_their_retention_only_while_their_transaction_is_open,
    a_write_that_timed_out_says_its_outcome_is_unknown_and_its_key_finds_it,
    a_failed_transaction_whose_nonce_was_reused_and_that_was_mined_is_settled,
    a_call_that_reverts_when_mined_ends_reverted,
    grpcurl_approves_and_calls_a_contract,
    a_retry_gets_its_answer_even_after_the_wallet_is_withdrawn,
    a_twin_refused_for_the_payment_its_key_made_answers_with_it,
    a_broadcast_without_verdict_is_sent_again_not_failed,
    a_refused_send_the_node_holds_is_not_failed,
    a_refusal_fails_the_record_and_its_key_together,
    a_record_is_its_requests_until_its_first_send_is_answered,
    a_dropped_transaction_mined_after_all_is_settled,
    a_core_that_stops_hands_its_records_to_the_others_at_once,
    a_core_that_cannot_follow_a_record_gives_it_up,
    a_nonce_taken_outside_is_re_signed_only_once_that_block_is_deep,
    a_filler_whose_nonce_another_transaction_took_is_dropped,
    a_refused_filler_is_raised_once_a_stuck_time,
    a_transaction_a_node_took_is_not_ended_by_a_refusal,
    a_nonce_held_only_in_a_pool_is_not_skipped,
    a_transaction_refused_for_five_stuck_times_is_dropped,
    a_gap_below_the_ledger_is_filled,
    a_mined_transaction_a_lagging_node_hides_is_not_signed_again,
);
