// Compiles contracts/TestMembership.sol, contracts/Multicall.sol, contracts/LeanGroup.sol
// (zk-kit's LeanIMT), poseidon-solidity's PoseidonT3
// and OpenZeppelin's ERC1967Proxy with solc-js (the npm compiler) and writes abi, bytecode and link references as
// one JSON file: argv[2].
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const here = __dirname;
const contract = (name) => ({ content: fs.readFileSync(path.join(here, "..", "contracts", name), "utf8") });
const input = {
  language: "Solidity",
  sources: {
    "TestMembership.sol": contract("TestMembership.sol"),
    "Multicall.sol": contract("Multicall.sol"),
    "LeanGroup.sol": contract("LeanGroup.sol"),
  },
  settings: {
    optimizer: { enabled: true, runs: 200 },
    // shanghai, not cancun: ganache 7.9.2 (the second node kind of the tests) runs up to it.
    evmVersion: "shanghai",
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.bytecode.linkReferences"] } },
  },
};
function findImports(name) {
  try {
    return { contents: fs.readFileSync(require.resolve(name, { paths: [here] }), "utf8") };
  } catch (e) {
    return { error: `not found: ${name}` };
  }
}
const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
const errors = (output.errors || []).filter((e) => e.severity === "error");
if (errors.length > 0) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}
const membership = output.contracts["TestMembership.sol"].TestMembership;
const poseidon = output.contracts["poseidon-solidity/PoseidonT3.sol"].PoseidonT3;
const proxy = output.contracts["@openzeppelin/contracts/proxy/ERC1967/ERC1967Proxy.sol"].ERC1967Proxy;
const multicall = output.contracts["Multicall.sol"].Multicall;
const leanGroup = output.contracts["LeanGroup.sol"].LeanGroup;
const out = {
  solc: solc.version(),
  membership: {
    abi: membership.abi,
    bytecode: membership.evm.bytecode.object,
    linkReferences: membership.evm.bytecode.linkReferences,
  },
  poseidonT3: { bytecode: poseidon.evm.bytecode.object },
  erc1967Proxy: { bytecode: proxy.evm.bytecode.object },
  multicall: { bytecode: multicall.evm.bytecode.object },
  leanGroup: {
    abi: leanGroup.abi,
    bytecode: leanGroup.evm.bytecode.object,
    linkReferences: leanGroup.evm.bytecode.linkReferences,
  },
};
fs.mkdirSync(path.dirname(process.argv[2]), { recursive: true });
fs.writeFileSync(process.argv[2], JSON.stringify(out));
console.log(`compiled TestMembership with solc ${solc.version()} -> ${process.argv[2]}`);
