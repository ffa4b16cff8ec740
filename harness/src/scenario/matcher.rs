//! Partial matching of expected YAML against live JSON (`group`, `object`, `body`, ...).
//!
//! A plain map matches when every key it names matches (other keys are ignored); a list
//! matches when every expected element matches a distinct actual element, in any order;
//! a scalar matches an equal scalar (numbers compare numerically). A map whose keys all
//! start with `$` is an operator map:
//!
//! | operator | holds when the actual value |
//! |---|---|
//! | `$gt`, `$gte`, `$lt`, `$lte` | is a number in that relation |
//! | `$ne` | differs |
//! | `$exists: false` / `true` | is absent or null / present |
//! | `$unchanged: true` | equals the value when the expectation started |
//! | `$changed: true` | differs from the value when the expectation started |
//! | `$contains` | is a string containing it |
//! | `$len` | is a list or map with that many entries |

use serde_json::Value;

/// The operators an operator map may use.
pub const OPERATORS: [&str; 10] = [
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$ne",
    "$exists",
    "$unchanged",
    "$changed",
    "$contains",
    "$len",
];

/// Checks that every `$` key in `expected` is a known operator used correctly.
pub fn check_operators(expected: &Value, path: &str) -> Result<(), String> {
    match expected {
        Value::Object(map) => {
            let operator_keys = map.keys().filter(|key| key.starts_with('$')).count();
            if operator_keys > 0 && operator_keys != map.len() {
                return Err(format!(
                    "{path}: a map mixes `$` operators with fields; put the operators one level down"
                ));
            }
            for (key, value) in map {
                let child = join(path, key);
                if key.starts_with('$') {
                    check_operator(key, value, &child)?;
                } else {
                    check_operators(value, &child)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(index, item)| check_operators(item, &format!("{path}[{index}]"))),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => Ok(()),
    }
}

fn check_operator(key: &str, value: &Value, path: &str) -> Result<(), String> {
    let ok = match key {
        "$gt" | "$gte" | "$lt" | "$lte" => value.is_number(),
        "$exists" | "$unchanged" | "$changed" => value.is_boolean(),
        "$contains" => value.is_string(),
        "$len" => value.is_u64(),
        "$ne" => true,
        _ => {
            return Err(format!(
                "{path}: unknown operator `{key}`, expected one of {}",
                OPERATORS.join(", ")
            ))
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{path}: operator `{key}` has a value of the wrong type"
        ))
    }
}

/// Matches `expected` against `actual`; `baseline` is the value at the same place when the
/// expectation started (for `$unchanged`/`$changed`). The error names the first mismatch.
pub fn matches(
    expected: &Value,
    actual: Option<&Value>,
    baseline: Option<&Value>,
) -> Result<(), String> {
    match_at(expected, actual, baseline, "")
}

fn match_at(
    expected: &Value,
    actual: Option<&Value>,
    baseline: Option<&Value>,
    path: &str,
) -> Result<(), String> {
    let shown = if path.is_empty() { "(root)" } else { path };
    match expected {
        Value::Object(map) if !map.is_empty() && map.keys().all(|key| key.starts_with('$')) => {
            for (operator, operand) in map {
                apply_operator(operator, operand, actual, baseline)
                    .map_err(|why| format!("{shown}: {why}"))?;
            }
            Ok(())
        }
        Value::Object(map) => {
            let Some(Value::Object(actual_map)) = actual else {
                return Err(format!(
                    "{shown}: expected a map, found {}",
                    describe(actual)
                ));
            };
            for (key, expected_child) in map {
                let base_child = baseline.and_then(|base| base.get(key));
                match_at(
                    expected_child,
                    actual_map.get(key),
                    base_child,
                    &join(path, key),
                )?;
            }
            Ok(())
        }
        Value::Array(expected_items) => {
            let Some(Value::Array(actual_items)) = actual else {
                return Err(format!(
                    "{shown}: expected a list, found {}",
                    describe(actual)
                ));
            };
            let mut used = vec![false; actual_items.len()];
            for (index, expected_item) in expected_items.iter().enumerate() {
                let base_item = baseline_item(expected_item, baseline);
                let mut last_error = None;
                let mut found = false;
                for (slot, actual_item) in actual_items.iter().enumerate() {
                    if used.get(slot).copied().unwrap_or(true) {
                        continue;
                    }
                    match match_at(
                        expected_item,
                        Some(actual_item),
                        base_item,
                        &format!("{path}[{index}]"),
                    ) {
                        Ok(()) => {
                            if let Some(flag) = used.get_mut(slot) {
                                *flag = true;
                            }
                            found = true;
                            break;
                        }
                        Err(error) => last_error = Some(error),
                    }
                }
                if !found {
                    return Err(last_error.unwrap_or_else(|| {
                        format!("{shown}[{index}]: no element left to match {expected_item}")
                    }));
                }
            }
            Ok(())
        }
        Value::Null => match actual {
            None | Some(Value::Null) => Ok(()),
            Some(other) => Err(format!("{shown}: expected null, found {other}")),
        },
        Value::Bool(_) | Value::Number(_) | Value::String(_) => match actual {
            Some(found) if scalar_equal(expected, found) => Ok(()),
            other => Err(format!(
                "{shown}: expected {expected}, found {}",
                describe(other)
            )),
        },
    }
}

/// The baseline element for a list element: the one with the same `name`, if any.
fn baseline_item<'a>(expected_item: &Value, baseline: Option<&'a Value>) -> Option<&'a Value> {
    let name = expected_item.get("name")?;
    baseline?
        .as_array()?
        .iter()
        .find(|item| item.get("name") == Some(name))
}

fn apply_operator(
    operator: &str,
    operand: &Value,
    actual: Option<&Value>,
    baseline: Option<&Value>,
) -> Result<(), String> {
    let present = actual.filter(|value| !value.is_null());
    match operator {
        "$gt" | "$gte" | "$lt" | "$lte" => {
            let (Some(limit), Some(found)) = (operand.as_f64(), present.and_then(Value::as_f64))
            else {
                return Err(format!(
                    "expected a number {operator} {operand}, found {}",
                    describe(actual)
                ));
            };
            let holds = match operator {
                "$gt" => found > limit,
                "$gte" => found >= limit,
                "$lt" => found < limit,
                _ => found <= limit,
            };
            if holds {
                Ok(())
            } else {
                Err(format!("expected {operator} {operand}, found {found}"))
            }
        }
        "$ne" => match present {
            Some(found) if scalar_equal(operand, found) => {
                Err(format!("expected anything but {operand}"))
            }
            None if operand.is_null() => Err("expected a value, found none".to_owned()),
            _ => Ok(()),
        },
        "$exists" => match (operand.as_bool(), present) {
            (Some(true), None) => Err("expected the field to exist, found none".to_owned()),
            (Some(false), Some(found)) => Err(format!("expected no value, found {found}")),
            _ => Ok(()),
        },
        "$unchanged" | "$changed" => {
            let want_same = (operator == "$unchanged") == operand.as_bool().unwrap_or(true);
            let base = baseline.filter(|value| !value.is_null());
            let same = match (base, present) {
                (Some(a), Some(b)) => scalar_equal(a, b),
                (None, None) => true,
                _ => false,
            };
            match (want_same, same) {
                (true, false) => Err(format!(
                    "expected it unchanged from {}, found {}",
                    describe(base),
                    describe(present)
                )),
                (false, true) => Err(format!("expected a change from {}", describe(base))),
                _ => Ok(()),
            }
        }
        "$contains" => {
            let needle = operand.as_str().unwrap_or_default();
            match present.and_then(Value::as_str) {
                Some(text) if text.contains(needle) => Ok(()),
                _ => Err(format!(
                    "expected a string containing {operand}, found {}",
                    describe(actual)
                )),
            }
        }
        "$len" => {
            let length = match present {
                Some(Value::Array(items)) => Some(items.len()),
                Some(Value::Object(map)) => Some(map.len()),
                _ => None,
            };
            match (length, operand.as_u64()) {
                (Some(found), Some(want)) if u64::try_from(found).ok() == Some(want) => Ok(()),
                _ => Err(format!(
                    "expected {operand} entries, found {}",
                    describe(actual)
                )),
            }
        }
        _ => Err(format!("unknown operator `{operator}`")),
    }
}

fn scalar_equal(expected: &Value, actual: &Value) -> bool {
    match (expected.as_f64(), actual.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => expected == actual,
    }
}

fn describe(value: Option<&Value>) -> String {
    match value {
        None => "nothing".to_owned(),
        Some(value) => value.to_string(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // harness.md: `expect` targets match "the group status (partial match)".
    #[test]
    fn partial_map_ignores_extra_fields_and_names_the_mismatch() {
        let actual =
            json!({"activeSite": "iad", "topologyGeneration": 3, "authority": {"state": "Valid"}});
        assert_eq!(
            matches(&json!({"activeSite": "iad"}), Some(&actual), None),
            Ok(())
        );
        let error =
            matches(&json!({"activeSite": "pdx"}), Some(&actual), None).expect_err("mismatch");
        assert!(
            error.contains("activeSite") && error.contains("\"pdx\""),
            "{error}"
        );
        let error = matches(
            &json!({"lastFailover": {"exact": true}}),
            Some(&actual),
            None,
        )
        .expect_err("missing");
        assert!(error.starts_with("lastFailover"), "{error}");
    }

    #[test]
    fn lists_match_elements_in_any_order() {
        let actual = json!({"sites": [{"name": "iad", "healthy": true}, {"name": "reader", "healthy": false}]});
        let expected = json!({"sites": [{"name": "reader", "healthy": false}, {"name": "iad"}]});
        assert_eq!(matches(&expected, Some(&actual), None), Ok(()));
        let expected = json!({"sites": [{"name": "reader", "healthy": true}]});
        assert!(matches(&expected, Some(&actual), None).is_err());
    }

    #[test]
    fn comparison_and_existence_operators() {
        let actual = json!({"lost": 3, "exact": true, "note": "errant 1-5"});
        assert_eq!(
            matches(&json!({"lost": {"$gt": 0, "$lte": 3}}), Some(&actual), None),
            Ok(())
        );
        assert!(matches(&json!({"lost": {"$lt": 3}}), Some(&actual), None).is_err());
        assert_eq!(
            matches(&json!({"gone": {"$exists": false}}), Some(&actual), None),
            Ok(())
        );
        assert!(matches(&json!({"lost": {"$exists": false}}), Some(&actual), None).is_err());
        assert_eq!(
            matches(
                &json!({"note": {"$contains": "errant"}}),
                Some(&actual),
                None
            ),
            Ok(())
        );
        assert_eq!(
            matches(&json!({"lost": {"$ne": 0}}), Some(&actual), None),
            Ok(())
        );
        assert_eq!(matches(&json!({"lost": 3.0}), Some(&actual), None), Ok(()));
    }

    // seed 001: with the operator at zero, `status.sites[].lastSeen` freezes.
    #[test]
    fn unchanged_compares_with_the_baseline_by_element_name() {
        let baseline = json!({"sites": [{"name": "iad", "lastSeen": "t1"}, {"name": "pdx", "lastSeen": "t1"}]});
        let frozen = json!({"sites": [{"name": "pdx", "lastSeen": "t1"}, {"name": "iad", "lastSeen": "t1"}]});
        let moved = json!({"sites": [{"name": "iad", "lastSeen": "t2"}, {"name": "pdx", "lastSeen": "t1"}]});
        let expected = json!({"sites": [{"name": "iad", "lastSeen": {"$unchanged": true}}]});
        assert_eq!(matches(&expected, Some(&frozen), Some(&baseline)), Ok(()));
        assert!(matches(&expected, Some(&moved), Some(&baseline)).is_err());
        let changed = json!({"sites": [{"name": "iad", "lastSeen": {"$changed": true}}]});
        assert_eq!(matches(&changed, Some(&moved), Some(&baseline)), Ok(()));
    }

    #[test]
    fn operator_check_rejects_unknown_and_mixed_maps() {
        assert!(check_operators(&json!({"a": {"$gt": 1}}), "group").is_ok());
        let error = check_operators(&json!({"a": {"$bigger": 1}}), "group").expect_err("unknown");
        assert!(
            error.contains("group.a.$bigger") && error.contains("unknown operator"),
            "{error}"
        );
        assert!(check_operators(&json!({"a": {"$gt": 1, "b": 2}}), "group").is_err());
        assert!(check_operators(&json!({"a": {"$gt": "x"}}), "group").is_err());
    }
}
