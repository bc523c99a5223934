//! Guarantees that hold at execution: a limited key's write is simulated as it will be
//! signed (gas limit, fees, the block's base fee), its wallet's balances and the allowances
//! it touches are read around it in the simulation, and every grant counts. Each hostile
//! contract here (tests/contracts/Skimmer.sol, QuietToken.sol) passed a judge that trusted
//! what its simulation's events showed; each is refused with nothing moved on the node.

use alloy::{
    primitives::{Address, Bytes, U256},
    sol,
    sol_types::SolCall,
};
use serde_json::json;
use walletops_tests::{
    Backend,
    anvil::{KeyedWallet, call_body},
    on_both_backends,
};

const STRANGER: &str = "0x5555555555555555555555555555555555555555";

sol! {
    function burn(uint256 rounds);
    function collectPriced(address token);
    function collectArmed(address token);
    function arm(bool on);
    function approveAndCall(address spender, uint256 amount, bytes data) returns (bool);
    function authorizeOperator(address operator);
    function transfer(address to, uint256 amount) returns (bool);
    function approve(address spender, uint256 amount) returns (bool);
    function mint(address to, uint256 amount);
    function add(uint256 amount);
}

fn stranger() -> Address {
    STRANGER.parse().expect("an address")
}

/// A key limited to 1,000 of `token` per write and per day.
async fn limit(keyed: &KeyedWallet, token: Address) -> anyhow::Result<()> {
    keyed
        .svc
        .limit_key(
            &keyed.prefix,
            &[
                "--chain",
                "anvil",
                "--asset",
                &token.to_string(),
                "--max-per-tx",
                "1000",
                "--daily",
                "1000",
            ],
        )
        .await?;
    Ok(())
}

/// A contract the owner approved takes 1 unit in a call without gas price (as a simulation
/// without fee fields was) and the wallet's whole balance in one with: the simulation now
/// carries the fees it is signed with, and sees the whole balance leave. A contract that
/// takes more once a stranger arms it (a front-runner) cannot be told from an honest one
/// in any simulation: a limited key calls a contract holding an allowance only through a
/// function its owner named.
async fn a_contract_that_tells_the_simulation_apart_is_judged_as_it_executes(
    b: Backend,
) -> anyhow::Result<()> {
    let keyed = KeyedWallet::start(b).await?;
    let token = keyed.token().await?;
    limit(&keyed, token).await?;
    let skimmer = keyed.anvil.deploy("Skimmer").await?;
    let owner = keyed.svc.rest(&keyed.svc.api_key);
    let reply = owner
        .post(
            "/token/approve",
            &json!({"chain": "anvil", "token": token.to_string(),
                "spender": skimmer.to_string(), "amount": U256::MAX.to_string()}),
        )
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    owner
        .wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    let (anvil, wallet) = (&keyed.anvil, keyed.wallet);
    let api = keyed.svc.rest(&keyed.key);
    let armed = collectArmedCall { token }.abi_encode();
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &call_body(skimmer, armed, 0)),
            &["state change not understood", &skimmer.to_string()],
        )
        .await?;
    // Named by the owner, the contract is judged on its simulation, run as it executes.
    keyed
        .svc
        .allow_key(
            &keyed.prefix,
            &[
                "--chain",
                "anvil",
                "--contract",
                &skimmer.to_string(),
                "--function",
                "collectPriced(address)",
            ],
        )
        .await?;
    let priced = collectPricedCall { token }.abi_encode();
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &call_body(skimmer, priced.clone(), 0)),
            &["at most 1000", "10000"],
        )
        .await?;
    let dry = api
        .post(
            "/contracts/send?dryRun=true",
            &call_body(skimmer, priced, 0),
        )
        .await?;
    assert_eq!(
        dry.body["effects"]["outflows"][0]["amount"], "10000",
        "{}",
        dry.text
    );
    assert_eq!(
        anvil.token_balance(token, wallet).await?,
        U256::from(10_000)
    );
    assert_eq!(anvil.token_balance(token, skimmer).await?, U256::ZERO);
    Ok(())
}

/// Holds and moves that a reading of events missed: ERC-1363's `approveAndCall` of the
/// maximum beside a 1-unit payment (the allowance read after it is unlimited), an ERC-777
/// operator (an unlimited hold), and a `Transfer` with no indexed field, past the limit.
/// A bounded approval counts as moved; so does an unindexed transfer within the limit.
async fn grants_and_unindexed_transfers_count(b: Backend) -> anyhow::Result<()> {
    let keyed = KeyedWallet::start(b).await?;
    let (anvil, wallet) = (&keyed.anvil, keyed.wallet);
    let quiet = anvil.deploy("QuietToken").await?;
    anvil
        .send_from_dev(
            Some(quiet),
            mintCall {
                to: wallet,
                amount: U256::from(10_000),
            }
            .abi_encode()
            .into(),
        )
        .await?;
    limit(&keyed, quiet).await?;
    let skimmer = anvil.deploy("Skimmer").await?;
    let api = keyed.svc.rest(&keyed.key);
    let approve_and_call = approveAndCallCall {
        spender: skimmer,
        amount: U256::MAX,
        data: Bytes::new(),
    }
    .abi_encode();
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &call_body(quiet, approve_and_call, 0)),
            &["unlimited", &skimmer.to_string()],
        )
        .await?;
    let operator = authorizeOperatorCall {
        operator: stranger(),
    }
    .abi_encode();
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &call_body(quiet, operator, 0)),
            &["unlimited", STRANGER],
        )
        .await?;
    let over = transferCall {
        to: stranger(),
        amount: U256::from(5_000),
    }
    .abi_encode();
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &call_body(quiet, over, 0)),
            &["at most 1000", "5000"],
        )
        .await?;
    assert_eq!(
        anvil.token_balance(quiet, wallet).await?,
        U256::from(10_000)
    );
    assert_eq!(anvil.allowance(quiet, wallet, skimmer).await?, U256::ZERO);

    // Within the limit: 600 sent quietly, then an approval of 600 is over the day's 1000.
    let within = transferCall {
        to: stranger(),
        amount: U256::from(600),
    }
    .abi_encode();
    let reply = api
        .post("/contracts/send", &call_body(quiet, within, 0))
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    api.wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    let approval = approveCall {
        spender: stranger(),
        amount: U256::from(600),
    }
    .abi_encode();
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &call_body(quiet, approval, 0)),
            &["left"],
        )
        .await?;
    assert_eq!(
        anvil.token_balance(quiet, stranger()).await?,
        U256::from(600)
    );
    Ok(())
}

/// Fees leave the wallet whatever a write moves: a limited key's writes are held to a fee
/// budget per chain (the chain's default until its owner sets one), each reserving its most
/// (gas limit at the most per gas) and, once mined, what it paid. A contract that only
/// burns gas (past each block's gas target, so the base fee rises), called again and again,
/// costs the wallet at most the budget.
async fn a_limited_keys_fees_are_held_to_a_budget(b: Backend) -> anyhow::Result<()> {
    let keyed = KeyedWallet::start(b).await?;
    let token = keyed.token().await?;
    limit(&keyed, token).await?;
    let (anvil, wallet) = (&keyed.anvil, keyed.wallet);
    let burner = anvil.deploy("Skimmer").await?;
    // Burning gas writes the contract's own storage: its owner names it.
    keyed
        .svc
        .allow_key(
            &keyed.prefix,
            &["--chain", "anvil", "--contract", &burner.to_string()],
        )
        .await?;
    let api = keyed.svc.rest(&keyed.key);
    let burn = call_body(
        burner,
        burnCall {
            rounds: U256::from(800),
        }
        .abi_encode(),
        0,
    );
    // Without a budget of its own the key has the chain's default, shown with its limits.
    let dry = api.post("/contracts/send?dryRun=true", &burn).await?;
    assert_eq!(dry.status, 200, "{}", dry.text);
    assert_eq!(dry.body["verdict"]["allowed"], true, "{}", dry.text);
    let most: U256 = dry.body["fee"]["maxFee"]
        .as_str()
        .unwrap_or_default()
        .parse()?;
    let shown = keyed
        .svc
        .limit_key(
            &keyed.prefix,
            &[
                "--chain",
                "anvil",
                "--fees-per-day",
                &(most * U256::from(5) / U256::from(2)).to_string(),
            ],
        )
        .await?;
    assert!(shown.contains("fees"), "{shown}");
    let before = anvil.balance(wallet).await?;
    let budget = most * U256::from(5) / U256::from(2);
    let mut made = 0;
    let refusal = loop {
        let reply = api.post("/contracts/send", &burn).await?;
        if reply.status != 200 {
            break reply;
        }
        api.wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
            .await?;
        made += 1;
        assert!(made < 20, "the budget never ran out");
    };
    refusal.assert_error(403, "FORBIDDEN")?;
    assert!(
        refusal.text.contains("fees") && refusal.text.contains("24-hour budget"),
        "{}",
        refusal.text
    );
    let paid = before - anvil.balance(wallet).await?;
    assert!(
        paid <= budget,
        "paid {paid} in fees, over the budget {budget}"
    );
    // Each write's reservation fell to what it paid: more were made than the budget holds
    // at their most.
    assert!(
        made >= 2,
        "{made} writes made under a budget of 2.5 at their most"
    );

    // A gas ceiling refuses a write signed with more gas than it allows, whatever budget
    // is left.
    let units = dry.body["fee"]["units"].as_u64().unwrap_or_default();
    assert!(units > 21_000, "{}", dry.text);
    let shown = keyed
        .svc
        .limit_key(
            &keyed.prefix,
            &["--chain", "anvil", "--max-gas", &(units / 2).to_string()],
        )
        .await?;
    assert!(shown.contains("anvil gas: at most"), "{shown}");
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &burn),
            &["gas:", &format!("at most {} gas", units / 2)],
        )
        .await?;
    Ok(())
}

/// A limited key's call is made only when all it writes is understood: a token's own
/// transfer (its storage, with the events the effects are read from) is; a contract keeping
/// state of its own (which could hold a claim on the wallet no effect shows) is not, until
/// the owner names it in the key's contract rules.
async fn a_limited_keys_call_must_change_only_understood_state(b: Backend) -> anyhow::Result<()> {
    let keyed = KeyedWallet::start(b).await?;
    let token = keyed.token().await?;
    limit(&keyed, token).await?;
    let (anvil, wallet) = (&keyed.anvil, keyed.wallet);
    let counter = anvil.deploy("Counter").await?;
    let api = keyed.svc.rest(&keyed.key);
    let pay = transferCall {
        to: stranger(),
        amount: U256::from(5),
    }
    .abi_encode();
    let reply = api
        .post("/contracts/send", &call_body(token, pay, 0))
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    api.wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    let add = call_body(
        counter,
        addCall {
            amount: U256::from(1),
        }
        .abi_encode(),
        0,
    );
    anvil
        .assert_forbidden(
            wallet,
            &api,
            ("/contracts/send", &add),
            &[
                "state change not understood",
                &counter.to_string(),
                "storage of",
            ],
        )
        .await?;
    keyed
        .svc
        .allow_key(
            &keyed.prefix,
            &["--chain", "anvil", "--contract", &counter.to_string()],
        )
        .await?;
    let reply = api.post("/contracts/send", &add).await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    api.wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    Ok(())
}

on_both_backends!(
    a_limited_keys_call_must_change_only_understood_state,
    a_contract_that_tells_the_simulation_apart_is_judged_as_it_executes,
    grants_and_unindexed_transfers_count,
    a_limited_keys_fees_are_held_to_a_budget,
);
