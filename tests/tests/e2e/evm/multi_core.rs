//! Two cores over one database: a core that stops, or cannot follow a record, leaves its
//! records to the others in time.

use alloy::primitives::U256;
use walletops_tests::{Backend, Rest, on_both_backends, poll_until};

use super::{Evm, RECIPIENT};

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
    e.svc.wait_for_leases(1).await?;
    let other = e.svc.sibling().await?;
    e.svc.terminate().await?;
    e.anvil.mine().await?;
    let api = Rest::new(&other.http()?, &e.svc.api_key);
    api.wait_for_status(&id, "CONFIRMED").await?;
    Ok(())
}

async fn a_core_that_cannot_follow_a_record_gives_it_up(b: Backend) -> anyhow::Result<()> {
    let toml = "[monitor]\npoll_interval_ms = 100\nlease_secs = 5\n";
    let mut e = Evm::start(b, toml, &["--no-mining"]).await?;
    let (id, _) = e.send_native(RECIPIENT, "5").await?;
    e.svc.wait_for_leases(1).await?;
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
    let blind = e.anvil.service_options_via(&silent_url, toml, &[]);
    let _blind = e.svc.sibling_with(&blind).await?;
    e.svc.kill().await?;
    poll_until("the blind core to take the record", || async {
        Ok((e.svc.send_lease_owners().await? != first).then_some(()))
    })
    .await?;
    // A core that can follow it starts: the blind core, renewing its lease each sweep,
    // would keep the record (and every later nonce of the wallet) from it for good.
    e.svc.relaunch(e.anvil.service_options(toml, &[])).await?;
    e.anvil.mine().await?;
    e.wait_for(&id, "CONFIRMED").await?;
    assert_eq!(e.anvil.balance(RECIPIENT.parse()?).await?, U256::from(5u64));
    Ok(())
}

on_both_backends!(
    a_core_that_stops_hands_its_records_to_the_others_at_once,
    a_core_that_cannot_follow_a_record_gives_it_up,
);
