//! The cluster network: one bridge per cluster, pods in their own network namespaces.
//!
//! Design (why one bridge): IP forwarding stays off in the root namespace, so nothing can be
//! routed between interfaces there. All pod veths of a cluster therefore hang on ONE bridge,
//! which carries every node's gateway address (`10.(244+c).n.1/24`). Pods get an on-link
//! route for the whole cluster pod range (`10.(244+c).0.0/16 dev eth0`), so a pod on node 0
//! reaches a pod on node 1 by ARP over the bridge (layer 2, no forwarding), and the Service
//! range via their node's gateway, where ClusterIPs are local addresses of the root
//! namespace (on the bridge, as `/32`s) and reach the userspace proxy. Pods have no default
//! route and the bridge has no uplink, so nothing a pod sends can leave the machine.
//! (`dummy` links are not available on every kernel here, hence ClusterIPs on the bridge.)
//!
//! Partitions are `prohibit` routes for the other side's node subnets inside the pods'
//! namespaces (more specific than the on-link /16), plus the proxy refusing cross-partition
//! connections.

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::error::{Error, Result};
use super::ip::{ip, ip_ignore_missing};
use super::naming::{ClusterNaming, Ipv4Cidr, NODES_MAX, SLOT_REGISTRY_DIR};
use super::state::{Resource, StateFile};

/// One pod's network sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxNet {
    /// The sandbox number (part of the netns and veth names).
    pub number: u32,
    /// The network namespace name (`ip netns`).
    pub netns: String,
    /// Path of the namespace file, for `setns`.
    pub netns_path: PathBuf,
    /// The pod IP.
    pub ip: Ipv4Addr,
    /// The node index whose subnet the IP is from.
    pub node_index: u8,
}

/// Deletes localkube bridges of other clusters that carry this slot's MAC address: leftovers
/// of a cluster whose process died and whose state dir was removed before its `down` ran (a
/// test's temporary dir), so nothing recorded them for cleanup. A live cluster holds its slot,
/// so a bridge with this slot's MAC and gateway addresses is never one in use; left in place,
/// it answers for this cluster's gateways and pods lose each other (seen: every pod-to-pod
/// connection of a new cluster timing out).
fn remove_stale_slot_bridges(naming: &ClusterNaming) -> Result<()> {
    let ours = naming.bridge();
    let mac = naming.bridge_mac().to_ascii_lowercase();
    for (name, address) in super::ip::bridge_macs()? {
        if name != ours && name.starts_with("lk") && name.ends_with("-br") && address == mac {
            tracing::warn!(bridge = %name, slot = naming.slot, "deleting a leftover bridge of a dead cluster that holds this slot's addresses");
            ip_ignore_missing(&["link", "del", &name])?;
        }
    }
    Ok(())
}

/// The network of one cluster on this machine.
#[derive(Debug)]
pub struct ClusterNetwork {
    naming: ClusterNaming,
    state_dir: PathBuf,
    state: Arc<StateFile>,
    next_sandbox: AtomicU32,
    used_ips: Mutex<HashMap<u8, BTreeSet<u8>>>,
    gateways: Mutex<BTreeSet<u8>>,
}

impl ClusterNetwork {
    /// Claims a cluster slot for `state_dir` and creates the cluster bridge.
    ///
    /// Fails with [`Error::NotRoot`] (one sentence naming the kind backend) without root.
    pub fn up(state_dir: &Path) -> Result<Arc<Self>> {
        require_root(nix::unistd::geteuid())?;
        std::fs::create_dir_all(state_dir).map_err(Error::io("create state dir", state_dir))?;
        let state_dir =
            std::fs::canonicalize(state_dir).map_err(Error::io("resolve state dir", state_dir))?;
        if !super::state::read_records(&state_dir)?.is_empty() {
            // Leftovers of a run that was not brought down (crash, SIGKILL): remove them
            // first, or the new sandbox names and addresses would collide with them.
            tracing::warn!(state_dir = %state_dir.display(), "state dir has leftovers of an earlier run; cleaning up first");
            super::state::cleanup(&state_dir)?;
        }
        warn_if_untraversable(&state_dir);
        let state = Arc::new(StateFile::open(&state_dir)?);
        state.record(&Resource::ClusterSlot {
            registry: PathBuf::from(SLOT_REGISTRY_DIR),
        })?;
        let naming = ClusterNaming::claim(&state_dir)?;
        let bridge = naming.bridge();
        remove_stale_slot_bridges(&naming)?;
        state.record(&Resource::Link {
            name: bridge.clone(),
        })?;
        if !super::ip::link_list()?.contains(&bridge) {
            ip(&["link", "add", &bridge, "type", "bridge"])?;
        }
        // A set address is sticky: pods joining never move the gateway's MAC (see
        // `ClusterNaming::bridge_mac`; the operator's calls to the replicas' sidecars stalled
        // ~25 s after a canary pod joined the bridge).
        ip(&["link", "set", &bridge, "address", &naming.bridge_mac()])?;
        ip(&["link", "set", &bridge, "up"])?;
        let network = Arc::new(Self {
            naming,
            state_dir,
            state,
            next_sandbox: AtomicU32::new(1),
            used_ips: Mutex::new(HashMap::new()),
            gateways: Mutex::new(BTreeSet::new()),
        });
        network.add_local_address(network.naming.dns_ip())?;
        tracing::info!(prefix = %network.naming.prefix, slot = network.naming.slot, bridge = %bridge, "cluster network up");
        Ok(network)
    }

    /// The cluster's names and ranges.
    pub fn naming(&self) -> &ClusterNaming {
        &self.naming
    }

    /// The canonical state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The state file (record before create).
    pub fn state(&self) -> &Arc<StateFile> {
        &self.state
    }

    /// Puts node index `node`'s gateway on the bridge (idempotent).
    pub fn ensure_node(&self, node: u8) -> Result<Ipv4Addr> {
        if usize::from(node) >= NODES_MAX {
            return Err(Error::TooManyNodes(node.to_string(), NODES_MAX));
        }
        let gateway = self.naming.gateway(node);
        let mut gateways = self
            .gateways
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if gateways.insert(node) {
            add_address(&self.naming.bridge(), &format!("{gateway}/24"))?;
        }
        Ok(gateway)
    }

    /// Adds a `/32` local address of the root namespace (a ClusterIP) on the bridge.
    pub fn add_local_address(&self, addr: Ipv4Addr) -> Result<()> {
        add_address(&self.naming.bridge(), &format!("{addr}/32"))
    }

    /// Removes a `/32` local address added by [`ClusterNetwork::add_local_address`].
    pub fn remove_local_address(&self, addr: Ipv4Addr) -> Result<()> {
        ip_ignore_missing(&[
            "addr",
            "del",
            &format!("{addr}/32"),
            "dev",
            &self.naming.bridge(),
        ])
    }

    /// Creates a pod sandbox on node index `node`: netns, veth to the bridge, an IP from the
    /// node's subnet, loopback up, routes for the cluster ranges only (no default route).
    pub fn create_sandbox(&self, node: u8) -> Result<SandboxNet> {
        let gateway = self.ensure_node(node)?;
        let ip_addr = self.allocate_ip(node)?;
        let number = self.next_sandbox.fetch_add(1, Ordering::Relaxed);
        let sandbox = SandboxNet {
            number,
            netns: self.naming.netns(number),
            netns_path: PathBuf::from("/run/netns").join(self.naming.netns(number)),
            ip: ip_addr,
            node_index: node,
        };
        let result = self.configure_sandbox(&sandbox, gateway);
        if result.is_err() {
            let _ = self.delete_sandbox(&sandbox);
        }
        result.map(|()| sandbox)
    }

    fn configure_sandbox(&self, sandbox: &SandboxNet, gateway: Ipv4Addr) -> Result<()> {
        let ns = sandbox.netns.as_str();
        let host = self.naming.host_veth(sandbox.number);
        let peer = self.naming.pod_veth(sandbox.number);
        self.state.record(&Resource::Netns {
            name: ns.to_string(),
        })?;
        ip(&["netns", "add", ns])?;
        self.state.record(&Resource::Link { name: host.clone() })?;
        ip(&[
            "link", "add", &host, "type", "veth", "peer", "name", &peer, "netns", ns,
        ])?;
        ip(&["link", "set", &host, "master", &self.naming.bridge()])?;
        ip(&["link", "set", &host, "up"])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        ip(&["-n", ns, "link", "set", &peer, "name", "eth0"])?;
        // The MAC derives from the IP (0a:58 + the IP, as kubenet does), so a reused pod IP
        // keeps its MAC and no neighbour cache (root namespace or other pods) goes stale.
        let o = sandbox.ip.octets();
        let mac = format!("0a:58:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3]);
        ip(&["-n", ns, "link", "set", "eth0", "address", &mac])?;
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/24", sandbox.ip),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", ns, "link", "set", "eth0", "up"])?;
        let pods = self.naming.cluster_pod_range().to_string();
        ip(&[
            "-n", ns, "route", "add", &pods, "dev", "eth0", "scope", "link",
        ])?;
        let services = self.naming.service_range().to_string();
        ip(&[
            "-n",
            ns,
            "route",
            "add",
            &services,
            "via",
            &gateway.to_string(),
            "dev",
            "eth0",
        ])?;
        tracing::info!(netns = ns, pod_ip = %sandbox.ip, "pod sandbox network created");
        Ok(())
    }

    /// Kills any process still inside the sandbox, deletes its namespace (the veth goes with
    /// it) and frees its IP.
    pub fn delete_sandbox(&self, sandbox: &SandboxNet) -> Result<()> {
        super::state::kill_netns_processes(&sandbox.netns_path);
        ip_ignore_missing(&["netns", "delete", &sandbox.netns])?;
        ip_ignore_missing(&["link", "delete", &self.naming.host_veth(sandbox.number)])?;
        let host_octet = sandbox.ip.octets()[3];
        let mut used = self
            .used_ips
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(set) = used.get_mut(&sandbox.node_index) {
            set.remove(&host_octet);
        }
        Ok(())
    }

    /// Adds (`blocked = true`) or removes `prohibit` routes for `subnets` in a sandbox.
    pub fn set_prohibited(
        &self,
        sandbox: &SandboxNet,
        subnets: &[Ipv4Cidr],
        blocked: bool,
    ) -> Result<()> {
        for subnet in subnets {
            let cidr = subnet.to_string();
            if blocked {
                ip(&["-n", &sandbox.netns, "route", "replace", "prohibit", &cidr])?;
            } else {
                ip_ignore_missing(&["-n", &sandbox.netns, "route", "del", "prohibit", &cidr])
                    .or_else(|err| match &err {
                        Error::Ip { message, .. } if message.contains("No such") => Ok(()),
                        _ => Err(err),
                    })?;
            }
        }
        Ok(())
    }

    fn allocate_ip(&self, node: u8) -> Result<Ipv4Addr> {
        let mut used = self
            .used_ips
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let set = used.entry(node).or_default();
        let host = (2..=254u8)
            .find(|h| !set.contains(h))
            .ok_or_else(|| Error::SubnetFull(node.to_string()))?;
        set.insert(host);
        let subnet = self.naming.pod_subnet(node).addr.octets();
        Ok(Ipv4Addr::new(subnet[0], subnet[1], subnet[2], host))
    }
}

/// Containers that drop root (mariadbd runs as `mysql`) reach their data in the state dir
/// only if every ancestor directory is searchable by others; say so early.
fn warn_if_untraversable(state_dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for ancestor in state_dir.ancestors() {
        let mode = std::fs::metadata(ancestor)
            .map(|m| m.permissions().mode())
            .unwrap_or(0o755);
        if mode & 0o001 == 0 {
            tracing::warn!(
                dir = %ancestor.display(),
                "state dir ancestor is not searchable by other users: containers that drop root (mariadbd runs as mysql) cannot reach their volumes; use a state dir under e.g. /var/lib or /tmp"
            );
            return;
        }
    }
}

/// Fails with [`Error::NotRoot`] unless `euid` is root: one sentence naming the kind backend.
pub fn require_root(euid: nix::unistd::Uid) -> Result<()> {
    if euid.is_root() {
        Ok(())
    } else {
        Err(Error::NotRoot)
    }
}

fn add_address(link: &str, cidr: &str) -> Result<()> {
    match ip(&["addr", "add", cidr, "dev", link]) {
        Ok(_) => Ok(()),
        // iproute2 says "File exists" or, in newer versions, "Address already assigned".
        Err(Error::Ip { message, .. })
            if message.contains("File exists") || message.contains("Address already assigned") =>
        {
            Ok(())
        }
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link_address(name: &str) -> String {
        std::fs::read_to_string(format!("/sys/class/net/{name}/address"))
            .map(|text| text.trim().to_owned())
            .unwrap_or_default()
    }

    // The bridge (every pod's gateway) keeps one MAC however many veths join it: a Linux
    // bridge without a set address takes its lowest port MAC, so a new pod could move the
    // gateway under the ARP caches of every running pod (the live "sidecar-call stall").
    #[test]
    fn the_bridge_mac_does_not_move_when_pods_join() {
        if !nix::unistd::geteuid().is_root() {
            panic!("needs root (network namespaces): run the localkube tests as root");
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let network = ClusterNetwork::up(dir.path()).expect("network up");
        let bridge = network.naming().bridge();
        let fixed = network.naming().bridge_mac();
        assert_eq!(link_address(&bridge), fixed);
        network.ensure_node(0).expect("node");
        let mut sandboxes = Vec::new();
        for _ in 0..6 {
            sandboxes.push(network.create_sandbox(0).expect("sandbox"));
            assert_eq!(
                link_address(&bridge),
                fixed,
                "a joining veth moved the bridge MAC"
            );
        }
        for sandbox in &sandboxes {
            network.delete_sandbox(sandbox).expect("delete sandbox");
        }
        assert_eq!(link_address(&bridge), fixed);
        drop(network);
        super::super::state::cleanup(dir.path()).expect("cleanup");
    }

    // docs/design/localkube.md#node-agent: without root, `localkube up` fails with one clear
    // sentence naming the kind backend as the alternative.
    #[test]
    fn without_root_the_error_is_one_sentence_naming_kind() {
        assert!(require_root(nix::unistd::Uid::from_raw(0)).is_ok());
        let message = format!(
            "failed to {}",
            require_root(nix::unistd::Uid::from_raw(1000)).unwrap_err()
        );
        assert!(message.contains("kind backend"), "{message}");
        assert_eq!(message.matches(". ").count(), 0, "one sentence: {message}");
        assert!(!message.contains('\n'));
    }
}
