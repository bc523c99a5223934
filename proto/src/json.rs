//! JSON to and from protobuf `Value`s and `Struct`s, shared by the edge and the core: a
//! contract call's arguments, and an aggregator's raw quote.

use prost_types::{ListValue, Struct, Value, value::Kind};

/// How integers cross into protobuf, whose only number is a double.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integers {
    /// As their decimal text, so a uint256 argument keeps every digit.
    AsText,
    /// As numbers while a double holds them exactly (up to 2^53), as text beyond: a raw
    /// upstream answer keeps its shape.
    AsNumbers,
}

/// The largest integer every double below it holds exactly.
const EXACT_IN_DOUBLE: u64 = 1 << 53;

/// JSON to a protobuf `Value`.
pub fn to_value(v: serde_json::Value, integers: Integers) -> Value {
    let kind = match v {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(b),
        serde_json::Value::Number(n) if n.is_u64() || n.is_i64() => {
            let exact = n
                .as_i64()
                .is_some_and(|i| i.unsigned_abs() <= EXACT_IN_DOUBLE);
            match (integers, n.as_f64()) {
                (Integers::AsNumbers, Some(f)) if exact => Kind::NumberValue(f),
                _ => Kind::StringValue(n.to_string()),
            }
        }
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        serde_json::Value::String(s) => Kind::StringValue(s),
        serde_json::Value::Array(a) => Kind::ListValue(ListValue {
            values: a.into_iter().map(|v| to_value(v, integers)).collect(),
        }),
        serde_json::Value::Object(o) => Kind::StructValue(to_struct(o, integers)),
    };
    Value { kind: Some(kind) }
}

/// A JSON object to a protobuf `Struct`.
pub fn to_struct(o: serde_json::Map<String, serde_json::Value>, integers: Integers) -> Struct {
    Struct {
        fields: o
            .into_iter()
            .map(|(k, v)| (k, to_value(v, integers)))
            .collect(),
    }
}

/// A protobuf `Value` to JSON. A whole number a double holds exactly comes back as an
/// integer, as it went in.
pub fn from_value(v: Value) -> serde_json::Value {
    match v.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => b.into(),
        Some(Kind::NumberValue(n)) if n.fract() == 0.0 && n.abs() <= EXACT_IN_DOUBLE as f64 => {
            // Exact: a whole number within 2^53.
            serde_json::Value::from(n as i64)
        }
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(n)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Some(Kind::StringValue(s)) => s.into(),
        Some(Kind::ListValue(l)) => l.values.into_iter().map(from_value).collect(),
        Some(Kind::StructValue(s)) => from_struct(s),
    }
}

/// A protobuf `Struct` to a JSON object.
pub fn from_struct(s: Struct) -> serde_json::Value {
    serde_json::Value::Object(
        s.fields
            .into_iter()
            .map(|(k, v)| (k, from_value(v)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_integers_keep_their_digits() {
        let v: serde_json::Value =
            serde_json::from_str("[18446744073709551615, -5, 1.5]").expect("json");
        let serde_json::Value::Array(items) = v else {
            panic!("array")
        };
        let back: Vec<_> = items
            .into_iter()
            .map(|i| from_value(to_value(i, Integers::AsText)))
            .collect();
        assert_eq!(
            back,
            vec![
                serde_json::json!("18446744073709551615"),
                serde_json::json!("-5"),
                serde_json::json!(1.5)
            ]
        );
    }

    #[test]
    fn a_raw_answer_keeps_its_shape() {
        let raw = serde_json::json!({
            "dstAmount": "123", "slippageBps": 50, "timeTaken": 0.25,
            "big": 18446744073709551615u64, "routes": [{"percent": 100}], "none": null,
        });
        let serde_json::Value::Object(o) = raw else {
            panic!("object")
        };
        let back = from_struct(to_struct(o, Integers::AsNumbers));
        assert_eq!(
            back,
            serde_json::json!({
                "dstAmount": "123", "slippageBps": 50, "timeTaken": 0.25,
                "big": "18446744073709551615", "routes": [{"percent": 100}], "none": null,
            })
        );
    }
}
