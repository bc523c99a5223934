//! The service's log as an operator's collector reads it: plain lines with no terminal
//! colour codes when standard error is a file, and one JSON object per line with
//! `log_format = "json"`.

use walletops_tests::{Backend, Options, Service};

/// Starts a service logging at `info` to a file with `env` besides, makes it log a webhook
/// registered, and returns its log.
async fn log_of(env: &[(&str, &str)]) -> anyhow::Result<String> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("service.log");
    let mut options = Options::default()
        .with_env("RUST_LOG", "info")
        .logging_to(&file);
    for (key, value) in env {
        options = options.with_env(key, value);
    }
    let svc = Service::start_with(Backend::Sqlite, options).await?;
    let made = svc
        .rest(&svc.api_key)
        .post(
            "/webhooks",
            &serde_json::json!({"url": "http://127.0.0.1:9/hook"}),
        )
        .await?;
    assert_eq!(made.status, 201, "{}", made.text);
    svc.stop().await?;
    Ok(std::fs::read_to_string(&file)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_written_to_a_file_has_no_colour_codes() -> anyhow::Result<()> {
    let log = log_of(&[]).await?;
    assert!(log.lines().count() > 1, "nothing logged: {log}");
    assert!(
        !log.contains('\u{1b}'),
        "an escape sequence in the log file: {log:?}"
    );
    assert!(log.contains("webhook registered"), "{log}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line() -> anyhow::Result<()> {
    let log = log_of(&[("WALLETOPS_LOG_FORMAT", "json")]).await?;
    assert!(!log.contains('\u{1b}'), "{log:?}");
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("a line that is not JSON ({e}): {log}"))?;
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "webhook registered"),
        "{log}"
    );
    for line in &lines {
        assert!(line["timestamp"].is_string(), "{line}");
        assert!(line["level"].is_string(), "{line}");
        assert!(line["fields"]["message"].is_string(), "{line}");
    }
    Ok(())
}
