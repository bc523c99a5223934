//! Calldata for `POST /contracts/send` from a human-readable function signature and JSON
//! arguments, encoded with alloy's dynamic ABI.

use alloy::{
    dyn_abi::{DynSolType, JsonAbiExt, Specifier},
    json_abi::Function,
    primitives::Bytes,
};
use prost_types::value::Kind;

/// Encodes a call of `signature` (e.g. `transfer(address,uint256)`) with `args`.
pub fn encode(signature: &str, args: &[prost_types::Value]) -> Result<Bytes, String> {
    let function = Function::parse(signature)
        .map_err(|e| format!("not a function signature like transfer(address,uint256): {e}"))?;
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
        let text = arg_text(arg).map_err(|e| format!("argument {i}: {e}"))?;
        values.push(
            ty.coerce_str(&text)
                .map_err(|e| format!("argument {i} is not a {ty}: {e}"))?,
        );
    }
    function
        .abi_encode_input(&values)
        .map(Bytes::from)
        .map_err(|e| format!("encoding: {e}"))
}

/// An argument in the text form alloy's coercion reads: `true`, `123`, `0xabc`, `[1,2]`.
fn arg_text(v: &prost_types::Value) -> Result<String, String> {
    match &v.kind {
        Some(Kind::StringValue(s)) => Ok(s.clone()),
        Some(Kind::BoolValue(b)) => Ok(b.to_string()),
        Some(Kind::NumberValue(n)) if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 => {
            Ok(format!("{n:.0}"))
        }
        Some(Kind::NumberValue(_)) => {
            Err("numbers must be integers (pass large ones as strings)".to_owned())
        }
        Some(Kind::ListValue(l)) => {
            let items: Result<Vec<String>, String> = l.values.iter().map(arg_text).collect();
            Ok(format!("[{}]", items?.join(",")))
        }
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

    #[test]
    fn encodes_like_the_static_abi() {
        let data = encode(
            "transfer(address,uint256)",
            &[s("0x1111111111111111111111111111111111111111"), s("1000")],
        )
        .expect("encodes");
        let expected = crate::chains::evm::erc20_transfer(
            "0x1111111111111111111111111111111111111111"
                .parse()
                .expect("address"),
            alloy::primitives::U256::from(1000),
        );
        assert_eq!(data, expected);
        assert!(encode("transfer(address,uint256)", &[s("0x11")]).is_err());
        assert!(encode("transfer(address,uint256)", &[s("nope"), s("1")]).is_err());
        assert!(encode("not a signature", &[]).is_err());
    }
}
