//! The configuration's sources, defaults and startup checks.

use super::*;

#[test]
fn defaults_need_no_file() {
    let c = Config::default();
    assert_eq!(c.http_addr.to_string(), "127.0.0.1:8080");
    assert_eq!(c.grpc_addr.to_string(), "127.0.0.1:50051");
    assert_eq!(c.rate_limits.writes_per_minute, 15);
    assert_eq!(c.rate_limits.reads_per_minute, 60);
    assert!(c.database_url().starts_with("sqlite://./walletops-data/"));
}

#[test]
fn secrets_do_not_print() {
    let s = Secret::from("hunter2".to_owned());
    assert_eq!(format!("{s:?}"), "Secret(..)");
}

#[test]
fn toml_file_is_typed_and_strict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "http_addr = \"127.0.0.1:9999\"\n[rate_limits]\nwrites_per_minute = 3\n",
    )
    .expect("write");
    let c = Config::load(Some(&path)).expect("load");
    assert_eq!(c.http_addr.port(), 9999);
    assert_eq!(c.rate_limits.writes_per_minute, 3);
    assert_eq!(c.rate_limits.reads_per_minute, 60);
    std::fs::write(&path, "no_such_option = 1\n").expect("write");
    assert!(Config::load(Some(&path)).is_err());
    for short in ["", "short"] {
        std::fs::write(&path, format!("admin_token = \"{short}\"\n")).expect("write");
        let err = Config::load(Some(&path)).expect_err("a short admin token");
        assert!(err.to_string().contains("admin_token"), "{err}");
    }
    assert!(NOT_OPTIONS.contains(&"anvil_bin"));
}

#[test]
fn values_the_service_cannot_run_with_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.toml");
    for (toml, option) in [
        (
            "[rate_limits]\nwrites_per_minute = 0\n",
            "rate_limits.writes_per_minute",
        ),
        (
            "[monitor]\nstuck_after_secs = 0\n",
            "monitor.stuck_after_secs",
        ),
        (
            "[monitor]\nfee_bump_percent = 5\n",
            "monitor.fee_bump_percent",
        ),
        (
            "[monitor]\npoll_interval_ms = 10\n",
            "monitor.poll_interval_ms",
        ),
        ("request_timeout_secs = 0\n", "request_timeout_secs"),
        ("max_body_bytes = 0\n", "max_body_bytes"),
        (
            "[rate_limits]\nkey_share_percent = 101\n",
            "rate_limits.key_share_percent",
        ),
        (
            "[rate_limits]\nwrites_when_redis_fails = \"maybe\"\n",
            "writes_when_redis_fails",
        ),
        (
            "[monitor]\nmax_priority_fee_per_gas_gwei = 0\n",
            "monitor.max_priority_fee_per_gas_gwei",
        ),
    ] {
        std::fs::write(&path, toml).expect("write");
        let err = Config::load(Some(&path)).expect_err(toml);
        assert!(err.to_string().contains(option), "{toml}: {err}");
    }
}

#[test]
fn writes_may_be_admitted_while_redis_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "[rate_limits]\nwrites_when_redis_fails = \"admit\"\nkey_share_percent = 25\n",
    )
    .expect("write");
    let c = Config::load(Some(&path)).expect("valid");
    assert_eq!(
        c.rate_limits.writes_when_redis_fails,
        crate::ratelimit::WhenRedisFails::Admit
    );
    assert_eq!(c.rate_limits.key_share(15), 4);
    assert_eq!(
        Config::default().rate_limits.writes_when_redis_fails,
        crate::ratelimit::WhenRedisFails::Refuse
    );
}

#[test]
fn a_secret_of_the_wrong_type_is_not_quoted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "admin_token = 9876543210123456\n").expect("write");
    let err = format!("{:#}", Config::load(Some(&path)).expect_err("a number"));
    assert!(err.contains("admin_token"), "{err}");
    assert!(!err.contains("9876543210123456"), "{err}");
}

#[test]
// figment's `Jail` closures return its large error type; a test can afford it.
#[allow(clippy::result_large_err)]
fn trade_options_map_from_the_file_and_the_environment() {
    figment::Jail::expect_with(|jail| {
        let defaults = Config::load(None).map_err(|e| e.to_string())?;
        assert_eq!(
            defaults.trade.evm.base_url.as_str(),
            "https://api.1inch.dev/"
        );
        assert!(defaults.trade.evm.api_key.is_empty());
        assert_eq!(
            defaults.trade.solana.base_url.as_str(),
            "https://api.jup.ag/swap/v1"
        );
        assert_eq!(defaults.trade.solana.allowed_programs.len(), 7);
        assert_eq!(defaults.trade.solana.max_compute_units, 1_400_000);

        jail.create_file(
            "c.toml",
            "[trade.evm]\nallowed_routers = [\"0x111111125421ca6dc452d289314280a0f8842a65\"]\n\
             [trade.solana]\nallowed_programs = [\"11111111111111111111111111111111\"]\n\
             max_fee_lamports = 10000\n",
        )?;
        jail.set_env("WALLETOPS_TRADE__EVM__BASE_URL", "http://127.0.0.1:9/1inch");
        // All digits with a leading zero: a key is taken as written, not as a number.
        jail.set_env("WALLETOPS_TRADE__EVM__API_KEY", "0123456789");
        jail.set_env(
            "WALLETOPS_TRADE__SOLANA__BASE_URL",
            "http://127.0.0.1:9/jup",
        );
        jail.set_env("WALLETOPS_TRADE__SOLANA__API_KEY", "jup-key");
        jail.set_env("WALLETOPS_TRADE__SOLANA__MAX_COMPUTE_UNITS", "300000");
        let c = Config::load(Some(std::path::Path::new("c.toml"))).map_err(|e| e.to_string())?;
        assert_eq!(c.trade.evm.base_url.as_str(), "http://127.0.0.1:9/1inch");
        assert_eq!(c.trade.evm.api_key.expose(), "0123456789");
        assert_eq!(c.trade.evm.allowed_routers.len(), 1);
        assert_eq!(c.trade.solana.base_url.as_str(), "http://127.0.0.1:9/jup");
        assert_eq!(c.trade.solana.api_key.expose(), "jup-key");
        assert_eq!(
            c.trade.solana.allowed_programs,
            vec![solana_pubkey::Pubkey::default()]
        );
        assert_eq!(c.trade.solana.max_fee_lamports, 10_000);
        assert_eq!(c.trade.solana.max_compute_units, 300_000);
        // Debug output, as a log line of the config would show it, hides both keys.
        let shown = format!("{:?}", c.trade);
        assert!(
            !shown.contains("0123456789") && !shown.contains("jup-key"),
            "{shown}"
        );
        Ok(())
    });
}

#[test]
// figment's `Jail` closures return its large error type; a test can afford it.
#[allow(clippy::result_large_err)]
fn trade_values_no_swap_could_use_are_refused_by_name() {
    // In a jail: it waits for the test above, whose variables would override the file.
    figment::Jail::expect_with(|jail| {
        for (toml, option) in [
            (
                "[trade.evm]\nbase_url = \"ftp://x\"\n",
                "trade.evm.base_url",
            ),
            (
                "[trade.solana]\nbase_url = \"mailto:a@b\"\n",
                "trade.solana.base_url",
            ),
            (
                "[trade.evm]\nbase_url = \"http://aggregator.example.com\"\n",
                "trade.evm.base_url",
            ),
            (
                "[provider]\nbase_url = \"http://10.0.0.5\"\n",
                "provider.base_url",
            ),
            (
                "[trade.solana]\nmax_fee_lamports = 0\n",
                "trade.solana.max_fee_lamports",
            ),
            (
                "[trade.solana]\nmax_compute_units = 1400001\n",
                "trade.solana.max_compute_units",
            ),
            (
                "[trade.solana]\nallowed_programs = [\"nope\"]\n",
                "allowed_programs",
            ),
            (
                "[trade.evm]\nallowed_routers = [\"0x12\"]\n",
                "allowed_routers",
            ),
        ] {
            jail.create_file("c.toml", toml)?;
            let loaded = Config::load(Some(std::path::Path::new("c.toml")));
            let err = format!("{:#}", loaded.expect_err(toml));
            assert!(err.contains(option), "{toml}: {err}");
        }
        Ok(())
    });
}

#[test]
fn a_fee_budget_default_is_per_chain_and_can_be_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "[limits.default_fees_per_day]\nbase = 7\n[chains.anvil]\nfamily = \"ethereum\"\nchain_id = 31337\nrpc_url = \"http://127.0.0.1:8545\"\n",
    )
    .expect("write");
    let c = Config::load(Some(&path)).expect("load");
    let chains = walletops_chains::Registry::new(&c.chains).expect("chains");
    let budget = |slug: &str| {
        c.limits
            .fees_per_day(chains.resolve(slug).expect(slug))
            .to_string()
    };
    assert_eq!(budget("base"), "7");
    assert_eq!(budget("ethereum"), "50000000000000000");
    assert_eq!(budget("anvil"), "100000000000000000");
    assert_eq!(budget("solana-devnet"), "100000000");
}
