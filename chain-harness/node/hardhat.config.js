// The local Ethereum node of Canopy's chain tests (`hardhat node`); nothing is compiled here
// (compile.js uses solc-js, since hardhat would download its compiler).
module.exports = {
  networks: {
    hardhat: {
      chainId: 31337,
      allowUnlimitedContractSize: true,
      blockGasLimit: 1000000000,
      accounts: { count: 4 },
      mining: { auto: true },
    },
  },
};
