//! JSON values to and from protobuf `Value`s: a contract call's arguments, and the
//! aggregator's raw quote.

/// JSON to a protobuf `Value`. Integers travel as their decimal text, so a uint256 argument
/// keeps every digit (a protobuf number is a double).
pub(super) fn to_proto_value(v: serde_json::Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(b),
        serde_json::Value::Number(n) if n.is_u64() || n.is_i64() => {
            Kind::StringValue(n.to_string())
        }
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        serde_json::Value::String(s) => Kind::StringValue(s),
        serde_json::Value::Array(a) => Kind::ListValue(prost_types::ListValue {
            values: a.into_iter().map(to_proto_value).collect(),
        }),
        serde_json::Value::Object(o) => Kind::StructValue(prost_types::Struct {
            fields: o.into_iter().map(|(k, v)| (k, to_proto_value(v))).collect(),
        }),
    };
    prost_types::Value { kind: Some(kind) }
}

/// A protobuf `Value` to JSON.
fn from_proto_value(v: prost_types::Value) -> serde_json::Value {
    use prost_types::value::Kind;
    match v.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => b.into(),
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(n)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Some(Kind::StringValue(s)) => s.into(),
        Some(Kind::ListValue(l)) => l.values.into_iter().map(from_proto_value).collect(),
        Some(Kind::StructValue(s)) => from_proto_struct(s),
    }
}

/// A protobuf `Struct` to a JSON object.
pub(super) fn from_proto_struct(s: prost_types::Struct) -> serde_json::Value {
    serde_json::Value::Object(
        s.fields
            .into_iter()
            .map(|(k, v)| (k, from_proto_value(v)))
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
            .map(|i| from_proto_value(to_proto_value(i)))
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
}
