//! The approval queue: a key's write that moves more than the key's approval threshold is
//! held, not signed (202 over REST, PENDING_APPROVAL over gRPC, `pending_approval` to an
//! agent), and signed only once a person approves it (the CLI, a dashboard session); a
//! rejected or expired one never is. No API key can decide. The chain is read directly.

use alloy::primitives::{Address, U256, utils::parse_ether};
use serde_json::{Value, json};
use walletops_proto::v1::{
    self as pb, approval_service_client::ApprovalServiceClient,
    dashboard_service_client::DashboardServiceClient,
    wallet_ops_service_client::WalletOpsServiceClient,
};
use walletops_tests::{
    Backend, Rest, Service,
    anvil::Anvil,
    mcp::{call, call_with_notes, connect, ok},
    on_both_backends, poll_until, reason, with_key, write_request,
};

use crate::dashboard::{redeem, session_call};

const RECIPIENT: &str = "0x1111111111111111111111111111111111111111";

/// A service on a new anvil, its default wallet funded, and a new key of the first user
/// whose writes of more than 1000 wei wait for approval.
struct Guarded {
    anvil: Anvil,
    svc: Service,
    wallet: Address,
    key: String,
}

async fn guarded(b: Backend, env: &[(&str, &str)]) -> anyhow::Result<Guarded> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", env)).await?;
    let wallet = anvil
        .fund_default_wallet(&svc.rest(&svc.api_key), parse_ether("1")?)
        .await?;
    let key = svc.create_key("agent").await?;
    let prefix = key.split('_').nth(1).unwrap_or_default().to_owned();
    let set = svc
        .limit_key(&prefix, &["--chain", "anvil", "--approve-above", "1000"])
        .await?;
    assert!(set.contains("approval above 1000"), "{set}");
    Ok(Guarded {
        anvil,
        svc,
        wallet,
        key,
    })
}

fn native(amount: &str) -> Value {
    json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": amount})
}

/// Polls approval `id` until it is in `state`; its JSON then.
async fn wait_for_state(api: &Rest, id: &str, state: &str) -> anyhow::Result<Value> {
    poll_until(&format!("approval {id} to be {state}"), || async {
        let reply = api.get(&format!("/approvals/{id}")).await?;
        anyhow::ensure!(reply.status == 200, "{}", reply.text);
        Ok((reply.body["state"] == state).then_some(reply.body))
    })
    .await
}

/// Holds a send of 5000 wei under `idempotency_key`; the approval's id.
async fn hold(api: &Rest, idempotency_key: &str) -> anyhow::Result<String> {
    let held = api
        .post_with_key("/send", idempotency_key, &native("5000").to_string())
        .await?;
    assert_eq!(held.status, 202, "{}", held.text);
    assert_eq!(held.body["status"], "PENDING_APPROVAL");
    assert!(held.body["hash"].is_null());
    let approval = &held.body["approval"];
    assert_eq!(approval["state"], "pending");
    assert_eq!(approval["amount"], "5000");
    assert_eq!(approval["approvalAbove"], "1000");
    assert_eq!(approval["asset"], "native");
    let summary = approval["summary"].as_str().unwrap_or_default();
    assert!(summary.starts_with("send 5000 native from 0x"), "{summary}");
    // The approver sees what the simulation says it does, not only what was asked.
    assert!(
        summary.ends_with(&format!("simulated: sends 5000 of native to {RECIPIENT}")),
        "{summary}"
    );
    assert_eq!(held.body["id"], approval["id"]);
    Ok(held.body["id"].as_str().unwrap_or_default().to_owned())
}

/// A write over the threshold waits unsigned (a retry answers the same approval; no key can
/// decide it), one under it goes at once; approved with the CLI, the held write is signed,
/// lands, and its key then answers with the transaction.
async fn an_approved_write_waits_then_lands(b: Backend) -> anyhow::Result<()> {
    let Guarded {
        anvil,
        svc,
        wallet,
        key,
        ..
    } = guarded(b, &[]).await?;
    let api = svc.rest(&key);
    let recipient: Address = RECIPIENT.parse()?;
    let before = anvil.balance(recipient).await?;
    let under = api.post("/send", &native("500")).await?;
    assert_eq!(under.status, 200, "{}", under.text);
    assert_eq!(under.body["status"], "SUBMITTED");
    let idempotency_key = uuid::Uuid::new_v4().to_string();
    let id = hold(&api, &idempotency_key).await?;
    // A retry answers the same approval; another request under the key is refused.
    let again = api
        .post_with_key("/send", &idempotency_key, &native("5000").to_string())
        .await?;
    assert_eq!(again.status, 202, "{}", again.text);
    assert_eq!(again.body["id"], id.as_str());
    api.post_with_key("/send", &idempotency_key, &native("6000").to_string())
        .await?
        .assert_error(409, "IDEMPOTENT_BODY_MISMATCH")?;
    // The key reads its approval; another key of the user does not see it.
    let listed = api.get("/approvals?state=pending").await?;
    assert_eq!(
        listed.body["approvals"][0]["id"],
        id.as_str(),
        "{}",
        listed.text
    );
    svc.rest(&svc.api_key)
        .get(&format!("/approvals/{id}"))
        .await?
        .assert_error(404, "NOT_FOUND")?;
    let unknown = api.get("/approvals?state=sideways").await?;
    unknown.assert_error(400, "INVALID_INPUT")?;
    assert!(unknown.text.contains("state"), "{}", unknown.text);
    // No API key decides, not even the owner's first.
    let mut approvals = ApprovalServiceClient::new(svc.channel().await?);
    for k in [&key, &svc.api_key] {
        let refused = approvals
            .decide_approval(with_key(
                pb::DecideApprovalRequest {
                    id: id.clone(),
                    approve: true,
                    reason: None,
                },
                k,
            )?)
            .await
            .expect_err("a key cannot decide");
        assert_eq!(reason(&refused).as_deref(), Some("FORBIDDEN"));
    }
    api.wait_for_status(under.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    assert_eq!(
        anvil.nonce(wallet).await?,
        1,
        "the held write is not signed"
    );
    // A person approves it with the CLI; a core signs and sends it.
    let listed = svc
        .cli(&["approvals", "list", "--state", "pending"])
        .await?;
    assert!(listed.stdout.contains(&id), "{}", listed.stdout);
    let approved = svc
        .cli(&["approvals", "approve", &id, "--by", "alice"])
        .await?;
    anyhow::ensure!(approved.success, "{}", approved.stderr);
    let made = wait_for_state(&api, &id, "submitted").await?;
    assert_eq!(made["decidedBy"], "cli:alice");
    assert!(made["decidedAt"].is_string());
    let tx = made["transactionId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    api.wait_for_status(&tx, "CONFIRMED").await?;
    assert_eq!(anvil.nonce(wallet).await?, 2);
    assert_eq!(
        anvil.balance(recipient).await? - before,
        U256::from(5500u64)
    );
    // Its key now answers with the transaction; a second decision is refused.
    let replay = api
        .post_with_key("/send", &idempotency_key, &native("5000").to_string())
        .await?;
    assert_eq!(replay.status, 200, "{}", replay.text);
    assert_eq!(replay.body["status"], "SUBMITTED");
    assert_eq!(replay.body["id"], tx.as_str());
    let twice = svc.cli(&["approvals", "reject", &id]).await?;
    assert!(!twice.success);
    assert!(
        twice.stderr.contains("no longer pending"),
        "{}",
        twice.stderr
    );
    Ok(())
}

/// An agent's write over the threshold answers pending_approval; rejected in a dashboard
/// session, with who and why recorded, it is never signed, and its retry is refused.
async fn a_rejected_write_is_never_signed(b: Backend) -> anyhow::Result<()> {
    let Guarded {
        anvil,
        svc,
        wallet,
        key,
        ..
    } = guarded(b, &[]).await?;
    let agent = connect(&svc, &key, true).await?;
    let args = json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "5000",
        "idempotencyKey": uuid::Uuid::new_v4().to_string()});
    let (failed, held, notes) = call_with_notes(&agent, "send", args.clone()).await?;
    assert!(!failed, "{held}");
    assert_eq!(held["status"], "PENDING_APPROVAL");
    assert!(
        notes.iter().any(|n| n.starts_with("pending_approval")),
        "{notes:?}"
    );
    let id = held["id"].as_str().unwrap_or_default().to_owned();
    let seen = ok(&agent, "get_approval", json!({"id": id})).await?;
    assert_eq!(seen["state"], "pending");
    // The owner rejects it from a dashboard session.
    let mut dashboard = DashboardServiceClient::new(svc.channel().await?);
    let (session, csrf) = redeem(&svc, &mut dashboard).await?;
    let mut approvals = ApprovalServiceClient::new(svc.channel().await?);
    let pending = approvals
        .list_approvals(session_call(
            pb::ListApprovalsRequest {
                state: pb::ApprovalState::Pending.into(),
            },
            &session,
            None,
        )?)
        .await?
        .into_inner()
        .approvals;
    assert_eq!(pending.len(), 1);
    // A decision without the session's CSRF token is refused.
    let forged = approvals
        .decide_approval(session_call(
            pb::DecideApprovalRequest {
                id: id.clone(),
                approve: true,
                reason: None,
            },
            &session,
            None,
        )?)
        .await
        .expect_err("no CSRF token");
    assert_eq!(reason(&forged).as_deref(), Some("FORBIDDEN"));
    let rejected = approvals
        .decide_approval(session_call(
            pb::DecideApprovalRequest {
                id: id.clone(),
                approve: false,
                reason: Some("too much for a test".to_owned()),
            },
            &session,
            Some(&csrf),
        )?)
        .await?
        .into_inner()
        .approval
        .expect("the approval");
    assert_eq!(rejected.state, i32::from(pb::ApprovalState::Rejected));
    assert_eq!(rejected.decided_by.as_deref(), Some("dashboard:owner"));
    assert_eq!(rejected.reason.as_deref(), Some("too much for a test"));
    let seen = ok(&agent, "get_approval", json!({"id": id})).await?;
    assert_eq!(seen["state"], "rejected");
    // The same tool call again is refused, saying why; nothing was signed.
    let (failed, retried) = call(&agent, "send", args).await?;
    assert!(failed, "{retried}");
    assert_eq!(retried["code"], "IDEMPOTENT_REPLAY");
    assert!(
        retried["error"]
            .as_str()
            .unwrap_or_default()
            .contains("rejected by dashboard:owner"),
        "{retried}"
    );
    // The next write takes the first nonce: the rejected one never had one.
    let api = svc.rest(&key);
    let next = api.post("/send", &native("700")).await?;
    assert_eq!(next.status, 200, "{}", next.text);
    api.wait_for_status(next.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    assert_eq!(anvil.nonce(wallet).await?, 1);
    assert_eq!(anvil.balance(RECIPIENT.parse()?).await?, U256::from(700u64));
    Ok(())
}

/// A held write nobody decides expires; it cannot be approved after, its retry is refused,
/// and it is never signed. Over gRPC, the held answer carries the approval.
async fn an_undecided_write_expires(b: Backend) -> anyhow::Result<()> {
    let Guarded {
        anvil,
        svc,
        wallet,
        key,
        ..
    } = guarded(b, &[("WALLETOPS_APPROVALS__EXPIRE_AFTER_SECS", "2")]).await?;
    let idempotency_key = uuid::Uuid::new_v4().to_string();
    let mut grpc = WalletOpsServiceClient::new(svc.channel().await?);
    let held = grpc
        .send(write_request(
            pb::SendRequest {
                chain: "anvil".to_owned(),
                to: RECIPIENT.to_owned(),
                asset: pb::Asset::Native.into(),
                amount: "5000".to_owned(),
                ..Default::default()
            },
            &key,
            &idempotency_key,
        )?)
        .await?
        .into_inner()
        .submission
        .expect("the submission");
    assert_eq!(
        held.status,
        i32::from(pb::SubmissionStatus::PendingApproval)
    );
    let approval = held.approval.expect("the approval");
    assert_eq!(approval.id, held.id);
    let api = svc.rest(&key);
    let expired = wait_for_state(&api, &held.id, "expired").await?;
    assert_eq!(expired["decidedBy"], "expiry");
    let late = svc.cli(&["approvals", "approve", &held.id]).await?;
    assert!(!late.success);
    assert!(late.stderr.contains("expired"), "{}", late.stderr);
    let retried = api
        .post_with_key("/send", &idempotency_key, &native("5000").to_string())
        .await?;
    retried.assert_error(409, "IDEMPOTENT_REPLAY")?;
    assert!(retried.text.contains("expired"), "{}", retried.text);
    assert_eq!(anvil.nonce(wallet).await?, 0, "nothing was signed");
    Ok(())
}

/// A held write that named no wallet goes, once approved, from the default wallet of when it
/// was held: the approver decided on that wallet, whatever became the default since.
async fn an_approved_write_goes_from_the_wallet_it_was_held_for(b: Backend) -> anyhow::Result<()> {
    let Guarded {
        anvil,
        svc,
        wallet,
        key,
    } = guarded(b, &[]).await?;
    let api = svc.rest(&key);
    let id = hold(&api, &uuid::Uuid::new_v4().to_string()).await?;
    svc.cli_evm_wallet(true).await?;
    let new_default: Address = api.default_wallet("ethereum").await?.parse()?;
    assert_ne!(new_default, wallet, "the default moved");
    anvil.set_balance(new_default, parse_ether("1")?).await?;
    let approved = svc.cli(&["approvals", "approve", &id]).await?;
    anyhow::ensure!(approved.success, "{}", approved.stderr);
    let done = wait_for_state(&api, &id, "submitted").await?;
    let tx = api
        .wait_for_status(
            done["transactionId"].as_str().unwrap_or_default(),
            "CONFIRMED",
        )
        .await?;
    assert_eq!(tx["from"], wallet.to_checksum(None), "{tx}");
    assert_eq!(
        anvil.nonce(new_default).await?,
        0,
        "sent from the new default"
    );
    Ok(())
}

on_both_backends!(
    an_approved_write_goes_from_the_wallet_it_was_held_for,
    an_approved_write_waits_then_lands,
    a_rejected_write_is_never_signed,
    an_undecided_write_expires
);
