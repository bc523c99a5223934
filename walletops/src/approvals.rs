//! `approvals`: a user's writes held for approval, and a person's decision on them, on the
//! configured database. A running core makes an approved write (within a second).

use walletops_core::{
    Config, Core,
    requests::{DecideRequest, approval_state_named},
};
use walletops_domain::Approval;
use walletops_proto::v1 as pb;

use crate::cli::ApprovalsCommand;

fn print_approval(a: &Approval) {
    let decided = match (&a.decided_by, a.decided_at) {
        (Some(by), Some(at)) => format!("  decided by {by} at {}", at.to_rfc3339()),
        _ => format!("  expires {}", a.expires_at.to_rfc3339()),
    };
    println!("{}  {:<9} {}{decided}", a.id, a.state.as_str(), a.summary);
    if let Some(reason) = &a.reason {
        println!("    reason: {reason}");
    }
    if let Some(tx) = a.transaction_id {
        println!("    transaction: {tx}");
    }
    if let Some(error) = &a.error {
        println!("    error: {error}");
    }
}

/// Who decides, as recorded: `cli:` and the name given, or the login name.
fn decider(by: Option<String>) -> String {
    let name = by
        .or_else(|| std::env::var("USER").ok())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "operator".to_owned());
    format!("cli:{name}")
}

/// `approvals list|approve|reject`.
pub(crate) async fn approvals(config: Config, command: ApprovalsCommand) -> anyhow::Result<()> {
    let core = Core::open(config).await?;
    match command {
        ApprovalsCommand::List { user, state } => {
            let user = core.users().find(&user).await?;
            let state = approval_state_named(state.as_deref().unwrap_or_default())?;
            let approvals = core.approvals.list_of(user.id, None, state).await?;
            if approvals.is_empty() {
                println!("No approvals.");
            }
            for a in &approvals {
                print_approval(a);
            }
        }
        ApprovalsCommand::Approve { user, id, by } => {
            decide(&core, &user, (id, true, None), by).await?;
            println!("Approved: a running core signs and sends it within a second.");
        }
        ApprovalsCommand::Reject {
            user,
            id,
            reason,
            by,
        } => {
            decide(&core, &user, (id, false, reason), by).await?;
            println!("Rejected: it will never be signed.");
        }
    }
    Ok(())
}

/// Records the decision `(id, approve, reason)` of `by` on `user`'s approval, and prints it.
async fn decide(
    core: &Core,
    user: &str,
    (id, approve, reason): (String, bool, Option<String>),
    by: Option<String>,
) -> anyhow::Result<()> {
    let user = core.users().find(user).await?;
    let req = DecideRequest::parse(&pb::DecideApprovalRequest {
        id,
        approve,
        reason,
    })?;
    let a = core
        .approvals
        .decide(user.id, req.id, req.decision, &decider(by))
        .await?;
    print_approval(&a);
    Ok(())
}
