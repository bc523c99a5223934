//! A service's Prometheus metrics, read as plain sums (counters, gauges, and histograms'
//! `_count` and `_sum` series).

/// The metrics text of the service whose metrics listener is `metrics_url`.
pub async fn scrape_text(metrics_url: &str) -> anyhow::Result<String> {
    Ok(crate::http::get(format!("{metrics_url}/metrics"))
        .await?
        .error_for_status()?
        .text()
        .await?)
}

/// The sum of the samples of series `name` in metrics text `text` (any labels), or of those
/// whose labels include `label` (written as in the text: `followed="full"`).
pub fn sum(text: &str, name: &str, label: Option<&str>) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let labels = series.strip_prefix(name)?;
            let named = labels.is_empty() || labels.starts_with('{');
            if !named || label.is_some_and(|l| !labels.contains(l)) {
                return None;
            }
            value.parse::<f64>().ok()
        })
        .sum()
}

/// The monitor's counters in `text`: sweeps made, seconds spent sweeping, records swept, and
/// of them those followed with calls of their own.
pub fn monitor_sweeps(text: &str) -> [f64; 4] {
    [
        sum(text, "walletops_monitor_sweep_duration_seconds_count", None),
        sum(text, "walletops_monitor_sweep_duration_seconds_sum", None),
        sum(text, "walletops_monitor_records_swept_total", None),
        sum(
            text,
            "walletops_monitor_records_swept_total",
            Some("followed=\"full\""),
        ),
    ]
}
