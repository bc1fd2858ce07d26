// A client no one at Canopy wrote: viem (npm) reads the membership contract's views through
// Canopy's JSON-RPC endpoint and straight from the node, with random arguments (members,
// strangers, unused and out-of-range indices, reverting positions), one by one and as one
// JSON-RPC batch, and compares every result and every error. With --register it then sends a
// registration through Canopy as a locally signed raw transaction (eth_sendRawTransaction) and
// prints its hash; the caller mines it.
//
// node viem-client.js CANOPY_URL NODE_URL CONTRACT IDS_JSON SEED [--register ID RATE_LIMIT]
// Prints one JSON line: {"compared", "batched", "mismatches", "tx"}; exits 1 on a mismatch.
const { createPublicClient, createWalletClient, http, parseAbi } = require("viem");
const { privateKeyToAccount } = require("viem/accounts");

const abi = parseAbi([
  "function root() view returns (uint256)",
  "function nextFreeIndex() view returns (uint32)",
  "function MERKLE_TREE_DEPTH() view returns (uint8)",
  "function deployedBlockNumber() view returns (uint32)",
  "function HISTORY_SIZE() view returns (uint8)",
  "function getRecentRoots() view returns (uint256[5])",
  "function getRootAt(uint8 position) view returns (uint256)",
  "function getMerkleProof(uint40 index) view returns (uint256[20])",
  "function getRateCommitmentsInRangeBoundsInclusive(uint32 startIndex, uint32 endIndex) view returns (uint256[])",
  "function isInMembershipSet(uint256 idCommitment) view returns (bool)",
  "function getMembershipInfo(uint256 idCommitment) view returns (uint32, uint32, uint256)",
  "function register(uint256 idCommitment, uint32 rateLimit)",
]);

// hardhat's second default account (the well-known test mnemonic): it signs here, not the node.
const KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";

const [canopyUrl, nodeUrl, contract, idsJson, seedArg, ...rest] = process.argv.slice(2);
const ids = JSON.parse(idsJson).map((x) => BigInt(x));
let seed = BigInt(seedArg || "1");
function random(n) {
  seed = (seed * 6364136223846793005n + 1442695040888963407n) % 2n ** 64n;
  return Number((seed >> 33n) % BigInt(n));
}

const chain = {
  id: 31337,
  name: "local",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [nodeUrl] } },
};
const client = (url, batch) => createPublicClient({ chain, transport: http(url, { batch }) });

// What a result or an error says, without the URL viem puts in its messages.
const json = (v) => JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x));
async function outcome(promise) {
  try {
    return json({ ok: await promise });
  } catch (e) {
    const cause = e.cause || {};
    return json({ error: e.name, short: e.shortMessage, reason: cause.reason, data: cause.data });
  }
}

async function main() {
  const direct = client(nodeUrl, false);
  const members = Number(await direct.readContract({ address: contract, abi, functionName: "nextFreeIndex" }));
  const any = () => random(members + 3);
  const stranger = BigInt(random(2 ** 30)) + 1n;
  const member = ids.length > 0 ? ids[random(ids.length)] : stranger;
  const [a, b] = [any(), any()];
  const reads = [
    ["root", []],
    ["nextFreeIndex", []],
    ["MERKLE_TREE_DEPTH", []],
    ["deployedBlockNumber", []],
    ["HISTORY_SIZE", []],
    ["getRecentRoots", []],
    ["getRootAt", [random(5)]],
    ["getRootAt", [5 + random(251)]],
    ["getMerkleProof", [BigInt(any())]],
    ["getMerkleProof", [2n ** 20n + BigInt(any())]],
    ["getRateCommitmentsInRangeBoundsInclusive", [Math.min(a, b), Math.max(a, b)]],
    ["getRateCommitmentsInRangeBoundsInclusive", [Math.max(a, b) + 1, Math.min(a, b)]],
    ["isInMembershipSet", [member]],
    ["isInMembershipSet", [stranger]],
    ["getMembershipInfo", [member]],
    ["getMembershipInfo", [stranger]],
  ];
  const read = (c, [functionName, args]) =>
    outcome(c.readContract({ address: contract, abi, functionName, args, blockTag: "latest" }));
  const ours = client(canopyUrl, false);
  const mismatches = [];
  let compared = 0;
  const expected = [];
  for (const r of reads) {
    const [x, y] = [await read(ours, r), await read(direct, r)];
    expected.push(y);
    compared += 1;
    if (x !== y) mismatches.push({ call: r[0], canopy: x, node: y });
  }
  // The same reads as one JSON-RPC batch through Canopy (viem batches concurrent requests).
  const batchClient = client(canopyUrl, { batchSize: reads.length, wait: 20 });
  const together = await Promise.all(reads.map((r) => read(batchClient, r)));
  together.forEach((x, i) => {
    if (x !== expected[i]) mismatches.push({ call: reads[i][0], batch: true, canopy: x, node: expected[i] });
  });
  let tx = null;
  if (rest[0] === "--register") {
    const wallet = createWalletClient({ account: privateKeyToAccount(KEY), chain, transport: http(canopyUrl) });
    tx = await wallet.writeContract({
      address: contract,
      abi,
      functionName: "register",
      args: [BigInt(rest[1]), Number(rest[2])],
      gas: 5_000_000n,
    });
  }
  console.log(json({ compared, batched: together.length, mismatches, tx }));
  process.exit(mismatches.length === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e);
  process.exit(2);
});
