//! Names and address ranges of one cluster, derived from its state directory.
//!
//! Every netns, link and bridge name starts with a prefix hashed from the state directory
//! (`lk` + 4 hex digits), so two clusters run side by side and `cleanup` can find its own
//! leftovers by name. Address ranges come from a cluster slot (0..[`CLUSTER_SLOTS_MAX`])
//! claimed in a machine-wide registry under `/run/localkube/clusters`, so two clusters
//! running at the same time never share a range:
//!
//! | range | slot `c` |
//! |---|---|
//! | pod subnet of node `n` | `10.(244+c).n.0/24`, gateway `10.(244+c).n.1` |
//! | Service range | `10.(96+c).0.0/16` (slot 0 is Kubernetes' default `10.96.0.0/16`) |
//! | cluster DNS | `10.(96+c).0.10` (as kube-dns) |

use std::fs;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::{Error, Result};

/// How many clusters may run on one machine at the same time (second octets 244..=255).
pub const CLUSTER_SLOTS_MAX: usize = 12;
/// How many nodes one cluster may have (third octet of the pod range).
pub const NODES_MAX: usize = 250;
/// Where cluster slots are claimed; a tmpfs, so a reboot frees every slot.
pub const SLOT_REGISTRY_DIR: &str = "/run/localkube/clusters";

/// An IPv4 network in CIDR form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Ipv4Cidr {
    /// The network address.
    pub addr: Ipv4Addr,
    /// The prefix length.
    pub prefix_len: u8,
}

impl Ipv4Cidr {
    /// Whether `ip` lies in this network.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = if self.prefix_len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix_len))
        };
        (u32::from(ip) & mask) == (u32::from(self.addr) & mask)
    }
}

impl std::fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// The names and ranges of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNaming {
    /// Prefix of every link and netns name (6 characters, `lk` + 4 hex digits).
    pub prefix: String,
    /// The claimed cluster slot.
    pub slot: u8,
}

impl ClusterNaming {
    /// The prefix derived from a state directory (it should be canonical).
    pub fn prefix_for(state_dir: &Path) -> String {
        let digest = Sha256::digest(state_dir.as_os_str().as_encoded_bytes());
        format!("lk{:02x}{:02x}", digest[0], digest[1])
    }

    /// Claims (or re-claims) a cluster slot for `state_dir` in [`SLOT_REGISTRY_DIR`].
    pub fn claim(state_dir: &Path) -> Result<Self> {
        Self::claim_in(Path::new(SLOT_REGISTRY_DIR), state_dir)
    }

    /// As [`ClusterNaming::claim`] with an explicit registry directory.
    ///
    /// A slot whose recorded state directory no longer exists is stale and reclaimed; a
    /// slot whose state directory exists belongs to a cluster that is running or was not
    /// cleaned up yet, so its address ranges may still be in use and it is skipped.
    pub fn claim_in(registry: &Path, state_dir: &Path) -> Result<Self> {
        fs::create_dir_all(registry).map_err(Error::io("create slot registry", registry))?;
        let me = SlotOwner::me(state_dir);
        for slot in 0..CLUSTER_SLOTS_MAX {
            let path = slot_path(registry, slot);
            if SlotOwner::read(&path).is_some_and(|owner| owner.state_dir == me.state_dir) {
                fs::write(&path, me.encode()).map_err(Error::io("write cluster slot", &path))?;
                return Ok(Self::new(state_dir, slot));
            }
        }
        for slot in 0..CLUSTER_SLOTS_MAX {
            let path = slot_path(registry, slot);
            if let Some(owner) = SlotOwner::read(&path) {
                if let Some(reason) = owner.stale_reason() {
                    tracing::info!(slot, stale_owner = %owner.state_dir.display(), reason, "reclaiming stale cluster slot");
                    if owner.state_dir.exists() {
                        // Its process died without `down`: remove its leftovers (their
                        // addresses are this slot's ranges) before reusing the slot.
                        if let Err(err) = super::state::cleanup(&owner.state_dir) {
                            tracing::warn!(slot, error = %err, "cleanup of a stale cluster failed; skipping its slot");
                            continue;
                        }
                    }
                    let _ = fs::remove_file(&path);
                }
            }
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut file) => {
                    file.write_all(me.encode().as_bytes())
                        .map_err(Error::io("write cluster slot", &path))?;
                    return Ok(Self::new(state_dir, slot));
                }
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(Error::io("create cluster slot", path)(err)),
            }
        }
        Err(Error::NoClusterSlot(CLUSTER_SLOTS_MAX))
    }

    /// Releases this state directory's slot, if it holds one.
    pub fn release_in(registry: &Path, state_dir: &Path) -> Result<()> {
        for slot in 0..CLUSTER_SLOTS_MAX {
            let path = slot_path(registry, slot);
            if SlotOwner::read(&path).is_some_and(|owner| owner.state_dir == state_dir) {
                fs::remove_file(&path).map_err(Error::io("remove cluster slot", &path))?;
            }
        }
        Ok(())
    }

    fn new(state_dir: &Path, slot: usize) -> Self {
        Self {
            prefix: Self::prefix_for(state_dir),
            slot: slot as u8,
        }
    }

    /// The cluster bridge every pod veth is attached to.
    pub fn bridge(&self) -> String {
        format!("{}-br", self.prefix)
    }

    /// The bridge's fixed MAC address (locally administered, one per cluster slot). Left
    /// unset, a Linux bridge takes the lowest MAC of its ports and changes it whenever a
    /// veth with a lower one joins; every pod's ARP entry for its gateway then points at a
    /// MAC nobody answers for until it is re-resolved (~30 s of stalled traffic).
    pub fn bridge_mac(&self) -> String {
        format!("02:6c:6b:00:{:02x}:01", self.slot)
    }

    /// The network namespace of sandbox number `n`.
    pub fn netns(&self, n: u32) -> String {
        format!("{}-p{n}", self.prefix)
    }

    /// The root-namespace end of sandbox `n`'s veth pair.
    pub fn host_veth(&self, n: u32) -> String {
        format!("{}-h{n}", self.prefix)
    }

    /// The pod end of sandbox `n`'s veth pair before it is renamed to `eth0`.
    pub fn pod_veth(&self, n: u32) -> String {
        format!("{}-c{n}", self.prefix)
    }

    /// All pod subnets of the cluster (`10.(244+c).0.0/16`).
    pub fn cluster_pod_range(&self) -> Ipv4Cidr {
        Ipv4Cidr {
            addr: Ipv4Addr::new(10, 244 + self.slot, 0, 0),
            prefix_len: 16,
        }
    }

    /// The pod subnet of node index `node` (`10.(244+c).node.0/24`).
    pub fn pod_subnet(&self, node: u8) -> Ipv4Cidr {
        Ipv4Cidr {
            addr: Ipv4Addr::new(10, 244 + self.slot, node, 0),
            prefix_len: 24,
        }
    }

    /// The gateway of node index `node` (`.1` of its subnet, on the cluster bridge).
    pub fn gateway(&self, node: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 244 + self.slot, node, 1)
    }

    /// The Service (ClusterIP) range.
    pub fn service_range(&self) -> Ipv4Cidr {
        Ipv4Cidr {
            addr: Ipv4Addr::new(10, 96 + self.slot, 0, 0),
            prefix_len: 16,
        }
    }

    /// The cluster DNS address (`.0.10` of the Service range, as kube-dns).
    pub fn dns_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 96 + self.slot, 0, 10)
    }

    /// Whether a link or netns name belongs to this cluster.
    pub fn owns(&self, name: &str) -> bool {
        name.starts_with(&format!("{}-", self.prefix))
    }
}

/// Who holds a slot: the state dir, and the process (pid and start time) that claimed it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SlotOwner {
    state_dir: PathBuf,
    pid: Option<i32>,
    start_time: Option<u64>,
}

impl SlotOwner {
    fn me(state_dir: &Path) -> Self {
        let pid = std::process::id() as i32;
        Self {
            state_dir: state_dir.to_path_buf(),
            pid: Some(pid),
            start_time: super::state::process_start_time(pid),
        }
    }

    /// Lines: state dir, pid, start time (older files have the state dir only).
    fn read(path: &Path) -> Option<Self> {
        let text = fs::read_to_string(path).ok()?;
        let mut lines = text.lines();
        let state_dir = PathBuf::from(lines.next().filter(|l| !l.is_empty())?);
        let pid = lines.next().and_then(|l| l.parse().ok());
        let start_time = lines.next().and_then(|l| l.parse().ok());
        Some(Self {
            state_dir,
            pid,
            start_time,
        })
    }

    fn encode(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.state_dir.display(),
            self.pid.map_or(String::new(), |p| p.to_string()),
            self.start_time.map_or(String::new(), |t| t.to_string())
        )
    }

    /// Why the slot may be taken over, or `None` while its owner may still use it.
    fn stale_reason(&self) -> Option<&'static str> {
        if !self.state_dir.exists() {
            return Some("its state dir is gone");
        }
        match self.pid {
            Some(pid) if !super::state::process_alive(pid, self.start_time.unwrap_or(0)) => {
                Some("its process is gone")
            }
            _ => None,
        }
    }
}

fn slot_path(registry: &Path, slot: usize) -> PathBuf {
    registry.join(slot.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/localkube.md#node-agent: two clusters (two tests) run side by side with their
    // own names and ranges.
    #[test]
    fn two_state_dirs_get_distinct_prefixes_and_ranges() {
        let registry = std::env::temp_dir().join(format!("lk-slots-{}", std::process::id()));
        let dir_a = std::env::temp_dir().join(format!("lk-a-{}", std::process::id()));
        let dir_b = std::env::temp_dir().join(format!("lk-b-{}", std::process::id()));
        fs::create_dir_all(&dir_a).unwrap();
        fs::create_dir_all(&dir_b).unwrap();
        let a = ClusterNaming::claim_in(&registry, &dir_a).unwrap();
        let b = ClusterNaming::claim_in(&registry, &dir_b).unwrap();
        assert_ne!(a.prefix, b.prefix);
        assert_ne!(a.pod_subnet(0), b.pod_subnet(0));
        assert_ne!(a.service_range(), b.service_range());
        assert_eq!(
            ClusterNaming::claim_in(&registry, &dir_a).unwrap(),
            a,
            "re-claim is stable"
        );
        assert!(
            a.bridge().len() <= 15 && a.host_veth(99_999).len() <= 15,
            "link names fit IFNAMSIZ"
        );
        ClusterNaming::release_in(&registry, &dir_a).unwrap();
        fs::remove_dir_all(&dir_b).unwrap();
        // b's state dir is gone: its slot is stale and may be reclaimed.
        let c = ClusterNaming::claim_in(&registry, &dir_a).unwrap();
        assert_eq!(c.slot, a.slot.min(b.slot));
        // A slot whose process died (SIGKILL, no `down`) is reclaimed after its cleanup.
        let dir_d = std::env::temp_dir().join(format!("lk-d-{}", std::process::id()));
        fs::create_dir_all(&dir_d).unwrap();
        let dead = SlotOwner {
            state_dir: dir_d.clone(),
            pid: Some(i32::MAX - 1),
            start_time: Some(1),
        };
        fs::write(slot_path(&registry, usize::from(c.slot) + 1), dead.encode()).unwrap();
        let taken = (0..CLUSTER_SLOTS_MAX)
            .filter(|s| slot_path(&registry, *s).exists())
            .count();
        let e =
            ClusterNaming::claim_in(&registry, &std::env::temp_dir().join("lk-e-none")).unwrap();
        assert_eq!(
            usize::from(e.slot),
            usize::from(c.slot) + 1,
            "{taken} slots were taken"
        );
        fs::remove_dir_all(&registry).unwrap();
        fs::remove_dir_all(&dir_a).unwrap();
        let _ = fs::remove_dir_all(&dir_d);
    }

    #[test]
    fn cidr_contains() {
        let c = Ipv4Cidr {
            addr: Ipv4Addr::new(10, 244, 1, 0),
            prefix_len: 24,
        };
        assert!(c.contains(Ipv4Addr::new(10, 244, 1, 7)));
        assert!(!c.contains(Ipv4Addr::new(10, 244, 2, 7)));
    }
}
