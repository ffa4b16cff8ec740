//! Simulated network: which nodes can reach which, and how long a message takes.
//!
//! Nodes are the three sites (mysqld and its sidecar share a pod and fail together on the network)
//! and the operator. Links are symmetric; a partition cuts a set of links until it heals.

/// Number of simulated sites (iad, pdx, reader).
pub const SITE_COUNT: usize = 3;

/// Index of the operator among the network nodes.
pub const OPERATOR_NODE: usize = SITE_COUNT;

/// Number of network nodes: every site plus the operator.
pub const NODE_COUNT: usize = SITE_COUNT + 1;

/// Smallest one-way latency of a message between two nodes, in milliseconds.
pub const LATENCY_MILLIS_MIN: u64 = 1;

/// Largest one-way latency of a message between two nodes, in milliseconds.
pub const LATENCY_MILLIS_MAX: u64 = 40;

/// The link matrix. `cut[a][b]` counts the partitions currently cutting the link a-b.
#[derive(Debug, Clone, Default)]
pub struct Network {
    cut: [[u32; NODE_COUNT]; NODE_COUNT],
}

/// A set of links cut together and healed together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// The cut links, each as a node pair.
    pub links: Vec<(usize, usize)>,
    /// Human-readable description for the trace.
    pub label: String,
}

impl Network {
    /// A fully connected network.
    pub fn new() -> Network {
        Network::default()
    }

    /// Whether `a` and `b` can exchange messages now. A node always reaches itself.
    pub fn connected(&self, a: usize, b: usize) -> bool {
        a == b || self.cut[a][b] == 0
    }

    /// Whether no link is cut.
    pub fn fully_connected(&self) -> bool {
        self.cut.iter().flatten().all(|&c| c == 0)
    }

    /// Cuts every link of `partition`.
    pub fn apply(&mut self, partition: &Partition) {
        for &(a, b) in &partition.links {
            self.cut[a][b] += 1;
            self.cut[b][a] += 1;
        }
    }

    /// Heals every link of `partition` (links cut by another live partition stay cut).
    pub fn heal(&mut self, partition: &Partition) {
        for &(a, b) in &partition.links {
            self.cut[a][b] = self.cut[a][b].saturating_sub(1);
            self.cut[b][a] = self.cut[b][a].saturating_sub(1);
        }
    }
}

/// Every link between `node` and any other node.
pub fn isolate(node: usize) -> Vec<(usize, usize)> {
    (0..NODE_COUNT)
        .filter(|&other| other != node)
        .map(|other| (node, other))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Overlapping partitions: healing one must not heal a link the other still cuts.
    #[test]
    fn overlapping_partitions_heal_independently() {
        let mut net = Network::new();
        let a = Partition {
            links: isolate(0),
            label: "iad isolated".into(),
        };
        let b = Partition {
            links: vec![(0, 1)],
            label: "iad-pdx".into(),
        };
        net.apply(&a);
        net.apply(&b);
        net.heal(&a);
        assert!(!net.connected(0, 1));
        assert!(net.connected(0, OPERATOR_NODE));
        net.heal(&b);
        assert!(net.fully_connected());
    }
}
