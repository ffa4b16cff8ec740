//! Turning mysql_async rows into the crate's text rows.

use mysql_async::{Row, Value};

use crate::StatusRow;

/// One value as text, the way the server prints it; `None` for NULL.
pub(crate) fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::NULL => None,
        Value::Bytes(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::Int(v) => Some(v.to_string()),
        Value::UInt(v) => Some(v.to_string()),
        Value::Float(v) => Some(v.to_string()),
        Value::Double(v) => Some(v.to_string()),
        Value::Date(year, month, day, hour, minute, second, micros) => Some(format!(
            "{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}.{micros:06}"
        )),
        Value::Time(negative, days, hours, minutes, seconds, micros) => {
            let sign = if *negative { "-" } else { "" };
            let hours = u64::from(*days) * 24 + u64::from(*hours);
            Some(format!(
                "{sign}{hours:02}:{minutes:02}:{seconds:02}.{micros:06}"
            ))
        }
    }
}

/// A row as column name -> text.
pub(crate) fn status_row(row: &Row) -> StatusRow {
    let columns = row.columns_ref();
    columns
        .iter()
        .enumerate()
        .map(|(index, column)| {
            let text = row.as_ref(index).and_then(value_text);
            (column.name_str().into_owned(), text)
        })
        .collect()
}

/// The text of column `name` in `row` (case-insensitive); `None` when absent or NULL.
pub(crate) fn column_text(row: &StatusRow, name: &str) -> Option<String> {
    row.iter()
        .find(|(column, _)| column.eq_ignore_ascii_case(name))
        .and_then(|(_, value)| value.clone())
}
