//! HSM custody: the token's signatures per second (`walletops hsm check --signatures`, a
//! SoftHSM2 token of the bench's own) and the service's CPU per REST send from a wallet whose
//! key is in it, against a keystore wallet's, on one service in one run.

use alloy::primitives::{Address, U256};
use anyhow::Context as _;
use serde_json::{Value, json};
use walletops_tests::{Backend, Options, Rest, Service, anvil::Anvil, softhsm::SoftHsm};

use crate::{
    cpu::Probe,
    report::SendRun,
    sends::{Sender, all_settled, walletops_sends},
};

/// Untimed sends from each wallet before its timed ones.
const WARMUP: u64 = 50;

/// Signatures of each curve timed by `hsm check`.
const SIGNATURES: u32 = 2000;

/// What the HSM phase measured.
#[derive(Debug)]
pub(crate) struct Figures {
    /// secp256k1 and Ed25519 signatures per second over the session pool.
    evm_rate: f64,
    solana_rate: f64,
    keystore: SendRun,
    hsm: SendRun,
}

/// Signatures per second on the line of `curve` that `hsm check --signatures` printed.
fn rate(printed: &str, curve: &str) -> anyhow::Result<f64> {
    let line = printed
        .lines()
        .find(|l| l.starts_with(curve))
        .with_context(|| format!("no {curve} rate in {printed}"))?;
    let (before, _) = line
        .split_once(" signatures/s")
        .with_context(|| format!("no rate in {line}"))?;
    Ok(before.rsplit(' ').next().unwrap_or_default().parse()?)
}

/// `n` REST sends from the default wallet of `api` after a warm-up, its nonce `0` before.
async fn sends_from(
    anvil: &Anvil,
    (svc, api): (&Service, &Rest),
    wallet: Address,
    (n, concurrency): (u64, usize),
) -> anyhow::Result<SendRun> {
    let probe = Probe {
        walletops: svc.pid(),
        anvil: None,
        client: None,
        postgres: false,
    };
    let rest = || Sender::Rest(api.clone());
    walletops_sends(anvil, api, rest(), wallet, (0, WARMUP), concurrency, probe).await?;
    all_settled(svc).await?;
    let run = walletops_sends(anvil, api, rest(), wallet, (WARMUP, n), concurrency, probe).await?;
    all_settled(svc).await?;
    Ok(run)
}

/// Measures the HSM phase on `anvil`: `n` sends from each wallet at `concurrency`.
pub(crate) async fn hsm(anvil: &Anvil, n: u64, concurrency: usize) -> anyhow::Result<Figures> {
    let token = SoftHsm::start()?;
    let svc = Service::start_with(
        Backend::Sqlite,
        Options {
            log_file: None,
            config_toml: Some(format!(
                "{}\n[rate_limits]\nwrites_per_minute = 1000000\nreads_per_minute = 1000000\n[monitor]\nstuck_after_secs = 5\n{}",
                anvil.chain_toml(),
                token.toml()
            )),
            env: vec![token.env()],
        },
    )
    .await?;
    let api = svc.rest(&svc.api_key);
    let funds = U256::from(10u128.pow(24));
    let wallet = anvil.fund_default_wallet(&api, funds).await?;
    let keystore = sends_from(anvil, (&svc, &api), wallet, (n, concurrency)).await?;
    let (in_hsm, _) = token.wallet(&svc, "ethereum").await?;
    let in_hsm: Address = in_hsm.parse()?;
    anvil.set_balance(in_hsm, funds).await?;
    let hsm = sends_from(anvil, (&svc, &api), in_hsm, (n, concurrency)).await?;
    let signatures = SIGNATURES.to_string();
    let check = svc
        .cli(&["hsm", "check", "--signatures", &signatures])
        .await?;
    anyhow::ensure!(check.success, "hsm check: {}", check.stderr);
    Ok(Figures {
        evm_rate: rate(&check.stdout, "secp256k1")?,
        solana_rate: rate(&check.stdout, "Ed25519")?,
        keystore,
        hsm,
    })
}

impl Figures {
    /// The service's CPU per send of `run`, in ms.
    fn ms(run: &SendRun) -> f64 {
        run.service_ms().unwrap_or(f64::NAN)
    }

    /// Whether the chain shows a correctness failure of either run.
    pub(crate) fn failed(&self) -> bool {
        self.keystore.failed() || self.hsm.failed()
    }

    pub(crate) fn print(&self) {
        println!(
            "hsm (SoftHSM2): {:.0} secp256k1 and {:.0} Ed25519 signatures/s; service CPU per REST send {:.3} ms from an HSM wallet against {:.3} ms from a keystore wallet ({} sends each; gaps {}, duplicates {})",
            self.evm_rate,
            self.solana_rate,
            Self::ms(&self.hsm),
            Self::ms(&self.keystore),
            self.hsm.sends,
            self.hsm.chain.gaps + self.keystore.chain.gaps,
            self.hsm.chain.duplicates + self.keystore.chain.duplicates,
        );
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "secp256k1_signatures_per_s": self.evm_rate,
            "ed25519_signatures_per_s": self.solana_rate,
            "cpu_ms_per_rest_send_hsm": Self::ms(&self.hsm),
            "cpu_ms_per_rest_send_keystore": Self::ms(&self.keystore),
            "sends": self.hsm.sends,
        })
    }
}
