//! Reads under a load generator: authenticated, cached `GET /api/v1/wallets/balances` through
//! WalletOps against a bare axum "hello" handler in a process of its own, both driven by
//! wrk with the same threads, connections and duration, so the ratio is what the service's
//! read path costs next to the least an HTTP server can do on this machine.

use std::{path::PathBuf, process::Stdio, time::Duration};

use anyhow::{Context, bail, ensure};
use tokio::{
    io::{AsyncBufReadExt as _, BufReader},
    process::{Child, Command},
};

/// The bench's own flag that makes it the bare server.
pub(crate) const BARE_SERVER_FLAG: &str = "--bare-server";

/// Serves `GET /` with `hello` on a free loopback port, printing the port first; runs until
/// killed.
pub(crate) async fn serve_bare() -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?.port());
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
    axum::serve(listener, app).await?;
    Ok(())
}

/// The bare server, started from this binary: the process and its URL.
async fn start_bare() -> anyhow::Result<(Child, String)> {
    let mut child = Command::new(std::env::current_exe()?)
        .arg(BARE_SERVER_FLAG)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().context("no stdout")?;
    let port = BufReader::new(stdout)
        .lines()
        .next_line()
        .await?
        .context("the bare server printed no port")?;
    Ok((child, format!("http://127.0.0.1:{}/", port.trim())))
}

/// Program `binary` from the PATH, installed with apt's `package` (as root, or through
/// sudo) when it is missing.
pub(crate) async fn installed(binary: &str, package: &str) -> anyhow::Result<PathBuf> {
    let found = || {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(binary))
                .find(|p| p.is_file())
        })
    };
    if let Some(path) = found() {
        return Ok(path);
    }
    println!("  installing {binary} (apt-get install {package}) ...");
    for prefix in [&[][..], &["sudo", "-n"][..]] {
        let mut args: Vec<&str> = prefix.to_vec();
        args.extend([
            "apt-get",
            "install",
            "-y",
            "--no-install-recommends",
            package,
        ]);
        let done = Command::new(args[0])
            .args(&args[1..])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
        if done.is_ok_and(|s| s.success())
            && let Some(path) = found()
        {
            return Ok(path);
        }
    }
    bail!("{binary} is not installed and apt-get could not install it: install {package}")
}

/// Requests per second wrk makes of `url` (with `headers`) on `connections` connections
/// for `duration`; any answer but 2xx fails the run.
async fn rate(
    wrk: &PathBuf,
    url: &str,
    headers: &[String],
    connections: usize,
    duration: Duration,
) -> anyhow::Result<f64> {
    let mut cmd = Command::new(wrk);
    cmd.args([
        "-t2",
        &format!("-c{connections}"),
        &format!("-d{}s", duration.as_secs().max(1)),
    ]);
    for h in headers {
        cmd.args(["-H", h]);
    }
    let out = cmd.arg(url).output().await?;
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success(), "wrk failed: {text}");
    ensure!(
        !text.contains("Non-2xx") && !text.contains("Socket errors"),
        "wrk saw failures: {text}"
    );
    text.lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("no rate in wrk's output: {text}"))
}

/// Cached balance reads through `http` with `key`, and the bare server's hello, each for
/// `duration` on `connections` connections: requests per second of both.
pub(crate) async fn reads_against_bare(
    http: &str,
    key: &str,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<(f64, f64)> {
    let wrk = installed("wrk", "wrk").await?;
    let (_bare, bare_url) = start_bare().await?;
    let url = format!(
        "{}/api/v1/wallets/balances?chain=anvil",
        http.trim_end_matches('/')
    );
    let headers = [format!("x-api-key: {key}")];
    // A short run first: the balance is cached and connections are warm for both.
    let warm = Duration::from_secs(1);
    rate(&wrk, &url, &headers, connections, warm).await?;
    rate(&wrk, &bare_url, &[], connections, warm).await?;
    let walletops = rate(&wrk, &url, &headers, connections, duration).await?;
    let bare = rate(&wrk, &bare_url, &[], connections, duration).await?;
    Ok((walletops, bare))
}
