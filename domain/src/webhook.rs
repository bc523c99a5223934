//! Webhook endpoints and their deliveries, as their owner sees them.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{DepositState, TxStatus};

/// A URL a user has transaction events delivered to. Its secret is never part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEndpoint {
    /// Its id.
    pub id: Uuid,
    /// Its owner.
    pub user_id: Uuid,
    /// Where deliveries are POSTed.
    pub url: url::Url,
    /// The events it receives.
    pub event_types: Vec<EventType>,
    /// When it was registered.
    pub created_at: DateTime<Utc>,
    /// Who registered it.
    pub created_by: EndpointMaker,
    /// Why and since when it is disabled; `None`: it is enabled.
    pub disabled: Option<Disabled>,
}

/// What an event tells: a transaction record or a deposit entered a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `transaction.<status>`.
    Transaction(TxStatus),
    /// `deposit.<state>` (never `deposit.ignored`).
    Deposit(DepositState),
    /// `payout.completed`: every item of a payout is final.
    PayoutCompleted,
    /// `key.frozen`: a key line was frozen, a write of it having moved more on chain than
    /// its simulation reserved.
    KeyFrozen,
}

impl EventType {
    /// Every event type, as webhooks may ask for them.
    pub const ALL: [Self; 11] = [
        Self::Transaction(TxStatus::Submitted),
        Self::Transaction(TxStatus::Confirmed),
        Self::Transaction(TxStatus::Reverted),
        Self::Transaction(TxStatus::Failed),
        Self::Transaction(TxStatus::Dropped),
        Self::Transaction(TxStatus::FeeCapped),
        Self::Deposit(DepositState::Pending),
        Self::Deposit(DepositState::Confirmed),
        Self::Deposit(DepositState::Reverted),
        Self::PayoutCompleted,
        Self::KeyFrozen,
    ];

    /// Its name (`transaction.confirmed`, `deposit.pending`).
    pub fn name(self) -> String {
        match self {
            Self::Transaction(status) => status.event_type(),
            Self::Deposit(state) => state.event_type(),
            Self::PayoutCompleted => "payout.completed".to_owned(),
            Self::KeyFrozen => "key.frozen".to_owned(),
        }
    }

    /// The event type named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// What its outbox rows are about: `transaction` or `deposit`.
    pub fn subject(self) -> &'static str {
        match self {
            Self::Transaction(_) => TRANSACTION_SUBJECT,
            Self::Deposit(_) => DEPOSIT_SUBJECT,
            Self::PayoutCompleted => PAYOUT_SUBJECT,
            Self::KeyFrozen => KEY_SUBJECT,
        }
    }

    /// The event of an outbox row about `subject` that entered `state`.
    pub fn of_row(subject: &str, state: &str) -> Option<Self> {
        match subject {
            TRANSACTION_SUBJECT => TxStatus::ALL
                .into_iter()
                .find(|s| s.as_str() == state)
                .map(Self::Transaction),
            DEPOSIT_SUBJECT => DepositState::parse(state).map(Self::Deposit),
            PAYOUT_SUBJECT if state == COMPLETED => Some(Self::PayoutCompleted),
            KEY_SUBJECT if state == FROZEN => Some(Self::KeyFrozen),
            _ => None,
        }
    }

    /// The state its outbox row stores.
    pub fn state(self) -> &'static str {
        match self {
            Self::Transaction(status) => status.as_str(),
            Self::Deposit(state) => state.as_str(),
            Self::PayoutCompleted => COMPLETED,
            Self::KeyFrozen => FROZEN,
        }
    }
}

/// The subject of a transaction record's events.
pub const TRANSACTION_SUBJECT: &str = "transaction";
/// The subject of a deposit's events.
pub const DEPOSIT_SUBJECT: &str = "deposit";
/// The subject of a payout's events.
pub const PAYOUT_SUBJECT: &str = "payout";
/// The state of a payout's outbox row.
const COMPLETED: &str = "completed";
/// The subject of a key line's events (the row's id is the line's).
pub const KEY_SUBJECT: &str = "key";
/// The state of a frozen key line's outbox row.
const FROZEN: &str = "frozen";

/// Who registered an endpoint: it belongs to that key, and revoking the key disables it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointMaker {
    /// An API key, by its id.
    Key(Uuid),
    /// A dashboard session of the owner, by its id.
    Session(Uuid),
    /// The owner at the command line (and every endpoint older than this record).
    Owner,
}

/// Why an endpoint is disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisabledReason {
    /// The key that registered it (or a key that key was made with) was revoked.
    KeyRevoked,
    /// Every attempt failed for `webhooks.disable_after_secs`.
    Failing,
}

impl DisabledReason {
    /// The reason as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::KeyRevoked => "key_revoked",
            Self::Failing => "failing",
        }
    }

    /// The reason stored as `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::KeyRevoked, Self::Failing]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

/// An endpoint disabled: nothing is delivered to it until its owner enables it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disabled {
    /// When.
    pub at: DateTime<Utc>,
    /// Why.
    pub reason: DisabledReason,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryState {
    /// Not delivered yet: due at `next_attempt_at`.
    Pending,
    /// The endpoint answered 2xx.
    Delivered,
    /// Retried until its retry window closed without a 2xx: kept until replayed.
    Dead,
}

impl DeliveryState {
    /// The state as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Dead => "dead",
        }
    }

    /// The state stored as `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Pending, Self::Delivered, Self::Dead]
            .into_iter()
            .find(|state| state.as_str() == s)
    }
}

/// One event for one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookDelivery {
    /// Its id: the `webhook-id` header, the same on every attempt.
    pub id: Uuid,
    /// The endpoint it goes to.
    pub endpoint_id: Uuid,
    /// The endpoint's owner.
    pub user_id: Uuid,
    /// The event's number (as `WatchTransactions` gives it).
    pub event_seq: u64,
    /// The transaction record or deposit the event is about.
    pub subject_id: Uuid,
    /// The event: what entered which state.
    pub event: EventType,
    /// Where it stands.
    pub state: DeliveryState,
    /// Attempts made.
    pub attempts: u32,
    /// When it is due (pending only).
    pub next_attempt_at: DateTime<Utc>,
    /// A failed attempt past this dead-letters it.
    pub retry_until: DateTime<Utc>,
    /// The last attempt's HTTP status; absent: none, or no answer.
    pub last_status: Option<u16>,
    /// What went wrong on the last attempt.
    pub last_error: Option<String>,
    /// When the last attempt was made.
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// When the endpoint took it.
    pub delivered_at: Option<DateTime<Utc>>,
    /// When the event was numbered and the delivery made.
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_read_back_from_names_and_rows() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse(&t.name()), Some(t));
            assert_eq!(EventType::of_row(t.subject(), t.state()), Some(t));
        }
        assert_eq!(EventType::parse("deposit.ignored"), None);
        assert_eq!(
            EventType::Deposit(DepositState::Pending).name(),
            "deposit.pending"
        );
    }
}
