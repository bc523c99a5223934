//! Keys held in memory for reads, and a change to a key reaching every core within a second:
//! a key revoked on one core is refused by another (PostgreSQL, `LISTEN`/`NOTIFY`), also
//! after the other lost its channel (it reads keys from the database until the channel is
//! back), and a key revoked by the CLI or moved past its expiry by hand is refused by the
//! serving core (both stores). Wallets are held beside the keys for reads: a new default
//! wallet, made on one core or by the CLI, is what every core's balance read names within a
//! second.

use sea_orm::ConnectionTrait as _;
use walletops_proto::v1::{
    self as pb, admin_service_client::AdminServiceClient,
    api_key_service_client::ApiKeyServiceClient,
};
use walletops_tests::{
    Backend, Options, Rest, Service, anvil::Anvil, as_admin, metrics, on_both_backends, poll_until,
    poll_until_within, silencer::Silencer, with_key,
};

/// The wallet whose balances `api`'s balance read on the node lists.
async fn wallet_read(api: &Rest) -> anyhow::Result<String> {
    let reply = api
        .get("/wallets/balances?chain=anvil&includeZero=true")
        .await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    Ok(reply.body["balances"][0]["address"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

/// Reads balances on `api` twice (the wallet held from then on), makes `change` elsewhere
/// (which gives the new default wallet), and waits at most a second (as for a key) until the
/// read names it.
async fn read_until(
    api: &Rest,
    change: impl Future<Output = anyhow::Result<String>>,
) -> anyhow::Result<()> {
    let before = wallet_read(api).await?;
    assert_eq!(wallet_read(api).await?, before, "the same wallet twice");
    let wallet = change.await?;
    assert_ne!(before, wallet, "a change to see");
    let within = std::time::Duration::from_secs(1);
    poll_until_within(
        "the read to name the new default wallet",
        within,
        || async { Ok((wallet_read(api).await? == wallet).then_some(())) },
    )
    .await
}

/// A key of the first user made on `svc`, used on `other` until it is held there.
async fn key_read_on(svc: &Service, other: &Rest, name: &str) -> anyhow::Result<(String, Rest)> {
    let key = svc.create_key(name).await?;
    let api = other.with_key(&key);
    for _ in 0..2 {
        assert_eq!(api.get("/wallets").await?.status, 200, "{name} reads");
    }
    Ok((key, api))
}

/// Revokes `key` through the gRPC core of `svc`, with the key itself.
async fn revoke_on(svc: &Service, key: &str) -> anyhow::Result<()> {
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let id = key.split('_').nth(1).unwrap_or_default().to_owned();
    keys.revoke_api_key(with_key(pb::RevokeApiKeyRequest { id }, key)?)
        .await?;
    Ok(())
}

/// How many cores listen for key changes on the service's database (their connections'
/// `application_name`, `walletops_store::LISTENER_NAME`); ended first if `terminate`.
async fn listeners(svc: &Service, terminate: bool) -> anyhow::Result<usize> {
    let what = if terminate {
        "pg_terminate_backend(pid)"
    } else {
        "pid"
    };
    let rows = svc
        .database()
        .await?
        .query_all_raw(sea_orm::Statement::from_string(
            sea_orm::DatabaseBackend::Postgres,
            format!(
                "SELECT {what} FROM pg_stat_activity WHERE application_name = 'walletops-key-changes' AND datname = current_database()"
            ),
        ))
        .await?;
    Ok(rows.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_reaches_every_core_within_a_second() {
    let run = async {
        let options = Options::default().with_env("WALLETOPS_METRICS_ADDR", "127.0.0.1:0");
        let svc = Service::start_with(Backend::Postgres, options.clone()).await?;
        let other = svc.sibling_with(&options).await?;
        let on_other = Rest::new(&other.http()?, &svc.api_key);
        poll_until("both cores to listen for key changes", || async {
            Ok((listeners(&svc, false).await? == 2).then_some(()))
        })
        .await?;
        let url = other.metrics_url().expect("the other core's metrics");
        poll_until("the other core to hold keys for reads", || async {
            let text = metrics::scrape_text(&url).await?;
            let heard = metrics::sum(&text, "walletops_key_changes_heard", None);
            Ok((heard == 1.0).then_some(()))
        })
        .await?;
        let (key, api) = key_read_on(&svc, &on_other, "held").await?;
        revoke_on(&svc, &key).await?;
        api.wait_refused("the other core to refuse the revoked key")
            .await?;

        // The channel lost: the other core reads keys from the database until it is back.
        assert_eq!(listeners(&svc, true).await?, 2, "both listeners ended");
        let (key, api) = key_read_on(&svc, &on_other, "while lost").await?;
        revoke_on(&svc, &key).await?;
        api.wait_refused("a revocation heard without the channel")
            .await?;
        let lost = metrics::sum(
            &metrics::scrape_text(&url).await?,
            "walletops_key_change_channel_lost_total",
            None,
        );
        assert!(lost >= 1.0, "the loss was noticed: {lost}");

        // Back: keys are held again, and changes still arrive.
        poll_until("both cores to listen again", || async {
            Ok((listeners(&svc, false).await? == 2).then_some(()))
        })
        .await?;
        let (key, api) = key_read_on(&svc, &on_other, "after").await?;
        revoke_on(&svc, &key).await?;
        api.wait_refused("a revocation after the channel is back")
            .await?;
        anyhow::Ok(())
    };
    if let Err(e) = run.await {
        panic!("{e:?}");
    }
}

/// A listening connection that goes silent (no reset, no notification: a route dropped
/// under it) cannot keep a revoked key held: each core reads the key-change version every
/// second through its pool, and a version that moved without a notification marks the
/// channel lost. Two cores whose listeners are silenced refuse a key revoked elsewhere
/// within two seconds, and listen again on new connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_listener_cannot_keep_a_revoked_key_held() {
    let run = async {
        let svc = Service::start(Backend::Postgres).await?;
        let url = reqwest::Url::parse(svc.database_url().expect("a PostgreSQL URL"))?;
        let server = tokio::net::lookup_host((
            url.host_str().unwrap_or("127.0.0.1"),
            url.port().unwrap_or(5432),
        ))
        .await?
        .next()
        .expect("the server's address");
        // The listening connection names itself so (`walletops_store::LISTENER_NAME`).
        let silencer = Silencer::start(server, b"walletops-key-changes").await?;
        let mut via = url.clone();
        via.set_host(Some("127.0.0.1"))?;
        via.set_port(Some(silencer.addr().port()))
            .map_err(|()| anyhow::anyhow!("no port"))?;
        // In plain text, for the proxy to see which connection listens.
        via.query_pairs_mut().append_pair("sslmode", "disable");
        let cores = [
            svc.sibling_over(via.as_str()).await?,
            svc.sibling_over(via.as_str()).await?,
        ];
        poll_until("both cores to listen through the proxy", || async {
            Ok((silencer.marked() >= 2).then_some(()))
        })
        .await?;
        let key = svc.create_key("held").await?;
        let apis: Vec<Rest> = cores
            .iter()
            .map(|c| Ok(Rest::new(&c.http()?, &key)))
            .collect::<anyhow::Result<_>>()?;
        for api in &apis {
            for _ in 0..2 {
                assert_eq!(api.get("/wallets").await?.status, 200, "the key reads");
            }
        }
        silencer.silence();
        revoke_on(&svc, &key).await?;
        for api in &apis {
            poll_until_within(
                "a core with a silent listener to refuse the revoked key",
                std::time::Duration::from_secs(2),
                || async { Ok((api.get("/wallets").await?.status == 401).then_some(())) },
            )
            .await?;
        }
        poll_until("both cores to listen again on new connections", || async {
            Ok((silencer.marked() >= 4).then_some(()))
        })
        .await?;
        anyhow::Ok(())
    };
    if let Err(e) = run.await {
        panic!("{e:?}");
    }
}

async fn a_change_made_outside_the_core_reaches_it_within_a_second(
    b: Backend,
) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    // Revoked by the CLI, another process.
    let (key, api) = key_read_on(&svc, &svc.rest(&svc.api_key), "by the CLI").await?;
    let out = svc.cli(&["keys", "revoke", &key[5..9]]).await?;
    anyhow::ensure!(out.success, "{}", out.stderr);
    api.wait_refused("a key revoked by the CLI").await?;
    // Moved past its expiry by an operator's SQL.
    let (key, api) = key_read_on(&svc, &svc.rest(&svc.api_key), "by hand").await?;
    svc.expire_key(&key[5..9]).await?;
    api.wait_refused("a key expired by hand").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_default_wallet_reaches_every_core_within_a_second() {
    let run = async {
        let anvil = Anvil::start().await?;
        let options = anvil.service_options("", &[]);
        let svc = Service::start_with(Backend::Postgres, options.clone()).await?;
        let other = svc.sibling_with(&options).await?;
        let on_other = Rest::new(&other.http()?, &svc.api_key);
        let made = svc.cli_evm_wallet(false).await?;
        let mut admin = AdminServiceClient::new(svc.admin_channel().await?);
        let update = as_admin(pb::UpdateWalletRequest {
            address: made.clone(),
            make_default: Some(true),
            automation_enabled: None,
        })?;
        read_until(&on_other, async {
            admin.update_wallet(update).await?;
            Ok(made)
        })
        .await
    };
    if let Err(e) = run.await {
        panic!("{e:?}");
    }
}

async fn a_default_wallet_made_by_the_cli_reaches_the_core_within_a_second(
    b: Backend,
) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    read_until(&api, svc.cli_evm_wallet(true)).await
}

on_both_backends!(
    a_change_made_outside_the_core_reaches_it_within_a_second,
    a_default_wallet_made_by_the_cli_reaches_the_core_within_a_second
);
