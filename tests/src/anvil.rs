//! A real anvil node for the EVM tests (from the project's npm install), on a random port,
//! with helpers to fund wallets, deploy the committed test contracts and steer mining.

use std::{path::PathBuf, process::Stdio};

use alloy::{
    primitives::{Address, B256, Bytes, U256},
    providers::{Provider, RootProvider},
    rpc::types::TransactionRequest,
    sol,
    sol_types::{SolCall, SolConstructor},
};
use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::{
    Options, Rest,
    paths::workspace_root,
    service::signal,
    wait::{poll_until, within},
};

sol! {
    /// The committed test token (tests/contracts/TestToken.sol).
    contract TestToken {
        constructor(string name_, string symbol_, uint8 decimals_);
        function mint(address to, uint256 amount) external;
        function setFrozen(address account, bool isFrozen) external;
        function balanceOf(address owner) external view returns (uint256);
        function allowance(address owner, address spender) external view returns (uint256);
    }

    /// The committed test contract (tests/contracts/Counter.sol).
    contract Counter {
        function count() external view returns (uint256);
        function received() external view returns (uint256);
        function lastCaller() external view returns (address);
    }
}

/// anvil's first dev account, unlocked: it deploys and funds in tests.
pub const DEV_ACCOUNT: Address =
    alloy::primitives::address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");

/// The anvil binary the test command installs with npm.
pub fn anvil_bin() -> anyhow::Result<PathBuf> {
    let bin = workspace_root().join("node_modules/.bin/anvil");
    if !bin.exists() {
        bail!(
            "{} is missing: `npm install` (scripts/test) installs it",
            bin.display()
        );
    }
    Ok(bin)
}

/// A running anvil, killed when dropped.
#[derive(Debug)]
pub struct Anvil {
    _child: Child,
    url: String,
    provider: RootProvider,
    http: reqwest::Client,
}

fn artifact(name: &str) -> anyhow::Result<Bytes> {
    let path = workspace_root().join(format!("tests/contracts/build/{name}.json"));
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let json: Value = serde_json::from_str(&text)?;
    let hex = json["bytecode"]
        .as_str()
        .context("artifact has no bytecode")?;
    Ok(hex.parse()?)
}

/// The config TOML that adds the node at `url` to a service as chain `anvil`.
fn chain_toml(url: &str) -> String {
    chain_toml_with(&format!("rpc_url = \"{url}\""))
}

/// A JSON-RPC quantity (`0x`-hex) as a number; an absent one is 0.
pub fn quantity(v: &serde_json::Value) -> anyhow::Result<u128> {
    let hex = v.as_str().unwrap_or("0x0").trim_start_matches("0x");
    Ok(u128::from_str_radix(hex, 16)?)
}

/// The body of `POST /contracts/send` on `anvil`: a call of `data` to `to` with `value` wei.
pub fn call_body(to: Address, data: Vec<u8>, value: u64) -> serde_json::Value {
    serde_json::json!({"chain": "anvil", "to": to.to_string(), "data": Bytes::from(data).to_string(),
           "value": value.to_string()})
}

/// The chain `anvil` reached as `rpc` (its `rpc_url` or `rpc_urls` line) says.
fn chain_toml_with(rpc: &str) -> String {
    format!(
        "[chains.anvil]\nfamily = \"ethereum\"\nchain_id = 31337\nname = \"Anvil\"\n{rpc}\nexplorer_tx_url = \"{EXPLORER}/tx/{{hash}}\"\n"
    )
}

/// The explorer the test chain `anvil` is configured with: transaction links are
/// `{EXPLORER}/tx/{hash}`.
pub const EXPLORER: &str = "https://explorer.anvil.test";

/// Arguments for a node that takes many concurrent transactions of one sender: automine
/// alone can leave ready transactions unmined when their nonces arrive out of order
/// (foundry-rs/foundry#10122, an anvil bug, not a behaviour of real nodes); a block every
/// second beside it mines most of them. Now and then one stays queued even so: a test that
/// must see every send mined lets the monitor replace stuck transactions soon.
pub const MIXED_MINING: &[&str] = &["--mixed-mining", "--block-time", "1"];

impl Anvil {
    /// Starts anvil with automatic mining.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(&[]).await
    }

    /// Starts anvil with extra arguments (e.g. `--no-mining`).
    pub async fn start_with(args: &[&str]) -> anyhow::Result<Self> {
        Self::start_on(0, args).await
    }

    /// Starts anvil on `port` (0: any free port) with extra arguments.
    pub async fn start_on(port: u16, args: &[&str]) -> anyhow::Result<Self> {
        let mut child = Command::new(anvil_bin()?)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting anvil")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = within("anvil to listen", async {
            while let Some(line) = lines.next_line().await? {
                if let Some(addr) = line.strip_prefix("Listening on ") {
                    return Ok::<_, anyhow::Error>(addr.trim().to_owned());
                }
            }
            bail!("anvil exited before listening")
        })
        .await??;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let url = format!("http://{addr}");
        Ok(Self {
            _child: child,
            provider: RootProvider::new_http(url.parse()?),
            url,
            http: crate::http::client(),
        })
    }

    /// The node's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self._child.id()
    }

    /// The node's JSON-RPC URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The node's port.
    pub fn port(&self) -> anyhow::Result<u16> {
        Ok(self
            .url
            .rsplit(':')
            .next()
            .context("no port in the URL")?
            .parse()?)
    }

    /// Stops the node as Ctrl-C would, so that a node started with `--state` writes its
    /// state out, and waits until it has exited.
    pub async fn stop_gracefully(mut self) -> anyhow::Result<()> {
        signal(&self._child, "-INT").await?;
        within("anvil to exit", self._child.wait()).await??;
        Ok(())
    }

    /// The node, through alloy.
    pub fn provider(&self) -> &RootProvider {
        &self.provider
    }

    /// The config TOML that adds this node to a service as chain `anvil`.
    pub fn chain_toml(&self) -> String {
        chain_toml(&self.url)
    }

    /// The options of a service with this node as chain `anvil`, `extra_toml` and `env`.
    pub fn service_options(&self, extra_toml: &str, env: &[(&str, &str)]) -> Options {
        self.service_options_via(&self.url, extra_toml, env)
    }

    /// `service_options`, the service reaching the node at `url` instead: a gateway in front
    /// of it, say, or an address that never answers.
    pub fn service_options_via(
        &self,
        url: &str,
        extra_toml: &str,
        env: &[(&str, &str)],
    ) -> Options {
        Options {
            // These tests poll GET /tx; the rate limits have tests of their own.
            log_file: None,
            config_toml: Some(format!(
                "{}\n[rate_limits]\nwrites_per_minute = 1000\nreads_per_minute = 100000\n{extra_toml}",
                chain_toml(url)
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

    /// `service_options`, the service reaching the node through `urls` (its `rpc_urls`, tried
    /// in order).
    pub fn service_options_over(
        &self,
        urls: &[&str],
        extra_toml: &str,
        env: &[(&str, &str)],
    ) -> Options {
        let listed: Vec<String> = urls.iter().map(|u| format!("\"{u}\"")).collect();
        let mut options = self.service_options(extra_toml, env);
        options.config_toml = options.config_toml.map(|toml| {
            toml.replacen(
                &chain_toml(&self.url),
                &chain_toml_with(&format!("rpc_urls = [{}]", listed.join(", "))),
                1,
            )
        });
        options
    }

    /// Gives the default EVM wallet of `api`'s caller `wei` to spend; its address.
    pub async fn fund_default_wallet(&self, api: &Rest, wei: U256) -> anyhow::Result<Address> {
        let wallet: Address = api.default_wallet("ethereum").await?.parse()?;
        self.set_balance(wallet, wei).await?;
        Ok(wallet)
    }

    /// A raw JSON-RPC call (for the anvil_* and evm_* methods).
    pub async fn rpc(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let reply: Value = self
            .http
            .post(&self.url)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await?
            .json()
            .await?;
        if let Some(err) = reply.get("error") {
            bail!("{method} failed: {err}");
        }
        Ok(reply["result"].clone())
    }

    /// Sets `address`'s balance to `wei`.
    pub async fn set_balance(&self, address: Address, wei: U256) -> anyhow::Result<()> {
        self.rpc("anvil_setBalance", json!([address, format!("{wei:#x}")]))
            .await?;
        Ok(())
    }

    /// The native balance of `address`.
    pub async fn balance(&self, address: Address) -> anyhow::Result<U256> {
        Ok(self.provider.get_balance(address).await?)
    }

    /// The count of `address`'s mined transactions.
    pub async fn nonce(&self, address: Address) -> anyhow::Result<u64> {
        Ok(self.provider.get_transaction_count(address).await?)
    }

    /// Posts `body` to `path` with `api` and asserts it is refused 403 `FORBIDDEN` in words
    /// containing each of `words` (in any case), `wallet` having signed nothing.
    pub async fn assert_forbidden(
        &self,
        wallet: Address,
        api: &Rest,
        request: (&str, &Value),
        words: &[&str],
    ) -> anyhow::Result<()> {
        self.assert_refused(wallet, api, request, (403, "FORBIDDEN"), words)
            .await
    }

    /// Posts `body` to `path` with `api` and asserts it is refused with `status` and `code`
    /// in words containing each of `words` (in any case), `wallet` having signed nothing.
    pub async fn assert_refused(
        &self,
        wallet: Address,
        api: &Rest,
        (path, body): (&str, &Value),
        (status, code): (u16, &str),
        words: &[&str],
    ) -> anyhow::Result<()> {
        let signed = self.nonce(wallet).await?;
        let reply = api.post(path, body).await?;
        reply.assert_error(status, code)?;
        for w in words {
            anyhow::ensure!(
                reply.text.to_lowercase().contains(&w.to_lowercase()),
                "{path}: no {w:?} in {}",
                reply.text
            );
        }
        anyhow::ensure!(
            self.nonce(wallet).await? == signed,
            "{path}: a refused write was signed"
        );
        Ok(())
    }

    /// Waits until `address` has `n` or more mined transactions; `what` names the wait.
    pub async fn wait_for_nonce(&self, what: &str, address: Address, n: u64) -> anyhow::Result<()> {
        poll_until(what, || async {
            Ok((self.nonce(address).await? >= n).then_some(()))
        })
        .await
    }

    /// Sends a transaction from the unlocked dev account and waits for its receipt.
    pub async fn send_from_dev(
        &self,
        to: Option<Address>,
        data: Bytes,
    ) -> anyhow::Result<alloy::rpc::types::TransactionReceipt> {
        self.send_as(DEV_ACCOUNT, to, data, U256::ZERO).await
    }

    /// Sends a transaction as `from` (impersonated if it is not a dev account) and waits for
    /// its receipt (the node must be mining).
    pub async fn send_as(
        &self,
        from: Address,
        to: Option<Address>,
        data: Bytes,
        value: U256,
    ) -> anyhow::Result<alloy::rpc::types::TransactionReceipt> {
        let mut tx = TransactionRequest::default()
            .from(from)
            .input(data.into())
            .value(value);
        if let Some(to) = to {
            tx = tx.to(to);
        }
        let hash: B256 =
            serde_json::from_value(self.rpc("eth_sendTransaction", json!([tx])).await?)?;
        poll_until(&format!("receipt of {hash}"), || async {
            Ok(self.provider.get_transaction_receipt(hash).await?)
        })
        .await
    }

    /// Deploys the test token.
    pub async fn deploy_token(&self, symbol: &str, decimals: u8) -> anyhow::Result<Address> {
        let mut code = artifact("TestToken")?.to_vec();
        code.extend(
            TestToken::constructorCall {
                name_: format!("{symbol} Test Token"),
                symbol_: symbol.to_owned(),
                decimals_: decimals,
            }
            .abi_encode(),
        );
        let receipt = self.send_from_dev(None, code.into()).await?;
        receipt.contract_address.context("no contract address")
    }

    /// Deploys the Relay contract (tests/contracts/Relay.sol).
    pub async fn deploy_relay(&self) -> anyhow::Result<Address> {
        self.deploy("Relay").await
    }

    /// Deploys tests/contracts/`name`.sol, whose constructor takes no argument.
    pub async fn deploy(&self, name: &str) -> anyhow::Result<Address> {
        let receipt = self.send_from_dev(None, artifact(name)?).await?;
        receipt.contract_address.context("no contract address")
    }

    /// Deploys the Counter contract.
    pub async fn deploy_counter(&self) -> anyhow::Result<Address> {
        let receipt = self.send_from_dev(None, artifact("Counter")?).await?;
        receipt.contract_address.context("no contract address")
    }

    /// Mints `amount` of `token` to `to`.
    pub async fn mint(&self, token: Address, to: Address, amount: U256) -> anyhow::Result<()> {
        self.send_from_dev(
            Some(token),
            TestToken::mintCall { to, amount }.abi_encode().into(),
        )
        .await?;
        Ok(())
    }

    /// Freezes `account` in `token`: its `transfer` and `approve` return false and do nothing.
    pub async fn freeze(&self, token: Address, account: Address) -> anyhow::Result<()> {
        self.send_from_dev(
            Some(token),
            TestToken::setFrozenCall {
                account,
                isFrozen: true,
            }
            .abi_encode()
            .into(),
        )
        .await?;
        Ok(())
    }

    async fn call(&self, to: Address, data: Vec<u8>) -> anyhow::Result<Bytes> {
        let tx = TransactionRequest::default()
            .to(to)
            .input(Bytes::from(data).into());
        Ok(self.provider.call(tx).await?)
    }

    /// `token.balanceOf(owner)`.
    pub async fn token_balance(&self, token: Address, owner: Address) -> anyhow::Result<U256> {
        let out = self
            .call(token, TestToken::balanceOfCall { owner }.abi_encode())
            .await?;
        Ok(TestToken::balanceOfCall::abi_decode_returns(&out)?)
    }

    /// `token.allowance(owner, spender)`.
    pub async fn allowance(
        &self,
        token: Address,
        owner: Address,
        spender: Address,
    ) -> anyhow::Result<U256> {
        let out = self
            .call(
                token,
                TestToken::allowanceCall { owner, spender }.abi_encode(),
            )
            .await?;
        Ok(TestToken::allowanceCall::abi_decode_returns(&out)?)
    }

    /// `counter.count()`, `counter.received()` and `counter.lastCaller()`.
    pub async fn counter_state(&self, counter: Address) -> anyhow::Result<(U256, U256, Address)> {
        let count = Counter::countCall::abi_decode_returns(
            &self
                .call(counter, Counter::countCall {}.abi_encode())
                .await?,
        )?;
        let received = Counter::receivedCall::abi_decode_returns(
            &self
                .call(counter, Counter::receivedCall {}.abi_encode())
                .await?,
        )?;
        let last = Counter::lastCallerCall::abi_decode_returns(
            &self
                .call(counter, Counter::lastCallerCall {}.abi_encode())
                .await?,
        )?;
        Ok((count, received, last))
    }

    /// Puts Multicall3 at its canonical address, which anvil lacks: deploys alloy's copy and
    /// moves its runtime code there with `anvil_setCode`.
    pub async fn install_multicall(&self) -> anyhow::Result<()> {
        let creation = alloy::providers::bindings::IMulticall3::BYTECODE.clone();
        let receipt = self.send_from_dev(None, creation).await?;
        let deployed = receipt.contract_address.context("no contract address")?;
        let code = self.provider.get_code_at(deployed).await?;
        self.rpc(
            "anvil_setCode",
            json!([alloy::providers::MULTICALL3_ADDRESS, code]),
        )
        .await?;
        Ok(())
    }

    /// Turns automatic mining on or off.
    pub async fn set_automine(&self, on: bool) -> anyhow::Result<()> {
        self.rpc("evm_setAutomine", json!([on])).await?;
        Ok(())
    }

    /// Mines one block.
    pub async fn mine(&self) -> anyhow::Result<()> {
        self.rpc("evm_mine", json!([])).await?;
        Ok(())
    }

    /// Replaces the last `depth` blocks with as many empty ones, as a reorganisation would:
    /// their transactions are gone, from the chain and from the pool.
    pub async fn reorg(&self, depth: u64) -> anyhow::Result<()> {
        self.rpc("anvil_reorg", json!([depth, []])).await?;
        Ok(())
    }

    /// Removes `hash` from the pool, as a node that lost it would.
    pub async fn drop_transaction(&self, hash: &str) -> anyhow::Result<()> {
        self.rpc("anvil_dropTransaction", json!([hash])).await?;
        Ok(())
    }

    /// The pool's pending transactions' hashes.
    pub async fn pool_hashes(&self) -> anyhow::Result<Vec<String>> {
        let content = self.rpc("txpool_content", json!([])).await?;
        let mut out = Vec::new();
        if let Some(pending) = content["pending"].as_object() {
            for by_nonce in pending.values() {
                if let Some(map) = by_nonce.as_object() {
                    for tx in map.values() {
                        if let Some(h) = tx["hash"].as_str() {
                            out.push(h.to_owned());
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

/// A service on its own anvil, its default wallet funded with 1 ETH, and a second API key of
/// its first user, to be limited: the set-up of the spend-limit and effects tests.
pub struct KeyedWallet {
    /// The node.
    pub anvil: Anvil,
    /// The service.
    pub svc: crate::Service,
    /// Its default EVM wallet.
    pub wallet: Address,
    /// The second key.
    pub key: String,
    /// The key's prefix, as the CLI names it.
    pub prefix: String,
}

impl KeyedWallet {
    /// Starts it on `backend`.
    pub async fn start(backend: crate::Backend) -> anyhow::Result<Self> {
        Self::on(Anvil::start().await?, backend, None).await
    }

    /// Starts it on `anvil`, the service reaching the node through `via` when given (a
    /// gateway in front of it, say).
    pub async fn on(
        anvil: Anvil,
        backend: crate::Backend,
        via: Option<&str>,
    ) -> anyhow::Result<Self> {
        let options = anvil.service_options_via(via.unwrap_or(anvil.url()), "", &[]);
        let svc = crate::Service::start_with(backend, options).await?;
        let wallet = anvil
            .fund_default_wallet(
                &svc.rest(&svc.api_key),
                alloy::primitives::utils::parse_ether("1")?,
            )
            .await?;
        let key = svc.create_key("agent").await?;
        let prefix = key.split('_').nth(1).unwrap_or_default().to_owned();
        Ok(Self {
            anvil,
            svc,
            wallet,
            key,
            prefix,
        })
    }

    /// Deploys a test token whose 10,000 base units the wallet holds; its address.
    pub async fn token(&self) -> anyhow::Result<Address> {
        let token = self.anvil.deploy_token("WDT", 18).await?;
        self.anvil
            .mint(token, self.wallet, U256::from(10_000))
            .await?;
        Ok(token)
    }
}
