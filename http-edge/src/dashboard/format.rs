//! Values as the pages show them: times, amounts in whole units, scope and status names.

use chrono::DateTime;
use walletops_proto::v1 as pb;

/// A time as `2026-11-26 15:04 UTC`; empty when absent.
pub(crate) fn time(ts: Option<prost_types::Timestamp>) -> String {
    ts.and_then(|ts| {
        DateTime::from_timestamp(ts.seconds, u32::try_from(ts.nanos).unwrap_or_default())
    })
    .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
    .unwrap_or_default()
}

/// A scope's name.
pub(crate) fn scope(value: i32) -> &'static str {
    match pb::ApiKeyScope::try_from(value) {
        Ok(pb::ApiKeyScope::Read) => "read",
        Ok(pb::ApiKeyScope::Trade) => "trade",
        Ok(pb::ApiKeyScope::Write) => "write",
        _ => "unknown",
    }
}

/// A spend limit as one line: `anvil native: at most 0.1 ETH a write; 24 h: 3 ETH of 5 ETH
/// left; approval above 0.05 ETH`.
pub(crate) fn limit(l: &pb::SpendLimit) -> String {
    let units = l.decimals.zip(l.symbol.as_deref());
    let shown = |raw: &str| {
        units.map_or_else(
            || raw.to_owned(),
            |(decimals, symbol)| format!("{} {symbol}", self::units(raw, decimals)),
        )
    };
    let mut parts = Vec::new();
    if let Some(max) = &l.max_per_transaction {
        parts.push(format!("at most {} a write", shown(max)));
    }
    if let Some(budget) = &l.daily_budget {
        let left = l.left.as_deref().unwrap_or("0");
        parts.push(format!("24 h: {} of {} left", shown(left), shown(budget)));
    }
    if let Some(above) = &l.approval_above {
        parts.push(format!("approval above {}", shown(above)));
    }
    format!("{} {}: {}", l.chain, l.asset, parts.join("; "))
}

/// A scope checkbox's value as the proto enum (an unknown value is sent as unspecified,
/// which the core refuses, naming the field).
pub(crate) fn scope_value(name: &str) -> i32 {
    match name {
        "read" => pb::ApiKeyScope::Read,
        "trade" => pb::ApiKeyScope::Trade,
        "write" => pb::ApiKeyScope::Write,
        _ => pb::ApiKeyScope::Unspecified,
    }
    .into()
}

/// A base-unit integer `raw` with `decimals` as whole units, trailing zeros dropped:
/// `1500000000000000000` with 18 is `1.5`. Text that is not an integer is shown as it is.
pub(crate) fn units(raw: &str, decimals: u32) -> String {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return raw.to_owned();
    }
    let decimals = decimals as usize;
    let padded = format!("{raw:0>width$}", width = decimals + 1);
    let (whole, fraction) = padded.split_at(padded.len() - decimals);
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    let fraction = fraction.trim_end_matches('0');
    if fraction.is_empty() {
        whole.to_owned()
    } else {
        format!("{whole}.{fraction}")
    }
}

/// An amount as a page shows it, and its base units for the hover (`title`).
pub(crate) struct Amount {
    /// `0.001 ETH`; a token whose decimals the core does not know, in base units with its
    /// address.
    pub(crate) shown: String,
    /// `1000000000000000 base units`.
    pub(crate) raw: String,
}

/// Base units `raw` as a page shows them: in whole units with the symbol when `units`
/// (decimals, symbol) are known, else as they are, naming `token` when there is one. The
/// one rule every page's amounts follow.
pub(crate) fn amount(raw: &str, units: Option<(u32, &str)>, token: Option<&str>) -> Amount {
    let shown = match (units, token) {
        (Some((decimals, symbol)), _) => format!("{} {symbol}", self::units(raw, decimals)),
        (None, Some(token)) => format!("{raw} (base units of {token})"),
        (None, None) => raw.to_owned(),
    };
    let raw = if raw.is_empty() {
        String::new()
    } else {
        format!("{raw} base units")
    };
    Amount { shown, raw }
}

/// An amount of `asset` (`native`, a token address or a mint) with the `decimals` and
/// `symbol` the core gave for it, when it knew them.
pub(crate) fn of_asset(
    raw: &str,
    asset: &str,
    decimals: Option<u32>,
    symbol: Option<&str>,
) -> Amount {
    let token = (asset != "native").then_some(asset);
    amount(raw, decimals.zip(symbol), token)
}

/// A transaction status's name, its badge's style, and whether the monitor still follows
/// it (the page then refreshes itself).
pub(crate) fn status(value: i32) -> (&'static str, &'static str, bool) {
    match pb::TransactionStatus::try_from(value) {
        Ok(pb::TransactionStatus::Submitted) => ("Submitted", "info", true),
        Ok(pb::TransactionStatus::Confirmed) => ("Confirmed", "ok", false),
        Ok(pb::TransactionStatus::Reverted) => ("Reverted", "bad", false),
        Ok(pb::TransactionStatus::Failed) => ("Failed", "bad", false),
        Ok(pb::TransactionStatus::Dropped) => ("Dropped", "muted", false),
        Ok(pb::TransactionStatus::FeeCapped) => ("Fee capped", "warn", true),
        _ => ("Unknown", "muted", false),
    }
}

/// A transaction kind's name.
pub(crate) fn kind(value: i32) -> &'static str {
    match pb::TransactionKind::try_from(value) {
        Ok(pb::TransactionKind::Send) => "Send",
        Ok(pb::TransactionKind::Approve) => "Approve",
        Ok(pb::TransactionKind::ContractCall) => "Contract call",
        Ok(pb::TransactionKind::Swap) => "Swap",
        Ok(pb::TransactionKind::NonceFill) => "Nonce fill",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_shift_the_decimal_point() {
        assert_eq!(units("1500000000000000000", 18), "1.5");
        assert_eq!(units("1", 18), "0.000000000000000001");
        assert_eq!(units("0", 9), "0");
        assert_eq!(units("120", 0), "120");
        assert_eq!(units("2000000", 6), "2");
        assert_eq!(units("n/a", 6), "n/a");
    }

    #[test]
    fn amounts_show_units_and_keep_the_base_units() {
        let a = amount("1000000000000000", Some((18, "ETH")), None);
        assert_eq!(
            (a.shown.as_str(), a.raw.as_str()),
            ("0.001 ETH", "1000000000000000 base units")
        );
        assert_eq!(
            amount("1500000", Some((6, "USDC")), Some("0xA0b8")).shown,
            "1.5 USDC"
        );
        assert_eq!(
            amount("5000", None, Some("0xA0b8")).shown,
            "5000 (base units of 0xA0b8)"
        );
        assert_eq!(
            of_asset("2500", "native", Some(3), Some("SOL")).shown,
            "2.5 SOL"
        );
        assert_eq!(of_asset("7", "native", None, None).shown, "7");
    }

    #[test]
    fn limits_read_in_units() {
        let mut l = pb::SpendLimit {
            chain: "anvil".to_owned(),
            asset: "native".to_owned(),
            max_per_transaction: Some("100000000000000000".to_owned()),
            daily_budget: Some("5000000000000000000".to_owned()),
            left: Some("3000000000000000000".to_owned()),
            decimals: Some(18),
            symbol: Some("ETH".to_owned()),
            ..Default::default()
        };
        assert_eq!(
            limit(&l),
            "anvil native: at most 0.1 ETH a write; 24 h: 3 ETH of 5 ETH left"
        );
        l.decimals = None;
        assert!(limit(&l).contains("at most 100000000000000000 a write"));
    }
}
