//! The gRPC core as a caller uses it: requests carrying an API key, an idempotency key or the
//! admin token, the contract code of an error, and grpcurl as a newcomer types it.

use tokio::process::Command;
use tonic::metadata::MetadataValue;

use crate::{ADMIN_TOKEN, paths::grpcurl_bin};

/// Adds `x-api-key: key` to a gRPC request.
pub fn with_key<T>(message: T, key: &str) -> anyhow::Result<tonic::Request<T>> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("x-api-key", MetadataValue::try_from(key)?);
    Ok(req)
}

/// A chain write: `message` with `x-api-key: key` and `idempotency-key: idempotency_key`.
pub fn write_request<T>(
    message: T,
    key: &str,
    idempotency_key: &str,
) -> anyhow::Result<tonic::Request<T>> {
    let mut req = with_key(message, key)?;
    req.metadata_mut()
        .insert("idempotency-key", MetadataValue::try_from(idempotency_key)?);
    Ok(req)
}

/// `message` as a gRPC request carrying the test services' admin token.
pub fn as_admin<T>(message: T) -> anyhow::Result<tonic::Request<T>> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("x-admin-token", MetadataValue::try_from(ADMIN_TOKEN)?);
    Ok(req)
}

/// The contract code (`ErrorInfo.reason`) of a gRPC status, checking its domain.
pub fn reason(status: &tonic::Status) -> Option<String> {
    use tonic_types::StatusExt;
    let details = status.get_error_details();
    let info = details.error_info()?;
    (info.domain == walletops_proto::ERROR_DOMAIN).then(|| info.reason.clone())
}

/// Runs grpcurl with `args`; its standard output, when it succeeds.
pub async fn grpcurl<I, S>(args: I) -> anyhow::Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = Command::new(grpcurl_bin()?).args(args).output().await?;
    anyhow::ensure!(
        out.status.success(),
        "grpcurl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
