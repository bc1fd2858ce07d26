//! Shared by the command's test files.

/// A spawned `canopy` that is killed and reaped when dropped, so a failing assertion never
/// leaves a server running after the test.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
