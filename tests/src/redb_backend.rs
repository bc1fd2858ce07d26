//! A redb `StorageBackend` that simulates a disk losing power, in the spirit of redb's own crash
//! tests and SQLite's crash VFS: what was synced is durable; of the writes since the last sync,
//! any subset may have reached the platter (disks reorder). It can also fail on command, so a
//! commit breaks part-way.

use std::sync::Arc;

use parking_lot::Mutex;
use rand::{rngs::StdRng, Rng, SeedableRng};
use redb::{BackendError, StorageBackend};

/// One operation since the last sync.
#[derive(Debug, Clone)]
enum Op {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug)]
struct Disk {
    /// What readers see.
    volatile: Vec<u8>,
    /// What survives any power loss.
    durable: Vec<u8>,
    /// Since the last sync, oldest first.
    unsynced: Vec<Op>,
    /// Operations left before every write, resize and sync fails.
    fail_in: Option<u32>,
    rng: StdRng,
}

/// The simulated disk; clones share it.
#[derive(Debug, Clone)]
pub struct PowerLossBackend {
    disk: Arc<Mutex<Disk>>,
}

fn range(offset: u64, len: usize) -> Result<std::ops::Range<usize>, BackendError> {
    let start = usize::try_from(offset).map_err(|_| invalid())?;
    Ok(start..start.checked_add(len).ok_or_else(invalid)?)
}

fn invalid() -> BackendError {
    BackendError::Io(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "out of range",
    ))
}

fn apply(image: &mut Vec<u8>, op: &Op) {
    match op {
        Op::SetLen(len) => image.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
        Op::Write(offset, data) => {
            let Ok(at) = range(*offset, data.len()) else {
                return;
            };
            if image.len() < at.end {
                image.resize(at.end, 0);
            }
            image[at].copy_from_slice(data);
        }
    }
}

impl PowerLossBackend {
    /// An empty disk; `seed` decides which unsynced writes survive a power loss.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self::from_image(Vec::new(), StdRng::seed_from_u64(seed))
    }

    fn from_image(image: Vec<u8>, rng: StdRng) -> Self {
        Self {
            disk: Arc::new(Mutex::new(Disk {
                volatile: image.clone(),
                durable: image,
                unsynced: Vec::new(),
                fail_in: None,
                rng,
            })),
        }
    }

    /// After `n` more writes, resizes or syncs, every one fails (a disk gone bad).
    pub fn fail_after(&self, n: u32) {
        self.disk.lock().fail_in = Some(n);
    }

    /// Stops failing.
    pub fn stop_failing(&self) {
        self.disk.lock().fail_in = None;
    }

    /// The disk as it is after the power is cut now: the durable image plus a random subset of
    /// the operations since the last sync, in order.
    #[must_use]
    pub fn power_loss(&self) -> Self {
        let mut disk = self.disk.lock();
        let mut image = disk.durable.clone();
        let unsynced = disk.unsynced.clone();
        for op in &unsynced {
            if disk.rng.gen_bool(0.5) {
                apply(&mut image, op);
            }
        }
        let rng = StdRng::seed_from_u64(disk.rng.gen());
        Self::from_image(image, rng)
    }

    fn mutate(&self, op: Op) -> Result<(), BackendError> {
        let mut disk = self.disk.lock();
        disk.check_failure()?;
        if let Op::Write(offset, data) = &op {
            if range(*offset, data.len())?.end > disk.volatile.len() {
                return Err(invalid());
            }
        }
        apply(&mut disk.volatile, &op);
        disk.unsynced.push(op);
        Ok(())
    }
}

impl Disk {
    fn check_failure(&mut self) -> Result<(), BackendError> {
        match &mut self.fail_in {
            Some(0) => Err(BackendError::Io(std::io::Error::other(
                "injected I/O failure",
            ))),
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }
}

impl StorageBackend for PowerLossBackend {
    fn len(&self) -> Result<u64, BackendError> {
        Ok(self.disk.lock().volatile.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), BackendError> {
        let disk = self.disk.lock();
        let source = disk
            .volatile
            .get(range(offset, out.len())?)
            .ok_or_else(invalid)?;
        out.copy_from_slice(source);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), BackendError> {
        self.mutate(Op::SetLen(len))
    }

    fn sync_data(&self) -> Result<(), BackendError> {
        let mut disk = self.disk.lock();
        disk.check_failure()?;
        disk.durable = disk.volatile.clone();
        disk.unsynced.clear();
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
        self.mutate(Op::Write(offset, data.to_vec()))
    }
}
