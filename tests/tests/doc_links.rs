//! Every link in the README and `docs/` resolves: a relative link names a file or folder of the
//! repository, and a `#fragment` names a heading of the page it points to (GitHub's anchors:
//! lower case, punctuation dropped, spaces as hyphens, a repeated heading numbered). Web links
//! are not followed (no network here). `.ci/run` runs this before the rest of the suite.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The pages checked: the README and every Markdown file under `docs/`.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// GitHub's anchor of a heading's text.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Lines outside fenced code blocks.
fn prose(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    text.lines().enumerate().filter(move |(_, line)| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The anchors of a page's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let n = seen.entry(base.clone()).or_default();
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of a line's inline links and images: `[text](target)`.
fn targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        out.push(after[..end].split_whitespace().next().unwrap_or(""));
        rest = &after[end..];
    }
    out
}

#[test]
fn every_readme_and_docs_link_resolves() {
    let root = root();
    let pages = pages(&root);
    assert!(
        pages.len() > 1,
        "no docs/ pages found under {}",
        root.display()
    );
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap_or_default();
        let dir = page.parent().unwrap_or(&root);
        for (number, line) in prose(&text) {
            for target in targets(line) {
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
                let file = if path.is_empty() {
                    page.clone()
                } else {
                    dir.join(path)
                };
                let where_ = format!(
                    "{}:{}: {target}",
                    page.strip_prefix(&root).unwrap_or(page).display(),
                    number + 1
                );
                if !file.exists() {
                    broken.push(format!("{where_} (no such file)"));
                    continue;
                }
                if fragment.is_empty() {
                    continue;
                }
                let linked = std::fs::read_to_string(&file).unwrap_or_default();
                if !anchors(&linked).contains(fragment) {
                    broken.push(format!("{where_} (no such heading)"));
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} links found: is the parser broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_checker_sees_what_github_sees() {
    assert_eq!(
        slug("Canopy as your node's RPC endpoint"),
        "canopy-as-your-nodes-rpc-endpoint"
    );
    assert_eq!(
        slug("Following a membership contract: `canopy follow`"),
        "following-a-membership-contract-canopy-follow"
    );
    let page = "# A\n## Figures\n```\n# not a heading\n```\n### Figures\n";
    let found = anchors(page);
    assert_eq!(
        found,
        ["a", "figures", "figures-1"]
            .into_iter()
            .map(String::from)
            .collect()
    );
    assert_eq!(
        targets("see [x](a.md#b) and ![y](c.svg), [z](#d)"),
        ["a.md#b", "c.svg", "#d"]
    );
}
