//! Request extraction that answers in the contract's error body: malformed JSON, a wrong
//! type or an unknown field in a body, and a bad query value are `INVALID_INPUT` naming the
//! field, never the framework's plain-text rejection.

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Request},
    http::request::Parts,
};
use serde::de::DeserializeOwned;

use crate::error::EdgeError;

/// A JSON body, parsed with the failing field's path in the error.
#[derive(Debug)]
pub(crate) struct EdgeJson<T>(pub T);

impl<S, T> FromRequest<S> for EdgeJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = EdgeError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            return Err(EdgeError::invalid(
                "Content-Type",
                "must be application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| EdgeError::invalid("body", e.body_text()))?;
        // Serde would take an array for a struct, its fields by position.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(EdgeError::invalid("body", "expected a JSON object"));
        }
        let de = &mut serde_json::Deserializer::from_slice(&bytes);
        let parsed = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
            use serde_json::error::Category;
            let path = e.path().to_string();
            let field = match e.inner().classify() {
                // Broken JSON is the body's fault, whichever field it broke in.
                Category::Syntax | Category::Eof | Category::Io => "body".to_owned(),
                Category::Data if path != "." => path,
                Category::Data => "body".to_owned(),
            };
            EdgeError::invalid(&field, e.into_inner())
        })?;
        // One object and nothing after it: `{...}garbage` or two objects are not one body.
        de.end().map_err(|e| EdgeError::invalid("body", e))?;
        Ok(EdgeJson(parsed))
    }
}

/// Whether the request says its body is JSON: `application/json` or `application/*+json`,
/// with any parameters (a charset, say).
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<mime::Mime>().ok())
        .is_some_and(|m| {
            m.type_() == mime::APPLICATION
                && (m.subtype() == mime::JSON || m.suffix() == Some(mime::JSON))
        })
}

/// The query string as name/value pairs, read with typed getters that name the parameter
/// in their errors.
#[derive(Debug, Default)]
pub(crate) struct QueryParams(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = EdgeError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        serde_urlencoded_pairs(query).map(QueryParams)
    }
}

fn serde_urlencoded_pairs(query: &str) -> Result<Vec<(String, String)>, EdgeError> {
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(
        &format!("/?{query}")
            .parse()
            .map_err(|_| EdgeError::invalid("query", "malformed query string"))?,
    )
    .map(|q| q.0)
    .map_err(|e| EdgeError::invalid("query", e.body_text()))
}

impl QueryParams {
    /// The one value of `name`; given twice is an error.
    pub(crate) fn string(&self, name: &str) -> Result<Option<String>, EdgeError> {
        let mut values = self.0.iter().filter(|(k, _)| k == name).map(|(_, v)| v);
        let first = values.next().cloned();
        if values.next().is_some() {
            return Err(EdgeError::invalid(name, "given more than once"));
        }
        Ok(first)
    }

    /// A page's `limit`: a number from 1 to 500; absent or empty: `None` (the core's
    /// default).
    pub(crate) fn limit(&self) -> Result<Option<u32>, EdgeError> {
        match self.string("limit")?.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(n) => n
                .parse::<u32>()
                .ok()
                .filter(|n| *n >= 1)
                .map(Some)
                .ok_or_else(|| EdgeError::invalid("limit", "must be a number from 1 to 500")),
        }
    }

    /// A boolean: `true` or `false` (also `1` or `0`); empty means absent.
    pub(crate) fn boolean(&self, name: &str) -> Result<Option<bool>, EdgeError> {
        match self.string(name)?.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("true") || v == "1" => Ok(Some(true)),
            Some(v) if v.eq_ignore_ascii_case("false") || v == "0" => Ok(Some(false)),
            Some(v) => Err(EdgeError::invalid(
                name,
                format!("must be true or false, got {v:?}"),
            )),
        }
    }

    /// A comma-separated list; an empty value is an empty list. Entries are passed on as
    /// written (`a,,b` keeps its empty one, `a, b` its blank), so the core refuses a bad one
    /// by its index as it would over gRPC.
    pub(crate) fn list(&self, name: &str) -> Result<Vec<String>, EdgeError> {
        Ok(self
            .string(name)?
            .filter(|v| !v.is_empty())
            .map(|v| v.split(',').map(str::to_owned).collect())
            .unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(q: &str) -> QueryParams {
        QueryParams(serde_urlencoded_pairs(q).expect("pairs"))
    }

    #[test]
    fn only_json_content_types_pass() {
        let with = |v: &str| {
            let mut h = axum::http::HeaderMap::new();
            h.insert(axum::http::header::CONTENT_TYPE, v.parse().expect("value"));
            is_json(&h)
        };
        assert!(with("application/json"));
        assert!(with("Application/JSON; charset=utf-8"));
        assert!(with("application/merge-patch+json"));
        assert!(!with("text/plain"));
        assert!(!with("application/x-www-form-urlencoded"));
        assert!(!with("application/jsonx"));
        assert!(!with("+json"));
        assert!(!is_json(&axum::http::HeaderMap::new()));
    }

    #[test]
    fn booleans_name_their_parameter() {
        let q = params("defaultOnly=true&automationOnly=maybe&fresh=0");
        assert_eq!(q.boolean("defaultOnly").expect("ok"), Some(true));
        assert_eq!(q.boolean("fresh").expect("ok"), Some(false));
        assert_eq!(q.boolean("absent").expect("ok"), None);
        match q.boolean("automationOnly") {
            Err(EdgeError::Unreadable { field, .. }) => assert_eq!(field, "automationOnly"),
            other => panic!("{other:?}"),
        }
        assert!(params("chain=a&chain=b").string("chain").is_err());
        assert_eq!(
            params("tokens=a,%20b,,c").list("tokens").expect("list"),
            vec!["a", " b", "", "c"]
        );
        assert!(params("tokens=").list("tokens").expect("list").is_empty());
        assert!(params("chain=x").list("tokens").expect("list").is_empty());
    }
}
