//! Reports: results.json, junit.xml, index.html, trend.jsonl and trends.html.

pub mod html;
pub mod junit;
pub mod results;
pub mod summary;
pub mod svg;
pub mod trend;
pub mod write;
