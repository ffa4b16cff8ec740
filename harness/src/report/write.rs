//! Writing a run's report directory and updating the trends.

use std::path::{Path, PathBuf};

use super::html::{render_index, render_trends};
use super::junit::render_junit;
use super::results::RunResults;
use super::trend::{append_trend, read_trend, TrendEntry};
use crate::error::{Error, Result};
use crate::history::store::History;

fn write_file(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(|source| Error::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `<root>/<run-id>/{index.html, results.json, junit.xml, <trial>/history.jsonl}`,
/// appends the run to `<root>/trend.jsonl` and re-renders `<root>/trends.html`.
/// `histories` pairs with `results.scenarios` by index. Returns the run directory.
pub fn write_report(root: &Path, results: &RunResults, histories: &[History]) -> Result<PathBuf> {
    let dir = root.join(&results.run_id);
    std::fs::create_dir_all(&dir).map_err(|source| Error::Write {
        path: dir.clone(),
        source,
    })?;
    for (scenario, history) in results.scenarios.iter().zip(histories) {
        let scenario_dir = dir.join(scenario.dir_name());
        std::fs::create_dir_all(&scenario_dir).map_err(|source| Error::Write {
            path: scenario_dir.clone(),
            source,
        })?;
        history.write(&scenario_dir.join("history.jsonl"))?;
    }
    let json = serde_json::to_string_pretty(results).map_err(|source| Error::Json {
        what: "results",
        source,
    })?;
    write_file(&dir.join("results.json"), &json)?;
    write_file(&dir.join("junit.xml"), &render_junit(results)?)?;
    write_file(&dir.join("index.html"), &render_index(results, histories))?;
    append_trend(
        &root.join("trend.jsonl"),
        &TrendEntry::from_results(results),
    )?;
    render_trends_file(root)?;
    Ok(dir)
}

/// Re-renders `<root>/trends.html` from `<root>/trend.jsonl` (`--trends`, `just report`).
pub fn render_trends_file(root: &Path) -> Result<PathBuf> {
    let entries = read_trend(&root.join("trend.jsonl"))?;
    let path = root.join("trends.html");
    write_file(&path, &render_trends(&entries))?;
    Ok(path)
}
