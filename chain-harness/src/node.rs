//! Starting, driving and stopping a local node: hardhat's, or ganache's (a second kind, which
//! lacks EIP-1898 block-hash parameters).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use alloy::primitives::{Address, Bytes, B256, U256};
use alloy::providers::{Provider, RootProvider};
use alloy::sol_types::SolValue;

/// Why the harness failed.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// `install.sh` (npm ci, solc-js) failed.
    #[error("installing the chain tools failed: {0}")]
    Install(String),
    /// The node did not start.
    #[error("the local node did not start: {0}")]
    Start(String),
    /// A JSON-RPC call failed.
    #[error("{0}")]
    Rpc(String),
    /// The compiled contract is missing or malformed.
    #[error("compiled contract: {0}")]
    Artifact(String),
}

fn rpc<E: std::fmt::Display>(e: E) -> HarnessError {
    HarnessError::Rpc(e.to_string())
}

/// Which node program runs the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// `hardhat node` (chain id 31337): the default.
    Hardhat,
    /// ganache 7.9.2 (chain id 1337, instant mining): refuses EIP-1898 `{blockHash}`
    /// parameters of `eth_call` with `-32700`.
    Ganache,
}

/// A running local node on 127.0.0.1; killed when dropped.
pub struct LocalChain {
    child: Child,
    url: url::Url,
    provider: RootProvider,
    from: Address,
    log: PathBuf,
}

impl LocalChain {
    /// The npm package folder (`chain-harness/node`).
    #[must_use]
    pub fn node_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("node")
    }

    /// Runs `install.sh` (idempotent, serialised by a file lock).
    ///
    /// # Errors
    /// npm or the compiler failed.
    pub fn install() -> Result<(), HarnessError> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh");
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .map_err(|e| HarnessError::Install(format!("bash {}: {e}", script.display())))?;
        if !out.status.success() {
            return Err(HarnessError::Install(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    }

    /// Installs if needed and starts a node on a free loopback port.
    ///
    /// # Errors
    /// Installation or start-up failed.
    pub async fn start() -> Result<Self, HarnessError> {
        Self::start_kind(NodeKind::Hardhat).await
    }

    /// Installs if needed and starts a node of `kind` on a free loopback port.
    ///
    /// # Errors
    /// Installation or start-up failed.
    pub async fn start_kind(kind: NodeKind) -> Result<Self, HarnessError> {
        Self::install()?;
        let mut last = String::new();
        for _ in 0..3 {
            match Self::start_once(kind).await {
                Ok(chain) => return Ok(chain),
                Err(e) => last = e.to_string(),
            }
        }
        Err(HarnessError::Start(last))
    }

    async fn start_once(kind: NodeKind) -> Result<Self, HarnessError> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| HarnessError::Start(e.to_string()))?
            .port();
        let log = std::env::temp_dir().join(format!("canopy-hardhat-{port}.log"));
        let log_file =
            std::fs::File::create(&log).map_err(|e| HarnessError::Start(e.to_string()))?;
        let log_err = log_file
            .try_clone()
            .map_err(|e| HarnessError::Start(e.to_string()))?;
        let url: url::Url = format!("http://127.0.0.1:{port}")
            .parse()
            .map_err(|e| HarnessError::Start(format!("{e}")))?;
        // The workspace builds reqwest with rustls but no default crypto provider (ring is
        // chosen instead of aws-lc-rs; see the workspace Cargo.toml): install it before the
        // first HTTP client is built. Already installed is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let provider = RootProvider::new_http(url.clone());
        // From the spawn on, nothing may return before `Self` owns the child (its drop kills it).
        let dir = Self::node_dir();
        let port_arg = port.to_string();
        let mut command = Command::new("node");
        match kind {
            NodeKind::Hardhat => command
                .arg(dir.join("node_modules/hardhat/internal/cli/cli.js"))
                .args(["node", "--hostname", "127.0.0.1", "--port", &port_arg]),
            NodeKind::Ganache => command
                .arg(dir.join("node_modules/ganache/dist/node/cli.js"))
                .args(["--server.host", "127.0.0.1", "--server.port", &port_arg])
                .args(["--miner.blockGasLimit", "1000000000", "--logging.quiet"])
                .args([
                    "--chain.allowUnlimitedContractSize",
                    "--wallet.totalAccounts",
                    "4",
                ]),
        };
        let child = command
            .current_dir(&dir)
            .env("HARDHAT_DISABLE_TELEMETRY_PROMPT", "true")
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .map_err(|e| HarnessError::Start(format!("node: {e}")))?;
        let mut chain = Self {
            child,
            url,
            provider,
            from: Address::ZERO,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Ok(accounts) = chain.provider.get_accounts().await {
                if let Some(first) = accounts.first() {
                    chain.from = *first;
                    return Ok(chain);
                }
            }
            if let Ok(Some(status)) = chain.child.try_wait() {
                let text = std::fs::read_to_string(&chain.log).unwrap_or_default();
                return Err(HarnessError::Start(format!(
                    "node exited ({status}): {text}"
                )));
            }
            if Instant::now() > deadline {
                return Err(HarnessError::Start("no answer within 90 s".into()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The node process's id (to read its memory from `/proc`, for example).
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The node's JSON-RPC URL.
    #[must_use]
    pub fn url(&self) -> &url::Url {
        &self.url
    }

    /// An alloy provider of the node.
    #[must_use]
    pub fn provider(&self) -> &RootProvider {
        &self.provider
    }

    /// Sends a transaction from the node's first (unlocked) account; returns its hash.
    ///
    /// # Errors
    /// The node refused it.
    pub async fn send(&self, to: Address, data: Bytes) -> Result<B256, HarnessError> {
        self.send_raw(Some(to), &data).await
    }

    /// `eth_sendTransaction` from the first account (hardhat's node signs it).
    async fn send_raw(&self, to: Option<Address>, data: &Bytes) -> Result<B256, HarnessError> {
        let mut tx = serde_json::json!({
            "from": self.from,
            "data": data,
            "gas": "0xf42400",
        });
        if let Some(to) = to {
            tx["to"] = serde_json::json!(to);
        }
        self.provider
            .raw_request("eth_sendTransaction".into(), (tx,))
            .await
            .map_err(rpc)
    }

    /// The receipt of a mined transaction (`what`, for the error).
    async fn receipt(
        &self,
        hash: B256,
        what: &str,
    ) -> Result<alloy::rpc::types::TransactionReceipt, HarnessError> {
        self.provider
            .get_transaction_receipt(hash)
            .await
            .map_err(rpc)?
            .ok_or_else(|| HarnessError::Rpc(format!("no receipt for {what}")))
    }

    /// Deploys `bytecode` (constructor arguments appended); returns the contract's address.
    async fn deploy(&self, bytecode: Bytes) -> Result<Address, HarnessError> {
        let hash = self.send_raw(None, &bytecode).await?;
        self.mine().await?;
        self.receipt(hash, "the deployment")
            .await?
            .contract_address
            .ok_or_else(|| HarnessError::Rpc("deployment created no contract".into()))
    }

    /// Deploys PoseidonT3 and the test membership contract linked to it. With
    /// `emits_rate_commitment`, `MembershipRegistered` carries the rate commitment (an earlier
    /// WakuRlnV2 revision, which keeps no root history) instead of the rate limit.
    ///
    /// # Errors
    /// Missing artifact, RPC failures.
    pub async fn deploy_membership(
        &self,
        emits_rate_commitment: bool,
    ) -> Result<Address, HarnessError> {
        self.deploy_implementation(emits_rate_commitment, !emits_rate_commitment)
            .await
    }

    /// Deploys the test membership contract as WakuRlnV2 is deployed: an implementation
    /// (`stores_roots`: the newest one, with a root history) behind OpenZeppelin's
    /// ERC1967Proxy, initialized in the proxy's constructor. Returns the proxy's address, the
    /// contract's address from then on; the sender is the owner who may upgrade it.
    ///
    /// # Errors
    /// Missing artifact, RPC failures.
    pub async fn deploy_membership_proxy(
        &self,
        stores_roots: bool,
    ) -> Result<Address, HarnessError> {
        let implementation = self.deploy_membership_implementation(stores_roots).await?;
        let artifact = Artifact::read()?;
        let mut bytecode = decode_hex(&artifact.hex("/erc1967Proxy/bytecode")?)?;
        bytecode.extend((implementation, crate::calls::initialize()).abi_encode_params());
        self.deploy(bytecode.into()).await
    }

    /// Upgrades the proxy at `proxy` to a new implementation (`stores_roots` as in
    /// [`Self::deploy_membership_proxy`]) with `upgradeToAndCall`, mined at once; returns the
    /// upgrade's block.
    ///
    /// # Errors
    /// Missing artifact, RPC failures, a reverted upgrade.
    pub async fn upgrade_membership(
        &self,
        proxy: Address,
        stores_roots: bool,
    ) -> Result<u64, HarnessError> {
        let implementation = self.deploy_membership_implementation(stores_roots).await?;
        let hash = self
            .send(proxy, crate::calls::upgrade_to(implementation))
            .await?;
        self.mine().await?;
        let receipt = self.receipt(hash, "the upgrade").await?;
        match receipt.block_number {
            Some(block) if receipt.status() => Ok(block),
            _ => Err(HarnessError::Rpc("the upgrade reverted".into())),
        }
    }

    /// Deploys the harness's multicall contract (`contracts/Multicall.sol`): send it
    /// [`calls::multicall`](crate::calls::multicall) to make several calls in one transaction.
    ///
    /// # Errors
    /// Missing artifact, RPC failures.
    pub async fn deploy_multicall(&self) -> Result<Address, HarnessError> {
        let artifact = Artifact::read()?;
        let bytecode = decode_hex(&artifact.hex("/multicall/bytecode")?)?;
        self.deploy(bytecode.into()).await
    }

    /// Deploys an implementation for a proxy (`stores_roots` as in
    /// [`Self::deploy_membership_proxy`]); a test that wants other transactions in the upgrade's
    /// block sends `calls::upgrade_to` itself.
    ///
    /// # Errors
    /// Missing artifact, RPC failures.
    pub async fn deploy_membership_implementation(
        &self,
        stores_roots: bool,
    ) -> Result<Address, HarnessError> {
        self.deploy_implementation(false, stores_roots).await
    }

    /// Deploys PoseidonT3 and a test membership contract linked to it, with its constructor's
    /// two flags.
    async fn deploy_implementation(
        &self,
        emits_rate_commitment: bool,
        stores_roots: bool,
    ) -> Result<Address, HarnessError> {
        let artifact = Artifact::read()?;
        let poseidon = decode_hex(&artifact.hex("/poseidonT3/bytecode")?)?;
        let poseidon_address = self.deploy(poseidon.into()).await?;
        let mut bytecode = artifact.linked("membership", poseidon_address)?;
        bytecode.extend((emits_rate_commitment, stores_roots).abi_encode_params());
        self.deploy(bytecode.into()).await
    }

    /// Deploys PoseidonT3 and `contracts/LeanGroup.sol` (zk-kit's Solidity LeanIMT) linked to
    /// it; send it the [`calls`](crate::calls) `lean_*` transactions and read its views.
    ///
    /// # Errors
    /// Missing artifact, RPC failures.
    pub async fn deploy_lean_group(&self) -> Result<Address, HarnessError> {
        let artifact = Artifact::read()?;
        let poseidon = decode_hex(&artifact.hex("/poseidonT3/bytecode")?)?;
        let poseidon_address = self.deploy(poseidon.into()).await?;
        let bytecode = artifact.linked("leanGroup", poseidon_address)?;
        self.deploy(bytecode.into()).await
    }

    /// `eth_call` of `data` to `to` at the head; the returned bytes.
    ///
    /// # Errors
    /// RPC failures (a reverted call among them).
    pub async fn call(&self, to: Address, data: Bytes) -> Result<Bytes, HarnessError> {
        let request = alloy::rpc::types::TransactionRequest::default()
            .to(to)
            .input(data.into());
        self.provider.call(request).await.map_err(rpc)
    }

    /// Turns automatic mining (one block per transaction) on or off.
    ///
    /// # Errors
    /// RPC failures.
    pub async fn set_automine(&self, on: bool) -> Result<(), HarnessError> {
        let _: bool = self
            .provider
            .raw_request("evm_setAutomine".into(), (on,))
            .await
            .map_err(rpc)?;
        Ok(())
    }

    /// Mines one block with the pending transactions; returns its number.
    ///
    /// # Errors
    /// RPC failures.
    pub async fn mine(&self) -> Result<u64, HarnessError> {
        let _: String = self
            .provider
            .raw_request("evm_mine".into(), Vec::<serde_json::Value>::new())
            .await
            .map_err(rpc)?;
        self.block_number().await
    }

    /// Mines `n` empty blocks at once.
    ///
    /// # Errors
    /// RPC failures.
    pub async fn mine_empty(&self, n: u64) -> Result<u64, HarnessError> {
        let _: bool = self
            .provider
            .raw_request("hardhat_mine".into(), (format!("{n:#x}"),))
            .await
            .map_err(rpc)?;
        self.block_number().await
    }

    /// The head block number.
    ///
    /// # Errors
    /// RPC failures.
    pub async fn block_number(&self) -> Result<u64, HarnessError> {
        self.provider.get_block_number().await.map_err(rpc)
    }

    /// `evm_snapshot`: an id to revert to.
    ///
    /// # Errors
    /// RPC failures.
    pub async fn snapshot(&self) -> Result<U256, HarnessError> {
        self.provider
            .raw_request("evm_snapshot".into(), Vec::<serde_json::Value>::new())
            .await
            .map_err(rpc)
    }

    /// `evm_revert`: back to a snapshot (the chain's later blocks are gone).
    ///
    /// # Errors
    /// RPC failures or an unknown snapshot.
    pub async fn revert(&self, id: U256) -> Result<(), HarnessError> {
        let ok: bool = self
            .provider
            .raw_request("evm_revert".into(), (id,))
            .await
            .map_err(rpc)?;
        if ok {
            Ok(())
        } else {
            Err(HarnessError::Rpc(format!("evm_revert({id}) refused")))
        }
    }

    /// How many of these mined transactions failed (reverted or have no receipt).
    ///
    /// # Errors
    /// RPC failures.
    pub async fn failed_transactions(&self, hashes: &[B256]) -> Result<usize, HarnessError> {
        let mut failed = 0;
        for hash in hashes {
            let receipt = self
                .provider
                .get_transaction_receipt(*hash)
                .await
                .map_err(rpc)?;
            if !receipt.is_some_and(|r| r.status()) {
                failed += 1;
            }
        }
        Ok(failed)
    }
}

impl Drop for LocalChain {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

fn decode_hex(text: &str) -> Result<Vec<u8>, HarnessError> {
    let text = text.strip_prefix("0x").unwrap_or(text);
    if !text.len().is_multiple_of(2) {
        return Err(HarnessError::Artifact("odd-length hex".into()));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&text[i..i + 2], 16)
                .map_err(|_| HarnessError::Artifact("bad hex (unlinked library?)".into()))
        })
        .collect()
}

/// `build/TestMembership.json`, written by `install.sh`.
struct Artifact(serde_json::Value);

impl Artifact {
    fn read() -> Result<Self, HarnessError> {
        let path = LocalChain::node_dir().join("build/TestMembership.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| HarnessError::Artifact(format!("{}: {e}", path.display())))?;
        serde_json::from_str(&text)
            .map(Self)
            .map_err(|e| HarnessError::Artifact(e.to_string()))
    }

    /// The bytecode of `contract` with every PoseidonT3 link reference set to `poseidon`.
    fn linked(&self, contract: &str, poseidon: Address) -> Result<Vec<u8>, HarnessError> {
        let mut code = self.hex(&format!("/{contract}/bytecode"))?;
        let links = self
            .0
            .pointer(&format!(
                "/{contract}/linkReferences/poseidon-solidity~1PoseidonT3.sol/PoseidonT3"
            ))
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| {
                HarnessError::Artifact(format!("{contract}: link references missing"))
            })?;
        let address_hex: String = poseidon
            .as_slice()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        for link in links {
            let start = link
                .get("start")
                .and_then(serde_json::Value::as_u64)
                .and_then(|s| usize::try_from(s).ok())
                .ok_or_else(|| HarnessError::Artifact("bad link reference".into()))?;
            let range = 2 * start..2 * start + 40;
            if range.end > code.len() {
                return Err(HarnessError::Artifact(
                    "link reference past the code".into(),
                ));
            }
            code.replace_range(range, &address_hex);
        }
        decode_hex(&code)
    }

    /// The hex string at `pointer`.
    fn hex(&self, pointer: &str) -> Result<String, HarnessError> {
        self.0
            .pointer(pointer)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| HarnessError::Artifact(format!("{pointer} missing")))
    }
}
