//! A SoftHSM2 token of a test's own: a fresh token directory and configuration file, one
//! token initialised with a user PIN. A service (and its CLI runs) reaches it through
//! `[hsm]` and `SOFTHSM2_CONF`; `pkcs11-tool` (OpenSC) inspects it as an operator would.

use std::path::PathBuf;

use anyhow::Context as _;

/// The variable SoftHSM2 reads its configuration file from.
pub const CONF: &str = "SOFTHSM2_CONF";
/// Debian's SoftHSM2 module.
pub const MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";
/// The token's label.
pub const LABEL: &str = "walletops-test";
/// The user PIN.
pub const PIN: &str = "1234";
/// The security officer's PIN.
const SO_PIN: &str = "5678";

/// A token in a temporary directory, gone with it.
#[derive(Debug)]
pub struct SoftHsm {
    dir: tempfile::TempDir,
}

impl SoftHsm {
    /// A fresh token.
    pub fn start() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("tokens"))?;
        std::fs::write(
            dir.path().join("softhsm2.conf"),
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n",
                dir.path().join("tokens").display()
            ),
        )?;
        let token = Self { dir };
        token.run(
            "softhsm2-util",
            &[
                "--init-token",
                "--free",
                "--label",
                LABEL,
                "--pin",
                PIN,
                "--so-pin",
                SO_PIN,
            ],
        )?;
        Ok(token)
    }

    fn tokens(&self) -> PathBuf {
        self.dir.path().join("tokens")
    }

    /// Takes the token away, as a device pulled out or an HSM gone from the network: its
    /// files are moved aside.
    pub fn remove(&self) -> anyhow::Result<()> {
        std::fs::rename(self.tokens(), self.dir.path().join("away"))?;
        Ok(())
    }

    /// Puts back the token `remove` took away.
    pub fn put_back(&self) -> anyhow::Result<()> {
        std::fs::rename(self.dir.path().join("away"), self.tokens())?;
        Ok(())
    }

    /// Changes the user PIN from `from` to `to`, as an operator would with `pkcs11-tool`.
    pub fn change_pin(&self, from: &str, to: &str) -> anyhow::Result<()> {
        self.tool_with_pin(from, &["--change-pin", "--new-pin", to])?;
        Ok(())
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("softhsm2.conf")
    }

    /// Runs `program` with `args` against this token; its standard output.
    fn run(&self, program: &str, args: &[&str]) -> anyhow::Result<String> {
        let out = std::process::Command::new(program)
            .args(args)
            .env(CONF, self.conf())
            .output()
            .with_context(|| format!("{program} (Debian's softhsm2 and opensc)"))?;
        anyhow::ensure!(
            out.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The `[hsm]` section of a service using this token.
    pub fn toml(&self) -> String {
        format!("[hsm]\nmodule = \"{MODULE}\"\ntoken_label = \"{LABEL}\"\npin = \"{PIN}\"\n")
    }

    /// The environment a service (and its CLI) using this token needs.
    pub fn env(&self) -> (String, String) {
        (CONF.to_owned(), self.conf().display().to_string())
    }

    /// `pkcs11-tool` with `args` against this token, logged in.
    pub fn tool(&self, args: &[&str]) -> anyhow::Result<String> {
        self.tool_with_pin(PIN, args)
    }

    /// `pkcs11-tool` with `args` against this token, logged in with `pin`.
    fn tool_with_pin(&self, pin: &str, args: &[&str]) -> anyhow::Result<String> {
        let base = [
            "--module",
            MODULE,
            "--token-label",
            LABEL,
            "--login",
            "--pin",
            pin,
        ];
        self.run("pkcs11-tool", &[&base[..], args].concat())
    }

    /// Makes a wallet of `chain_type` (`ethereum`, `solana`) in this token with the CLI of
    /// `svc`, its owner's default: its address and its key's label.
    pub async fn wallet(
        &self,
        svc: &crate::Service,
        chain_type: &str,
    ) -> anyhow::Result<(String, String)> {
        let args = ["wallets", "create", "--chain-type", chain_type];
        let out = svc
            .cli(&[&args[..], &["--custody", "hsm", "--make-default"]].concat())
            .await?;
        anyhow::ensure!(out.success, "wallets create: {}", out.stderr);
        let address = out.stdout.split_whitespace().next().context("an address")?;
        let (_, label) = out
            .stdout
            .split_once("  key ")
            .with_context(|| format!("the key's label: {}", out.stdout))?;
        Ok((address.to_owned(), label.trim().to_owned()))
    }

    /// What a `C_GetAttributeValue` of the private key labelled `label` answers, by
    /// `walletops-pkcs11-probe`: its `value: …`, `sensitive: …` and `extractable: …` lines.
    pub fn probe_key(&self, label: &str) -> anyhow::Result<String> {
        let probe = crate::paths::built_bin("walletops-pkcs11-probe")?;
        let probe = probe.to_str().context("the probe's path")?;
        self.run(probe, &[MODULE, LABEL, PIN, label])
    }
}
