//! The partition table shared by the runtime (routes) and the proxy (refusals).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::RwLock;

use tokio::sync::watch;

use super::naming::ClusterNaming;

/// One active partition between two sets of node indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// One side.
    pub side_a: BTreeSet<u8>,
    /// The other side.
    pub side_b: BTreeSet<u8>,
}

impl Partition {
    /// Whether traffic between nodes `x` and `y` crosses this partition.
    pub fn separates(&self, x: u8, y: u8) -> bool {
        (self.side_a.contains(&x) && self.side_b.contains(&y))
            || (self.side_b.contains(&x) && self.side_a.contains(&y))
    }
}

/// The active partitions of one cluster; changes are announced on a watch channel.
#[derive(Debug)]
pub struct Partitions {
    naming: ClusterNaming,
    active: RwLock<Vec<Partition>>,
    generation: watch::Sender<u64>,
}

impl Partitions {
    /// No partitions.
    pub fn new(naming: ClusterNaming) -> Self {
        Self {
            naming,
            active: RwLock::new(Vec::new()),
            generation: watch::channel(0).0,
        }
    }

    /// Adds a partition.
    pub fn add(&self, partition: Partition) {
        self.active
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(partition);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Removes a partition (all equal ones).
    pub fn remove(&self, partition: &Partition) {
        self.active
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|p| p != partition);
        self.generation.send_modify(|g| *g += 1);
    }

    /// The active partitions.
    pub fn list(&self) -> Vec<Partition> {
        self.active
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The node index of a pod IP of this cluster, or `None` (root namespace, loopback...).
    pub fn node_of(&self, ip: IpAddr) -> Option<u8> {
        let IpAddr::V4(v4) = ip else { return None };
        let range = self.naming.cluster_pod_range();
        // Gateways (.1) are the root namespace, never behind a partition.
        (range.contains(v4) && v4.octets()[3] != 1).then(|| v4.octets()[2])
    }

    /// Whether traffic from `source` to `destination` is cut by a partition.
    pub fn blocks(&self, source: IpAddr, destination: IpAddr) -> bool {
        let (Some(x), Some(y)) = (self.node_of(source), self.node_of(destination)) else {
            return false;
        };
        self.active
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|p| p.separates(x, y))
    }

    /// A receiver that changes whenever partitions change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// The cluster's naming.
    pub fn naming(&self) -> &ClusterNaming {
        &self.naming
    }
}

/// Shorthand for a pod IP in tests and callers.
pub fn pod_ip(naming: &ClusterNaming, node: u8, host: u8) -> Ipv4Addr {
    let base = naming.pod_subnet(node).addr.octets();
    Ipv4Addr::new(base[0], base[1], base[2], host)
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/localkube.md#faults: the proxy refuses cross-site connections during a partition.
    #[test]
    fn partition_blocks_only_across_sides() {
        let naming = ClusterNaming {
            prefix: "lkabcd".into(),
            slot: 0,
        };
        let table = Partitions::new(naming.clone());
        let a = IpAddr::V4(pod_ip(&naming, 0, 5));
        let b = IpAddr::V4(pod_ip(&naming, 1, 5));
        let c = IpAddr::V4(pod_ip(&naming, 2, 5));
        let p = Partition {
            side_a: [0].into(),
            side_b: [1].into(),
        };
        table.add(p.clone());
        assert!(table.blocks(a, b) && table.blocks(b, a));
        assert!(!table.blocks(a, c) && !table.blocks(c, b));
        assert!(!table.blocks(IpAddr::V4(Ipv4Addr::LOCALHOST), b));
        assert!(
            !table.blocks(IpAddr::V4(naming.gateway(0)), b),
            "the root namespace is never partitioned"
        );
        table.remove(&p);
        assert!(!table.blocks(a, b));
    }
}
