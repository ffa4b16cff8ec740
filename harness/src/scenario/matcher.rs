//! Partial matching of expected YAML against live JSON (`group`, `object`, `body`, ...).
//!
//! A plain map matches when every key it names matches (other keys are ignored); a list
//! matches when every expected element matches a distinct actual element, in any order;
//! a scalar matches an equal scalar (numbers compare numerically). A map whose keys all
//! start with `$` is an operator map:
//!
//! | operator | holds when the actual value |
//! |---|---|
//! | `$gt`, `$gte`, `$lt`, `$lte` | is a number in that relation (or, against an RFC 3339 time, a time in that order) |
//! | `$ne` | is present and differs |
//! | `$exists: false` / `true` | is absent or null / present |
//! | `$unchanged: true` | is present and equals the baseline (present too) |
//! | `$changed: true` | is present and differs from the baseline (present too) |
//! | `$contains` | is a string containing it |
//! | `$len` | is a list or map with that many entries |
//! | `$exact: [..]` | is a list of exactly these elements, each matching one (any order) |
//!
//! The baseline is the observation before the step's fault (see
//! [`crate::runner::execute`]), else the expectation's first poll.

use serde_json::Value;

/// The operators an operator map may use.
pub const OPERATORS: [&str; 11] = [
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
    "$exact",
];

/// Checks that every `$` key in `expected` is a known operator used correctly, and that
/// nothing in it matches vacuously: an empty map or list matches anything (only `$exact: []`
/// says "exactly empty"), and `$changed`/`$unchanged` inside a list element without `name`
/// has no baseline element to compare with.
pub fn check_operators(expected: &Value, path: &str) -> Result<(), String> {
    check_operators_in(expected, path, None)
}

/// [`check_operators`]; `unnamed_element` is the path of the nearest enclosing list element
/// that has no `name` (its baseline cannot be found).
fn check_operators_in(
    expected: &Value,
    path: &str,
    unnamed_element: Option<&str>,
) -> Result<(), String> {
    let shown = if path.is_empty() { "(root)" } else { path };
    match expected {
        Value::Object(map) if map.is_empty() => Err(format!(
            "{shown}: an empty map matches anything; name the fields it must have"
        )),
        Value::Array(items) if items.is_empty() => Err(format!(
            "{shown}: an empty list matches any list; use `{{$exact: []}}` for \"no element\" or `{{$len: 0}}`"
        )),
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
                    if let (Some(element), "$changed" | "$unchanged") = (unnamed_element, key.as_str())
                    {
                        return Err(format!(
                            "{shown}: `{key}` inside the list element {element}, which has no `name`: \
                             its baseline element cannot be found, so it would compare with nothing"
                        ));
                    }
                    check_operator(key, value, &child)?;
                    if key == "$exact" {
                        // `$exact: []` is the explicit "no element"; its elements are checked.
                        for (index, item) in value.as_array().into_iter().flatten().enumerate() {
                            let element = format!("{child}[{index}]");
                            let unnamed = unnamed_element.or_else(|| {
                                item.get("name").is_none().then_some(element.as_str())
                            });
                            check_operators_in(item, &element, unnamed)?;
                        }
                    }
                } else {
                    check_operators_in(value, &child, unnamed_element)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => items.iter().enumerate().try_for_each(|(index, item)| {
            let element = format!("{path}[{index}]");
            let unnamed = unnamed_element
                .map(str::to_owned)
                .or_else(|| item.get("name").is_none().then(|| element.clone()));
            check_operators_in(item, &element, unnamed.as_deref())
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => Ok(()),
    }
}

fn check_operator(key: &str, value: &Value, path: &str) -> Result<(), String> {
    // A whole `${var}` stands for a saved value of any type (substituted before matching).
    let placeholder = value.as_str().is_some_and(|text| {
        text.strip_prefix("${")
            .and_then(|rest| rest.strip_suffix('}'))
            .is_some_and(|name| !name.is_empty())
    });
    let typed = match key {
        "$gt" | "$gte" | "$lt" | "$lte" => {
            value.is_number() || value.as_str().and_then(timestamp).is_some()
        }
        "$exists" | "$unchanged" | "$changed" => value.is_boolean(),
        "$contains" => value.is_string(),
        "$len" => value.is_u64(),
        "$exact" => value.is_array(),
        "$ne" => true,
        _ => {
            return Err(format!(
                "{path}: unknown operator `{key}`, expected one of {}",
                OPERATORS.join(", ")
            ))
        }
    };
    let ok = typed || placeholder;
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
            match_list(expected_items, actual_items, baseline, path)
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

/// Matches every expected element with a distinct actual element, in any order (a
/// bipartite matching, so overlapping partial patterns cannot hide a solution). Extra actual
/// elements are allowed; `$exact` checks the length on top.
fn match_list(
    expected_items: &[Value],
    actual_items: &[Value],
    baseline: Option<&Value>,
    path: &str,
) -> Result<(), String> {
    let shown = if path.is_empty() { "(root)" } else { path };
    // fits[i]: the actual elements expected element i matches.
    let mut fits: Vec<Vec<usize>> = Vec::with_capacity(expected_items.len());
    for (index, expected_item) in expected_items.iter().enumerate() {
        let base_item = baseline_item(expected_item, baseline);
        let mut last_error = None;
        let mut slots = Vec::new();
        for (slot, actual_item) in actual_items.iter().enumerate() {
            match match_at(
                expected_item,
                Some(actual_item),
                base_item,
                &format!("{path}[{index}]"),
            ) {
                Ok(()) => slots.push(slot),
                Err(error) => last_error = Some(error),
            }
        }
        if slots.is_empty() {
            return Err(last_error.unwrap_or_else(|| {
                format!("{shown}[{index}]: no element to match {expected_item}")
            }));
        }
        fits.push(slots);
    }
    // Kuhn's augmenting paths: owner[slot] = the expected element using it.
    let mut owner: Vec<Option<usize>> = vec![None; actual_items.len()];
    for index in 0..fits.len() {
        let mut visited = vec![false; actual_items.len()];
        if !augment(index, &fits, &mut owner, &mut visited) {
            return Err(format!(
                "{shown}[{index}]: no element left to match {} (the others are taken)",
                expected_items.get(index).unwrap_or(&Value::Null)
            ));
        }
    }
    Ok(())
}

fn augment(
    index: usize,
    fits: &[Vec<usize>],
    owner: &mut [Option<usize>],
    visited: &mut [bool],
) -> bool {
    for &slot in fits.get(index).map(Vec::as_slice).unwrap_or_default() {
        if visited.get(slot).copied().unwrap_or(true) {
            continue;
        }
        if let Some(flag) = visited.get_mut(slot) {
            *flag = true;
        }
        let taken_by = owner.get(slot).copied().flatten();
        let free = match taken_by {
            None => true,
            Some(other) => augment(other, fits, owner, visited),
        };
        if free {
            if let Some(entry) = owner.get_mut(slot) {
                *entry = Some(index);
            }
            return true;
        }
    }
    false
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
        "$gt" | "$gte" | "$lt" | "$lte" => compare(operator, operand, actual),
        "$ne" => match present {
            Some(found) if scalar_equal(operand, found) => {
                Err(format!("expected anything but {operand}"))
            }
            // Absence is not a value: `$ne` asserts a field that is there.
            None => Err(format!(
                "expected a value other than {operand}, found nothing"
            )),
            Some(_) => Ok(()),
        },
        "$exists" => match (operand.as_bool(), present) {
            (Some(true), None) => Err("expected the field to exist, found none".to_owned()),
            (Some(false), Some(found)) => Err(format!("expected no value, found {found}")),
            _ => Ok(()),
        },
        "$unchanged" | "$changed" => {
            let want_same = (operator == "$unchanged") == operand.as_bool().unwrap_or(true);
            against_baseline(
                want_same,
                baseline.filter(|value| !value.is_null()),
                present,
            )
        }
        "$exact" => exact_list(operand, actual, baseline),
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
        "$len" => length(operand, actual),
        _ => Err(format!("unknown operator `{operator}`")),
    }
}

/// `$gt`, `$gte`, `$lt`, `$lte`: numbers, or RFC 3339 times given one.
fn compare(operator: &str, operand: &Value, actual: Option<&Value>) -> Result<(), String> {
    let present = actual.filter(|value| !value.is_null());
    let order = match (operand, present) {
        (Value::String(limit), Some(Value::String(found))) => {
            match (timestamp(limit), timestamp(found)) {
                (Some(limit), Some(found)) => Some(found.cmp(&limit)),
                _ => None,
            }
        }
        (_, found) => operand
            .as_f64()
            .zip(found.and_then(Value::as_f64))
            .and_then(|(limit, found)| found.partial_cmp(&limit)),
    };
    let Some(order) = order else {
        return Err(format!(
            "expected a number (or an RFC 3339 time, given one) {operator} {operand}, found {}",
            describe(actual)
        ));
    };
    let holds = match operator {
        "$gt" => order.is_gt(),
        "$gte" => order.is_ge(),
        "$lt" => order.is_lt(),
        _ => order.is_le(),
    };
    if holds {
        Ok(())
    } else {
        Err(format!(
            "expected {operator} {operand}, found {}",
            describe(actual)
        ))
    }
}

/// `$unchanged` (`want_same`) and `$changed`, against the value at the baseline.
fn against_baseline(
    want_same: bool,
    base: Option<&Value>,
    present: Option<&Value>,
) -> Result<(), String> {
    match (want_same, base, present) {
        // Both need a value now: an absent field is neither frozen nor changed.
        (_, _, None) => Err(format!(
            "expected {} from {}, found nothing",
            if want_same {
                "it unchanged"
            } else {
                "a change"
            },
            describe(base)
        )),
        (true, None, Some(found)) => Err(format!(
            "expected it unchanged, but it had no value at the baseline (now {found})"
        )),
        // Nothing to compare with is not a change: `$exists` says "it appeared".
        (false, None, Some(found)) => Err(format!(
            "expected a change, but it had no value at the baseline to change from (now {found})"
        )),
        (true, Some(before), Some(found)) if !scalar_equal(before, found) => Err(format!(
            "expected it unchanged from {before}, found {found}"
        )),
        (false, Some(before), Some(found)) if scalar_equal(before, found) => {
            Err(format!("expected a change from {before}"))
        }
        _ => Ok(()),
    }
}

/// `$exact`: a list of exactly these elements, in order.
fn exact_list(
    operand: &Value,
    actual: Option<&Value>,
    baseline: Option<&Value>,
) -> Result<(), String> {
    let Some(expected_items) = operand.as_array() else {
        return Err(format!("`$exact` needs a list, found {operand}"));
    };
    let Some(Value::Array(actual_items)) = actual.filter(|value| !value.is_null()) else {
        return Err(format!(
            "expected exactly the list {operand}, found {}",
            describe(actual)
        ));
    };
    if expected_items.len() != actual_items.len() {
        return Err(format!(
            "expected exactly {} elements, found {}: {}",
            expected_items.len(),
            actual_items.len(),
            Value::Array(actual_items.clone())
        ));
    }
    match_list(expected_items, actual_items, baseline, "")
        .map_err(|why| format!("exact list: {why}"))
}

/// `$len`: the number of a list's elements or a map's entries.
fn length(operand: &Value, actual: Option<&Value>) -> Result<(), String> {
    let length = match actual.filter(|value| !value.is_null()) {
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

/// An RFC 3339 time (`2026-01-01T00:00:07Z`), which `$gt` ... compare in time order.
fn timestamp(text: &str) -> Option<jiff::Timestamp> {
    text.parse().ok()
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

    // docs/design/harness.md#scenario-files: `expect` targets the group status by partial match.
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

    // docs/design/requirements.md R001.12 (scenario 015): a deferred planned failover proceeds
    // at expiry, `promotedAt >= cooldownUntil`, compared in time order (a different offset or
    // precision is no problem).
    #[test]
    fn comparisons_order_rfc3339_times() {
        let actual = json!({"promotedAt": "2026-01-01T00:00:30.5Z"});
        let at_least = |limit: &str| json!({"promotedAt": {"$gte": limit}});
        assert_eq!(
            matches(&at_least("2026-01-01T00:00:30Z"), Some(&actual), None),
            Ok(())
        );
        assert_eq!(
            matches(&at_least("2026-01-01T00:00:30.5Z"), Some(&actual), None),
            Ok(())
        );
        assert_eq!(
            matches(&at_least("2026-01-01T01:00:30+01:00"), Some(&actual), None),
            Ok(())
        );
        let error =
            matches(&at_least("2026-01-01T00:00:31Z"), Some(&actual), None).expect_err("early");
        assert!(error.contains("promotedAt"), "{error}");
        assert!(matches(
            &json!({"promotedAt": {"$lt": "2026-01-01T00:00:30Z"}}),
            Some(&actual),
            None
        )
        .is_err());
        // Not a time, or nothing there: never a pass.
        assert!(matches(
            &at_least("2026-01-01T00:00:30Z"),
            Some(&json!({"promotedAt": "soon"})),
            None
        )
        .is_err());
        assert!(matches(&at_least("2026-01-01T00:00:30Z"), Some(&json!({})), None).is_err());
        assert!(check_operators(&json!({"a": {"$gte": "2026-01-01T00:00:30Z"}}), "group").is_ok());
        assert!(check_operators(&json!({"a": {"$gte": "later"}}), "group").is_err());
    }

    // docs/design/requirements.md R001.3: with the operator at zero, `status.sites[].lastSeen`
    // freezes.
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

    // `$ne: true` must not pass because the field is missing: absence is not a value.
    #[test]
    fn ne_does_not_pass_on_an_absent_field() {
        let expected = json!({"spec": {"publishNotReadyAddresses": {"$ne": true}}});
        assert_eq!(
            matches(
                &expected,
                Some(&json!({"spec": {"publishNotReadyAddresses": false}})),
                None
            ),
            Ok(())
        );
        assert!(matches(
            &expected,
            Some(&json!({"spec": {"publishNotReadyAddresses": true}})),
            None
        )
        .is_err());
        for absent in [
            json!({"spec": {}}),
            json!({"spec": {"publishNotReadyAddresses": null}}),
        ] {
            let error = matches(&expected, Some(&absent), None).expect_err("absent");
            assert!(error.contains("publishNotReadyAddresses"), "{error}");
        }
    }

    // `$unchanged` must not pass because the field was and is missing (a frozen `lastSeen`
    // that was never written is not frozen); `$changed` needs a value now.
    #[test]
    fn unchanged_and_changed_do_not_pass_on_an_absent_field() {
        let unchanged = json!({"sites": [{"name": "iad", "lastSeen": {"$unchanged": true}}]});
        let never_seen = json!({"sites": [{"name": "iad"}]});
        assert!(matches(&unchanged, Some(&never_seen), Some(&never_seen)).is_err());
        let seen = json!({"sites": [{"name": "iad", "lastSeen": "t1"}]});
        assert!(matches(&unchanged, Some(&never_seen), Some(&seen)).is_err());
        assert!(matches(&unchanged, Some(&seen), Some(&never_seen)).is_err());
        assert_eq!(matches(&unchanged, Some(&seen), Some(&seen)), Ok(()));
        let changed = json!({"sites": [{"name": "iad", "lastSeen": {"$changed": true}}]});
        assert!(matches(&changed, Some(&never_seen), Some(&seen)).is_err());
        assert!(matches(&changed, Some(&never_seen), Some(&never_seen)).is_err());
        // No baseline value: nothing to change from (it passed, so any appearance or a
        // baseline taken at the wrong place read as a change). `$exists` says "appeared".
        let error = matches(&changed, Some(&seen), Some(&never_seen)).expect_err("no baseline");
        assert!(error.contains("no value at the baseline"), "{error}");
        let later = json!({"sites": [{"name": "iad", "lastSeen": "t2"}]});
        assert_eq!(matches(&changed, Some(&later), Some(&seen)), Ok(()));
    }

    // Vacuous expectations are refused when the file is validated, naming where.
    #[test]
    fn empty_values_and_unnamed_baselines_are_refused() {
        let error = check_operators(&json!({"status": {}}), "group").expect_err("empty map");
        assert!(error.starts_with("group.status: an empty map"), "{error}");
        let error = check_operators(&json!({"sites": []}), "group").expect_err("empty list");
        assert!(error.starts_with("group.sites: an empty list"), "{error}");
        assert!(check_operators(&json!({}), "object.match").is_err());
        assert!(check_operators(&json!({"sites": {"$exact": []}}), "group").is_ok());
        assert!(check_operators(&json!({"sites": {"$len": 0}}), "group").is_ok());
        let error = check_operators(
            &json!({"sites": [{"role": "primary", "lastSeen": {"$changed": true}}]}),
            "group",
        )
        .expect_err("no name");
        assert!(
            error.starts_with(
                "group.sites[0].lastSeen: `$changed` inside the list element group.sites[0]"
            ),
            "{error}"
        );
        let error = check_operators(
            &json!({"sites": {"$exact": [{"role": "primary", "x": {"$unchanged": true}}]}}),
            "group",
        )
        .expect_err("no name in $exact");
        assert!(error.contains("`$unchanged`"), "{error}");
        assert!(check_operators(
            &json!({"sites": [{"name": "iad", "lastSeen": {"$changed": true}}]}),
            "group"
        )
        .is_ok());
    }

    // A plain list is a partial match (extra elements are ignored); `$exact` matches every
    // element, none left over.
    #[test]
    fn lists_can_be_matched_exactly() {
        let actual = json!({"sites": [{"name": "iad", "healthy": true}, {"name": "pdx", "healthy": true}, {"name": "reader", "healthy": false}]});
        let two = json!({"sites": {"$exact": [{"name": "pdx"}, {"name": "iad"}]}});
        let error = matches(&two, Some(&actual), None).expect_err("an element left over");
        assert!(error.contains("sites") && error.contains("3"), "{error}");
        let three = json!({"sites": {"$exact": [{"name": "pdx"}, {"name": "iad"}, {"name": "reader", "healthy": false}]}});
        assert_eq!(matches(&three, Some(&actual), None), Ok(()));
        let wrong = json!({"sites": {"$exact": [{"name": "pdx"}, {"name": "iad"}, {"name": "reader", "healthy": true}]}});
        assert!(matches(&wrong, Some(&actual), None).is_err());
        let targets = json!({"targets": {"$exact": ["10.0.0.1"]}});
        assert_eq!(
            matches(&targets, Some(&json!({"targets": ["10.0.0.1"]})), None),
            Ok(())
        );
        assert!(matches(
            &targets,
            Some(&json!({"targets": ["10.0.0.1", "10.0.0.2"]})),
            None
        )
        .is_err());
        assert!(matches(&targets, Some(&json!({"targets": []})), None).is_err());
        assert!(matches(&targets, Some(&json!({})), None).is_err());
        // Overlapping partial patterns: the matching is not greedy.
        let overlapping = json!({"$exact": [{"name": "a"}, {"name": "a", "x": 1}]});
        assert_eq!(
            matches(
                &overlapping,
                Some(&json!([{"name": "a", "x": 1}, {"name": "a"}])),
                None
            ),
            Ok(())
        );
        assert!(check_operators(&json!({"a": {"$exact": [1]}}), "group").is_ok());
        assert!(check_operators(&json!({"a": {"$exact": 1}}), "group").is_err());
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
        // A saved `${var}` may stand for the number.
        assert!(check_operators(&json!({"a": {"$gt": "${gen}"}}), "group").is_ok());
        assert!(check_operators(&json!({"a": {"$bigger": "${gen}"}}), "group").is_err());
    }
}
