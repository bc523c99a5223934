//! Which scope each operation of the core needs, and how every RPC is let in: the one
//! table of both. The admission layer (`grpc/admission.rs`) reads a call's gate off its
//! path before any handler runs, and a caller learns from `GetCurrentApiKey` which
//! operations its scopes allow, so a surface that hides what a key cannot do (the MCP
//! tools list) reads this table instead of keeping a copy.

use walletops_domain::{Scope, Scopes};

/// An operation a key or a dashboard session asks of the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Operation {
    ListWallets,
    GetBalances,
    GetTransaction,
    WatchTransactions,
    Send,
    ApproveToken,
    CallContract,
    GetQuote,
    Swap,
    SimulateWrite,
    CreateApiKey,
    ListApiKeys,
    RevokeApiKey,
    SetSpendLimit,
    RemoveSpendLimit,
    AddPolicyRule,
    RemovePolicyRule,
    UnfreezeApiKey,
    ListApprovals,
    GetApproval,
    DecideApproval,
    CreateWebhook,
    ListWebhooks,
    DeleteWebhook,
    RotateWebhookSecret,
    ListWebhookDeliveries,
    ReplayWebhookDeliveries,
    EnableWebhook,
    ListHoldings,
    ListTransactions,
    ListDeposits,
    GetDeposit,
    WatchDeposits,
    CreatePayout,
    GetPayout,
    ListPayouts,
}

impl Operation {
    /// Every operation.
    pub const ALL: [Self; 36] = [
        Self::ListWallets,
        Self::GetBalances,
        Self::GetTransaction,
        Self::WatchTransactions,
        Self::Send,
        Self::ApproveToken,
        Self::CallContract,
        Self::GetQuote,
        Self::Swap,
        Self::SimulateWrite,
        Self::CreateApiKey,
        Self::ListApiKeys,
        Self::RevokeApiKey,
        Self::SetSpendLimit,
        Self::RemoveSpendLimit,
        Self::AddPolicyRule,
        Self::RemovePolicyRule,
        Self::UnfreezeApiKey,
        Self::ListApprovals,
        Self::GetApproval,
        Self::DecideApproval,
        Self::CreateWebhook,
        Self::ListWebhooks,
        Self::DeleteWebhook,
        Self::RotateWebhookSecret,
        Self::ListWebhookDeliveries,
        Self::ReplayWebhookDeliveries,
        Self::EnableWebhook,
        Self::ListHoldings,
        Self::ListTransactions,
        Self::ListDeposits,
        Self::GetDeposit,
        Self::WatchDeposits,
        Self::CreatePayout,
        Self::GetPayout,
        Self::ListPayouts,
    ];

    /// The scope a caller needs for it.
    pub fn scope(self) -> Scope {
        match self {
            Self::ListWallets
            | Self::GetBalances
            | Self::GetTransaction
            | Self::WatchTransactions
            | Self::ListApiKeys
            | Self::ListApprovals
            | Self::GetApproval
            | Self::ListWebhooks
            | Self::ListWebhookDeliveries
            | Self::ListHoldings
            | Self::ListTransactions
            | Self::ListDeposits
            | Self::GetDeposit
            | Self::WatchDeposits
            | Self::GetPayout
            | Self::ListPayouts
            | Self::SimulateWrite => Scope::Read,
            Self::GetQuote => Scope::Trade,
            Self::Send
            | Self::ApproveToken
            | Self::CallContract
            | Self::Swap
            | Self::CreateApiKey
            | Self::RevokeApiKey
            | Self::SetSpendLimit
            | Self::RemoveSpendLimit
            | Self::AddPolicyRule
            | Self::RemovePolicyRule
            | Self::UnfreezeApiKey
            | Self::DecideApproval
            | Self::CreateWebhook
            | Self::DeleteWebhook
            | Self::RotateWebhookSecret
            | Self::ReplayWebhookDeliveries
            | Self::EnableWebhook
            | Self::CreatePayout => Scope::Write,
        }
    }

    /// Its gRPC method, as a call's path names it: `/walletops.v1.WalletOpsService/Send`.
    pub fn method(self) -> &'static str {
        match self {
            Self::ListWallets => "/walletops.v1.WalletOpsService/ListWallets",
            Self::GetBalances => "/walletops.v1.WalletOpsService/GetBalances",
            Self::GetTransaction => "/walletops.v1.WalletOpsService/GetTransaction",
            Self::WatchTransactions => "/walletops.v1.WalletOpsService/WatchTransactions",
            Self::Send => "/walletops.v1.WalletOpsService/Send",
            Self::ApproveToken => "/walletops.v1.WalletOpsService/ApproveToken",
            Self::CallContract => "/walletops.v1.WalletOpsService/CallContract",
            Self::GetQuote => "/walletops.v1.WalletOpsService/GetQuote",
            Self::Swap => "/walletops.v1.WalletOpsService/Swap",
            Self::SimulateWrite => "/walletops.v1.WalletOpsService/SimulateWrite",
            Self::CreateApiKey => "/walletops.v1.ApiKeyService/CreateApiKey",
            Self::ListApiKeys => "/walletops.v1.ApiKeyService/ListApiKeys",
            Self::RevokeApiKey => "/walletops.v1.ApiKeyService/RevokeApiKey",
            Self::SetSpendLimit => "/walletops.v1.ApiKeyService/SetSpendLimit",
            Self::RemoveSpendLimit => "/walletops.v1.ApiKeyService/RemoveSpendLimit",
            Self::AddPolicyRule => "/walletops.v1.ApiKeyService/AddPolicyRule",
            Self::RemovePolicyRule => "/walletops.v1.ApiKeyService/RemovePolicyRule",
            Self::UnfreezeApiKey => "/walletops.v1.ApiKeyService/UnfreezeApiKey",
            Self::ListApprovals => "/walletops.v1.ApprovalService/ListApprovals",
            Self::GetApproval => "/walletops.v1.ApprovalService/GetApproval",
            Self::DecideApproval => "/walletops.v1.ApprovalService/DecideApproval",
            Self::CreateWebhook => "/walletops.v1.WebhookService/CreateWebhook",
            Self::ListWebhooks => "/walletops.v1.WebhookService/ListWebhooks",
            Self::DeleteWebhook => "/walletops.v1.WebhookService/DeleteWebhook",
            Self::RotateWebhookSecret => "/walletops.v1.WebhookService/RotateWebhookSecret",
            Self::ListWebhookDeliveries => "/walletops.v1.WebhookService/ListWebhookDeliveries",
            Self::ListDeposits => "/walletops.v1.DepositService/ListDeposits",
            Self::GetDeposit => "/walletops.v1.DepositService/GetDeposit",
            Self::WatchDeposits => "/walletops.v1.DepositService/WatchDeposits",
            Self::CreatePayout => "/walletops.v1.PayoutService/CreatePayout",
            Self::GetPayout => "/walletops.v1.PayoutService/GetPayout",
            Self::ListPayouts => "/walletops.v1.PayoutService/ListPayouts",
            Self::ReplayWebhookDeliveries => "/walletops.v1.WebhookService/ReplayWebhookDeliveries",
            Self::EnableWebhook => "/walletops.v1.WebhookService/EnableWebhook",
            Self::ListHoldings => "/walletops.v1.DashboardService/ListHoldings",
            Self::ListTransactions => "/walletops.v1.DashboardService/ListTransactions",
        }
    }

    /// The methods of the operations `scopes` allow, in the table's order.
    pub fn allowed(scopes: Scopes) -> Vec<&'static str> {
        Self::ALL
            .iter()
            .filter(|op| scopes.contains(op.scope()))
            .map(|op| op.method())
            .collect()
    }
}

/// How a call of a method is let in, before its handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// By a key or session holding the operation's scope, drawn from its budget.
    Scoped(Operation),
    /// By any key or session whatever its scopes, drawn from no budget: asking who the
    /// caller is and what it may do (`GetCurrentApiKey`).
    AnyCaller,
    /// By an open dashboard session (`GetSession`).
    Session,
    /// By an open dashboard session and its CSRF token (`SignOut`).
    ChangingSession,
    /// By no credential: the call is how a session is had (`SignIn`, `RedeemSignInLink`).
    Open,
    /// By the operators' admin token: `AdminService`, served on the admin listener only.
    Admin,
}

/// The path prefix of `AdminService`'s methods.
const ADMIN_SERVICE: &str = "/walletops.v1.AdminService/";

impl Gate {
    /// The gate of the method a call's path names, or none for a method outside the
    /// contract (health, reflection, or one no service has).
    pub fn of(method: &str) -> Option<Self> {
        if let Some(op) = Operation::ALL.into_iter().find(|op| op.method() == method) {
            return Some(Self::Scoped(op));
        }
        match method {
            "/walletops.v1.ApiKeyService/GetCurrentApiKey" => Some(Self::AnyCaller),
            "/walletops.v1.DashboardService/GetSession" => Some(Self::Session),
            "/walletops.v1.DashboardService/SignOut" => Some(Self::ChangingSession),
            "/walletops.v1.DashboardService/SignIn"
            | "/walletops.v1.DashboardService/RedeemSignInLink" => Some(Self::Open),
            m if m.starts_with(ADMIN_SERVICE) => Some(Self::Admin),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each method is one the contract serves, named once.
    #[test]
    fn every_operation_names_a_method_of_the_contract() {
        let descriptors = String::from_utf8_lossy(walletops_proto::FILE_DESCRIPTOR_SET);
        let mut seen = std::collections::HashSet::new();
        for op in Operation::ALL {
            let (service, method) = op
                .method()
                .trim_start_matches("/walletops.v1.")
                .split_once('/')
                .expect("service/method");
            assert!(
                descriptors.contains(service),
                "{op:?}: no service {service}"
            );
            assert!(descriptors.contains(method), "{op:?}: no method {method}");
            assert!(seen.insert(op.method()), "{op:?} named twice");
        }
    }

    /// Every method of every service of the contract is let in by a gate of the table, and
    /// only the admin service's by the admin token: a method added to the contract and not
    /// to the table would otherwise reach its handler with no caller.
    #[test]
    fn every_method_of_the_contract_has_its_gate() {
        use prost::Message as _;
        let set = prost_types::FileDescriptorSet::decode(walletops_proto::FILE_DESCRIPTOR_SET)
            .expect("the contract's descriptors");
        let mut methods = 0;
        for file in set.file.iter().filter(|f| f.package() == "walletops.v1") {
            for service in &file.service {
                for method in &service.method {
                    let path = format!("/walletops.v1.{}/{}", service.name(), method.name());
                    let gate = Gate::of(&path).unwrap_or_else(|| panic!("{path}: no gate"));
                    assert_eq!(
                        gate == Gate::Admin,
                        service.name() == "AdminService",
                        "{path}: {gate:?}"
                    );
                    methods += 1;
                }
            }
        }
        assert!(methods > Operation::ALL.len(), "{methods} methods read");
        assert_eq!(Gate::of("/grpc.health.v1.Health/Check"), None);
    }
}
