//! Chain writes over REST: transfers, approvals and contract calls move exactly what they
//! say, and writes bound to fail are refused before anything is signed.

use alloy::primitives::{Address, U256};
use serde_json::json;
use walletops_tests::{Backend, on_both_backends, webhooks::Receiver};

use super::{ETH, Evm, submitted_id};

async fn native_and_token_sends_move_exactly_the_amount(b: Backend) -> anyhow::Result<()> {
    use alloy::providers::Provider;
    let e = Evm::start(b, "", &[]).await?;
    let to: Address = "0x1111111111111111111111111111111111111111".parse()?;
    let reply = e.post_native(&to.to_string(), "1000000000000000").await?;
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
    e.post_native(to, &(200 * ETH).to_string())
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
    let reply = e.post_native(to, "1").await?;
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
            .post_with_key("/token/approve", &key, &approve)
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
    e.write_confirmed(
        "/token/approve",
        &json!({"chain": "anvil", "token": token, "spender": spender, "amount": unlimited}),
    )
    .await?;
    assert_eq!(
        e.anvil.allowance(token, e.wallet, spender).await?,
        U256::MAX
    );
    let counter = e.anvil.deploy_counter().await?;
    e.write_confirmed(
        "/contracts/send",
        // `uint` is `uint256`: the selector is the canonical signature's.
        &json!({"chain": "anvil", "to": counter, "function": "add(uint)", "args": [5]}),
    )
    .await?;
    e.write_confirmed(
        "/contracts/send",
        // add(uint256) with 7, as raw calldata.
        &json!({"chain": "anvil", "to": counter,
                "data": "0x1003e2d20000000000000000000000000000000000000000000000000000000000000007"}),
    )
    .await?;
    let tx = e
        .write_confirmed(
            "/contracts/send",
            &json!({"chain": "anvil", "to": counter, "function": "deposit()", "value": "12345"}),
        )
        .await?;
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
    let hook = Receiver::start().await?;
    hook.register(&e.api(), &["transaction.reverted"]).await?;
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
    e.wait_for_pool_size("both transactions to be pooled", 2)
        .await?;
    e.anvil.mine().await?;
    let tx = e.wait_for(&id, "REVERTED").await?;
    assert_eq!(tx["hash"], reply.body["hash"], "{tx}");
    // Its webhook, signed, is the record.
    assert_eq!(
        hook.wait_for_event(&id, "transaction.reverted").await?.body,
        tx
    );
    // Mined: the nonce is used (the gas paid), and no token moved.
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    assert_eq!(e.anvil.token_balance(token, e.wallet).await?, U256::ZERO);
    assert_eq!(
        e.anvil.token_balance(token, DEV_ACCOUNT).await?,
        U256::from(100u64)
    );
    Ok(())
}

on_both_backends!(
    native_and_token_sends_move_exactly_the_amount,
    doomed_writes_fail_before_signing_and_consume_no_nonce,
    approvals_and_contract_calls_execute,
    a_call_that_reverts_when_mined_ends_reverted,
);
