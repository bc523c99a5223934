//! A key's policy on its limits page: adds a rule (a chain, recipient, contract with an
//! optional function, or spender) and removes one. Only a session may change it (the core
//! refuses every API key).

use axum::extract::{Path, State};
use axum_extra::extract::Form;
use serde::Deserialize;
use walletops_proto::v1 as pb;

use super::{Dashboard, Page, Visit};

/// One rule as the page shows it.
pub(super) struct RuleRow {
    /// `chain`, `recipient`, `contract`, `spender` or `token`, as the form names it.
    pub(super) kind: &'static str,
    /// What the rule allows, in words.
    pub(super) label: &'static str,
    pub(super) chain: String,
    pub(super) address: String,
    pub(super) selector: String,
}

fn kind_name(kind: pb::PolicyRuleKind) -> (&'static str, &'static str) {
    match kind {
        pb::PolicyRuleKind::Chain | pb::PolicyRuleKind::Unspecified => ("chain", "Chain"),
        pb::PolicyRuleKind::Recipient => ("recipient", "Recipient"),
        pb::PolicyRuleKind::Contract => ("contract", "Contract"),
        pb::PolicyRuleKind::Spender => ("spender", "Spender"),
        pb::PolicyRuleKind::Token => ("token", "Token"),
    }
}

impl From<pb::PolicyRule> for RuleRow {
    fn from(r: pb::PolicyRule) -> Self {
        let (kind, label) = kind_name(r.kind());
        Self {
            kind,
            label,
            chain: r.chain,
            address: r.address.unwrap_or_default(),
            selector: r.selector.unwrap_or_default(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct RuleForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    chain: String,
    #[serde(default)]
    address: String,
    #[serde(default)]
    selector: String,
}

impl RuleForm {
    /// The rule, and what it allows in words for the notice.
    fn rule(&self) -> (pb::PolicyRule, String) {
        let kind = match self.kind.trim() {
            "chain" => pb::PolicyRuleKind::Chain,
            "recipient" => pb::PolicyRuleKind::Recipient,
            "contract" => pb::PolicyRuleKind::Contract,
            "spender" => pb::PolicyRuleKind::Spender,
            "token" => pb::PolicyRuleKind::Token,
            _ => pb::PolicyRuleKind::Unspecified,
        };
        let given = |f: &str| Some(f.trim().to_owned()).filter(|f| !f.is_empty());
        let rule = pb::PolicyRule {
            kind: kind.into(),
            chain: self.chain.trim().to_owned(),
            address: given(&self.address),
            selector: given(&self.selector),
        };
        let what = match &rule.address {
            Some(address) => format!("{} {address} on {}", self.kind.trim(), rule.chain),
            None => format!("chain {}", rule.chain),
        };
        (rule, what)
    }
}

/// `POST /dashboard/keys/{id}/policy`: adds a rule.
pub(crate) async fn add(
    State(dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<RuleForm>,
) -> Page {
    change(dashboard, visit, id, form, false).await
}

/// `POST /dashboard/keys/{id}/policy/remove`: removes a rule.
pub(crate) async fn remove(
    State(dashboard): State<Dashboard>,
    visit: Visit,
    Path(id): Path<String>,
    Form(form): Form<RuleForm>,
) -> Page {
    change(dashboard, visit, id, form, true).await
}

/// Adds the form's rule to key `id`, or removes it when `removing`.
async fn change(
    mut dashboard: Dashboard,
    visit: Visit,
    id: String,
    form: RuleForm,
    removing: bool,
) -> Page {
    let (rule, what) = form.rule();
    let (key_id, rule) = (id.clone(), Some(rule));
    let csrf = Some(form.csrf.as_str());
    let answer = if removing {
        let req = pb::RemovePolicyRuleRequest { key_id, rule };
        let call = dashboard.keys.remove_policy_rule(visit.call(req, csrf));
        call.await.map(|_| ())
    } else {
        let req = pb::AddPolicyRuleRequest { key_id, rule };
        let call = dashboard.keys.add_policy_rule(visit.call(req, csrf));
        call.await.map(|_| ())
    };
    let done = if removing { "disallowed" } else { "allowed" };
    super::limits::after(&mut dashboard, &visit, &id, answer, (done, &what)).await
}
