//! A write's dry run (`?dryRun=true` on every write): what its simulation says it does to
//! the wallet, the verdict of the key's scopes and limits, and the fee.

use serde::Serialize;
use utoipa::ToSchema;
use walletops_proto::{rest::EffectsJson, v1 as pb};

/// The answer of a write's dry run.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DryRunJson {
    /// What it does to the wallet; null when the chain's node cannot simulate.
    pub(crate) effects: Option<EffectsJson>,
    /// Whether it would be made, and every reason it would not.
    pub(crate) verdict: VerdictJson,
    /// The most the network fee may cost.
    pub(crate) fee: FeeJson,
}

/// The verdict of the caller's scopes and limits.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct VerdictJson {
    /// Whether it would be signed now (neither refused nor held).
    pub(crate) allowed: bool,
    /// Whether it would wait for a person's approval.
    pub(crate) needs_approval: bool,
    /// Every reason it would be refused or held, as the write's error would say it.
    pub(crate) reasons: Vec<String>,
    /// What it would reserve against the key's limits.
    pub(crate) reservations: Vec<ReservationJson>,
}

/// What a write holds against one of its key's limits.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReservationJson {
    /// The chain's slug.
    pub(crate) chain: String,
    /// The asset.
    pub(crate) asset: String,
    /// Base units.
    pub(crate) amount: String,
}

/// The most the network fee may cost.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FeeJson {
    /// In the chain's native base units (wei, lamports).
    pub(crate) max_fee: String,
    /// The gas limit (EVM) or compute unit limit (Solana) it is priced at; 0 when not known.
    pub(crate) units: u64,
}

impl From<pb::SimulateWriteResponse> for DryRunJson {
    fn from(r: pb::SimulateWriteResponse) -> Self {
        let verdict = r.verdict.unwrap_or_default();
        let fee = r.fee.unwrap_or_default();
        Self {
            effects: r.effects.map(EffectsJson::from),
            verdict: VerdictJson {
                allowed: verdict.allowed,
                needs_approval: verdict.needs_approval,
                reasons: verdict.reasons,
                reservations: verdict
                    .reservations
                    .into_iter()
                    .map(|r| ReservationJson {
                        chain: r.chain,
                        asset: r.asset,
                        amount: r.amount,
                    })
                    .collect(),
            },
            fee: FeeJson {
                max_fee: fee.max_fee,
                units: fee.units,
            },
        }
    }
}
