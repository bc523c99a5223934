//! The `walletops` admin commands, run against a test service's data dir and database.

use std::path::Path;

use anyhow::{Context, bail};
use tokio::process::Command;

use crate::{Service, paths::walletops_bin, service::log_filter, wait::within};

/// What a CLI run printed.
#[derive(Debug)]
pub struct CliOutput {
    /// Exit status was 0.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl CliOutput {
    /// The value of the `API key: ` line.
    pub fn api_key(&self) -> Option<String> {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix("API key: "))
            .map(|k| k.trim().to_owned())
    }
}

impl Service {
    /// Runs `walletops <args>` against this service's data dir and database, with the
    /// `WALLETOPS_*` options the service was started with.
    pub async fn cli(&self, args: &[&str]) -> anyhow::Result<CliOutput> {
        self.cli_in(self.data_dir.path(), args).await
    }

    /// Makes an EVM wallet of the first user with `walletops wallets create`, its default
    /// when `make_default`; its address.
    pub async fn cli_evm_wallet(&self, make_default: bool) -> anyhow::Result<String> {
        let mut args = vec!["wallets", "create", "--chain-type", "ethereum"];
        if make_default {
            args.push("--make-default");
        }
        let made = self.cli(&args).await?;
        anyhow::ensure!(made.success, "{}", made.stderr);
        // The line starts with the address.
        let address = made.stdout.split_whitespace().next().unwrap_or_default();
        Ok(address.to_owned())
    }

    /// Runs `walletops <args>` against this service's database with `data_dir` as its data
    /// dir (the master key's place).
    pub async fn cli_in(&self, data_dir: &Path, args: &[&str]) -> anyhow::Result<CliOutput> {
        self.run_cli(data_dir, args, None).await
    }

    /// Runs `walletops <args>` as `cli` does, with `input` on its standard input.
    pub async fn cli_with_input(&self, args: &[&str], input: &str) -> anyhow::Result<CliOutput> {
        self.run_cli(self.data_dir.path(), args, Some(input)).await
    }

    async fn run_cli(
        &self,
        data_dir: &Path,
        args: &[&str],
        input: Option<&str>,
    ) -> anyhow::Result<CliOutput> {
        let mut cmd = Command::new(walletops_bin()?);
        // The service's configuration file (its chains, say), as the service reads it.
        if self.options().config_toml.is_some() {
            cmd.arg("--config")
                .arg(self.data_dir.path().join("walletops.toml"));
        }
        cmd.args(args)
            // As for the service: the tests' webhook receivers listen on loopback.
            .env("WALLETOPS_WEBHOOKS__ALLOW_PRIVATE_TARGETS", "true")
            // The service's options (not its failpoints or log filter), and its HSM token's
            // place.
            .envs(
                self.options()
                    .env
                    .iter()
                    .filter(|(k, _)| k.starts_with("WALLETOPS_") || k == crate::softhsm::CONF)
                    .map(|(k, v)| (k, v)),
            )
            .env("WALLETOPS_DATA_DIR", data_dir)
            .env("RUST_LOG", log_filter())
            .env_remove("DATABASE_URL")
            .env_remove("WALLETOPS_DATABASE_URL");
        let url = match &self.database_url {
            Some(url) => url.clone(),
            None => format!(
                "sqlite://{}?mode=rwc",
                self.data_dir.path().join("walletops.db").display()
            ),
        };
        cmd.env("WALLETOPS_DATABASE_URL", url);
        let out = match input {
            None => within("the walletops CLI", cmd.output()).await??,
            Some(input) => {
                use tokio::io::AsyncWriteExt;
                cmd.stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                let mut child = cmd.spawn()?;
                let mut stdin = child.stdin.take().context("no stdin")?;
                stdin.write_all(input.as_bytes()).await?;
                drop(stdin);
                within("the walletops CLI", child.wait_with_output()).await??
            }
        };
        Ok(CliOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// Creates a user with the CLI and returns its first API key.
    pub async fn create_user(&self, name: &str) -> anyhow::Result<String> {
        let out = self.cli(&["users", "create", name]).await?;
        if !out.success {
            bail!("users create {name} failed: {}", out.stderr);
        }
        out.api_key().context("users create printed no API key")
    }

    /// Creates another API key of the first user with the CLI (`keys create --name name`)
    /// and returns it.
    pub async fn create_key(&self, name: &str) -> anyhow::Result<String> {
        let out = self.cli(&["keys", "create", "--name", name]).await?;
        if !out.success {
            bail!("keys create --name {name} failed: {}", out.stderr);
        }
        out.api_key().context("keys create printed no API key")
    }

    /// Sets a spend limit of the key with prefix `prefix` with the CLI (`keys limit <prefix>
    /// <args>`); what it printed.
    pub async fn limit_key(&self, prefix: &str, args: &[&str]) -> anyhow::Result<String> {
        let mut all = vec!["keys", "limit", prefix];
        all.extend_from_slice(args);
        let out = self.cli(&all).await?;
        anyhow::ensure!(out.success, "keys limit {prefix}: {}", out.stderr);
        Ok(out.stdout)
    }

    /// Adds a rule to the policy of the key with prefix `prefix` with the CLI (`keys allow
    /// <prefix> <args>`); what it printed.
    pub async fn allow_key(&self, prefix: &str, args: &[&str]) -> anyhow::Result<String> {
        let mut all = vec!["keys", "allow", prefix];
        all.extend_from_slice(args);
        let out = self.cli(&all).await?;
        anyhow::ensure!(out.success, "keys allow {prefix}: {}", out.stderr);
        Ok(out.stdout)
    }

    /// Turns the delegation of `wallet` to the server signer on or off with the CLI
    /// (`wallets delegate <wallet> on|off`).
    pub async fn delegate(&self, wallet: &str, on: bool) -> anyhow::Result<()> {
        let state = if on { "on" } else { "off" };
        let out = self.cli(&["wallets", "delegate", wallet, state]).await?;
        anyhow::ensure!(out.success, "delegate {state}: {}", out.stderr);
        Ok(())
    }

    /// The environment a CLI run against this service's data needs.
    pub fn cli_env(&self) -> Vec<(String, String)> {
        let mut env = vec![(
            "WALLETOPS_DATA_DIR".to_owned(),
            self.data_dir.path().display().to_string(),
        )];
        if let Some(url) = &self.database_url {
            env.push(("WALLETOPS_DATABASE_URL".to_owned(), url.clone()));
        }
        env
    }
}
