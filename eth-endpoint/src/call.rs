//! An `eth_call` as clients write it, reduced to what decides whether the mirror may answer:
//! the target, the calldata and the block. Anything that could change the node's answer (a
//! value, gas or fee fields, state overrides, unknown fields) makes the call one to forward.

use alloy::primitives::{Address, Bytes, B256, U256};
use serde_json::Value;

/// The block an `eth_call` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockTag {
    /// `latest`, or no tag.
    Latest,
    /// A number (a hex quantity, or `{blockNumber}`).
    Number(u64),
    /// `{blockHash}` (EIP-1898).
    Hash(B256),
}

/// A call the mirror may answer: the followed contract's view at a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalCall {
    /// The calldata.
    pub data: Bytes,
    /// The block.
    pub block: BlockTag,
}

/// Fields a call object may carry with any value: they do not change a view's result.
const INERT: [&str; 6] = ["from", "nonce", "chainId", "type", "to", "accessList"];
/// Fields that change the node's answer unless unset (`null`) or zero: a gas limit can run a
/// view out of gas, a fee or a value can fail for want of funds.
const UNSET_OR_ZERO: [&str; 9] = [
    "gas",
    "gasPrice",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
    "maxFeePerBlobGas",
    "value",
    "blobVersionedHashes",
    "authorizationList",
    "sidecar",
];

/// `params` of an `eth_call` to `contract` that the mirror may answer, or `None` (forward it).
#[must_use]
pub fn local_call(params: &Value, contract: Address) -> Option<LocalCall> {
    let params = params.as_array()?;
    // A third parameter is a state override (or a block override): the node's business.
    if params.is_empty() || params.len() > 2 {
        return None;
    }
    let call = params[0].as_object()?;
    let to: Address = call.get("to")?.as_str()?.parse().ok()?;
    if to != contract {
        return None;
    }
    for (key, value) in call {
        let inert = INERT.contains(&key.as_str());
        let unset = UNSET_OR_ZERO.contains(&key.as_str()) && unset_or_zero(value);
        let calldata = key == "data" || key == "input";
        if !(inert || unset || calldata) {
            return None;
        }
        if key == "accessList" && !(value.is_null() || value.as_array().is_some_and(Vec::is_empty))
        {
            return None;
        }
    }
    let data = call.get("data").filter(|v| !v.is_null());
    let input = call.get("input").filter(|v| !v.is_null());
    let data: Bytes = match (data, input) {
        (Some(d), Some(i)) if d != i => return None,
        (Some(d), _) | (None, Some(d)) => d.as_str()?.parse().ok()?,
        (None, None) => return None,
    };
    let block = match params.get(1) {
        None | Some(Value::Null) => BlockTag::Latest,
        Some(tag) => block_tag(tag)?,
    };
    Some(LocalCall { data, block })
}

fn unset_or_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.parse::<U256>().is_ok_and(|n| n.is_zero()),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// A block parameter the mirror understands; `pending`, `safe`, `finalized`, `earliest` are
/// the node's.
fn block_tag(tag: &Value) -> Option<BlockTag> {
    match tag {
        Value::String(s) if s == "latest" => Some(BlockTag::Latest),
        Value::String(s) => quantity(s).map(BlockTag::Number),
        Value::Object(o) => {
            if let Some(hash) = o.get("blockHash") {
                let extra = o
                    .keys()
                    .any(|k| k != "blockHash" && k != "requireCanonical");
                if extra {
                    return None;
                }
                Some(BlockTag::Hash(hash.as_str()?.parse().ok()?))
            } else if let (Some(number), 1) = (o.get("blockNumber"), o.len()) {
                match number.as_str()? {
                    "latest" => Some(BlockTag::Latest),
                    n => quantity(n).map(BlockTag::Number),
                }
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A JSON-RPC quantity: `0x`, hex digits, no leading zero.
fn quantity(s: &str) -> Option<u64> {
    let digits = s.strip_prefix("0x")?;
    if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    const C: &str = "0x5fbdb2315678afecb367f032d93f642f64180aa3";

    fn contract() -> Address {
        C.parse().unwrap()
    }

    #[test]
    fn clients_call_objects_are_recognised() {
        // nwaku's JSON-RPC library: every field, unset ones null, from zero, value 0x0.
        let nwaku = json!([{
            "from": "0x0000000000000000000000000000000000000000", "to": C,
            "gas": null, "gasPrice": null, "maxFeePerGas": null, "maxPriorityFeePerGas": null,
            "value": "0x0", "nonce": null, "chainId": "0x539", "accessList": null,
            "maxFeePerBlobGas": null, "blobVersionedHashes": null, "input": "0xebf0c717"
        }, "latest"]);
        let call = local_call(&nwaku, contract()).unwrap();
        assert_eq!(call.block, BlockTag::Latest);
        assert_eq!(call.data.as_ref(), [0xeb, 0xf0, 0xc7, 0x17]);
        let viem = json!([{"to": C, "data": "0xebf0c717"}, "0x1f"]);
        assert_eq!(
            local_call(&viem, contract()).unwrap().block,
            BlockTag::Number(31)
        );
        let hash = format!("0x{}", "ab".repeat(32));
        let eip1898 =
            json!([{"to": C, "data": "0x01"}, {"blockHash": hash, "requireCanonical": true}]);
        assert!(matches!(
            local_call(&eip1898, contract()).unwrap().block,
            BlockTag::Hash(_)
        ));
        assert_eq!(
            local_call(&json!([{"to": C, "input": "0x01"}]), contract())
                .unwrap()
                .block,
            BlockTag::Latest
        );
    }

    #[test]
    fn anything_that_could_change_the_answer_is_forwarded() {
        let other = "0x0000000000000000000000000000000000000001";
        for params in [
            json!([{"to": other, "data": "0xebf0c717"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "value": "0x1"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "gas": "0x5208"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "gasPrice": "0x1"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717"}, "latest", {}]),
            json!([{"to": C, "data": "0xebf0c717"}, "pending"]),
            json!([{"to": C, "data": "0xebf0c717"}, "safe"]),
            json!([{"to": C, "data": "0xebf0c717"}, "0x01"]),
            json!([{"to": C, "data": "0x01", "input": "0x02"}]),
            json!([{"to": C, "data": "0x01", "stateDiff": {}}]),
            json!([{"to": C, "data": "0x01", "accessList": [{"address": C, "storageKeys": []}]}]),
            json!([{"to": C}]),
            json!({"to": C, "data": "0x01"}),
        ] {
            assert_eq!(local_call(&params, contract()), None, "{params}");
        }
    }
}
