//! The REST contract fuzzed from its own OpenAPI document with schemathesis (installed by
//! the test command): at least 2,000 generated requests, none answered with a server error
//! other than the contract's 502 and 503, every 4xx and 5xx in the contract's error body
//! (`tests/fuzz/contract_checks.py`), every answer as the document says.
//! `WALLETOPS_TEST_FUZZ_EXAMPLES` (examples per operation, default 100) makes a longer run.

use anyhow::Context;
use walletops_tests::{Options, Service, schemathesis_bin, workspace_root};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rest_contract_holds_under_generated_requests() -> anyhow::Result<()> {
    // Limits high enough that the run exercises the routes, not only the 429.
    let options = Options::default()
        .with_env("WALLETOPS_RATE_LIMITS__READS_PER_MINUTE", "10000000")
        .with_env("WALLETOPS_RATE_LIMITS__WRITES_PER_MINUTE", "10000000")
        .with_env("WALLETOPS_RATE_LIMITS__FAILED_AUTH_PER_MINUTE", "10000000");
    let svc = Service::start_with(walletops_tests::Backend::Sqlite, options).await?;
    let examples =
        std::env::var("WALLETOPS_TEST_FUZZ_EXAMPLES").unwrap_or_else(|_| "100".to_owned());
    let scratch = tempfile::tempdir()?;
    let run = tokio::process::Command::new(schemathesis_bin()?)
        .args(["run", &format!("{}/api/v1/openapi.json", svc.http)])
        .args(["--header", &format!("x-api-key: {}", svc.api_key)])
        .args(["--max-examples", &examples, "--no-color"])
        // An event stream never ends: a generated request would wait on it for good (the
        // deposits' stream until its lifetime ran out: most of the run's wall time). Their
        // refusals are checked in `events.rs` and `deposits.rs`.
        .args(["--exclude-path-regex", "(tx|deposits)/events$"])
        .args([
            "--checks",
            "status_code_conformance,response_schema_conformance,contract_error_body",
        ])
        .env("SCHEMATHESIS_HOOKS", "contract_checks")
        .env("PYTHONPATH", workspace_root().join("tests/fuzz"))
        .current_dir(scratch.path())
        .kill_on_drop(true)
        .output();
    // Far longer than a run takes alone (about 8 minutes on two cores: schemathesis's
    // generation is most of it), for a machine running the rest of the suite beside it.
    let out = tokio::time::timeout(std::time::Duration::from_secs(1800), run)
        .await
        .context("the schemathesis run did not end in 30 minutes")??;
    let report = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "schemathesis failed:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The summary's "N generated, N passed".
    let generated: u64 = report
        .lines()
        .find_map(|l| {
            let (n, _) = l.trim().split_once(" generated,")?;
            n.trim().parse().ok()
        })
        .with_context(|| format!("no count of generated requests in:\n{report}"))?;
    println!("schemathesis: {generated} requests generated, every one passed");
    anyhow::ensure!(
        generated >= 2000,
        "only {generated} requests generated:\n{report}"
    );
    Ok(())
}
