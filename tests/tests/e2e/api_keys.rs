//! The API key lifecycle over gRPC `ApiKeyService`: creation with each expiration, the value
//! shown once, listing, immediate and permanent revocation, and the 10-active-keys limit.

use walletops_proto::v1::{
    self as pb, ApiKeyState, KeyExpiration, api_key_service_client::ApiKeyServiceClient,
};
use walletops_tests::{Backend, Options, Service, on_both_backends, reason, with_key};

type Keys = ApiKeyServiceClient<tonic::transport::Channel>;

async fn create(
    keys: &mut Keys,
    key: &str,
    name: &str,
    expiration: KeyExpiration,
) -> Result<pb::CreateApiKeyResponse, tonic::Status> {
    let req = pb::CreateApiKeyRequest {
        name: name.to_owned(),
        expiration: expiration.into(),
        scopes: Vec::new(),
    };
    keys.create_api_key(with_key(req, key).map_err(|e| tonic::Status::internal(e.to_string()))?)
        .await
        .map(tonic::Response::into_inner)
}

fn is_key_shaped(secret: &str) -> bool {
    let parts: Vec<&str> = secret.split('_').collect();
    parts.len() == 3
        && parts[0] == "wops"
        && parts[1].len() == 4
        && parts[2].len() == 32
        && parts[1..]
            .iter()
            .all(|p| p.bytes().all(|b| b.is_ascii_alphanumeric()))
}

async fn created_keys_have_the_contract_shape_and_each_expiration(
    b: Backend,
) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let now = chrono::Utc::now().timestamp();
    let day = 86_400;
    for (expiration, days, state) in [
        (KeyExpiration::Unspecified, None, ApiKeyState::Active),
        (KeyExpiration::Never, None, ApiKeyState::Active),
        (KeyExpiration::SevenDays, Some(7), ApiKeyState::ExpiringSoon),
        (KeyExpiration::ThirtyDays, Some(30), ApiKeyState::Active),
        (KeyExpiration::NinetyDays, Some(90), ApiKeyState::Active),
        (
            KeyExpiration::OneHundredEightyDays,
            Some(180),
            ApiKeyState::Active,
        ),
        (KeyExpiration::OneYear, Some(365), ApiKeyState::Active),
    ] {
        let created = create(&mut keys, &svc.api_key, "ci", expiration).await?;
        assert!(is_key_shaped(&created.secret), "{}", created.secret);
        let meta = created.api_key.expect("key");
        assert_eq!(meta.state(), state, "{expiration:?}");
        assert_eq!(meta.prefix, created.secret[5..9]);
        let expires = meta.expires_at.map(|t| t.seconds);
        match days {
            None => assert_eq!(expires, None, "{expiration:?}"),
            Some(d) => {
                let e = expires.expect("expiry");
                assert!((e - (now + d * day)).abs() < 120, "{expiration:?}: {e}");
            }
        }
        // The new key works at once.
        assert_eq!(svc.rest(&created.secret).get("/wallets").await?.status, 200);
    }
    Ok(())
}

async fn keys_are_listed_without_values_and_names_are_checked(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let created = create(&mut keys, &svc.api_key, "listed", KeyExpiration::Never).await?;
    let list = keys
        .list_api_keys(with_key(pb::ListApiKeysRequest {}, &svc.api_key)?)
        .await?
        .into_inner();
    assert_eq!(list.api_keys.len(), 2);
    assert_eq!(list.api_keys[0].name, "listed", "newest first");
    // Each key says which key made it, so that an owner can find what a leaked key made.
    let first = &list.api_keys[1];
    assert_eq!(first.created_by, None, "the first start made the first key");
    assert_eq!(list.api_keys[0].created_by.as_ref(), Some(&first.id));
    let printed = format!("{list:?}");
    assert!(!printed.contains(&created.secret[10..]), "a value leaked");
    assert!(!printed.contains(&svc.api_key[10..]), "a value leaked");
    let err = create(&mut keys, &svc.api_key, "  ", KeyExpiration::Never)
        .await
        .expect_err("empty name");
    assert_eq!(reason(&err).as_deref(), Some("INVALID_INPUT"));
    assert!(err.message().contains("name"), "{}", err.message());
    Ok(())
}

async fn revocation_is_immediate_and_permanent(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let second = create(&mut keys, &svc.api_key, "to revoke", KeyExpiration::Never).await?;
    assert_eq!(svc.rest(&second.secret).get("/wallets").await?.status, 200);
    let id = second.api_key.expect("key").id;
    let revoked = keys
        .revoke_api_key(with_key(
            pb::RevokeApiKeyRequest { id: id.clone() },
            &svc.api_key,
        )?)
        .await?
        .into_inner()
        .api_key
        .expect("key");
    assert_eq!(revoked.state(), ApiKeyState::Revoked);
    let first_revoked_at = revoked.revoked_at.expect("revoked_at");
    svc.rest(&second.secret)
        .get("/wallets")
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    let err = keys
        .list_api_keys(with_key(pb::ListApiKeysRequest {}, &second.secret)?)
        .await
        .expect_err("revoked over gRPC too");
    assert_eq!(reason(&err).as_deref(), Some("UNAUTHORIZED"));
    // Revoking again changes nothing: revocation is permanent.
    let again = keys
        .revoke_api_key(with_key(pb::RevokeApiKeyRequest { id }, &svc.api_key)?)
        .await?
        .into_inner()
        .api_key
        .expect("key");
    assert_eq!(again.revoked_at, Some(first_revoked_at));
    svc.rest(&second.secret)
        .get("/wallets")
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    // A key can revoke itself, and is refused from the next request on.
    let own_prefix = svc.api_key[5..9].to_owned();
    keys.revoke_api_key(with_key(
        pb::RevokeApiKeyRequest { id: own_prefix },
        &svc.api_key,
    )?)
    .await?;
    svc.rest(&svc.api_key)
        .get("/wallets")
        .await?
        .assert_error(401, "UNAUTHORIZED")?;
    Ok(())
}

/// A leaked key cannot keep its holder in past its revocation or expiry through keys made
/// with it: it makes none that outlives it, and revoking it revokes the keys made with it,
/// and theirs.
async fn a_key_cannot_outlive_the_key_that_made_it(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start_with(
        b,
        Options::with_config("[rate_limits]\nwrites_per_minute = 1000\n"),
    )
    .await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let leaked = create(&mut keys, &svc.api_key, "ci", KeyExpiration::NinetyDays).await?;
    for longer in [
        KeyExpiration::Never,
        KeyExpiration::Unspecified,
        KeyExpiration::OneHundredEightyDays,
        // Made later, it would expire later.
        KeyExpiration::NinetyDays,
    ] {
        let err = create(&mut keys, &leaked.secret, "spawn", longer)
            .await
            .expect_err("outlives its maker");
        assert_eq!(reason(&err).as_deref(), Some("INVALID_INPUT"), "{err:?}");
        assert!(err.message().contains("expiration"), "{err:?}");
    }
    let child = create(
        &mut keys,
        &leaked.secret,
        "child",
        KeyExpiration::ThirtyDays,
    )
    .await?;
    let grandchild = create(
        &mut keys,
        &child.secret,
        "grandchild",
        KeyExpiration::SevenDays,
    )
    .await?;
    // A key the owner made elsewhere is not the leaked key's to take along.
    let other = create(&mut keys, &svc.api_key, "other", KeyExpiration::SevenDays).await?;
    let id = leaked.api_key.expect("key").id;
    keys.revoke_api_key(with_key(pb::RevokeApiKeyRequest { id }, &svc.api_key)?)
        .await?;
    for secret in [&leaked.secret, &child.secret, &grandchild.secret] {
        svc.rest(secret)
            .get("/wallets")
            .await?
            .assert_error(401, "UNAUTHORIZED")?;
    }
    assert_eq!(svc.rest(&other.secret).get("/wallets").await?.status, 200);
    // A key revokes only itself and the keys made from it: not its maker, not a sibling;
    // revoking itself, it takes the keys made from it along.
    let leaked = create(&mut keys, &svc.api_key, "ci", KeyExpiration::Never).await?;
    let middle = create(&mut keys, &leaked.secret, "middle", KeyExpiration::Never).await?;
    let last = create(&mut keys, &middle.secret, "last", KeyExpiration::Never).await?;
    let sibling = create(&mut keys, &leaked.secret, "sibling", KeyExpiration::Never).await?;
    let id = |k: &pb::CreateApiKeyResponse| k.api_key.as_ref().expect("key").id.clone();
    for (by, target) in [
        (&last.secret, id(&middle)),
        (&middle.secret, id(&leaked)),
        (&middle.secret, id(&sibling)),
    ] {
        let err = keys
            .revoke_api_key(with_key(pb::RevokeApiKeyRequest { id: target }, by)?)
            .await
            .expect_err("not of its line");
        assert_eq!(reason(&err).as_deref(), Some("FORBIDDEN"), "{err:?}");
        assert!(err.message().contains("only itself"), "{err:?}");
    }
    for k in [&leaked, &middle, &last, &sibling] {
        assert_eq!(svc.rest(&k.secret).get("/wallets").await?.status, 200);
    }
    keys.revoke_api_key(with_key(
        pb::RevokeApiKeyRequest { id: id(&middle) },
        &middle.secret,
    )?)
    .await?;
    for (k, status) in [
        (&middle, 401),
        (&last, 401),
        (&leaked, 200),
        (&sibling, 200),
    ] {
        assert_eq!(svc.rest(&k.secret).get("/wallets").await?.status, status);
    }
    Ok(())
}

async fn users_cannot_touch_each_others_keys(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let bob = svc.create_user("bob").await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let bob_prefix = bob[5..9].to_owned();
    let err = keys
        .revoke_api_key(with_key(
            pb::RevokeApiKeyRequest { id: bob_prefix },
            &svc.api_key,
        )?)
        .await
        .expect_err("not the owner's key");
    assert_eq!(reason(&err).as_deref(), Some("NOT_FOUND"));
    assert_eq!(svc.rest(&bob).get("/wallets").await?.status, 200);
    let owners = keys
        .list_api_keys(with_key(pb::ListApiKeysRequest {}, &svc.api_key)?)
        .await?
        .into_inner();
    assert!(owners.api_keys.iter().all(|k| k.prefix != bob[5..9]));
    Ok(())
}

async fn at_most_ten_active_keys_per_user(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    // The first key is active already: nine more reach the limit.
    let mut made = Vec::new();
    for i in 0..9 {
        made.push(
            create(
                &mut keys,
                &svc.api_key,
                &format!("k{i}"),
                KeyExpiration::Never,
            )
            .await?,
        );
    }
    let err = create(&mut keys, &svc.api_key, "eleventh", KeyExpiration::Never)
        .await
        .expect_err("the 11th active key");
    assert_eq!(reason(&err).as_deref(), Some("FORBIDDEN"));
    assert!(err.message().contains("10"), "{}", err.message());
    // Revoking one frees a place.
    let id = made[0].api_key.as_ref().expect("key").id.clone();
    keys.revoke_api_key(with_key(pb::RevokeApiKeyRequest { id }, &svc.api_key)?)
        .await?;
    create(&mut keys, &svc.api_key, "replacement", KeyExpiration::Never).await?;
    Ok(())
}

async fn concurrent_creations_cannot_pass_the_limit(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let channel = svc.channel().await?;
    let attempts = (0..12).map(|i| {
        let mut keys = ApiKeyServiceClient::new(channel.clone());
        let key = svc.api_key.clone();
        async move { create(&mut keys, &key, &format!("race{i}"), KeyExpiration::Never).await }
    });
    let results = futures::future::join_all(attempts).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 9, "{results:?}");
    for r in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(reason(r).as_deref(), Some("FORBIDDEN"), "{r:?}");
    }
    Ok(())
}

/// The last use of the key with prefix `prefix`, as listed.
async fn last_used(keys: &mut Keys, key: &str, prefix: &str) -> anyhow::Result<Option<i64>> {
    let listed = keys
        .list_api_keys(with_key(pb::ListApiKeysRequest {}, key)?)
        .await?
        .into_inner();
    Ok(listed
        .api_keys
        .iter()
        .find(|k| k.prefix == prefix)
        .and_then(|k| k.last_used_at.as_ref())
        .map(|t| t.seconds))
}

async fn last_use_is_written_behind_at_most_once_a_minute(b: Backend) -> anyhow::Result<()> {
    // The waits below poll the key list: a read each time.
    let options = Options::default().with_env("WALLETOPS_RATE_LIMITS__READS_PER_MINUTE", "100000");
    let svc = Service::start_with(b, options).await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let (a, z) = (
        create(&mut keys, &svc.api_key, "a", KeyExpiration::Never)
            .await?
            .secret,
        create(&mut keys, &svc.api_key, "z", KeyExpiration::Never)
            .await?
            .secret,
    );
    assert_eq!(last_used(&mut keys, &svc.api_key, &a[5..9]).await?, None);
    for _ in 0..5 {
        assert_eq!(svc.rest(&a).get("/wallets").await?.status, 200);
    }
    let mut probe = keys.clone();
    let first = walletops_tests::poll_until("key a's last use to be written", || {
        let (mut keys, key, prefix) = (probe.clone(), svc.api_key.clone(), a[5..9].to_owned());
        async move { last_used(&mut keys, &key, &prefix).await }
    })
    .await?;
    // More uses within the minute, then one of key z: once z's use is written, a later
    // write has run, and a's stayed as it was.
    for _ in 0..5 {
        assert_eq!(svc.rest(&a).get("/wallets").await?.status, 200);
    }
    assert_eq!(svc.rest(&z).get("/wallets").await?.status, 200);
    walletops_tests::poll_until("key z's last use to be written", || {
        let (mut keys, key, prefix) = (probe.clone(), svc.api_key.clone(), z[5..9].to_owned());
        async move { Ok(last_used(&mut keys, &key, &prefix).await?.map(|_| ())) }
    })
    .await?;
    assert_eq!(
        last_used(&mut probe, &svc.api_key, &a[5..9]).await?,
        Some(first)
    );
    Ok(())
}

on_both_backends!(
    last_use_is_written_behind_at_most_once_a_minute,
    a_key_cannot_outlive_the_key_that_made_it,
    created_keys_have_the_contract_shape_and_each_expiration,
    keys_are_listed_without_values_and_names_are_checked,
    revocation_is_immediate_and_permanent,
    users_cannot_touch_each_others_keys,
    at_most_ten_active_keys_per_user,
    concurrent_creations_cannot_pass_the_limit,
);
