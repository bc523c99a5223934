//! Calldata for `POST /contracts/send` from a human-readable function signature and JSON
//! arguments, encoded with alloy's dynamic ABI.

use alloy::{
    dyn_abi::{DynSolType, DynSolValue, JsonAbiExt, Specifier},
    json_abi::Function,
    primitives::Bytes,
};
use prost_types::value::Kind;

/// The function that `signature` (e.g. `transfer(address,uint256)`) names. alloy writes
/// short type names out (`uint` → `uint256`), so the selector is the canonical one.
pub fn parse(signature: &str) -> Result<Function, String> {
    Function::parse(signature)
        .map_err(|e| format!("not a function signature like transfer(address,uint256): {e}"))
}

/// Encodes a call of `function` with `args`.
pub fn encode(function: &Function, args: &[prost_types::Value]) -> Result<Bytes, String> {
    if args.len() != function.inputs.len() {
        return Err(format!(
            "{} takes {} arguments, got {}",
            function.name,
            function.inputs.len(),
            args.len()
        ));
    }
    let mut values = Vec::with_capacity(args.len());
    for (i, (param, arg)) in function.inputs.iter().zip(args).enumerate() {
        let ty: DynSolType = param
            .resolve()
            .map_err(|e| format!("argument {i}: type {}: {e}", param.ty))?;
        values.push(value(&ty, arg).map_err(|e| format!("argument {i}: {e}"))?);
    }
    function
        .abi_encode_input(&values)
        .map(Bytes::from)
        .map_err(|e| format!("encoding: {e}"))
}

/// The ABI value of `arg` as type `ty`. Lists are taken item by item with the item types
/// (never joined into text for alloy to split again, which would cut a string item at its
/// commas), strings are taken as given, addresses and bytes must be 0x-prefixed hex, and
/// other scalars go through alloy's coercion (`true`, `123`, `1.5 ether`). A string for an array or tuple is read as alloy's
/// text form, `[1,2]`.
fn value(ty: &DynSolType, arg: &prost_types::Value) -> Result<DynSolValue, String> {
    let items = |types: &mut dyn Iterator<Item = &DynSolType>, list: &[prost_types::Value]| {
        types
            .zip(list)
            .enumerate()
            .map(|(i, (ty, v))| value(ty, v).map_err(|e| format!("item {i}: {e}")))
            .collect::<Result<Vec<_>, _>>()
    };
    let exactly = |n: usize, list: &[prost_types::Value]| {
        if list.len() == n {
            Ok(())
        } else {
            Err(format!("a {ty} takes {n} items, got {}", list.len()))
        }
    };
    match (ty, &arg.kind) {
        (DynSolType::String, Some(Kind::StringValue(s))) => Ok(DynSolValue::String(s.clone())),
        (DynSolType::Array(item), Some(Kind::ListValue(l))) => Ok(DynSolValue::Array(items(
            &mut std::iter::repeat(item.as_ref()),
            &l.values,
        )?)),
        (DynSolType::FixedArray(item, n), Some(Kind::ListValue(l))) => {
            exactly(*n, &l.values)?;
            Ok(DynSolValue::FixedArray(items(
                &mut std::iter::repeat(item.as_ref()),
                &l.values,
            )?))
        }
        (DynSolType::Tuple(types), Some(Kind::ListValue(l))) => {
            exactly(types.len(), &l.values)?;
            Ok(DynSolValue::Tuple(items(&mut types.iter(), &l.values)?))
        }
        (_, Some(Kind::ListValue(_))) => Err(format!("a list is not a {ty}")),
        // alloy reads these as hex with or without `0x`: a number (`1234`) or a prefix-less
        // address would be taken as hex silently, so the prefix is required.
        (
            DynSolType::Address
            | DynSolType::Bytes
            | DynSolType::FixedBytes(_)
            | DynSolType::Function,
            kind,
        ) => match kind {
            Some(Kind::StringValue(s)) if s.starts_with("0x") => {
                ty.coerce_str(s).map_err(|e| format!("not a {ty}: {e}"))
            }
            _ => Err(format!("a {ty} is written as a 0x-prefixed hex string")),
        },
        _ => ty
            .coerce_str(&scalar_text(arg)?)
            .map_err(|e| format!("not a {ty}: {e}")),
    }
}

/// A scalar argument in the text form alloy's coercion reads.
fn scalar_text(v: &prost_types::Value) -> Result<String, String> {
    match &v.kind {
        Some(Kind::StringValue(s)) => Ok(s.clone()),
        Some(Kind::BoolValue(b)) => Ok(b.to_string()),
        Some(Kind::NumberValue(n)) if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 => {
            Ok(format!("{n:.0}"))
        }
        Some(Kind::NumberValue(_)) => {
            Err("numbers must be integers (pass large ones as strings)".to_owned())
        }
        Some(Kind::ListValue(_)) => Err("a list is not a scalar".to_owned()),
        Some(Kind::StructValue(_)) => {
            Err("objects are not ABI values; use a list for a tuple".to_owned())
        }
        Some(Kind::NullValue(_)) | None => Err("null is not an ABI value".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> prost_types::Value {
        prost_types::Value {
            kind: Some(Kind::StringValue(v.to_owned())),
        }
    }

    /// Parses `signature` and encodes `args`, as `/contracts/send` does.
    fn call(signature: &str, args: &[prost_types::Value]) -> Result<Bytes, String> {
        encode(&parse(signature)?, args)
    }

    #[test]
    fn encodes_like_the_static_abi() {
        let data = call(
            "transfer(address,uint256)",
            &[s("0x1111111111111111111111111111111111111111"), s("1000")],
        )
        .expect("encodes");
        let expected = walletops_chains::evm::erc20_transfer(
            "0x1111111111111111111111111111111111111111"
                .parse()
                .expect("address"),
            alloy::primitives::U256::from(1000),
        );
        assert_eq!(data, expected);
        assert!(call("transfer(address,uint256)", &[s("0x11")]).is_err());
        assert!(call("transfer(address,uint256)", &[s("nope"), s("1")]).is_err());
        assert!(call("not a signature", &[]).is_err());
    }

    #[test]
    fn short_type_names_call_the_canonical_function() {
        let args = [s("0x1111111111111111111111111111111111111111"), s("1000")];
        let canonical = call("transfer(address,uint256)", &args).expect("encodes");
        for written in [
            "transfer(address,uint)",
            "function transfer(address to, uint amount) external returns (bool)",
        ] {
            assert_eq!(call(written, &args).expect(written), canonical, "{written}");
        }
        assert_eq!(&canonical[..4], &[0xa9, 0x05, 0x9c, 0xbb]);
        // Inside tuples and arrays too.
        let function = parse("f((uint,int8)[],int)").expect("parses");
        assert_eq!(function.signature(), "f((uint256,int8)[],int256)");
    }

    fn n(v: f64) -> prost_types::Value {
        prost_types::Value {
            kind: Some(Kind::NumberValue(v)),
        }
    }

    #[test]
    fn addresses_and_bytes_need_the_0x_prefix() {
        let bare = call(
            "f(address)",
            &[s("1111111111111111111111111111111111111111")],
        )
        .expect_err("an address without 0x");
        assert!(bare.contains("0x-prefixed"), "{bare}");
        for (signature, arg) in [
            ("f(bytes2)", n(1234.0)),
            ("f(bytes2)", s("1234")),
            ("f(bytes)", s("1234")),
            ("f(bytes2[])", list(vec![n(1234.0)])),
        ] {
            assert!(call(signature, &[arg]).is_err(), "{signature}");
        }
        assert!(call("f(bytes2)", &[s("0x1234")]).is_ok());
        assert!(call("f(bytes)", &[s("0x")]).is_ok());
        assert!(call("f(uint16)", &[n(1234.0)]).is_ok());
    }

    fn list(items: Vec<prost_types::Value>) -> prost_types::Value {
        prost_types::Value {
            kind: Some(Kind::ListValue(prost_types::ListValue { values: items })),
        }
    }

    #[test]
    fn list_items_are_taken_whole_with_their_item_types() {
        let function = Function::parse("f(string[],(address,uint256),uint8[2])").expect("sig");
        let data = call(
            &function.signature(),
            &[
                list(vec![s("a,b"), s("\"quoted\""), s("")]),
                list(vec![
                    s("0x1111111111111111111111111111111111111111"),
                    s("7"),
                ]),
                list(vec![s("1"), s("0x02")]),
            ],
        )
        .expect("encodes");
        let expected = function
            .abi_encode_input(&[
                DynSolValue::Array(vec![
                    DynSolValue::String("a,b".to_owned()),
                    DynSolValue::String("\"quoted\"".to_owned()),
                    DynSolValue::String(String::new()),
                ]),
                DynSolValue::Tuple(vec![
                    DynSolValue::Address(
                        "0x1111111111111111111111111111111111111111"
                            .parse()
                            .expect("address"),
                    ),
                    DynSolValue::Uint(alloy::primitives::U256::from(7), 256),
                ]),
                DynSolValue::FixedArray(vec![
                    DynSolValue::Uint(alloy::primitives::U256::from(1), 8),
                    DynSolValue::Uint(alloy::primitives::U256::from(2), 8),
                ]),
            ])
            .expect("encodes");
        assert_eq!(data, Bytes::from(expected));
        // The text form of a list still reads, and the shapes are checked.
        assert!(call("g(uint8[])", &[s("[1,2]")]).is_ok());
        let short = call("g(uint8[2])", &[list(vec![s("1")])]).expect_err("one item short");
        assert!(short.contains("takes 2 items"), "{short}");
        let nested = call("g(uint8[])", &[list(vec![s("1"), s("x")])]).expect_err("bad item");
        assert!(nested.contains("argument 0: item 1"), "{nested}");
        assert!(call("g(uint256)", &[list(vec![s("1")])]).is_err());
    }
}
