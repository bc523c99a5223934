//! Dashboard sign-in and sessions over gRPC `DashboardService`: the first start's one-time
//! link, passwords set with the CLI, refusals that do not tell a wrong name from a wrong
//! password, the failed sign-in throttle, CSRF on every changing call, timeouts, and a
//! sign-out that holds on every core.

use sea_orm::ConnectionTrait;
use walletops_proto::v1::{
    self as pb, api_key_service_client::ApiKeyServiceClient,
    dashboard_service_client::DashboardServiceClient,
};
use walletops_tests::{Backend, Service, on_both_backends, poll_until, reason};

use super::{Dashboard, PASSWORD, from_client, link_token, redeem, session_call, sign_in};

async fn dashboard(svc: &Service) -> anyhow::Result<Dashboard> {
    Ok(DashboardServiceClient::new(svc.channel().await?))
}

async fn the_first_start_link_sets_a_password_once(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    assert!(
        svc.sign_in_link
            .starts_with(&format!("{}/dashboard/sign-in-link?token=", svc.http)),
        "{}",
        svc.sign_in_link
    );
    let mut d = dashboard(&svc).await?;
    // A short password is refused, naming the field, and leaves the link usable.
    let short = d
        .redeem_sign_in_link(pb::RedeemSignInLinkRequest {
            token: link_token(&svc)?,
            password: "short".to_owned(),
            form_token: "f".repeat(32),
            form_cookie: "f".repeat(32),
        })
        .await
        .expect_err("a short password");
    assert_eq!(reason(&short).as_deref(), Some("INVALID_INPUT"));
    assert!(short.message().contains("password"), "{}", short.message());
    let (token, csrf) = redeem(&svc, &mut d).await?;
    let session = d
        .get_session(session_call(pb::GetSessionRequest {}, &token, None)?)
        .await?
        .into_inner()
        .session
        .expect("session");
    assert_eq!(session.user_name, "owner");
    assert_eq!(session.csrf_token, csrf);
    // Used once, the link is spent.
    let again = redeem(&svc, &mut d).await.expect_err("a used link");
    let status = again.downcast_ref::<tonic::Status>().expect("a status");
    assert_eq!(reason(status).as_deref(), Some("UNAUTHORIZED"));
    // The password it set signs in.
    d.sign_in(sign_in("owner", PASSWORD, "10.0.0.1")?).await?;
    Ok(())
}

async fn wrong_credentials_are_answered_alike_and_throttled(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut d = dashboard(&svc).await?;
    redeem(&svc, &mut d).await?;
    let wrong_password = d
        .sign_in(sign_in("owner", "not the password", "10.0.0.1")?)
        .await
        .expect_err("wrong password");
    let no_user = d
        .sign_in(sign_in("nobody", PASSWORD, "10.0.0.2")?)
        .await
        .expect_err("unknown user");
    assert_eq!(reason(&wrong_password).as_deref(), Some("UNAUTHORIZED"));
    assert_eq!(reason(&no_user).as_deref(), Some("UNAUTHORIZED"));
    assert_eq!(wrong_password.message(), no_user.message());
    // Two more failures for the owner from 10.0.0.1: three in all from there.
    for _ in 0..2 {
        d.sign_in(sign_in("owner", "still wrong", "10.0.0.1")?)
            .await
            .expect_err("wrong password");
    }
    // Now even the right password waits, from that address, before it is checked...
    let first_wait = throttled(&mut d, "10.0.0.1").await?;
    assert!((1..=2).contains(&first_wait), "first wait {first_wait}s");
    // ...while from anywhere else the owner signs in at once: a stranger's guesses do not
    // lock the user out.
    d.sign_in(sign_in("owner", PASSWORD, "10.0.9.9")?).await?;
    // Each further failure from there doubles the wait.
    poll_until("the first backoff to pass", || async {
        let tried = d
            .clone()
            .sign_in(sign_in("owner", "wrong again", "10.0.0.1")?)
            .await;
        Ok(tried
            .expect_err("wrong password")
            .message()
            .contains("wrong user name")
            .then_some(()))
    })
    .await?;
    let second_wait = throttled(&mut d, "10.0.0.1").await?;
    assert!(
        second_wait >= 3,
        "second wait {second_wait}s after {first_wait}s"
    );
    // Per address too: ten failures from one address for names that do not exist...
    for i in 0..10 {
        d.sign_in(sign_in(&format!("ghost{i}"), PASSWORD, "10.0.3.1")?)
            .await
            .expect_err("unknown user");
    }
    // ...and another user is refused from there, but signs in from elsewhere.
    svc.create_user("alice").await?;
    let set = svc
        .cli_with_input(
            &["users", "set-password", "alice"],
            &format!("{PASSWORD}\n"),
        )
        .await?;
    assert!(set.success, "{}", set.stderr);
    let from_there = d
        .sign_in(sign_in("alice", PASSWORD, "10.0.3.1")?)
        .await
        .expect_err("address throttled");
    assert_eq!(reason(&from_there).as_deref(), Some("RATE_LIMITED"));
    let session = d
        .sign_in(sign_in("alice", PASSWORD, "10.0.4.1")?)
        .await?
        .into_inner()
        .session
        .expect("session");
    assert_eq!(session.user_name, "alice");
    Ok(())
}

/// Asserts that the owner's right password is refused `RATE_LIMITED` from `client`; the
/// seconds it says to wait.
async fn throttled(d: &mut Dashboard, client: &str) -> anyhow::Result<u64> {
    let limited = d
        .sign_in(sign_in("owner", PASSWORD, client)?)
        .await
        .expect_err("throttled");
    assert_eq!(reason(&limited).as_deref(), Some("RATE_LIMITED"));
    let message = limited.message();
    assert!(message.contains("sign-ins"), "{message}");
    let secs = message
        .rsplit("retry after ")
        .next()
        .and_then(|s| s.trim_end_matches('s').parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no wait in {message}"))?;
    Ok(secs)
}

async fn guessed_sign_in_links_are_throttled_per_address(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut d = dashboard(&svc).await?;
    let guess = |i: usize| {
        from_client(
            pb::RedeemSignInLinkRequest {
                token: format!("{i}{}", "g".repeat(42)),
                password: PASSWORD.to_owned(),
                form_token: "f".repeat(32),
                form_cookie: "f".repeat(32),
            },
            "10.0.5.1",
        )
    };
    for i in 0..10 {
        let err = d
            .redeem_sign_in_link(guess(i)?)
            .await
            .expect_err("no such link");
        assert_eq!(reason(&err).as_deref(), Some("UNAUTHORIZED"));
    }
    let err = d
        .redeem_sign_in_link(guess(10)?)
        .await
        .expect_err("throttled");
    assert_eq!(reason(&err).as_deref(), Some("RATE_LIMITED"));
    assert!(err.message().contains("sign-in links"), "{}", err.message());
    // The real link, from another address, still works.
    redeem(&svc, &mut d).await?;
    Ok(())
}

async fn changing_calls_need_the_csrf_token(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut d = dashboard(&svc).await?;
    // A sign-in form whose token and cookie differ is refused.
    let mut forged = sign_in("owner", PASSWORD, "10.0.0.1")?;
    forged.get_mut().form_cookie = "x".repeat(32);
    let err = d.sign_in(forged).await.expect_err("forged form");
    assert_eq!(reason(&err).as_deref(), Some("FORBIDDEN"));
    let (token, csrf) = redeem(&svc, &mut d).await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let listed = keys
        .list_api_keys(session_call(pb::ListApiKeysRequest {}, &token, None)?)
        .await?
        .into_inner();
    assert_eq!(listed.api_keys.len(), 1);
    let create = || pb::CreateApiKeyRequest {
        name: "from the dashboard".to_owned(),
        ..Default::default()
    };
    for bad in [None, Some("0".repeat(64))] {
        let err = keys
            .create_api_key(session_call(create(), &token, bad.as_deref())?)
            .await
            .expect_err("no or a wrong CSRF token");
        assert_eq!(reason(&err).as_deref(), Some("FORBIDDEN"));
        assert!(err.message().contains("CSRF"), "{}", err.message());
    }
    let made = keys
        .create_api_key(session_call(create(), &token, Some(&csrf))?)
        .await?
        .into_inner();
    assert_eq!(svc.rest(&made.secret).get("/wallets").await?.status, 200);
    let err = d
        .sign_out(session_call(pb::SignOutRequest {}, &token, None)?)
        .await
        .expect_err("sign-out without its CSRF token");
    assert_eq!(reason(&err).as_deref(), Some("FORBIDDEN"));
    Ok(())
}

async fn sign_out_ends_the_session_on_every_core(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let sibling = svc.sibling().await?;
    let mut here = dashboard(&svc).await?;
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", sibling.grpc_addr()?))?
            .connect()
            .await?;
    let mut there = DashboardServiceClient::new(channel);
    let (token, csrf) = redeem(&svc, &mut here).await?;
    there
        .get_session(session_call(pb::GetSessionRequest {}, &token, None)?)
        .await?;
    there
        .sign_out(session_call(pb::SignOutRequest {}, &token, Some(&csrf))?)
        .await?;
    for d in [&mut here, &mut there] {
        let err = d
            .get_session(session_call(pb::GetSessionRequest {}, &token, None)?)
            .await
            .expect_err("signed out");
        assert_eq!(reason(&err).as_deref(), Some("UNAUTHORIZED"));
    }
    Ok(())
}

/// Whether session `token` is open.
async fn is_open(d: &Dashboard, token: &str) -> bool {
    let Ok(req) = session_call(pb::GetSessionRequest {}, token, None) else {
        return false;
    };
    d.clone().get_session(req).await.is_ok()
}

/// A new session of the owner.
async fn fresh(d: &Dashboard) -> anyhow::Result<String> {
    Ok(d.clone()
        .sign_in(sign_in("owner", PASSWORD, "10.0.0.1")?)
        .await?
        .into_inner()
        .session_token)
}

async fn sessions_end_when_idle_old_or_the_password_changes(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut d = dashboard(&svc).await?;
    redeem(&svc, &mut d).await?;
    let db = svc.database().await?;
    // Idle for more than 30 minutes.
    let idle = fresh(&d).await?;
    db.execute_unprepared("UPDATE dashboard_sessions SET last_seen_at = '2020-01-01T00:00:00Z'")
        .await?;
    assert!(!is_open(&d, &idle).await, "an idle session ended");
    // Past its 12 hours, however busy.
    let old = fresh(&d).await?;
    assert!(is_open(&d, &old).await);
    db.execute_unprepared("UPDATE dashboard_sessions SET expires_at = '2020-01-01T00:00:00Z'")
        .await?;
    assert!(!is_open(&d, &old).await, "an old session ended");
    // A password set with the CLI ends the sessions opened before.
    let before = fresh(&d).await?;
    assert!(is_open(&d, &before).await);
    let set = svc
        .cli_with_input(
            &["users", "set-password", "owner"],
            "a brand new password\n",
        )
        .await?;
    assert!(set.success, "{}", set.stderr);
    assert!(!is_open(&d, &before).await, "the password changed");
    d.sign_in(sign_in("owner", "a brand new password", "10.0.0.1")?)
        .await?;
    Ok(())
}

/// Behind https (`public_url`), the session cookie is `Secure` and the first start's link
/// points there; the edge's own form posts set the cookie with the other flags.
async fn behind_https_the_cookie_is_secure(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start_with(
        b,
        walletops_tests::Options::default()
            .with_env("WALLETOPS_PUBLIC_URL", "https://ops.example.test/"),
    )
    .await?;
    assert!(
        svc.sign_in_link
            .starts_with("https://ops.example.test/dashboard/sign-in-link?token="),
        "{}",
        svc.sign_in_link
    );
    let client = walletops_tests::http::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    // Form-encoded by hand: the values hold only letters, digits, `-`, `_` and spaces.
    let password = PASSWORD.replace(' ', "+");
    let form = format!(
        "token={}&password={password}&confirm={password}&form_token={}",
        link_token(&svc)?,
        "f".repeat(32)
    );
    let answer = client
        .post(format!("{}/dashboard/sign-in-link", svc.http))
        .header("cookie", format!("walletops_form={}", "f".repeat(32)))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await?;
    assert_eq!(answer.status(), 303);
    let cookie = answer
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    for flag in [
        "walletops_session=",
        "HttpOnly",
        "SameSite=Strict",
        "Secure",
        "Path=/dashboard",
    ] {
        assert!(cookie.contains(flag), "{flag} missing from {cookie}");
    }
    Ok(())
}

on_both_backends!(
    the_first_start_link_sets_a_password_once,
    wrong_credentials_are_answered_alike_and_throttled,
    guessed_sign_in_links_are_throttled_per_address,
    changing_calls_need_the_csrf_token,
    sign_out_ends_the_session_on_every_core,
    sessions_end_when_idle_old_or_the_password_changes,
    behind_https_the_cookie_is_secure,
);
