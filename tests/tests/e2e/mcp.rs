//! The agent surface: an MCP client (rmcp's, over streamable HTTP at `/mcp`, and raw
//! JSON-RPC through `walletops mcp` on stdio) lists the tools its key's scopes allow, calls
//! them against anvil and sees the transactions on the node; a retried call pays once.

use alloy::primitives::{Address, U256, utils::parse_ether};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use walletops_tests::{
    Backend, Service,
    anvil::Anvil,
    mcp::{call, connect, ok, tool_names},
    on_both_backends, walletops_bin,
};

const RECIPIENT: &str = "0x1111111111111111111111111111111111111111";

/// A key of the first user with `scopes`, made with the CLI.
async fn key_with(svc: &Service, scopes: &str) -> anyhow::Result<String> {
    let out = svc
        .cli(&["keys", "create", "--name", scopes, "--scopes", scopes])
        .await?;
    anyhow::ensure!(out.success, "{}", out.stderr);
    out.api_key().ok_or_else(|| anyhow::anyhow!("no key"))
}

async fn tools_follow_the_keys_scopes(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let reads = [
        "get_approval",
        "get_balances",
        "get_transaction",
        "list_deposits",
        "list_wallets",
        "simulate",
    ];
    let reader = connect(&svc, &key_with(&svc, "read").await?, false).await?;
    assert_eq!(tool_names(&reader).await?, reads);
    let trader = connect(&svc, &key_with(&svc, "read,trade").await?, true).await?;
    assert_eq!(
        tool_names(&trader).await?,
        [
            "get_approval",
            "get_balances",
            "get_transaction",
            "list_deposits",
            "list_wallets",
            "quote_swap",
            "simulate"
        ]
    );
    let all = connect(&svc, &svc.api_key, true).await?;
    let mut every = tool_names(&all).await?;
    every.sort();
    assert_eq!(
        every,
        [
            "approve_token",
            "get_approval",
            "get_balances",
            "get_transaction",
            "list_deposits",
            "list_wallets",
            "quote_swap",
            "send",
            "simulate",
            "swap"
        ]
    );
    // Every tool's input has a schema that marks what a call needs, every description says
    // what it needs, and every tool has a title and says whether it changes anything.
    let writes = ["approve_token", "send", "swap"];
    for tool in all.list_all_tools().await? {
        let name = tool.name.to_string();
        assert!(!tool.input_schema.is_empty(), "{name}");
        let about = tool.description.clone().unwrap_or_default();
        assert!(about.contains("scope"), "{name}: {about}");
        let required: Vec<&str> = tool
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let needs: &[&str] = match name.as_str() {
            "list_wallets" | "simulate" | "list_deposits" => &[],
            "get_balances" => &["chain"],
            "get_transaction" | "get_approval" => &["id"],
            "send" => &["chain", "to", "asset", "amount"],
            "approve_token" => &["chain", "token", "spender", "amount"],
            "quote_swap" | "swap" => &["chain", "fromToken", "toToken", "amount"],
            other => panic!("a tool this test does not know: {other}"),
        };
        assert_eq!(required, needs, "{name}: {:?}", tool.input_schema);
        assert!(
            tool.title.as_deref().is_some_and(|t| !t.is_empty()),
            "{name}"
        );
        let hints = tool.annotations.clone().expect("annotations");
        let write = writes.contains(&name.as_str());
        assert_eq!(hints.read_only_hint, Some(!write), "{name}");
        assert_eq!(hints.destructive_hint, Some(write), "{name}");
        assert_eq!(hints.idempotent_hint, Some(!write), "{name}");
        assert!(hints.open_world_hint.is_some(), "{name}");
        if write {
            // A model learns before it pays that the key's rules hold and how to try first.
            assert!(about.contains("limits and policy"), "{name}: {about}");
            assert!(about.contains("call simulate"), "{name}: {about}");
        }
    }
    // A tool the key may not use is refused by the core, naming the scope.
    let (failed, refused) = call(
        &reader,
        "send",
        json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "1"}),
    )
    .await?;
    assert!(failed, "{refused}");
    assert_eq!(refused["code"], "FORBIDDEN");
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or_default()
            .contains("write")
    );
    // A bad key is not let in.
    assert!(connect(&svc, "wo_abcd_notakey", false).await.is_err());
    Ok(())
}

async fn tools_act_as_rest_does(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil.fund_default_wallet(&api, parse_ether("10")?).await?;
    let agent = connect(&svc, &svc.api_key, false).await?;
    let wallets = ok(&agent, "list_wallets", json!({"chain": "ethereum"})).await?;
    assert_eq!(wallets, api.get("/wallets?chain=ethereum").await?.body);
    // Read fresh by the tool, then from the cache the read filled.
    let balances = ok(
        &agent,
        "get_balances",
        json!({"chain": "anvil", "fresh": true}),
    )
    .await?;
    assert_eq!(
        balances,
        api.get("/wallets/balances?chain=anvil").await?.body
    );
    // A payment, seen on the node.
    let recipient: Address = RECIPIENT.parse()?;
    let before = anvil.balance(recipient).await?;
    let sent = ok(
        &agent,
        "send",
        json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "12345"}),
    )
    .await?;
    assert_eq!(sent["status"], "SUBMITTED", "{sent}");
    let id = sent["id"].as_str().unwrap_or_default().to_owned();
    api.wait_for_status(&id, "CONFIRMED").await?;
    let record = ok(&agent, "get_transaction", json!({"id": id})).await?;
    assert_eq!(record, api.transaction(&id).await?);
    assert_eq!(
        anvil.balance(recipient).await? - before,
        U256::from(12_345u64)
    );
    // An approval, seen on the token.
    let token = anvil.deploy_token("AGT", 18).await?;
    let approved = ok(
        &agent,
        "approve_token",
        json!({"chain": "anvil", "token": token.to_string(), "spender": RECIPIENT, "amount": "777"}),
    )
    .await?;
    let approval = approved["id"].as_str().unwrap_or_default().to_owned();
    api.wait_for_status(&approval, "CONFIRMED").await?;
    assert_eq!(
        anvil.allowance(token, wallet, recipient).await?,
        U256::from(777u64)
    );
    // A bad input is a tool error in the contract's body, naming the field; nothing signed.
    let (failed, bad) = call(
        &agent,
        "send",
        json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "1.5"}),
    )
    .await?;
    assert!(failed);
    assert_eq!(bad["code"], "INVALID_INPUT", "{bad}");
    assert!(bad["error"].as_str().unwrap_or_default().contains("amount"));
    assert_eq!(
        anvil.nonce(wallet).await?,
        2,
        "only the two writes were signed"
    );
    Ok(())
}

/// The same idempotency key given twice pays once, the second call answered as the first.
async fn one_idempotency_key_pays_once(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil.fund_default_wallet(&api, parse_ether("10")?).await?;
    let agent = connect(&svc, &svc.api_key, true).await?;
    let payment = json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "5",
                         "idempotencyKey": uuid::Uuid::new_v4().to_string()});
    let first = ok(&agent, "send", payment.clone()).await?;
    let again = ok(&agent, "send", payment).await?;
    assert_eq!(first["id"], again["id"]);
    api.wait_for_status(first["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    assert_eq!(anvil.nonce(wallet).await?, 1, "one payment signed");
    Ok(())
}

on_both_backends!(
    tools_follow_the_keys_scopes,
    tools_act_as_rest_does,
    one_idempotency_key_pays_once,
);

/// One JSON-RPC exchange with `walletops mcp` over its stdin and stdout.
struct Stdio {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Stdio {
    async fn send(&mut self, message: Value) -> anyhow::Result<()> {
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .await?;
        Ok(self.stdin.flush().await?)
    }

    /// The answer to request `id`.
    async fn answer(&mut self, id: u64) -> anyhow::Result<Value> {
        walletops_tests::within("the stdio answer", async {
            loop {
                let line = self
                    .stdout
                    .next_line()
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("walletops mcp closed its output"))?;
                let message: Value = serde_json::from_str(&line)?;
                if message["id"] == id {
                    return anyhow::Ok(message);
                }
            }
        })
        .await?
    }
}

/// `walletops mcp` serves a service's tools on stdio under the key in its key file; a call
/// the agent retries with the same id pays once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stdio_bridge_serves_the_tools_and_a_retried_call_pays_once() -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(Backend::Sqlite, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil.fund_default_wallet(&api, parse_ether("10")?).await?;
    let key_file = svc.data_dir().join("agent.key");
    std::fs::write(&key_file, format!("{}\n", svc.api_key))?;
    let mut child = tokio::process::Command::new(walletops_bin()?)
        .args(["mcp", "--url", &svc.http, "--key-file"])
        .arg(&key_file)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdin = child.stdin.take().expect("stdin");
    let stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut io = Stdio {
        child,
        stdin,
        stdout,
    };
    io.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "desktop", "version": "1"}}}),
    )
    .await?;
    let init = io.answer(1).await?;
    assert_eq!(init["result"]["serverInfo"]["name"], "walletops", "{init}");
    io.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await?;
    io.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await?;
    let listed = io.answer(2).await?;
    assert_eq!(
        listed["result"]["tools"].as_array().map(Vec::len),
        Some(10),
        "{listed}"
    );
    let payment = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "send",
        "arguments": {"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "9"}}});
    io.send(payment.clone()).await?;
    let first = io.answer(3).await?;
    io.send(payment).await?;
    let again = io.answer(3).await?;
    let id_of = |answer: &Value| -> anyhow::Result<String> {
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no result: {answer}"))?;
        let body: Value = serde_json::from_str(text)?;
        Ok(body["id"].as_str().unwrap_or_default().to_owned())
    };
    let id = id_of(&first)?;
    assert_eq!(id, id_of(&again)?, "the retried call answered as the first");
    api.wait_for_status(&id, "CONFIRMED").await?;
    assert_eq!(anvil.nonce(wallet).await?, 1, "one payment signed");
    drop(io.stdin);
    io.child.wait().await?;
    Ok(())
}
