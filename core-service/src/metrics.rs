//! What the service counts and times, for Prometheus (the `metrics` facade; the exporter
//! renders them on the metrics listener, `server`). Every name is declared here with its
//! help text; code elsewhere calls the functions below. Label values are bounded: RPC
//! names, contract codes, chain slugs, record kinds and statuses, JSON-RPC methods; never an
//! address, a key or a user's name.

use std::time::Duration;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};

/// gRPC calls answered, by `rpc` (method path) and contract `code` (`OK` on success).
pub const REQUESTS: &str = "walletops_requests_total";
/// How long gRPC calls took to answer, by `rpc`.
pub const REQUEST_SECONDS: &str = "walletops_request_duration_seconds";
/// Writes stored and sent to their chain, by `chain` and `kind`.
pub const WRITES_SUBMITTED: &str = "walletops_writes_submitted_total";
/// Records that reached a final status, by `chain`, `kind` and `status`.
pub const WRITES_SETTLED: &str = "walletops_writes_settled_total";
/// Age of the oldest record not final yet, per `chain`, read at each scrape.
pub const OLDEST_OPEN_SECONDS: &str = "walletops_oldest_open_record_seconds";
/// Records not final yet, per `chain`, read at each scrape.
pub const OPEN_RECORDS: &str = "walletops_open_records";
/// Transactions re-sent with a higher fee or a new nonce, by `chain` and `reason`.
pub const REPLACEMENTS: &str = "walletops_replacements_total";
/// Nonce gaps filled, by `chain`.
pub const NONCE_GAPS_FILLED: &str = "walletops_nonce_gaps_filled_total";
/// Records whose fee reached `monitor.max_fee_per_gas_gwei`, by `chain`.
pub const FEE_CAPS: &str = "walletops_fee_caps_hit_total";
pub use walletops_chains::metrics::{RPC_CALLS, RPC_SECONDS};
/// Writes answered from their idempotency key's stored response.
pub const IDEMPOTENT_REPLAYS: &str = "walletops_idempotent_replays_total";
/// Requests that met a concurrent twin's claim of their idempotency key, by `at`: `claim`
/// (both signed; this one's claim lost) or `failure` (this one failed, the twin's stood).
pub const TWINS_MET: &str = "walletops_idempotency_twins_met_total";
/// Sends signed together in one batch of a signing lane: more than one means they raced
/// for the wallet's nonces.
pub const SIGNING_BATCH: &str = "walletops_signing_batch_size";
/// Sends waiting in the signing lanes of this core.
pub const LANE_DEPTH: &str = "walletops_signing_lane_depth";
/// Webhook delivery attempts, by `event_type` and `outcome` (`delivered`; `retried`: failed,
/// to be tried again; `dead_lettered`: failed, its retry window closed).
pub const WEBHOOK_ATTEMPTS: &str = "walletops_webhook_attempts_total";
/// How long webhook endpoints took to answer.
pub const WEBHOOK_SECONDS: &str = "walletops_webhook_duration_seconds";
/// Monitor sweeps, and how long each took.
pub const SWEEP_SECONDS: &str = "walletops_monitor_sweep_duration_seconds";
/// Records the monitor leased, by whether each needed calls of its own (`followed`: `full`,
/// `waiting`).
pub const RECORDS_SWEPT: &str = "walletops_monitor_records_swept_total";
/// Final transactions whose effects on chain differ from their simulation, by `chain` and
/// `kind`.
pub const EFFECTS_DIFFERED: &str = "walletops_effects_differed_total";
/// Time from a write's request to its landing (`CONFIRMED`), by `chain` and `route` (`rpc`:
/// the chain's RPC URLs; `rpc_and_send_urls`: those and its `send_urls`).
pub const LANDING_SECONDS: &str = "walletops_landing_duration_seconds";
/// Sends of a final transaction's same signed bytes again by the monitor (EVM rebroadcasts,
/// Solana resends), per transaction, by `chain`.
pub const RESENDS: &str = "walletops_resends_per_transaction";
/// The priority fee a landed transaction offered, by `chain` and `unit` (`wei_per_gas`: EVM's
/// `maxPriorityFeePerGas`; `micro_lamports_per_cu`: Solana's compute-unit price).
pub const PRIORITY_FEE: &str = "walletops_priority_fee_paid";
/// Writes held for approval and what became of them, by `outcome` (`held`, `approved`,
/// `rejected`, `expired`, `submitted`, `failed`).
pub const APPROVALS: &str = "walletops_approvals_total";
/// 1 while this core hears of API key changes (and holds keys for reads), 0 while it reads
/// every key from the database.
pub const KEY_CHANGES_HEARD: &str = "walletops_key_changes_heard";
/// Times this core lost the channel it hears key changes on.
pub const KEY_CHANNEL_LOST: &str = "walletops_key_change_channel_lost_total";

/// Declares every metric's help text (once, at start).
pub fn describe() {
    describe_counter!(REQUESTS, "gRPC calls answered, by rpc and contract code");
    describe_histogram!(
        REQUEST_SECONDS,
        metrics::Unit::Seconds,
        "time to answer a gRPC call, by rpc"
    );
    describe_counter!(
        WRITES_SUBMITTED,
        "writes stored and sent to their chain, by chain and kind"
    );
    describe_counter!(
        WRITES_SETTLED,
        "records that reached a final status, by chain, kind and status"
    );
    describe_gauge!(
        OLDEST_OPEN_SECONDS,
        metrics::Unit::Seconds,
        "age of the oldest record not final yet, per chain (0: none open)"
    );
    describe_gauge!(OPEN_RECORDS, "records not final yet, per chain");
    describe_counter!(
        REPLACEMENTS,
        "transactions re-sent with a higher fee or a new nonce, by chain and reason"
    );
    describe_counter!(NONCE_GAPS_FILLED, "nonce gaps filled, by chain");
    describe_counter!(
        EFFECTS_DIFFERED,
        "final transactions whose effects on chain differ from their simulation, by chain and kind"
    );
    describe_counter!(FEE_CAPS, "records whose fee reached the cap, by chain");
    describe_histogram!(
        LANDING_SECONDS,
        metrics::Unit::Seconds,
        "time from a write's request to its landing, by chain and send route"
    );
    describe_histogram!(
        RESENDS,
        "sends of a final transaction's same bytes again by the monitor, per transaction, by chain"
    );
    describe_histogram!(
        PRIORITY_FEE,
        "the priority fee a landed transaction offered, by chain and unit (wei_per_gas, micro_lamports_per_cu)"
    );
    describe_counter!(
        APPROVALS,
        "writes held for approval and what became of them, by outcome"
    );
    describe_counter!(
        RPC_CALLS,
        "calls to chain nodes, by chain, method and outcome"
    );
    describe_histogram!(
        RPC_SECONDS,
        metrics::Unit::Seconds,
        "time a chain node took to answer, by chain and method"
    );
    describe_counter!(
        IDEMPOTENT_REPLAYS,
        "writes answered with their idempotency key's stored response"
    );
    describe_counter!(
        TWINS_MET,
        "requests that met a concurrent twin's claim of their idempotency key, by where"
    );
    describe_histogram!(
        SIGNING_BATCH,
        "sends signed together in one batch of a signing lane"
    );
    describe_histogram!(
        SWEEP_SECONDS,
        metrics::Unit::Seconds,
        "time a monitor sweep took"
    );
    describe_counter!(
        RECORDS_SWEPT,
        "records the monitor swept, by whether each was followed with calls of its own (full) or waited with its wallet's nonces (waiting)"
    );
    describe_gauge!(LANE_DEPTH, "sends waiting in this core's signing lanes");
    describe_gauge!(
        KEY_CHANGES_HEARD,
        "1 while this core hears of API key changes and holds keys in memory for reads"
    );
    describe_counter!(
        KEY_CHANNEL_LOST,
        "times this core lost the channel it hears API key changes on"
    );
    describe_counter!(
        WEBHOOK_ATTEMPTS,
        "webhook delivery attempts, by event type and outcome (delivered, retried, dead_lettered)"
    );
    describe_histogram!(
        WEBHOOK_SECONDS,
        metrics::Unit::Seconds,
        "time a webhook endpoint took to answer"
    );
}

/// A gRPC call to `rpc` answered with contract `code` after `took`.
pub(crate) fn request(rpc: String, code: &'static str, took: Duration) {
    counter!(REQUESTS, "rpc" => rpc.clone(), "code" => code).increment(1);
    histogram!(REQUEST_SECONDS, "rpc" => rpc).record(took.as_secs_f64());
}

/// A write of `kind` stored and sent on `chain`.
pub(crate) fn write_submitted(chain: &str, kind: &'static str) {
    counter!(WRITES_SUBMITTED, "chain" => chain.to_owned(), "kind" => kind).increment(1);
}

/// `open`, moved to `status` in a committed change: counted as settled when it ended, as
/// fee-capped when it stopped at its cap. Called after the commit, so a change rolled back is
/// never counted.
pub(crate) fn settled(
    open: &walletops_domain::OpenTransaction,
    status: walletops_domain::TxStatus,
) {
    if status == open.status {
        return;
    }
    if status == walletops_domain::TxStatus::FeeCapped {
        fee_capped(&open.chain);
    } else if status.is_final() {
        write_settled(&open.chain, open.kind.as_str(), status.as_str());
    }
}

/// A final record of `kind` on `chain` did otherwise than its simulation showed. Called
/// after the commit that keeps the difference on the record.
pub(crate) fn effects_differed(chain: &str, kind: walletops_domain::TxKind) {
    counter!(EFFECTS_DIFFERED, "chain" => chain.to_owned(), "kind" => kind.as_str()).increment(1);
}

/// A record of `kind` on `chain` ended `status`.
fn write_settled(chain: &str, kind: &'static str, status: &'static str) {
    counter!(WRITES_SETTLED, "chain" => chain.to_owned(), "kind" => kind, "status" => status)
        .increment(1);
}

/// `open` records of `chain` are not final, the oldest `oldest` old.
pub fn open_records(chain: &str, open: usize, oldest: Duration) {
    gauge!(OPEN_RECORDS, "chain" => chain.to_owned()).set(open as f64);
    gauge!(OLDEST_OPEN_SECONDS, "chain" => chain.to_owned()).set(oldest.as_secs_f64());
}

/// A transaction of `chain` re-sent for `reason` (`fee`, `nonce`).
pub(crate) fn replacement(chain: &str, reason: &'static str) {
    counter!(REPLACEMENTS, "chain" => chain.to_owned(), "reason" => reason).increment(1);
}

/// A record of `chain` ended after the monitor sent its same bytes `resends` more times.
pub(crate) fn resent(chain: &str, resends: u32) {
    histogram!(RESENDS, "chain" => chain.to_owned()).record(f64::from(resends));
}

/// A write of `chain` landed `took` after its request, sent through `route`, offering
/// `priority` (a unit and an amount) when it says.
pub(crate) fn landed(
    chain: &str,
    route: &'static str,
    took: Duration,
    priority: Option<(&'static str, f64)>,
) {
    histogram!(LANDING_SECONDS, "chain" => chain.to_owned(), "route" => route)
        .record(took.as_secs_f64());
    if let Some((unit, fee)) = priority {
        histogram!(PRIORITY_FEE, "chain" => chain.to_owned(), "unit" => unit).record(fee);
    }
}

/// A nonce gap of `chain` filled.
pub(crate) fn nonce_gap_filled(chain: &str) {
    counter!(NONCE_GAPS_FILLED, "chain" => chain.to_owned()).increment(1);
}

/// A record of `chain` reached the fee cap.
fn fee_capped(chain: &str) {
    counter!(FEE_CAPS, "chain" => chain.to_owned()).increment(1);
}

/// A write answered from its key's stored response.
pub(crate) fn idempotent_replay() {
    counter!(IDEMPOTENT_REPLAYS).increment(1);
}

/// A request met a concurrent twin's claim of its key `at` `claim` or `failure`.
pub(crate) fn twin_met(at: &'static str) {
    counter!(TWINS_MET, "at" => at).increment(1);
}

/// A signing lane signed `sends` sends in one batch.
pub(crate) fn signing_batch(sends: usize) {
    histogram!(SIGNING_BATCH).record(sends as f64);
}

/// The sends waiting in this core's signing lanes changed by `change`.
pub(crate) fn lane_depth(change: f64) {
    gauge!(LANE_DEPTH).increment(change);
}

/// A monitor sweep took `took`.
pub(crate) fn swept(took: Duration) {
    histogram!(SWEEP_SECONDS).record(took.as_secs_f64());
}

/// A sweep followed `full` records with calls of their own and let `waiting` wait.
pub(crate) fn records_swept(full: usize, waiting: usize) {
    counter!(RECORDS_SWEPT, "followed" => "full").increment(full as u64);
    counter!(RECORDS_SWEPT, "followed" => "waiting").increment(waiting as u64);
}

/// A held write reached `outcome`.
pub(crate) fn approval(outcome: &'static str) {
    counter!(APPROVALS, "outcome" => outcome).increment(1);
}

/// A webhook delivery attempt of `event_type` ended with `outcome` after `took`.
pub(crate) fn webhook_attempt(event_type: String, outcome: &'static str, took: Duration) {
    counter!(WEBHOOK_ATTEMPTS, "event_type" => event_type, "outcome" => outcome).increment(1);
    histogram!(WEBHOOK_SECONDS).record(took.as_secs_f64());
}

/// The key-change channel is up (`true`) or lost.
pub fn key_changes_heard(heard: bool) {
    gauge!(KEY_CHANGES_HEARD).set(if heard { 1.0 } else { 0.0 });
    if !heard {
        counter!(KEY_CHANNEL_LOST).increment(1);
    }
}
