#!/usr/bin/env bash
# Installs what the chain tests need (a hardhat node, solc-js, zk-kit's LazyIMT and LeanIMT
# (Solidity and TypeScript), poseidon-solidity, poseidon-lite and OpenZeppelin's proxy contracts,
# pinned by package-lock.json) and compiles the test contracts (the membership look-alike, a
# multicall and a LeanIMT group). Idempotent and
# safe to run concurrently (flock): the test harness calls it before starting a node, `.ci/run`
# calls it up front. Needs Node 20 and npm, nothing else.
set -euo pipefail
cd "$(dirname "$0")/node"
exec 9>".install.lock"
flock 9
stamp="node_modules/.canopy-installed"
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  npm ci --no-audit --no-fund --loglevel=error
  touch "$stamp"
fi
out="build/TestMembership.json"
if [ ! -f "$out" ] || [ ../contracts/TestMembership.sol -nt "$out" ] || [ ../contracts/Multicall.sol -nt "$out" ] || [ ../contracts/LeanGroup.sol -nt "$out" ] || [ compile.js -nt "$out" ]; then
  node compile.js "$out"
fi
