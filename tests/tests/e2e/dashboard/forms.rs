//! The dashboard's pages over plain HTTP: every changing form answers 303 to a page fetched
//! with GET, a new key's value crosses the redirect in a sealed one-time cookie (never in a
//! URL) and is shown once; amounts in units with their base units on hover; the favicon;
//! the wallets page reading only the chains configured or in use, the rest behind `?all=1`.

use alloy::primitives::U256;
use reqwest::{Client, Response, header};
use serde_json::json;
use walletops_proto::v1::{self as pb, api_key_service_client::ApiKeyServiceClient};
use walletops_tests::{
    Backend, Service, anvil::Anvil, metrics, on_one_backend, webhooks::Receiver,
};

use super::{Dashboard, funded, redeem, session_call};

/// A browser that follows no redirect, signed in with session `token`.
struct Browser {
    client: Client,
    base: String,
    session: String,
}

impl Browser {
    fn new(svc: &Service, session: &str) -> anyhow::Result<Self> {
        Ok(Self {
            client: walletops_tests::http::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
            base: svc.http.clone(),
            session: session.to_owned(),
        })
    }

    async fn get(&self, path: &str, extra_cookie: Option<&str>) -> anyhow::Result<Response> {
        let mut cookie = format!("walletops_session={}", self.session);
        if let Some(extra) = extra_cookie {
            cookie.push_str("; ");
            cookie.push_str(extra);
        }
        Ok(self
            .client
            .get(format!("{}{path}", self.base))
            .header(header::COOKIE, cookie)
            .send()
            .await?)
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> anyhow::Result<Response> {
        Ok(self
            .client
            .post(format!("{}{path}", self.base))
            .header(
                header::COOKIE,
                format!("walletops_session={}", self.session),
            )
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(encoded(form))
            .send()
            .await?)
    }
}

/// `form` URL-encoded, as a browser posts it.
fn encoded(form: &[(&str, &str)]) -> String {
    let escape = |text: &str| {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    char::from(b).to_string()
                }
                b' ' => "+".to_owned(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    form.iter()
        .map(|(k, v)| format!("{}={}", escape(k), escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The `Set-Cookie` of `answer` that sets cookie `name`.
fn set_cookie(answer: &Response, name: &str) -> Option<String> {
    answer
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

/// `answer` is a 303 to `to`; its `Location`.
fn see_other(answer: &Response, to: &str) -> String {
    assert_eq!(answer.status(), 303, "a form answers 303 See Other");
    let location = answer
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(location.starts_with(to), "{location} is not {to}");
    location
}

async fn forms_redirect_and_a_new_key_is_shown_once(b: Backend) -> anyhow::Result<()> {
    let (_anvil, svc, _wallet) = funded(b).await?;
    let mut d = Dashboard::new(svc.channel().await?);
    let (token, csrf) = redeem(&svc, &mut d).await?;
    let browser = Browser::new(&svc, &token)?;

    // Generate: 303 to the keys page, the value in a sealed, short-lived, HttpOnly cookie.
    let made = browser
        .post(
            "/dashboard/keys",
            &[
                ("csrf", csrf.as_str()),
                ("name", "prg bot"),
                ("scopes", "read"),
            ],
        )
        .await?;
    let location = see_other(&made, "/dashboard/keys");
    assert!(!location.contains("wops_"), "no secret in the URL");
    let flash = set_cookie(&made, "walletops_flash").expect("a flash cookie");
    for flag in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/dashboard",
        "Max-Age=60",
    ] {
        assert!(flash.contains(flag), "{flag} missing from {flash}");
    }
    assert!(!flash.contains("wops_"), "the value is sealed: {flash}");
    let pair = flash.split(';').next().unwrap_or_default().to_owned();
    // A page of another session cannot open it.
    let (other, _) = d
        .sign_in(super::sign_in("owner", super::PASSWORD, "10.9.9.9")?)
        .await
        .map(|a| (a.into_inner().session_token, ()))?;
    let stranger = Browser::new(&svc, &other)?
        .get("/dashboard/keys", Some(&pair))
        .await?;
    assert!(!stranger.text().await?.contains("id=\"new-key\""));
    // The next GET shows it once and removes the cookie.
    let shown = browser.get(&location, Some(&pair)).await?;
    assert_eq!(shown.status(), 200);
    let removed = set_cookie(&shown, "walletops_flash").expect("the flash removed");
    assert!(removed.contains("Max-Age=0"), "{removed}");
    let page = shown.text().await?;
    assert!(page.contains("id=\"new-key\""), "the value is shown");
    assert!(page.contains("value=\"wops_"), "the value is shown");
    // Reloaded (the browser dropped the cookie): no value, and still one key of that name.
    let again = browser.get(&location, None).await?.text().await?;
    assert!(!again.contains("id=\"new-key\""), "shown only once");
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let listed = keys
        .list_api_keys(session_call(pb::ListApiKeysRequest {}, &token, None)?)
        .await?
        .into_inner()
        .api_keys;
    let made: Vec<&pb::ApiKey> = listed.iter().filter(|k| k.name == "prg bot").collect();
    assert_eq!(made.len(), 1, "exactly one new key");
    let id = made[0].id.clone();

    // Every other changing form answers 303 to a GET page too.
    let limits = format!("/dashboard/keys/{id}/limits");
    let set = browser
        .post(
            &limits,
            &[
                ("csrf", csrf.as_str()),
                ("chain", "anvil"),
                ("asset", "native"),
                ("daily_budget", "5000"),
            ],
        )
        .await?;
    see_other(&set, &limits);
    let removed = browser
        .post(
            &format!("{limits}/remove"),
            &[
                ("csrf", csrf.as_str()),
                ("chain", "anvil"),
                ("asset", "native"),
            ],
        )
        .await?;
    see_other(&removed, &limits);
    let rule = [
        ("csrf", csrf.as_str()),
        ("kind", "recipient"),
        ("chain", "anvil"),
        ("address", "0x1111111111111111111111111111111111111111"),
    ];
    let policy = format!("/dashboard/keys/{id}/policy");
    see_other(&browser.post(&policy, &rule).await?, &limits);
    see_other(
        &browser.post(&format!("{policy}/remove"), &rule).await?,
        &limits,
    );
    // A webhook's new secret crosses its redirect the same way, and is shown once.
    let hook = Receiver::start().await?;
    let created = svc
        .rest(&svc.api_key)
        .post(
            "/webhooks",
            &json!({"url": hook.url(), "eventTypes": ["transaction.confirmed"]}),
        )
        .await?;
    anyhow::ensure!(created.status == 201, "{}", created.text);
    let hook_id = created.body["id"].as_str().unwrap_or_default().to_owned();
    let rotated = browser
        .post(
            &format!("/dashboard/webhooks/{hook_id}/rotate"),
            &[("csrf", csrf.as_str())],
        )
        .await?;
    let location = see_other(&rotated, "/dashboard/webhooks");
    let flash = set_cookie(&rotated, "walletops_flash").expect("a flash cookie");
    let pair = flash.split(';').next().unwrap_or_default().to_owned();
    let shown = browser.get(&location, Some(&pair)).await?.text().await?;
    assert!(shown.contains("id=\"new-secret\""), "the secret is shown");
    let again = browser.get(&location, None).await?.text().await?;
    assert!(!again.contains("id=\"new-secret\""), "shown only once");
    let deleted = browser
        .post(
            &format!("/dashboard/webhooks/{hook_id}/delete"),
            &[("csrf", csrf.as_str())],
        )
        .await?;
    see_other(&deleted, "/dashboard/webhooks");
    let revoked = browser
        .post(
            &format!("/dashboard/keys/{id}/revoke"),
            &[("csrf", csrf.as_str())],
        )
        .await?;
    see_other(&revoked, "/dashboard/keys");
    let out = browser
        .post("/dashboard/sign-out", &[("csrf", csrf.as_str())])
        .await?;
    see_other(&out, "/dashboard/sign-in");
    Ok(())
}

async fn amounts_favicon_and_the_chains_in_use(b: Backend) -> anyhow::Result<()> {
    // A metrics listener, to read the RPC counters from.
    let anvil = Anvil::start().await?;
    let options = anvil.service_options("", &[("WALLETOPS_METRICS_ADDR", "127.0.0.1:0")]);
    let svc = Service::start_with(b, options).await?;
    let metrics_url = svc.metrics_url.clone().expect("a metrics listener");
    let api = svc.rest(&svc.api_key);
    let wallet = anvil
        .fund_default_wallet(&api, U256::from(10 * super::ETH))
        .await?;
    let sent = api
        .post("/send", &json!({"chain": "anvil", "from": wallet.to_string(), "to": "0x1111111111111111111111111111111111111111", "asset": "native", "amount": "1000000000000000"}))
        .await?;
    anyhow::ensure!(sent.status == 200, "{}", sent.text);
    let mut d = Dashboard::new(svc.channel().await?);
    let (token, _) = redeem(&svc, &mut d).await?;
    let browser = Browser::new(&svc, &token)?;

    // The favicon, at the root and under the dashboard, and linked from every page.
    for path in ["/favicon.ico", "/dashboard/favicon.ico"] {
        let icon = browser.get(path, None).await?;
        assert_eq!(icon.status(), 200, "{path}");
        let kind = icon
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(kind.starts_with("image/"), "{path}: {kind}");
    }

    // Transactions: the amount in ETH, its base units on hover.
    let page = browser
        .get("/dashboard/transactions", None)
        .await?
        .text()
        .await?;
    assert!(page.contains("rel=\"icon\""), "the layout links the icon");
    assert!(
        page.contains("title=\"1000000000000000 base units\">0.001 ETH</td>"),
        "{page}"
    );

    // Wallets: by default only the configured chain is read, and no other chain's RPC is
    // counted (so none can fire WalletOpsRpcFailing); `?all=1` shows the rest.
    let rpc_off_anvil = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("walletops_chain_rpc_calls_total{"))
            .filter(|l| !l.contains("chain=\"anvil\""))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let wallets = browser
        .get("/dashboard/wallets?fresh=1", None)
        .await?
        .text()
        .await?;
    assert!(wallets.contains("data-chains=\"anvil \""), "{wallets}");
    assert!(
        !wallets.contains("<td>Sepolia</td>"),
        "unused chains are not listed"
    );
    assert!(
        wallets.contains("href=\"/dashboard/wallets?all=1\""),
        "the toggle"
    );
    let after = metrics::scrape_text(&metrics_url).await?;
    assert_eq!(
        rpc_off_anvil(&after),
        Vec::<String>::new(),
        "no unused chain read"
    );
    let all = browser
        .get("/dashboard/wallets?all=1", None)
        .await?
        .text()
        .await?;
    assert!(all.contains("data-chains=\"anvil "), "{all}");
    assert!(
        all.contains(" sepolia "),
        "every chain of the family: {all}"
    );
    assert!(all.contains("href=\"/dashboard/wallets\""), "the way back");
    Ok(())
}

on_one_backend!(
    forms_redirect_and_a_new_key_is_shown_once,
    amounts_favicon_and_the_chains_in_use,
);
