//! Transaction records: what the service submitted for a user, and where each stands.

use uuid::Uuid;

use crate::error::{Result, WalletOpsError};
use walletops_domain::{TransactionRecord, TxStatus};
use walletops_store::Store;

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

    /// A page of the caller's records, newest first: up to `page_size` of chain `chain`
    /// and status `status` (when given) older than record `before`, and the record the next
    /// page starts after (`None`: this page is the last).
    pub async fn list(
        &self,
        user_id: Uuid,
        chain: Option<&str>,
        status: Option<TxStatus>,
        before: Option<Uuid>,
        page_size: u64,
    ) -> Result<(Vec<TransactionRecord>, Option<Uuid>)> {
        // One more than the page, to know whether another page follows.
        let mut records = self
            .store
            .list_transactions(user_id, chain, status, before, page_size + 1)
            .await?;
        let more = records.len() as u64 > page_size;
        records.truncate(page_size as usize);
        let next = more.then(|| records.last().map(|r| r.id)).flatten();
        Ok((records, next))
    }

    /// The chains the caller has any record on, by slug.
    pub async fn chains_used(&self, user_id: Uuid) -> Result<Vec<String>> {
        Ok(self.store.chains_used(user_id).await?)
    }
}
