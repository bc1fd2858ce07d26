//! Progress bars on stderr (indicatif), shared by the demo and `follow`.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar over `total` blocks with rate and ETA; hidden when stderr is not a terminal.
#[must_use]
pub fn blocks_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    if let Ok(style) =
        ProgressStyle::with_template("  [{bar:30}] {pos}/{len} blocks, {per_sec}, ETA {eta} {msg}")
    {
        bar.set_style(style.progress_chars("#>-"));
    }
    bar
}
