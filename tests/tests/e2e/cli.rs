//! The `walletops` binary: first start, restarts, the admin commands, and core and edge run
//! as two processes.

use alloy::providers::Provider as _;
use tokio::process::Command;
use walletops_tests::{
    Backend, Launched, Rest, Service, TestDatabase, first_api_key, launch, launch_logging_to,
    on_both_backends, poll_until, walletops_bin, within, workspace_root,
};

async fn first_start_prints_one_key_once_and_restarts_keep_the_data(
    b: Backend,
) -> anyhow::Result<()> {
    let mut svc = Service::start(b).await?;
    let key = svc.api_key.clone();
    assert!(key.starts_with("wops_") && key.len() == 42, "{key}");
    let before = svc.rest(&key).get("/wallets").await?.body;
    let printed_again = svc.restart().await?;
    assert!(
        !printed_again,
        "a restart must not make a second first user"
    );
    let after = svc.rest(&key).get("/wallets").await?;
    assert_eq!(after.status, 200);
    assert_eq!(after.body, before);
    let users = svc.cli(&["users", "list"]).await?;
    assert_eq!(users.stdout.lines().count(), 1, "{}", users.stdout);
    Ok(())
}

async fn admin_commands_manage_users_and_keys(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let dave = svc.create_user("dave").await?;
    assert_eq!(svc.rest(&dave).get("/wallets").await?.status, 200);
    let again = svc.cli(&["users", "create", "dave"]).await?;
    assert!(!again.success, "a taken name must be refused");
    let key_of_dave = async |name: &str, expires: &str| {
        svc.cli(&[
            "keys",
            "create",
            "--user",
            "dave",
            "--name",
            name,
            "--expires",
            expires,
        ])
        .await
    };
    let made = key_of_dave("ci", "90d").await?;
    assert!(made.success, "{}", made.stderr);
    let ci = made.api_key().expect("key");
    assert_eq!(svc.rest(&ci).get("/wallets").await?.status, 200);
    let listed = svc.cli(&["keys", "list", "--user", "dave"]).await?;
    assert!(listed.stdout.contains(&ci[5..9]), "{}", listed.stdout);
    assert!(
        !listed.stdout.contains(&ci[10..]),
        "a key value leaked into the list"
    );
    let bad = key_of_dave("x", "2d").await?;
    assert!(!bad.success);
    let revoked = svc
        .cli(&["keys", "revoke", "--user", "dave", &ci[5..9]])
        .await?;
    assert!(revoked.success, "{}", revoked.stderr);
    assert!(revoked.stdout.contains("revoked"), "{}", revoked.stdout);
    svc.rest(&ci)
        .wait_refused("the revoked key to be refused")
        .await?;
    assert_eq!(svc.rest(&dave).get("/wallets").await?.status, 200);
    let migrate = svc.cli(&["migrate"]).await?;
    assert!(migrate.success, "{}", migrate.stderr);
    Ok(())
}

async fn core_and_edge_run_as_separate_processes(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut core = Command::new(walletops_bin()?);
    core.args(["core", "--grpc-addr", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .envs(svc.cli_env());
    let mut core = launch(core, &["gRPC listening on "]).await?;
    let core_url = format!("http://{}", core.grpc_addr()?);
    let mut edge = Command::new(walletops_bin()?);
    edge.args([
        "edge",
        "--core-url",
        &core_url,
        "--http-addr",
        "127.0.0.1:0",
    ])
    .env("RUST_LOG", "warn");
    let edge = launch(edge, &["REST listening on "]).await?;
    let api = Rest::new(&edge.http()?, &svc.api_key);
    let reply = api.get("/wallets").await?;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["wallets"].as_array().map(Vec::len), Some(2));
    // With its core gone, the edge still answers in the contract's shape.
    core.child.kill().await?;
    let reply = api.get("/wallets").await?;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.body["code"], "SERVICE_UNAVAILABLE");
    Ok(())
}

async fn another_master_key_than_the_wallets_is_refused(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    // A data dir without the master key the database's wallets were sealed under (lost, or
    // a CLI run elsewhere): no new key is made beside them, nothing starts.
    let elsewhere = tempfile::tempdir()?;
    let out = svc.cli_in(elsewhere.path(), &["users", "list"]).await?;
    assert!(!out.success, "{}", out.stdout);
    assert!(out.stderr.contains("master.key"), "{}", out.stderr);
    assert!(!elsewhere.path().join("master.key").exists());
    // Another master key there does not open them either.
    std::fs::write(
        elsewhere.path().join("master.key"),
        "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=",
    )?;
    let out = svc.cli_in(elsewhere.path(), &["users", "list"]).await?;
    assert!(!out.success, "{}", out.stdout);
    assert!(out.stderr.contains("does not open"), "{}", out.stderr);
    // Its own data dir opens them.
    assert!(svc.cli(&["users", "list"]).await?.success);
    Ok(())
}

on_both_backends!(
    another_master_key_than_the_wallets_is_refused,
    a_first_start_stopped_half_way_is_finished_by_the_next,
    a_read_from_elsewhere_binds_no_master_key,
    first_start_prints_one_key_once_and_restarts_keep_the_data,
    admin_commands_manage_users_and_keys,
    core_and_edge_run_as_separate_processes,
    the_first_start_keeps_its_key_in_a_private_file,
);

/// A first start that stops half-way (the user made, its key not) is finished by the next
/// start, which shows the key: it is not left without one, nothing said.
async fn a_first_start_stopped_half_way_is_finished_by_the_next(b: Backend) -> anyhow::Result<()> {
    let (data, db) = (tempfile::tempdir()?, TestDatabase::new(b).await?);
    let mut failing = serve_in(data.path(), &[])?;
    failing
        .env("FAILPOINTS", "bootstrap-before-key=return")
        .env("WALLETOPS_DATABASE_URL", &db.url);
    let out = within("the first start to fail", failing.output()).await??;
    assert!(!out.status.success());
    let mut again = serve_in(data.path(), &[])?;
    again.env("WALLETOPS_DATABASE_URL", &db.url);
    let mut svc = launch(again, &["REST listening on ", "gRPC listening on "]).await?;
    let key = first_api_key(data.path())?;
    let wallets = svc
        .lines
        .iter()
        .filter(|l| l.trim_start().starts_with("Wallet:"))
        .count();
    assert_eq!(wallets, 2, "{:?}", svc.lines);
    let listed = Rest::new(&svc.http()?, &key).get("/wallets").await?;
    assert_eq!(
        listed.body["wallets"].as_array().map(Vec::len),
        Some(2),
        "{}",
        listed.text
    );
    svc.child.start_kill()?;
    svc.child.wait().await?;
    Ok(())
}

/// A command that only reads, run against a new database from elsewhere (another data dir,
/// so another master key), leaves the database to the cores that serve it; and a core whose
/// key is not the one the database was begun with is refused, naming the key.
async fn a_read_from_elsewhere_binds_no_master_key(b: Backend) -> anyhow::Result<()> {
    let (shared, elsewhere, other) = (
        tempfile::tempdir()?,
        tempfile::tempdir()?,
        tempfile::tempdir()?,
    );
    let db = TestDatabase::new(b).await?;
    let url = &db.url;
    let listed = Command::new(walletops_bin()?)
        .args(["users", "list"])
        .env("WALLETOPS_DATA_DIR", elsewhere.path())
        .env("WALLETOPS_DATABASE_URL", url)
        .env_remove("DATABASE_URL")
        .output()
        .await?;
    assert!(listed.status.success(), "{listed:?}");
    let mut serving = serve_in(shared.path(), &[])?;
    serving.env("WALLETOPS_DATABASE_URL", url);
    let mut core = launch(serving, &["REST listening on ", "gRPC listening on "]).await?;
    assert!(
        core.lines.iter().any(|l| l.starts_with("First start:")),
        "{:?}",
        core.lines
    );
    // A second core with a key of its own is refused before it serves.
    let mut second = serve_in(other.path(), &[])?;
    second.env("WALLETOPS_DATABASE_URL", url);
    let out = within("the second core to be refused", second.output()).await??;
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("master"), "{said}");
    core.child.start_kill()?;
    core.child.wait().await?;
    Ok(())
}

/// `walletops serve --dev` starts a funded local chain and prints a curl line that works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_dev_prints_a_working_send() -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let mut dev = launch(
        dev_command(data.path())?,
        &["REST listening on ", "Dev playground ready"],
    )
    .await?;
    let key = dev.value("API key: ").expect("first start prints the key");
    sends_confirm(&dev, &key, &key).await?;
    samples_work(&dev, &key).await?;
    swaps_work(&dev, &key).await?;
    cli_beside_the_playground(&dev, data.path(), &key).await?;
    let client = walletops_tests::http::client();
    // Killed outright, with no chance to stop them, the service still takes its nodes along.
    let node_url = |line: &str| {
        let rest = line.split(" at ").nth(1)?;
        Some(rest.split(';').next().unwrap_or(rest).trim().to_owned())
    };
    let nodes: Vec<String> = dev
        .lines
        .iter()
        .filter(|l| l.starts_with("Dev chain "))
        .filter_map(|l| node_url(l))
        .collect();
    assert_eq!(nodes.len(), 2, "{:?}", dev.lines);
    // The dev anvil mines a block a second beside automine, so that concurrent sends whose
    // nonces reach it out of order are never left unmined (foundry-rs/foundry#10122): with
    // nothing sent, its height still grows.
    let anvil = dev
        .lines
        .iter()
        .find(|l| l.starts_with("Dev chain `anvil`"))
        .and_then(|l| node_url(l))
        .expect("the anvil line");
    let anvil: alloy::providers::RootProvider =
        alloy::providers::RootProvider::new_http(anvil.parse()?);
    let height = || async { Ok::<_, anyhow::Error>(anvil.get_block_number().await?) };
    let start = height().await?;
    poll_until("the idle dev chain to mine two blocks", || async {
        Ok((height().await? >= start + 2).then_some(()))
    })
    .await?;
    dev.child.start_kill()?;
    dev.child.wait().await?;
    for url in &nodes {
        poll_until(&format!("the node at {url} to stop"), || async {
            Ok(client
                .post(url)
                .body("{}")
                .send()
                .await
                .is_err()
                .then_some(()))
        })
        .await?;
    }
    // Started again over the same data, with new, empty nodes: what the store knew of the
    // old ones (the wallet's nonce) must not hold the next sends back. Started from
    // elsewhere than the checkout, it finds anvil from its own location.
    let mut elsewhere = dev_command(data.path())?;
    elsewhere.current_dir(data.path());
    let mut again = launch(elsewhere, &["REST listening on ", "Dev playground ready"]).await?;
    assert_eq!(again.value("API key: "), None, "the key is shown only once");
    sends_confirm(&again, "$KEY", &key).await?;
    again.child.start_kill()?;
    again.child.wait().await?;
    Ok(())
}

/// The CLI on the playground's data dir knows the dev chains and where the server answers:
/// the README's agent recipe (a limit on chain `anvil`) works there, and a sign-in link
/// points at the running server, not at the default address.
async fn cli_beside_the_playground(
    dev: &Launched,
    data: &std::path::Path,
    key: &str,
) -> anyhow::Result<()> {
    let run = |args: &'static [&'static str]| {
        let mut cmd = Command::new(walletops_bin()?);
        cmd.args(args)
            .env("WALLETOPS_DATA_DIR", data)
            .env_remove("DATABASE_URL")
            .env_remove("WALLETOPS_DATABASE_URL")
            .current_dir(data);
        anyhow::Ok(cmd)
    };
    let prefix = key.split('_').nth(1).unwrap_or_default().to_owned();
    let limited = run(&[])?
        .args([
            "keys",
            "limit",
            &prefix,
            "--chain",
            "anvil",
            "--max-per-tx",
            "1000",
        ])
        .output()
        .await?;
    assert!(
        limited.status.success(),
        "{}",
        String::from_utf8_lossy(&limited.stderr)
    );
    // The running server holds the key to it at once.
    let api = Rest::new(&dev.http()?, key);
    let over = serde_json::json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111",
                                  "asset": "native", "amount": "1001"});
    api.post("/send", &over)
        .await?
        .assert_error(403, "FORBIDDEN")?;
    let removed = run(&[])?
        .args(["keys", "limit", &prefix, "--chain", "anvil", "--remove"])
        .output()
        .await?;
    assert!(
        removed.status.success(),
        "{}",
        String::from_utf8_lossy(&removed.stderr)
    );
    let link = run(&["users", "sign-in-link", "owner"])?.output().await?;
    assert!(
        link.status.success(),
        "{}",
        String::from_utf8_lossy(&link.stderr)
    );
    let printed = String::from_utf8_lossy(&link.stdout);
    assert!(
        printed.contains(&format!("{}/dashboard/sign-in-link?token=", dev.http()?)),
        "{printed} (serving at {})",
        dev.http()?
    );
    Ok(())
}

/// `walletops serve --dev` over the data dir `data`, on free ports.
fn dev_command(data: &std::path::Path) -> anyhow::Result<Command> {
    serve_in(data, &["--dev"])
}

/// `walletops serve` with `args` over the data dir `data` (SQLite), on free ports.
/// The first start writes the key to a file only its user may read and says where; it prints
/// the key only with `--print-key`, and at the default log level no library's INFO lines
/// scroll what it says away. There is no command that shows a key again.
async fn the_first_start_keeps_its_key_in_a_private_file(b: Backend) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let (data, db) = (tempfile::tempdir()?, TestDatabase::new(b).await?);
    let mut cmd = serve_in(data.path(), &[])?;
    cmd.env("WALLETOPS_DATABASE_URL", &db.url)
        .env_remove("RUST_LOG");
    let log_file = data.path().join("log");
    let ready = ["REST listening on ", "gRPC listening on ", "Next: "];
    let mut svc = launch_logging_to(cmd, &ready, std::fs::File::create(&log_file)?.into()).await?;
    let file = data.path().join("first-api-key");
    let key = first_api_key(data.path())?;
    assert_eq!(
        std::fs::metadata(&file)?.permissions().mode() & 0o777,
        0o600
    );
    let said = svc.lines.join("\n");
    assert!(!said.contains(&key), "the key was printed:\n{said}");
    assert!(said.contains(&file.display().to_string()), "{said}");
    assert!(said.contains("/dashboard/sign-in-link?token="), "{said}");
    assert!(
        svc.lines.len() <= 10,
        "a first start says a few lines:\n{said}"
    );
    assert_eq!(
        Rest::new(&svc.http()?, &key).get("/wallets").await?.status,
        200
    );
    svc.child.start_kill()?;
    svc.child.wait().await?;
    let logged = std::fs::read_to_string(&log_file)?;
    assert!(
        !logged.contains("migration"),
        "migration lines at INFO:\n{logged}"
    );
    assert!(!logged.contains(&key), "the key was logged");
    // Printed too only when asked (the playground asks).
    let (data, db) = (tempfile::tempdir()?, TestDatabase::new(b).await?);
    let mut cmd = serve_in(data.path(), &["--print-key"])?;
    cmd.env("WALLETOPS_DATABASE_URL", &db.url);
    let mut svc = launch(cmd, &["REST listening on ", "gRPC listening on "]).await?;
    assert_eq!(svc.value("API key: "), Some(first_api_key(data.path())?));
    svc.child.start_kill()?;
    svc.child.wait().await?;
    // No command reveals a key.
    let reveal = Command::new(walletops_bin()?)
        .args(["keys", "reveal"])
        .env("WALLETOPS_DATA_DIR", data.path())
        .output()
        .await?;
    assert!(!reveal.status.success());
    assert!(String::from_utf8_lossy(&reveal.stderr).contains("unrecognized subcommand"));
    Ok(())
}

fn serve_in(data: &std::path::Path, args: &[&str]) -> anyhow::Result<Command> {
    let mut cmd = Command::new(walletops_bin()?);
    cmd.arg("serve")
        .args(args)
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .env("WALLETOPS_DATA_DIR", data)
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .env_remove("WALLETOPS_DATABASE_URL")
        .env("WALLETOPS_MONITOR__POLL_INTERVAL_MS", "100")
        .current_dir(workspace_root());
    Ok(cmd)
}

/// Sends what each `curl` line `dev` printed sends (one for anvil, one for the Solana test
/// node, built beside walletops), with `key`, which the lines show as `shown`, and waits
/// for each transaction to be confirmed.
/// The dev token and contract `serve --dev` prints, as the README's examples use them: the
/// wallet holds the minted token, read through Multicall3, and a call to the Counter is mined.
async fn samples_work(dev: &Launched, key: &str) -> anyhow::Result<()> {
    let (token, contract, _) = exported(dev);
    let api = Rest::new(&dev.http()?, key);
    let read = api
        .get(&format!(
            "/wallets/balances?chain=anvil&tokens={token}&fresh=true"
        ))
        .await?;
    assert_eq!(read.status, 200, "{}", read.text);
    let held = &read.body["balances"][1];
    assert_eq!(held["raw"], "1000000000000000000000000", "{}", read.text);
    assert_eq!(held["symbol"], "WDT", "{}", read.text);
    let call = api
        .post(
            "/contracts/send",
            &serde_json::json!({"chain": "anvil", "to": contract, "function": "add(uint256)", "args": ["7"]}),
        )
        .await?;
    assert_eq!(call.body["status"], "SUBMITTED", "{}", call.text);
    let id = call.body["id"].as_str().expect("id");
    api.wait_for_status(id, "CONFIRMED").await?;
    Ok(())
}

/// The dev token, contract and pool the `export` line of `dev` names.
fn exported(dev: &Launched) -> (String, String, String) {
    let line = dev.value("export TOKEN=").expect("the export line");
    let (token, rest) = line.split_once(" CONTRACT=").expect("TOKEN=… CONTRACT=…");
    let (contract, pool) = rest.split_once(" POOL=").expect("… POOL=…");
    (token.to_owned(), contract.to_owned(), pool.to_owned())
}

/// The body of the printed `curl` line that posts to `path`.
fn printed_body(dev: &Launched, path: &str) -> serde_json::Value {
    let line = dev
        .lines
        .iter()
        .find(|l| l.starts_with("curl ") && l.contains(path))
        .unwrap_or_else(|| panic!("a curl line for {path}: {:?}", dev.lines));
    let body = line
        .rsplit_once(" -d '")
        .map(|(_, b)| b.trim_end_matches('\''))
        .expect("a body");
    serde_json::from_str(body).expect("a JSON body")
}

/// The printed quote and swap work on the dev pool: the swap moves exactly the quoted WDT
/// into the wallet, and selling WDT back first needs the approval the refusal names.
async fn swaps_work(dev: &Launched, key: &str) -> anyhow::Result<()> {
    let (token, _, pool) = exported(dev);
    let api = Rest::new(&dev.http()?, key);
    let wdt = async || -> anyhow::Result<u128> {
        let read = api
            .get(&format!(
                "/wallets/balances?chain=anvil&tokens={token}&fresh=true"
            ))
            .await?;
        Ok(read.body["balances"][1]["raw"]
            .as_str()
            .expect("a WDT balance")
            .parse()?)
    };
    let quote = api
        .post("/trade/quote", &printed_body(dev, "/trade/quote"))
        .await?;
    assert_eq!(quote.status, 200, "{}", quote.text);
    let quoted: u128 = quote.body["quote"]["dstAmount"]
        .as_str()
        .expect("dstAmount")
        .parse()?;
    let before = wdt().await?;
    let swap = api
        .post("/trade/swap", &printed_body(dev, "/trade/swap"))
        .await?;
    assert_eq!(swap.body["status"], "SUBMITTED", "{}", swap.text);
    let record = api
        .wait_for_status(swap.body["id"].as_str().expect("id"), "CONFIRMED")
        .await?;
    assert_eq!(record["type"], "swap", "{record}");
    assert_eq!(record["dstAmount"], quoted.to_string(), "{record}");
    assert_eq!(
        wdt().await? - before,
        quoted,
        "the swap pays what was quoted"
    );

    let sell = serde_json::json!({
        "chain": "anvil", "fromToken": token, "toToken": "NATIVE", "amount": "1000000000000000000000",
    });
    let refused = api.post("/trade/swap", &sell).await?;
    refused.assert_error(400, "QUOTE_FAILED")?;
    let said = refused.body["error"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase();
    assert!(
        said.contains(&pool.to_ascii_lowercase()) && said.contains("/token/approve"),
        "{said}"
    );
    let approve = api
        .post(
            "/token/approve",
            &serde_json::json!({"chain": "anvil", "token": token, "spender": pool, "amount": "1000000000000000000000"}),
        )
        .await?;
    api.wait_for_status(approve.body["id"].as_str().expect("id"), "CONFIRMED")
        .await?;
    let sold = api.post("/trade/swap", &sell).await?;
    assert_eq!(sold.body["status"], "SUBMITTED", "{}", sold.text);
    api.wait_for_status(sold.body["id"].as_str().expect("id"), "CONFIRMED")
        .await?;
    Ok(())
}

async fn sends_confirm(dev: &Launched, shown: &str, key: &str) -> anyhow::Result<()> {
    let curls: Vec<&String> = dev
        .lines
        .iter()
        .filter(|l| l.starts_with("curl ") && l.contains("/api/v1/send "))
        .collect();
    assert_eq!(curls.len(), 2, "{:?}", dev.lines);
    let client = walletops_tests::http::client();
    for curl in curls {
        assert!(curl.contains(shown), "{curl}");
        let url = curl
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .expect("a URL");
        let body = curl
            .rsplit_once(" -d '")
            .map(|(_, b)| b.trim_end_matches('\''))
            .expect("a body");
        let reply: serde_json::Value = client
            .post(url)
            .header("x-api-key", key)
            .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await?
            .json()
            .await?;
        assert_eq!(reply["status"], "SUBMITTED", "{reply}");
        let id = reply["id"].as_str().expect("id");
        Rest::new(&dev.http()?, key)
            .wait_for_status(id, "CONFIRMED")
            .await?;
    }
    Ok(())
}
