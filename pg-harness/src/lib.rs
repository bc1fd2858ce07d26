//! A throw-away PostgreSQL cluster for Canopy's tests and benchmarks: `initdb` into a temporary
//! directory, a server on a free loopback port, stopped (`pg_ctl stop -m immediate`) when the
//! [`PgCluster`] is dropped, a failing test's unwinding included.
//!
//! The binaries are Debian's (`install.sh` installs the `postgresql` package where missing):
//! `$CANOPY_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`, else `PATH`. `initdb` refuses to
//! run as root, so as root the cluster runs as the `postgres` user (`$CANOPY_PG_USER` to pick
//! another) through `runuser`.
//!
//! ```no_run
//! let cluster = pg_harness::PgCluster::start()?;
//! let url = cluster.url(); // postgres://canopy@127.0.0.1:<port>/postgres
//! cluster.stop_immediate()?; // what a crash of Postgres looks like
//! cluster.start_again()?;
//! # Ok::<(), pg_harness::HarnessError>(())
//! ```

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Why a cluster could not be made, started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// No `initdb` was found: run `pg-harness/install.sh` (Debian's `postgresql`).
    #[error("PostgreSQL's initdb was not found (set CANOPY_PG_BIN or run pg-harness/install.sh)")]
    NotInstalled,
    /// Running a PostgreSQL program failed to start at all.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A PostgreSQL program exited with an error.
    #[error("{program} failed: {output}")]
    Failed {
        /// The program.
        program: String,
        /// What it printed (and the server log's tail, for a start that failed).
        output: String,
    },
    /// Filesystem work around the cluster failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// How the server trades durability for speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fsync {
    /// `fsync=off`: commits still reach the OS before they are acknowledged, so killing the
    /// server (`stop_immediate`) loses nothing acknowledged; only a machine crash could. What
    /// tests use.
    #[default]
    Off,
    /// PostgreSQL's defaults (fsync on): what benchmarks use.
    On,
}

/// A running (or stopped) throw-away cluster; dropped = stopped and deleted.
#[derive(Debug)]
pub struct PgCluster {
    bin: PathBuf,
    run_as: Option<String>,
    port: u16,
    data: PathBuf,
    sync: Fsync,
    // Deleted last, after the server has stopped.
    root: tempfile::TempDir,
}

/// The role and database every cluster has.
pub const USER: &str = "canopy";

impl PgCluster {
    /// A new cluster with fsync off ([`Fsync::Off`]), started.
    ///
    /// # Errors
    /// [`HarnessError`]: not installed, or `initdb`/`pg_ctl` failed.
    pub fn start() -> Result<Self, HarnessError> {
        Self::start_with(Fsync::Off)
    }

    /// A new cluster with the given durability, started.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_with(sync: Fsync) -> Result<Self, HarnessError> {
        let bin = find_bin()?;
        let run_as = run_as();
        let root = tempfile::Builder::new()
            .prefix("canopy-pg-")
            .tempdir()
            .map_err(|source| HarnessError::Io {
                what: "temporary directory",
                source,
            })?;
        let data = root.path().join("data");
        std::fs::create_dir(&data).map_err(|source| HarnessError::Io {
            what: "data directory",
            source,
        })?;
        if let Some(user) = &run_as {
            // The unprivileged user must reach and own the data directory.
            set_mode(root.path(), 0o755)?;
            run(Command::new("chown").arg(user).arg(&data))?;
        }
        let cluster = Self {
            bin,
            run_as,
            port: 0,
            data,
            sync,
            root,
        };
        cluster.run_pg(
            "initdb",
            &[
                "-D",
                &cluster.data_str(),
                "-U",
                USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
        )?;
        let mut cluster = cluster;
        cluster.start_on_free_port()?;
        Ok(cluster)
    }

    /// `postgres://canopy@127.0.0.1:<port>/postgres`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/postgres", self.port)
    }

    /// The loopback port the server listens on.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server the way a crash would (`pg_ctl stop -m immediate`: no checkpoint, every
    /// connection cut); [`start_again`](Self::start_again) recovers it from its WAL.
    ///
    /// # Errors
    /// `pg_ctl` failed.
    pub fn stop_immediate(&self) -> Result<(), HarnessError> {
        self.run_pg(
            "pg_ctl",
            &["-D", &self.data_str(), "-m", "immediate", "-w", "stop"],
        )
        .map(drop)
    }

    /// Starts the stopped server again on the same port.
    ///
    /// # Errors
    /// `pg_ctl` failed.
    pub fn start_again(&self) -> Result<(), HarnessError> {
        self.pg_ctl_start(self.port)
    }

    /// Runs `sql` through `psql` as the cluster's superuser and returns what it printed
    /// (unaligned, tuples only): for tests that look at the tables or kill sessions.
    ///
    /// # Errors
    /// `psql` failed.
    pub fn psql(&self, sql: &str) -> Result<String, HarnessError> {
        let output = run(Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d"])
            .arg(self.url())
            .arg("-c")
            .arg(sql))?;
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// A hot standby of this cluster (a new cluster streaming its WAL: `pg_basebackup -R`),
    /// started on a free port. It answers reads, refuses writes and LISTEN, and follows the
    /// primary's commits a moment later: where a replica must poll.
    ///
    /// # Errors
    /// `pg_basebackup` or `pg_ctl` failed.
    pub fn hot_standby(&self) -> Result<Self, HarnessError> {
        let root = tempfile::Builder::new()
            .prefix("canopy-pg-standby-")
            .tempdir()
            .map_err(|source| HarnessError::Io {
                what: "temporary directory",
                source,
            })?;
        // pg_basebackup makes the data directory itself (with the mode the server requires),
        // inside a directory the server's user owns.
        let parent = root.path().join("standby");
        std::fs::create_dir(&parent).map_err(|source| HarnessError::Io {
            what: "standby directory",
            source,
        })?;
        if let Some(user) = &self.run_as {
            set_mode(root.path(), 0o755)?;
            run(Command::new("chown").arg(user).arg(&parent))?;
        }
        let mut standby = Self {
            bin: self.bin.clone(),
            run_as: self.run_as.clone(),
            port: 0,
            data: parent.join("data"),
            sync: self.sync,
            root,
        };
        standby.run_pg(
            "pg_basebackup",
            &[
                "-D",
                &standby.data_str(),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
                "--no-sync",
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                USER,
            ],
        )?;
        standby.start_on_free_port()?;
        Ok(standby)
    }

    fn data_str(&self) -> String {
        self.data.display().to_string()
    }

    fn start_on_free_port(&mut self) -> Result<(), HarnessError> {
        // A port picked free can be taken before the server binds it: try a few.
        let mut last = None;
        for _ in 0..5 {
            let port = free_port()?;
            match self.pg_ctl_start(port) {
                Ok(()) => {
                    self.port = port;
                    return Ok(());
                }
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or(HarnessError::NotInstalled))
    }

    fn pg_ctl_start(&self, port: u16) -> Result<(), HarnessError> {
        let fsync = match self.sync {
            Fsync::Off => "off",
            Fsync::On => "on",
        };
        let options = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -k {dir} -c fsync={fsync} \
             -c max_connections=200 -c shared_buffers=128MB",
            dir = self.data_str()
        );
        // Inside the data directory: the unprivileged user owns it.
        let log = self.data.join("server.log");
        let result = self.run_pg(
            "pg_ctl",
            &[
                "-D",
                &self.data_str(),
                "-l",
                &log.display().to_string(),
                "-o",
                &options,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        match result {
            Ok(_) => Ok(()),
            Err(HarnessError::Failed { program, output }) => {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: String = tail.lines().rev().take(10).collect::<Vec<_>>().join("\n");
                Err(HarnessError::Failed {
                    program,
                    output: format!("{output}\nserver log (last lines, newest first):\n{tail}"),
                })
            }
            Err(other) => Err(other),
        }
    }

    /// Runs one of the server's programs, as the unprivileged user when we are root.
    fn run_pg(&self, program: &str, args: &[&str]) -> Result<Output, HarnessError> {
        let path = self.bin.join(program);
        let mut command = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&path);
                c
            }
            None => Command::new(&path),
        };
        command.args(args).current_dir(self.root.path());
        run(&mut command)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // Best effort: the server may already be stopped.
        let _ = self.stop_immediate();
    }
}

/// The directory of PostgreSQL's server programs.
fn find_bin() -> Result<PathBuf, HarnessError> {
    if let Some(dir) = std::env::var_os("CANOPY_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|dir| dir.join("initdb").is_file())
        .ok_or(HarnessError::NotInstalled)
}

/// Whom to run the server as: nobody else unless we are root.
fn run_as() -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    (String::from_utf8_lossy(&uid.stdout).trim() == "0")
        .then(|| std::env::var("CANOPY_PG_USER").unwrap_or_else(|_| "postgres".to_owned()))
}

fn free_port() -> Result<u16, HarnessError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|source| HarnessError::Io {
        what: "picking a free port",
        source,
    })?;
    listener
        .local_addr()
        .map(|addr| addr.port())
        .map_err(|source| HarnessError::Io {
            what: "picking a free port",
            source,
        })
}

fn set_mode(path: &Path, mode: u32) -> Result<(), HarnessError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        HarnessError::Io {
            what: "permissions of the temporary directory",
            source,
        }
    })
}

fn run(command: &mut Command) -> Result<Output, HarnessError> {
    let program = format!("{:?}", command.get_program());
    let output = command.output().map_err(|source| HarnessError::Spawn {
        program: program.clone(),
        source,
    })?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(HarnessError::Failed {
            program,
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_starts_answers_survives_an_immediate_stop_and_is_gone_when_dropped() {
        let cluster = PgCluster::start().unwrap();
        cluster
            .psql("CREATE TABLE t (x int); INSERT INTO t VALUES (41), (1)")
            .unwrap();
        cluster.stop_immediate().unwrap();
        assert!(cluster.psql("SELECT 1").is_err(), "the server is down");
        cluster.start_again().unwrap();
        assert_eq!(cluster.psql("SELECT sum(x) FROM t").unwrap(), "42");
        let root = cluster.root.path().to_path_buf();
        drop(cluster);
        assert!(!root.exists());
    }
}
