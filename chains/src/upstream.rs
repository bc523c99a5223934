//! Calls to the external HTTP APIs the service depends on (the swap aggregators, the wallet
//! provider): timeouts, retries of the calls that may be repeated, and the classification of
//! every failure into an `UpstreamError`.
//!
//! **Invariant:** no error message or log line written here holds a URL, a header or a
//! request body: credentials travel in headers, and an operator may have put one in the
//! base URL. Failures name the service and the endpoint (`quote`, `swap`, `rpc`), nothing
//! more.

use std::time::{Duration, SystemTime};

use backon::{ExponentialBuilder, Retryable as _};
use reqwest::{RequestBuilder, StatusCode, header::RETRY_AFTER};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why a call to an external API gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// The service cannot be used as configured: `option` is missing or was refused.
    #[error("{option} {problem}")]
    Unavailable {
        /// The configuration option to set or fix, e.g. `trade.evm.api_key`.
        option: &'static str,
        /// What is wrong with it, e.g. `is not set`.
        problem: String,
    },
    /// The service refused the request (a 4xx answer): asking again will not help.
    #[error("{service} refused: {message}")]
    Rejected {
        /// Which service: `1inch`, `Jupiter`, `Privy`.
        service: &'static str,
        /// The HTTP status of its answer.
        status: u16,
        /// Its machine-readable code, where it gives one (Jupiter's `errorCode`, e.g.
        /// `TOKEN_NOT_TRADABLE`).
        code: Option<String>,
        /// Its own message, shortened to 300 characters.
        message: String,
    },
    /// The service failed or did not answer in time, or its answer could not be read; the
    /// message says retrying may help.
    #[error("{message}")]
    Failed {
        /// Which service, what went wrong, and that retrying may help.
        message: String,
    },
}

/// How calls to an external API are timed and retried. The defaults keep a quote with all
/// its retries well inside the service's 30-second request timeout.
#[derive(Debug, Clone)]
pub struct HttpPolicy {
    /// Longest wait for a TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Longest one attempt may take, from sending the request to the last byte of the answer.
    pub timeout: Duration,
    /// Attempts of a read-only call (quote, spender, allowance), the first included.
    pub attempts: usize,
    /// The first backoff; it doubles per retry, with jitter, up to `max_backoff`.
    pub min_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
    /// The longest `Retry-After` honoured. An aggregator that asks for more gets no retry:
    /// the caller's request would time out while waiting, so it fails at once saying so.
    pub max_retry_after: Duration,
}

impl Default for HttpPolicy {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(3),
            timeout: Duration::from_secs(8),
            attempts: 3,
            min_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(2),
            max_retry_after: Duration::from_secs(5),
        }
    }
}

/// Reads an error body into the service's code (if it has codes) and message.
pub(crate) type ErrorReader = fn(&Value) -> Option<(Option<String>, String)>;

/// One external API's HTTP client.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    /// The service's name, for messages: `1inch`, `Jupiter`, `Privy`.
    pub(crate) name: &'static str,
    /// The option holding its credentials, named when they are refused.
    pub(crate) key_option: &'static str,
    http: reqwest::Client,
    policy: HttpPolicy,
    /// Reads an error body, if it has the aggregator's shape.
    read_error: ErrorReader,
    /// Whether a 403 is a refusal of the request (with a message worth passing on) rather
    /// than of the credentials.
    forbidden_refuses_request: bool,
}

/// Why one attempt failed.
#[derive(Debug)]
enum Failure {
    /// No connection was made: the request never left.
    Unreached,
    /// The attempt took longer than the policy allows (the request may have arrived).
    TimedOut,
    /// Sent, but the connection broke before a whole answer came back.
    Broken,
    /// An answer with a status other than 2xx.
    Status {
        status: StatusCode,
        body: Option<Value>,
        retry_after: Option<Duration>,
    },
    /// A 2xx answer the service cannot read.
    Unreadable,
}

impl Failure {
    /// Whether another attempt of a read-only call may succeed.
    fn is_transient(&self) -> bool {
        match self {
            Self::Unreached | Self::TimedOut | Self::Broken => true,
            Self::Status { status, .. } => {
                *status == StatusCode::TOO_MANY_REQUESTS
                    || *status == StatusCode::REQUEST_TIMEOUT
                    || status.is_server_error()
            }
            Self::Unreadable => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Reads `Retry-After`: delay-seconds or an HTTP date (RFC 9110 section 10.2.3).
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// Redirects followed, within one origin: credentials travel in headers (`x-api-key`,
/// `Authorization`, `privy-app-id`) that reqwest would carry to any host, so a redirect to
/// another scheme, host or port is not followed (its 3xx answer is a failure) and the
/// credentials never leave for a host the operator did not name.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first();
        let same = first.is_some_and(|first| {
            first.scheme() == attempt.url().scheme()
                && first.host_str() == attempt.url().host_str()
                && first.port_or_known_default() == attempt.url().port_or_known_default()
        });
        if same && attempt.previous().len() < MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// Redirects followed in a row at most.
const MAX_REDIRECTS: usize = 5;

/// Refuses `url` as the base URL of an external API (`option`) unless it is https, or http
/// on a loopback host (a local fake or a sidecar): over plain http the credentials would
/// cross the network in clear.
pub fn check_base_url(option: &str, url: &url::Url) -> anyhow::Result<()> {
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" if url.has_host() => Ok(()),
        "http" if loopback => Ok(()),
        "http" => anyhow::bail!(
            "{option} must be an https URL: plain http is allowed on loopback only (the \
             credentials would cross the network in clear)"
        ),
        _ => anyhow::bail!("{option} must be an https URL"),
    }
}

/// The longest upstream message passed on to a caller.
const MAX_MESSAGE_CHARS: usize = 300;

impl Upstream {
    /// A client with `policy`'s timeouts.
    pub(crate) fn new(
        name: &'static str,
        key_option: &'static str,
        policy: HttpPolicy,
        read_error: ErrorReader,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(policy.connect_timeout)
            .timeout(policy.timeout)
            .user_agent(concat!("walletops/", env!("CARGO_PKG_VERSION")))
            .redirect(same_origin_redirects())
            .build()?;
        Ok(Self {
            name,
            key_option,
            http,
            policy,
            read_error,
            forbidden_refuses_request: false,
        })
    }

    /// The same client, taking a 403 as a refusal of the request (a policy's, say) whose
    /// message is passed on, not as a refusal of the credentials.
    pub(crate) fn forbidden_refuses_request(mut self) -> Self {
        self.forbidden_refuses_request = true;
        self
    }

    /// The HTTP client, to build requests with.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A read-only call (`endpoint` names it in messages): retried with exponential backoff
    /// and jitter on 408, 429, 5xx, timeouts and broken connections, waiting as long as a
    /// `Retry-After` asks when it asks for no more than `max_retry_after`. Reads cannot move
    /// funds, so a duplicate is harmless.
    pub(crate) async fn read<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        request: impl Fn() -> RequestBuilder,
    ) -> Result<(T, Value), UpstreamError> {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.policy.min_backoff)
            .with_max_delay(self.policy.max_backoff)
            .with_max_times(self.policy.attempts.saturating_sub(1))
            .with_jitter();
        let max_retry_after = self.policy.max_retry_after;
        (|| self.attempt(request()))
            .retry(backoff)
            .when(Failure::is_transient)
            .adjust(|failure, next| match (failure.retry_after(), next) {
                (_, None) => None,
                (Some(asked), Some(_)) if asked > max_retry_after => None,
                (Some(asked), Some(_)) => Some(asked),
                (None, next) => next,
            })
            .notify(|failure, wait| {
                tracing::warn!(
                    upstream = self.name,
                    endpoint,
                    failure = %self.describe(failure),
                    wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    "upstream call failed; retrying"
                );
            })
            .await
            .map_err(|failure| self.classify(endpoint, failure))
    }

    /// A call that builds a transaction (`endpoint` names it). Once the aggregator has
    /// answered, even with a 5xx, it is not called again: a build runs a simulation and can
    /// take seconds, a second one would push the caller past its request timeout, and the
    /// caller (who holds an idempotency key for the swap) can retry the whole swap instead.
    /// A build that could not even connect is tried once more: that request never left, so
    /// the aggregator spent nothing on it and the retry costs at most one connect timeout.
    /// A timeout after the request was sent is not retried, for the same reason as a 5xx.
    pub(crate) async fn build<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        request: impl Fn() -> RequestBuilder,
    ) -> Result<(T, Value), UpstreamError> {
        let first = self.attempt(request()).await;
        let outcome = match first {
            Err(Failure::Unreached) => {
                tracing::warn!(
                    upstream = self.name,
                    endpoint,
                    "upstream unreachable; trying once more"
                );
                self.attempt(request()).await
            }
            other => other,
        };
        outcome.map_err(|failure| self.classify(endpoint, failure))
    }

    /// One request and its answer, parsed as `T` and kept as sent.
    async fn attempt<T: DeserializeOwned>(
        &self,
        request: RequestBuilder,
    ) -> Result<(T, Value), Failure> {
        let response = request.send().await.map_err(|e| transport_failure(&e))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let bytes = response.bytes().await.map_err(|e| transport_failure(&e))?;
        if !status.is_success() {
            return Err(Failure::Status {
                status,
                body: serde_json::from_slice(&bytes).ok(),
                retry_after,
            });
        }
        let raw: Value = serde_json::from_slice(&bytes).map_err(|_| Failure::Unreadable)?;
        let typed = T::deserialize(&raw).map_err(|_| Failure::Unreadable)?;
        Ok((typed, raw))
    }

    /// The error for a 2xx answer that parsed but makes no sense (`what` says why; it must
    /// not quote the answer).
    pub(crate) fn nonsense(&self, endpoint: &'static str, what: &str) -> UpstreamError {
        tracing::warn!(
            upstream = self.name,
            endpoint,
            what,
            "upstream answer refused"
        );
        UpstreamError::Failed {
            message: format!("{} {what}; retrying may help", self.name),
        }
    }

    /// A failure's short description for the log (no URL, no body).
    fn describe(&self, failure: &Failure) -> String {
        match failure {
            Failure::Unreached => "no connection".to_owned(),
            Failure::TimedOut => format!("no answer within {:?}", self.policy.timeout),
            Failure::Broken => "connection broken".to_owned(),
            Failure::Status { status, .. } => format!("HTTP {}", status.as_u16()),
            Failure::Unreadable => "unreadable answer".to_owned(),
        }
    }

    /// The error of a final failure.
    fn classify(&self, endpoint: &'static str, failure: Failure) -> UpstreamError {
        let name = self.name;
        tracing::warn!(
            upstream = name,
            endpoint,
            failure = %self.describe(&failure),
            "upstream call failed"
        );
        let upstream = |what: String| UpstreamError::Failed {
            message: format!("{name} {what}; retrying may help"),
        };
        match failure {
            Failure::Unreached => upstream("could not be reached".to_owned()),
            Failure::TimedOut => upstream(format!(
                "did not answer within {} s",
                self.policy.timeout.as_secs_f32()
            )),
            Failure::Broken => upstream("broke off its answer".to_owned()),
            Failure::Unreadable => upstream("sent an answer the service cannot read".to_owned()),
            Failure::Status {
                status,
                body,
                retry_after,
            } => match status {
                StatusCode::TOO_MANY_REQUESTS => upstream(match retry_after {
                    Some(wait) => format!(
                        "is rate limiting the service and asks to wait {} s",
                        wait.as_secs()
                    ),
                    None => "is rate limiting the service".to_owned(),
                }),
                StatusCode::FORBIDDEN if self.forbidden_refuses_request => {
                    self.rejected(status, body.as_ref())
                }
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => UpstreamError::Unavailable {
                    option: self.key_option,
                    problem: format!("was refused by {name} (HTTP {})", status.as_u16()),
                },
                status if status.is_client_error() && status != StatusCode::REQUEST_TIMEOUT => {
                    self.rejected(status, body.as_ref())
                }
                status => upstream(format!("failed (HTTP {})", status.as_u16())),
            },
        }
    }
}

impl Upstream {
    /// The refusal a 4xx answer with `body` stands for, in the service's words.
    fn rejected(&self, status: StatusCode, body: Option<&Value>) -> UpstreamError {
        let (code, message) = body
            .and_then(self.read_error)
            .unwrap_or((None, format!("HTTP {}", status.as_u16())));
        UpstreamError::Rejected {
            service: self.name,
            status: status.as_u16(),
            code,
            message: message.chars().take(MAX_MESSAGE_CHARS).collect(),
        }
    }
}

/// Classifies a transport error; its text (which holds the URL) is dropped.
fn transport_failure(err: &reqwest::Error) -> Failure {
    if err.is_connect() {
        Failure::Unreached
    } else if err.is_timeout() {
        Failure::TimedOut
    } else {
        Failure::Broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(parse_retry_after(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        let wait = parse_retry_after(&later).expect("a date");
        assert!(wait > Duration::from_secs(100) && wait <= Duration::from_secs(120));
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn base_urls_are_https_or_loopback_http() {
        let ok = |u: &str| check_base_url("trade.evm.base_url", &u.parse().expect("url"));
        assert!(ok("https://api.1inch.dev").is_ok());
        assert!(ok("http://127.0.0.1:9/1inch").is_ok());
        assert!(ok("http://localhost:8080").is_ok());
        assert!(ok("http://[::1]:8080").is_ok());
        let err = ok("http://aggregator.example.com").expect_err("plain http");
        assert!(err.to_string().contains("trade.evm.base_url"), "{err}");
        assert!(ok("http://10.0.0.5").is_err());
        assert!(ok("ftp://x").is_err());
    }

    /// A server on `listener` that answers every request with `status` and `location`,
    /// noting the `x-api-key` it was sent.
    async fn serve(
        listener: tokio::net::TcpListener,
        status: u16,
        location: Option<String>,
        seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    ) {
        let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
            let (location, seen) = (location.clone(), seen.clone());
            async move {
                seen.lock().expect("seen").push(
                    headers
                        .get("x-api-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned(),
                );
                let mut response = axum::response::Response::new(axum::body::Body::from("{}"));
                *response.status_mut() = StatusCode::from_u16(status).expect("status");
                if let Some(location) = location {
                    response
                        .headers_mut()
                        .insert("location", location.parse().expect("location"));
                }
                response
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
    }

    #[tokio::test]
    async fn credentials_follow_no_redirect_to_another_origin() {
        let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let named = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let (elsewhere_url, named_url) = (
            format!("http://{}/", elsewhere.local_addr().expect("addr")),
            format!("http://{}/", named.local_addr().expect("addr")),
        );
        let (leaked, asked) = (std::sync::Arc::default(), std::sync::Arc::default());
        serve(elsewhere, 200, None, std::sync::Arc::clone(&leaked)).await;
        serve(
            named,
            302,
            Some(elsewhere_url),
            std::sync::Arc::clone(&asked),
        )
        .await;
        let upstream = Upstream::new("1inch", "trade.evm.api_key", HttpPolicy::default(), |_| {
            None
        })
        .expect("client");
        let answer: Result<(Value, Value), _> = upstream
            .read("quote", || {
                upstream
                    .http()
                    .get(&named_url)
                    .header("x-api-key", "SECRET")
            })
            .await;
        assert!(
            answer.is_err(),
            "a redirect elsewhere is a failure: {answer:?}"
        );
        assert_eq!(*asked.lock().expect("asked"), ["SECRET"]);
        assert!(
            leaked.lock().expect("leaked").is_empty(),
            "the key went to another origin"
        );
    }
}
