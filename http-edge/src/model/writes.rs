//! The chain writes `POST /send`, `POST /token/approve` and `POST /contracts/send`: their
//! bodies, and the submission every write but the quote answers.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use walletops_proto::v1 as pb;

use walletops_proto::json::{Integers, to_value};

use super::{approvals::ApprovalJson, short_name};

/// What a send moves: the chain's native coin, an ERC20 token or an SPL token.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum Asset {
    Native,
    Erc20,
    Spl,
}

/// Submission result of every write except the quote.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SubmissionJson {
    /// Service transaction id, for `GET /tx/{id}`; for a held write, the approval's id.
    pub(crate) id: String,
    /// `SUBMITTED`; `PENDING_APPROVAL` for a write held for approval (HTTP 202).
    #[schema(example = "SUBMITTED")]
    pub(crate) status: String,
    /// Hash or signature; may be null at submission time.
    pub(crate) hash: Option<String>,
    /// Explorer link; null until a hash exists.
    pub(crate) explorer_url: Option<String>,
    /// Display name of the chain.
    pub(crate) chain_name: String,
    /// The held write, with `PENDING_APPROVAL` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) approval: Option<ApprovalJson>,
}

impl SubmissionJson {
    /// Whether the write was held for approval rather than submitted.
    pub(crate) fn is_held(&self) -> bool {
        self.approval.is_some()
    }
}

impl From<Option<pb::Submission>> for SubmissionJson {
    fn from(s: Option<pb::Submission>) -> Self {
        let s = s.unwrap_or_default();
        Self {
            id: s.id,
            status: short_name(
                pb::SubmissionStatus::try_from(s.status).map(|s| s.as_str_name()),
                "SUBMISSION_STATUS_",
            ),
            hash: s.hash,
            explorer_url: s.explorer_url,
            chain_name: s.chain_name,
            approval: s.approval.map(ApprovalJson::from),
        }
    }
}

/// Body of `POST /send`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SendBody {
    /// Chain slug.
    #[schema(required = true, min_length = 1)]
    pub(crate) chain: String,
    /// Sender wallet; null or absent: the caller's default wallet for the chain.
    #[schema(pattern = "^(0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$")]
    pub(crate) from: Option<String>,
    /// Recipient wallet address (the owner, for token transfers).
    #[schema(
        required = true,
        pattern = "^(0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"
    )]
    pub(crate) to: String,
    /// `native`, `erc20` or `spl`.
    #[schema(required = true, value_type = Asset)]
    pub(crate) asset: String,
    /// Token address (EVM) or mint (Solana), for token sends.
    #[schema(pattern = "^(0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$")]
    pub(crate) token: Option<String>,
    /// Integer amount in base units (wei, lamports or token units): decimal, or 0x-hex on
    /// EVM chains.
    #[schema(
        required = true,
        example = "1000000000000000",
        pattern = "^(0x[0-9a-fA-F]+|[0-9]+)$"
    )]
    pub(crate) amount: String,
}

impl From<SendBody> for pb::SendRequest {
    fn from(b: SendBody) -> Self {
        let asset = match b.asset.as_str() {
            "native" => pb::Asset::Native,
            "erc20" => pb::Asset::Erc20,
            "spl" => pb::Asset::Spl,
            _ => pb::Asset::Unspecified,
        };
        Self {
            chain: b.chain,
            from: b.from,
            to: b.to,
            asset: asset.into(),
            token: b.token,
            amount: b.amount,
        }
    }
}

/// Body of `POST /token/approve`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ApproveBody {
    /// EVM chain slug.
    #[schema(required = true, min_length = 1)]
    pub(crate) chain: String,
    /// Owner wallet; default: the caller's default EVM wallet.
    #[schema(pattern = "^0x[a-fA-F0-9]{40}$")]
    pub(crate) from: Option<String>,
    /// ERC20 token address.
    #[schema(required = true, pattern = "^0x[a-fA-F0-9]{40}$")]
    pub(crate) token: String,
    /// Spender (router) address.
    #[schema(required = true, pattern = "^0x[a-fA-F0-9]{40}$")]
    pub(crate) spender: String,
    /// Allowance in token base units.
    #[schema(required = true, pattern = "^(0x[0-9a-fA-F]+|[0-9]+)$")]
    pub(crate) amount: String,
}

impl From<ApproveBody> for pb::ApproveTokenRequest {
    fn from(b: ApproveBody) -> Self {
        Self {
            chain: b.chain,
            from: b.from,
            token: b.token,
            spender: b.spender,
            amount: b.amount,
        }
    }
}

/// Body of `POST /contracts/send`: either `data`, or `function` with `args`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ContractCallBody {
    /// EVM chain slug.
    #[schema(required = true, min_length = 1)]
    pub(crate) chain: String,
    /// Sender wallet; default: the caller's default EVM wallet.
    #[schema(pattern = "^0x[a-fA-F0-9]{40}$")]
    pub(crate) from: Option<String>,
    /// Contract address.
    #[schema(required = true, pattern = "^0x[a-fA-F0-9]{40}$")]
    pub(crate) to: String,
    /// Native value in wei; default 0.
    #[schema(pattern = "^(0x[0-9a-fA-F]+|[0-9]+)$")]
    pub(crate) value: Option<String>,
    /// Raw 0x-hex calldata.
    #[schema(pattern = "^0x([0-9a-fA-F]{2})*$")]
    pub(crate) data: Option<String>,
    /// Human-readable signature, e.g. `transfer(address,uint256)`.
    #[schema(example = "transfer(address,uint256)")]
    pub(crate) function: Option<String>,
    /// Arguments for `function`; pass integers wider than 53 bits as strings, and addresses
    /// and bytes as 0x-prefixed hex strings.
    #[schema(value_type = Option<Vec<Object>>)]
    pub(crate) args: Option<Vec<serde_json::Value>>,
}

impl From<ContractCallBody> for pb::CallContractRequest {
    fn from(b: ContractCallBody) -> Self {
        Self {
            chain: b.chain,
            from: b.from,
            to: b.to,
            value: b.value,
            data: b.data,
            function: b.function,
            args: b.args.map(|a| prost_types::ListValue {
                values: a
                    .into_iter()
                    .map(|v| to_value(v, Integers::AsText))
                    .collect(),
            }),
        }
    }
}
