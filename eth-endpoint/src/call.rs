//! An `eth_call` as clients write it, reduced to what decides whether the mirror may answer:
//! the target, the calldata and the block. The rule: answer locally only a call whose every field
//! is one the node provably accepts and ignores for a view; anything else (a value, a gas limit,
//! fees, blobs, authorizations, another chain id, a field in a form a node refuses, state
//! overrides, unknown fields) makes the call one to forward, so its answer or its error is the
//! node's own.

use alloy::primitives::{Address, Bytes, B256};
use serde_json::Value;

/// The block an `eth_call` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockTag {
    /// `latest`, or no tag.
    Latest,
    /// A number (a hex quantity, or `{blockNumber}`).
    Number(u64),
    /// `{blockHash}` (EIP-1898), with its `requireCanonical` (false when absent).
    Hash {
        /// The block's hash.
        hash: B256,
        /// Whether the node must refuse a block that is not on its chain.
        require_canonical: bool,
    },
}

/// A call the mirror may answer: the followed contract's view at a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalCall {
    /// The calldata.
    pub data: Bytes,
    /// The block.
    pub block: BlockTag,
}

/// Fields that must be unset (absent or `null`) for a local answer. Set, each can change what
/// the node answers: a gas limit below the intrinsic gas is refused (`gas: "0x0"` too), fees can
/// fail for want of funds and `gasPrice` beside `maxFeePerGas` is refused, blob and
/// authorization lists are refused even when empty, and nodes disagree on what a nonce or a
/// type does to a call.
const UNSET: [&str; 10] = [
    "gas",
    "gasPrice",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
    "maxFeePerBlobGas",
    "blobVersionedHashes",
    "authorizationList",
    "sidecar",
    "nonce",
    "type",
];

/// `params` of an `eth_call` to `contract` on chain `chain_id` that the mirror may answer, or
/// `None` (forward it).
#[must_use]
pub fn local_call(params: &Value, contract: Address, chain_id: u64) -> Option<LocalCall> {
    let params = params.as_array()?;
    // A third parameter is a state override (or a block override): the node's business.
    if params.is_empty() || params.len() > 2 {
        return None;
    }
    let call = params[0].as_object()?;
    if address(call.get("to")?)? != contract {
        return None;
    }
    for (key, value) in call {
        let accepted = match key.as_str() {
            "to" | "data" | "input" => true,
            "from" => value.is_null() || address(value).is_some(),
            // nwaku sends `value: "0x0"`; `"0x00"` or a decimal is no quantity to a node.
            "value" => value.is_null() || value.as_str() == Some("0x0"),
            // A node refuses a call for another chain.
            "chainId" => value.is_null() || value.as_str().and_then(quantity) == Some(chain_id),
            "accessList" => value.is_null() || value.as_array().is_some_and(Vec::is_empty),
            other => UNSET.contains(&other) && value.is_null(),
        };
        if !accepted {
            return None;
        }
    }
    let data = call.get("data").filter(|v| !v.is_null());
    let input = call.get("input").filter(|v| !v.is_null());
    let data: Bytes = match (data, input) {
        // Both set: geth takes equal ones, hardhat refuses even those ("duplicate field
        // `data`"). Nodes differ: the node decides.
        (Some(_), Some(_)) | (None, None) => return None,
        (Some(d), None) | (None, Some(d)) => hex_bytes(d)?,
    };
    let block = match params.get(1) {
        None | Some(Value::Null) => BlockTag::Latest,
        Some(tag) => block_tag(tag)?,
    };
    Some(LocalCall { data, block })
}

/// `0x` and hex digits (either case), or `None`: nodes refuse the forms alloy's parsers also
/// take (no prefix, an odd length).
fn hex_digits(value: &Value) -> Option<&str> {
    let digits = value.as_str()?.strip_prefix("0x")?;
    (digits.len() % 2 == 0 && digits.bytes().all(|b| b.is_ascii_hexdigit())).then_some(digits)
}

fn hex_bytes(value: &Value) -> Option<Bytes> {
    let digits = hex_digits(value)?;
    alloy::primitives::hex::decode(digits).ok().map(Bytes::from)
}

fn address(value: &Value) -> Option<Address> {
    let bytes = hex_bytes(value)?;
    (bytes.len() == 20).then(|| Address::from_slice(&bytes))
}

fn block_hash(value: &Value) -> Option<B256> {
    let bytes = hex_bytes(value)?;
    (bytes.len() == 32).then(|| B256::from_slice(&bytes))
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
                let require_canonical = match o.get("requireCanonical") {
                    None => false,
                    Some(flag) => flag.as_bool()?,
                };
                if extra {
                    return None;
                }
                Some(BlockTag::Hash {
                    hash: block_hash(hash)?,
                    require_canonical,
                })
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

    /// The test chain: hardhat's and ganache's id, 1337 (`0x539`).
    fn local_call_on_chain(params: &Value, contract: Address) -> Option<LocalCall> {
        local_call(params, contract, 0x539)
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
        let call = local_call_on_chain(&nwaku, contract()).unwrap();
        assert_eq!(call.block, BlockTag::Latest);
        assert_eq!(call.data.as_ref(), [0xeb, 0xf0, 0xc7, 0x17]);
        let viem = json!([{"to": C, "data": "0xebf0c717"}, "0x1f"]);
        assert_eq!(
            local_call_on_chain(&viem, contract()).unwrap().block,
            BlockTag::Number(31)
        );
        let hash = format!("0x{}", "ab".repeat(32));
        let eip1898 =
            json!([{"to": C, "data": "0x01"}, {"blockHash": hash, "requireCanonical": true}]);
        assert!(matches!(
            local_call_on_chain(&eip1898, contract()).unwrap().block,
            BlockTag::Hash {
                require_canonical: true,
                ..
            }
        ));
        assert_eq!(
            local_call_on_chain(&json!([{"to": C, "input": "0x01"}]), contract())
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
            json!([{"to": C, "data": "0x01", "input": "0x01"}]),
            json!([{"to": C, "data": "0x01", "stateDiff": {}}]),
            json!([{"to": C, "data": "0x01", "accessList": [{"address": C, "storageKeys": []}]}]),
            json!([{"to": C}]),
            json!({"to": C, "data": "0x01"}),
            // Refused by a node, so never answered here (issue 38's code reading of geth):
            json!([{"to": C, "data": "0xebf0c717", "gas": "0x0"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "chainId": "0x1"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "chainId": "0x0539"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "blobVersionedHashes": []}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "authorizationList": []}, "latest"]),
            json!([{"to": &C[2..], "data": "0xebf0c717"}, "latest"]),
            json!([{"to": C, "data": "ebf0c717"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c71"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "from": "0x00"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "value": "0x00"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "value": "0"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "gasPrice": "0x0", "maxFeePerGas": "0x0"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "gasPrice": "0x0"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "nonce": "0x0"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717", "type": "0x2"}, "latest"]),
            json!([{"to": C, "data": "0xebf0c717"}, {"blockHash": "ab".repeat(32)}]),
            json!([{"to": C, "data": "0xebf0c717"}, {"blockHash": format!("0x{}", "ab".repeat(31))}]),
            json!([{"to": C, "data": "0xebf0c717"}, {"blockHash": format!("0x{}", "ab".repeat(32)), "requireCanonical": "true"}]),
        ] {
            assert_eq!(local_call_on_chain(&params, contract()), None, "{params}");
        }
    }
}
