//! Transaction records: what the service submitted for a user, and where each stands.

use uuid::Uuid;

use crate::{
    domain::TransactionRecord,
    error::{Result, WalletOpsError},
    store::Store,
};

/// Transaction lookups.
#[derive(Debug, Clone)]
pub struct Transactions {
    store: Store,
}

impl Transactions {
    /// Lookups over `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// The caller's transaction `id`. An unknown id and another user's transaction are both
    /// `NOT_FOUND`, so ids cannot be probed.
    pub async fn get(&self, user_id: Uuid, id: Uuid) -> Result<TransactionRecord> {
        self.store
            .find_transaction(user_id, id)
            .await?
            .ok_or_else(|| WalletOpsError::NotFound(format!("no transaction {id}")))
    }
}
