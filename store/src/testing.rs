//! Runs tests on a fresh store on SQLite and on PostgreSQL: for this crate's tests and, with
//! the `testing` feature, the tests of the crates above it.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, sea_query::Expr};
use uuid::Uuid;

use walletops_domain::{NewKey, NewWallet, SealedKey, TxKind, WalletAddress};

use crate::{NewTransaction, Store, entities::transactions as txs};

/// `n` open transactions put in `store`, held by their requests until `held_until`,
/// and their ids, oldest first.
pub async fn open_records(store: &Store, n: u64, held_until: Option<DateTime<Utc>>) -> Vec<Uuid> {
    let user = store.insert_user("lease").await.expect("a user");
    let from: WalletAddress = alloy::primitives::Address::repeat_byte(0xaa).into();
    let wallet = store
        .insert_wallet(
            NewWallet {
                user_id: user.id,
                address: from,
                make_default: true,
                key: NewKey::Sealed(SealedKey {
                    nonce: vec![0; 12],
                    ciphertext: vec![0; 48],
                }),
            },
            |_| true,
        )
        .await
        .expect("a wallet");
    let mut ids = Vec::new();
    for i in 0..n {
        let id = Uuid::now_v7();
        let record = NewTransaction {
            id,
            held_until,
            ..new_record(user.id, wallet.id, from, i)
        };
        store
            .insert_transaction(store.db(), record)
            .await
            .expect("a record");
        ids.push(id);
    }
    ids
}

/// A native send of 1 wei from `from`, wallet `wallet` of `user`, at `nonce`.
pub fn new_record(user: Uuid, wallet: Uuid, from: WalletAddress, nonce: u64) -> NewTransaction {
    NewTransaction {
        id: Uuid::now_v7(),
        user_id: user,
        wallet_id: wallet,
        chain: "anvil".to_owned(),
        chain_id: 31_337,
        kind: TxKind::Send,
        from,
        to: "0x00000000000000000000000000000000000000bb".to_owned(),
        asset: Some("native".to_owned()),
        token: None,
        amount: Some("1".to_owned()),
        request: serde_json::json!({}),
        hash: format!("0x{:064x}", nonce + 1),
        nonce: Some(nonce),
        signed_payload: vec![1, 2, 3],
        idempotency_key: None,
        note: None,
        valid_until: None,
        held_until: None,
        simulated_effects: None,
        guarded: false,
    }
}

/// Writes a hash list that is no list over record `id`: a row the store cannot read.
pub async fn corrupt_record(store: &Store, id: Uuid) {
    txs::Entity::update_many()
        .col_expr(txs::Column::Hashes, Expr::value(serde_json::json!(5)))
        .filter(txs::Column::Id.eq(id))
        .exec(store.sea())
        .await
        .expect("corrupting a record");
}

/// Dates record `id`'s last change at `at`.
pub async fn date_record(store: &Store, id: Uuid, at: DateTime<Utc>) {
    txs::Entity::update_many()
        .col_expr(txs::Column::UpdatedAt, Expr::value(at))
        .filter(txs::Column::Id.eq(id))
        .exec(store.sea())
        .await
        .expect("dating a record");
}

/// Record `id`'s lease: the core that holds it, and until when.
pub async fn lease_of(store: &Store, id: Uuid) -> (Option<Uuid>, Option<DateTime<Utc>>) {
    let row = txs::Entity::find_by_id(id)
        .one(store.sea())
        .await
        .expect("reading a record")
        .expect("the record");
    (row.lease_owner, row.lease_until)
}

/// Stores a key of `user` with prefix (and name and hash) `prefix`, made with `maker`; its id.
pub async fn insert_key(store: &Store, user: Uuid, prefix: &str, maker: Option<Uuid>) -> Uuid {
    let new = crate::NewApiKey {
        user_id: user,
        name: prefix.to_owned(),
        prefix: prefix.to_owned(),
        secret_hash: prefix.to_owned(),
        expires_at: None,
        created_by: maker,
        scopes: walletops_domain::Scopes::ALL,
    };
    let made = store.insert_api_key(new, 10, Utc::now()).await;
    made.expect("stored").expect("prefix free").id
}

/// A store on a new SQLite file, migrated; the file lives as long as the directory.
pub async fn temp_sqlite() -> (tempfile::TempDir, crate::Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("w.db").display());
    let store = crate::Store::connect(&url).await.expect("connecting");
    (dir, store)
}

/// The databases every store test runs on.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    /// A new SQLite file in a temporary directory.
    Sqlite,
    /// The server at `WALLETOPS_TEST_PG` (default the local `test` database); the test
    /// fails, it does not skip, when it is unreachable.
    Postgres,
}

/// Runs `test` on a new, migrated store on `backend`: a SQLite file in a temporary
/// directory, or a PostgreSQL schema of its own, dropped afterwards whether the test
/// passed or not. Row locks, `SKIP LOCKED` and isolation differ between the two.
pub async fn on_store<F, Fut>(backend: Backend, test: F)
where
    F: FnOnce(crate::Store) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    use futures::FutureExt;
    use sea_orm::ConnectionTrait;
    match backend {
        Backend::Sqlite => {
            let (_dir, store) = temp_sqlite().await;
            test(store).await;
        }
        Backend::Postgres => {
            let url = std::env::var("WALLETOPS_TEST_PG")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
            let admin = sea_orm::Database::connect(&url)
                .await
                .expect("PostgreSQL is required for the store tests");
            let schema = format!("walletops_unit_{}", uuid::Uuid::new_v4().simple());
            admin
                .execute_unprepared(&format!("CREATE SCHEMA {schema}"))
                .await
                .expect("a schema");
            let join = if url.contains('?') { '&' } else { '?' };
            let store = crate::Store::connect(&format!("{url}{join}options[search_path]={schema}"))
                .await
                .expect("connecting");
            let outcome = std::panic::AssertUnwindSafe(test(store.clone()))
                .catch_unwind()
                .await;
            let _ = store.sea().clone().close().await;
            admin
                .execute_unprepared(&format!("DROP SCHEMA {schema} CASCADE"))
                .await
                .expect("dropping the schema");
            if let Err(panic) = outcome {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

/// Runs each named `async fn(Store)` as a test on SQLite and on PostgreSQL.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test]
            async fn $name() {
                $crate::testing::on_store(
                    $crate::testing::Backend::Sqlite,
                    super::$name,
                )
                .await;
            })*
        }
        mod postgres {
            $(#[tokio::test]
            async fn $name() {
                $crate::testing::on_store(
                    $crate::testing::Backend::Postgres,
                    super::$name,
                )
                .await;
            })*
        }
    };
}
