//! JSON-RPC 2.0 plumbing: the error object with the codes the real node uses, positional
//! parameters, and parsing of the values the real node verifies the same way.

use std::str::FromStr;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use solana_hash::Hash;
use solana_pubkey::Pubkey;
use solana_signature::Signature;

/// A JSON-RPC error object.
#[derive(Debug)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub(crate) fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub(crate) fn parse_error() -> Self {
        Self::new(-32700, "Parse error")
    }

    pub(crate) fn invalid_request() -> Self {
        Self::new(-32600, "Invalid request")
    }

    pub(crate) fn method_not_found() -> Self {
        Self::new(-32601, "Method not found")
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(-32602, message)
    }

    pub(crate) fn internal() -> Self {
        Self::new(-32603, "Internal error")
    }

    pub(crate) fn to_json(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

/// What a method returns.
pub(crate) type RpcResult = Result<Value, RpcError>;

/// Positional parameters; `null` or absent `params` is an empty list, as methods without
/// arguments are sent with `"params": null`.
pub(crate) struct Params(Vec<Value>);

impl Params {
    pub(crate) fn from_request(params: Option<Value>) -> Result<Self, RpcError> {
        match params {
            None | Some(Value::Null) => Ok(Self(Vec::new())),
            Some(Value::Array(values)) => Ok(Self(values)),
            Some(_) => Err(RpcError::invalid_params(
                "Invalid params: expected an array of positional parameters",
            )),
        }
    }

    /// Parameter `index`, which must be present.
    pub(crate) fn required<T: DeserializeOwned>(&self, index: usize) -> Result<T, RpcError> {
        let value = self.0.get(index).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "Invalid params: invalid length {}, expected at least {}",
                self.0.len(),
                index + 1
            ))
        })?;
        serde_json::from_value(value.clone())
            .map_err(|e| RpcError::invalid_params(format!("Invalid params: {e}")))
    }

    /// Parameter `index`; absent or `null` is `None`.
    pub(crate) fn optional<T: DeserializeOwned>(
        &self,
        index: usize,
    ) -> Result<Option<T>, RpcError> {
        match self.0.get(index) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => serde_json::from_value(value.clone())
                .map(Some)
                .map_err(|e| RpcError::invalid_params(format!("Invalid params: {e}"))),
        }
    }

    /// The `minContextSlot` of any config object among the parameters.
    pub(crate) fn min_context_slot(&self) -> Option<u64> {
        self.0
            .iter()
            .filter_map(|value| value.get("minContextSlot"))
            .find_map(Value::as_u64)
    }
}

pub(crate) fn parse_pubkey(value: &str) -> Result<Pubkey, RpcError> {
    Pubkey::from_str(value).map_err(|e| RpcError::invalid_params(format!("Invalid param: {e:?}")))
}

pub(crate) fn parse_signature(value: &str) -> Result<Signature, RpcError> {
    Signature::from_str(value)
        .map_err(|e| RpcError::invalid_params(format!("Invalid param: {e:?}")))
}

pub(crate) fn parse_hash(value: &str) -> Result<Hash, RpcError> {
    Hash::from_str(value).map_err(|e| RpcError::invalid_params(format!("{e:?}")))
}
