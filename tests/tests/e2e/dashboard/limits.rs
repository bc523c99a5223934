//! Spend limits are set by a person, never by a key: a dashboard session sets and removes
//! them over `ApiKeyService`, the key itself is refused, and the list shows what is spent
//! and left.

use serde_json::json;
use walletops_proto::v1::{
    self as pb, api_key_service_client::ApiKeyServiceClient,
    dashboard_service_client::DashboardServiceClient,
};
use walletops_tests::{Backend, on_both_backends, reason, with_key};

use super::{funded, redeem, session_call};

async fn a_session_sets_limits_and_the_key_cannot(b: Backend) -> anyhow::Result<()> {
    let (_anvil, svc, _wallet) = funded(b).await?;
    let agent = svc.create_key("agent").await?;
    let prefix = agent.split('_').nth(1).unwrap_or_default().to_owned();
    let (session, csrf) =
        redeem(&svc, &mut DashboardServiceClient::new(svc.channel().await?)).await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let set = pb::SetSpendLimitRequest {
        key_id: prefix.clone(),
        chain: "anvil".to_owned(),
        asset: "native".to_owned(),
        max_per_transaction: None,
        daily_budget: Some("3000".to_owned()),
        approval_above: None,
    };
    let key = keys
        .set_spend_limit(session_call(set.clone(), &session, Some(&csrf))?)
        .await?
        .into_inner()
        .api_key
        .expect("the key");
    let limit = &key.spend_limits[0];
    assert_eq!(
        (
            limit.daily_budget.as_deref(),
            limit.spent_24h.as_str(),
            limit.left.as_deref()
        ),
        (Some("3000"), "0", Some("3000"))
    );
    // The key cannot raise its own limit, nor can any other key.
    for caller in [&agent, &svc.api_key] {
        let refused = keys
            .set_spend_limit(with_key(set.clone(), caller)?)
            .await
            .expect_err("a key");
        assert_eq!(
            reason(&refused).as_deref(),
            Some("FORBIDDEN"),
            "{refused:?}"
        );
    }
    // A bad amount is named.
    let bad = pb::SetSpendLimitRequest {
        daily_budget: Some("lots".to_owned()),
        ..set.clone()
    };
    let refused = keys
        .set_spend_limit(session_call(bad, &session, Some(&csrf))?)
        .await
        .expect_err("not an amount");
    assert!(refused.message().contains("daily_budget"), "{refused:?}");
    // What a write holds shows in the list.
    let sent = svc
        .rest(&agent)
        .post(
            "/send",
            &json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111",
                    "asset": "native", "amount": "1000"}),
        )
        .await?;
    assert_eq!(sent.status, 200, "{}", sent.text);
    let listed = keys
        .list_api_keys(session_call(pb::ListApiKeysRequest {}, &session, None)?)
        .await?
        .into_inner()
        .api_keys;
    let shown = listed
        .iter()
        .find(|k| k.prefix == prefix)
        .expect("the agent's key");
    let native = shown
        .spend_limits
        .iter()
        .find(|l| l.asset == "native")
        .expect("the native limit");
    assert_eq!(native.spent_24h, "1000");
    assert_eq!(native.left.as_deref(), Some("2000"));
    // Beside it, the chain's default fee budget, holding what the send may pay.
    let fees = shown
        .spend_limits
        .iter()
        .find(|l| l.asset == "fees")
        .expect("the fee budget");
    assert_ne!(fees.spent_24h, "0", "{fees:?}");
    let removed = keys
        .remove_spend_limit(session_call(
            pb::RemoveSpendLimitRequest {
                key_id: prefix,
                chain: "anvil".to_owned(),
                asset: "native".to_owned(),
            },
            &session,
            Some(&csrf),
        )?)
        .await?
        .into_inner()
        .api_key
        .expect("the key");
    assert!(
        removed.spend_limits.iter().all(|l| l.asset == "fees"),
        "only the fee budget is left: {:?}",
        removed.spend_limits
    );
    Ok(())
}

/// A session adds and removes policy rules over `ApiKeyService`; no key may, and a bad rule
/// is named.
async fn a_session_sets_policies_and_the_key_cannot(b: Backend) -> anyhow::Result<()> {
    let (_anvil, svc, _wallet) = funded(b).await?;
    let agent = svc.create_key("agent").await?;
    let prefix = agent.split('_').nth(1).unwrap_or_default().to_owned();
    let (session, csrf) =
        redeem(&svc, &mut DashboardServiceClient::new(svc.channel().await?)).await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let rule = pb::PolicyRule {
        kind: pb::PolicyRuleKind::Contract.into(),
        chain: "anvil".to_owned(),
        address: Some("0x1111111111111111111111111111111111111111".to_owned()),
        selector: Some("approve(address,uint256)".to_owned()),
    };
    let add = pb::AddPolicyRuleRequest {
        key_id: prefix.clone(),
        rule: Some(rule.clone()),
    };
    let key = keys
        .add_policy_rule(session_call(add.clone(), &session, Some(&csrf))?)
        .await?
        .into_inner()
        .api_key
        .expect("the key");
    assert_eq!(key.policy_rules.len(), 1, "{key:?}");
    assert_eq!(key.policy_rules[0].selector.as_deref(), Some("0x095ea7b3"));
    for caller in [&agent, &svc.api_key] {
        let refused = keys
            .add_policy_rule(with_key(add.clone(), caller)?)
            .await
            .expect_err("a key");
        assert_eq!(
            reason(&refused).as_deref(),
            Some("FORBIDDEN"),
            "{refused:?}"
        );
    }
    let bad = pb::AddPolicyRuleRequest {
        key_id: prefix.clone(),
        rule: Some(pb::PolicyRule {
            kind: pb::PolicyRuleKind::Recipient.into(),
            address: Some("nobody".to_owned()),
            selector: Some("0x01".to_owned()),
            ..rule.clone()
        }),
    };
    let refused = keys
        .add_policy_rule(session_call(bad, &session, Some(&csrf))?)
        .await
        .expect_err("not a rule");
    assert!(
        refused.message().contains("address") && refused.message().contains("selector"),
        "{refused:?}"
    );
    let listed = keys
        .list_api_keys(session_call(pb::ListApiKeysRequest {}, &session, None)?)
        .await?
        .into_inner()
        .api_keys;
    let shown = listed
        .iter()
        .find(|k| k.prefix == prefix)
        .expect("the agent's key");
    assert_eq!(shown.policy_rules, key.policy_rules);
    let removed = keys
        .remove_policy_rule(session_call(
            pb::RemovePolicyRuleRequest {
                key_id: prefix,
                rule: Some(rule),
            },
            &session,
            Some(&csrf),
        )?)
        .await?
        .into_inner()
        .api_key
        .expect("the key");
    assert!(removed.policy_rules.is_empty());
    Ok(())
}

on_both_backends!(
    a_session_sets_limits_and_the_key_cannot,
    a_session_sets_policies_and_the_key_cannot,
);
