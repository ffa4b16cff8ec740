//! Sorted, disjoint, non-adjacent inclusive intervals of sequence numbers.

/// A set of sequence numbers as inclusive `(start, end)` intervals: sorted, disjoint and
/// non-adjacent (so the representation of a set is unique and derived equality is set
/// equality).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Intervals(Vec<(u64, u64)>);

/// `end + 1 >= start`, without overflow: the two ranges touch or overlap.
fn touches(end: u64, start: u64) -> bool {
    end.checked_add(1).is_none_or(|next| next >= start)
}

impl Intervals {
    /// Whether no number is in the set.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The intervals, ascending.
    pub(crate) fn ranges(&self) -> &[(u64, u64)] {
        &self.0
    }

    /// The largest number in the set.
    pub(crate) fn last(&self) -> Option<u64> {
        self.0.last().map(|&(_, end)| end)
    }

    /// How many numbers are in the set (saturating at `u64::MAX`).
    pub(crate) fn count(&self) -> u64 {
        self.0.iter().fold(0u64, |total, &(start, end)| {
            total.saturating_add((end - start).saturating_add(1))
        })
    }

    /// Whether `n` is in the set.
    pub(crate) fn contains(&self, n: u64) -> bool {
        let index = self.0.partition_point(|&(_, end)| end < n);
        self.0.get(index).is_some_and(|&(start, _)| start <= n)
    }

    /// Adds one number. Appending the next number (the common case: a new transaction) is
    /// O(1); anything else is a binary search plus at most one merge.
    pub(crate) fn insert(&mut self, n: u64) {
        if let Some(last) = self.0.last_mut() {
            if last.1 >= n && last.0 <= n {
                return;
            }
            if last.1.checked_add(1) == Some(n) {
                last.1 = n;
                return;
            }
            if last.1 < n {
                self.0.push((n, n));
                return;
            }
        } else {
            self.0.push((n, n));
            return;
        }
        self.insert_range(n, n);
    }

    /// Adds `start..=end` (ignored when `start > end`).
    pub(crate) fn insert_range(&mut self, start: u64, end: u64) {
        if start > end {
            return;
        }
        // First interval that could touch the new one, and first one strictly after it.
        let first = self.0.partition_point(|&(_, e)| !touches(e, start));
        let after = self.0.partition_point(|&(s, _)| touches(end, s));
        if first >= after {
            self.0.insert(first, (start, end));
            return;
        }
        let merged = (start.min(self.0[first].0), end.max(self.0[after - 1].1));
        self.0.splice(first..after, std::iter::once(merged));
    }

    /// The union of two sets.
    pub(crate) fn union(&self, other: &Intervals) -> Intervals {
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.0.len() + other.0.len());
        let (mut i, mut j) = (0, 0);
        while i < self.0.len() || j < other.0.len() {
            let next = match (self.0.get(i), other.0.get(j)) {
                (Some(&a), Some(&b)) if a.0 <= b.0 => {
                    i += 1;
                    a
                }
                (Some(_), Some(&b)) => {
                    j += 1;
                    b
                }
                (Some(&a), None) => {
                    i += 1;
                    a
                }
                (None, Some(&b)) => {
                    j += 1;
                    b
                }
                (None, None) => break,
            };
            match merged.last_mut() {
                Some(last) if touches(last.1, next.0) => last.1 = last.1.max(next.1),
                _ => merged.push(next),
            }
        }
        Intervals(merged)
    }

    /// The numbers in `self` that are not in `other`.
    pub(crate) fn subtract(&self, other: &Intervals) -> Intervals {
        let mut result = Vec::with_capacity(self.0.len());
        let mut j = 0;
        for &(start, end) in &self.0 {
            let mut cursor = start;
            let mut open = true;
            while j < other.0.len() && other.0[j].1 < cursor {
                j += 1;
            }
            let mut k = j;
            while open && k < other.0.len() && other.0[k].0 <= end {
                let (cut_start, cut_end) = other.0[k];
                if cut_start > cursor {
                    result.push((cursor, cut_start - 1));
                }
                match cut_end.checked_add(1) {
                    Some(next) if next <= end => cursor = cursor.max(next),
                    _ => open = false,
                }
                k += 1;
            }
            if open {
                result.push((cursor, end));
            }
        }
        Intervals(result)
    }

    /// The numbers in both sets.
    pub(crate) fn intersect(&self, other: &Intervals) -> Intervals {
        self.subtract(&self.subtract(other))
    }

    /// Whether every number of `other` is in `self`.
    pub(crate) fn contains_all(&self, other: &Intervals) -> bool {
        let mut i = 0;
        for &(start, end) in &other.0 {
            while i < self.0.len() && self.0[i].1 < start {
                i += 1;
            }
            match self.0.get(i) {
                Some(&(s, e)) if s <= start && e >= end => {}
                _ => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ranges: &[(u64, u64)]) -> Intervals {
        let mut result = Intervals::default();
        for &(s, e) in ranges {
            result.insert_range(s, e);
        }
        result
    }

    // Brief (simulator calls insert a lot): appends coalesce into one interval.
    #[test]
    fn sequential_inserts_coalesce_into_one_interval() {
        let mut intervals = Intervals::default();
        for n in 1..=1000 {
            intervals.insert(n);
        }
        assert_eq!(intervals.ranges(), &[(1, 1000)]);
        intervals.insert(1002);
        intervals.insert(1001);
        assert_eq!(intervals.ranges(), &[(1, 1002)]);
    }

    #[test]
    fn out_of_order_inserts_merge_neighbours() {
        let intervals = set(&[(5, 6), (1, 2), (3, 4), (10, 10)]);
        assert_eq!(intervals.ranges(), &[(1, 6), (10, 10)]);
        assert!(intervals.contains(6));
        assert!(!intervals.contains(7));
        assert_eq!(intervals.count(), 7);
    }

    #[test]
    fn subtract_cuts_holes_and_edges_at_u64_max() {
        let a = set(&[(1, 10), (20, u64::MAX)]);
        let b = set(&[(3, 4), (10, 21), (u64::MAX, u64::MAX)]);
        assert_eq!(
            a.subtract(&b).ranges(),
            &[(1, 2), (5, 9), (22, u64::MAX - 1)]
        );
        assert_eq!(
            a.intersect(&b).ranges(),
            &[(3, 4), (10, 10), (20, 21), (u64::MAX, u64::MAX)]
        );
        assert!(a.contains_all(&set(&[(1, 2), (30, 40)])));
        assert!(!a.contains_all(&set(&[(10, 11)])));
    }
}
