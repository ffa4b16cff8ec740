//! `partition`: in a pod's network namespace (entered with `nsenter -t <pid> -n`, so the
//! pod's image needs no tools), drop every packet to and from the peers, both ways,
//! established connections included. The rules live in a table (nft) or chain (iptables) of
//! the fault's own; the fault counts once they are listed back from the namespace, and its end
//! once they are gone. While it stands the agent follows its pods ([`follow`]): the same rules
//! go into the namespace of the pod when it is recreated, and [`update`] brings the rules of
//! every namespace cut to the peers' current addresses, each checked the same way.

pub mod follow;
pub mod iptables;
pub mod nft;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::command;
use crate::error::{Error, Result};

/// A peer: an address or a CIDR, host bits cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Peer {
    /// The network address.
    pub address: IpAddr,
    /// The prefix length (32 or 128 for a single address).
    pub prefix: u8,
}

impl Peer {
    /// Parses `10.244.1.7`, `10.96.0.0/16`, `fd00::1`, `fd00::/64`. Host bits of a CIDR are
    /// cleared (`10.96.1.0/16` is `10.96.0.0/16`), as nft itself does.
    pub fn parse(text: &str) -> Result<Peer> {
        let fail = |reason: String| Error::Peer {
            peer: text.to_owned(),
            reason,
        };
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let address: IpAddr = address
            .parse()
            .map_err(|_| fail(format!("{address:?} is not an IPv4 or IPv6 address")))?;
        let bits: u8 = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(prefix) => prefix
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= bits)
                .ok_or_else(|| fail(format!("the prefix {prefix:?} is not 0 to {bits}")))?,
        };
        if prefix == 0 {
            return Err(fail(
                "a /0 would cut the pod off from everything, the agent's own checks included"
                    .to_owned(),
            ));
        }
        let address = match address {
            IpAddr::V4(v4) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        };
        Ok(Peer { address, prefix })
    }

    /// Whether it is an IPv6 peer.
    pub fn is_ipv6(&self) -> bool {
        self.address.is_ipv6()
    }

    /// Whether it is a single address (/32, /128).
    pub fn is_host(&self) -> bool {
        self.prefix == if self.is_ipv6() { 128 } else { 32 }
    }

    /// nft's family keyword for it (`ip`, `ip6`).
    pub fn nft_family(&self) -> &'static str {
        if self.is_ipv6() {
            "ip6"
        } else {
            "ip"
        }
    }

    /// Always `address/prefix` (how iptables -S shows it).
    pub fn with_prefix(&self) -> String {
        format!("{}/{}", self.address, self.prefix)
    }

    /// Whether every address of `other` is one of `self`'s (same family, a prefix no longer
    /// than `other`'s, and `other`'s address inside `self`'s network).
    pub fn covers(&self, other: &Peer) -> bool {
        if self.is_ipv6() != other.is_ipv6() || self.prefix > other.prefix {
            return false;
        }
        Peer::parse(&format!("{}/{}", other.address, self.prefix)).ok() == Some(*self)
    }
}

/// The peers to install: sorted, without duplicates, and without any peer another one covers
/// (`10.96.3.4` inside `10.96.0.0/16`): nft refuses overlapping elements in an interval set,
/// and the covered peer is cut by the covering one anyway.
pub fn reduce_peers(peers: &[Peer]) -> Vec<Peer> {
    let mut sorted: Vec<Peer> = peers.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    sorted
        .iter()
        .copied()
        .filter(|peer| {
            !sorted
                .iter()
                .any(|other| other != peer && other.covers(peer))
        })
        .collect()
}

impl std::fmt::Display for Peer {
    /// A single address bare, a network as `address/prefix` (how nft lists them).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_host() {
            write!(f, "{}", self.address)
        } else {
            write!(f, "{}/{}", self.address, self.prefix)
        }
    }
}

/// Parses every peer, in order, without duplicates (none is fine: the peers may all be pods,
/// `peerPods`).
pub fn parse_peers(peers: &[String]) -> Result<Vec<Peer>> {
    let mut parsed: Vec<Peer> = Vec::new();
    for peer in peers {
        let peer = Peer::parse(peer.trim())?;
        if !parsed.contains(&peer) {
            parsed.push(peer);
        }
    }
    Ok(parsed)
}

/// The tool the rules are made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Backend {
    /// `nft`, a table of the fault's own.
    Nft,
    /// `iptables`/`ip6tables`, a chain of the fault's own.
    Iptables,
}

impl Backend {
    /// `nft` when the agent's image has it, else iptables (ip6tables too for IPv6 peers).
    pub fn detect(peers: &[Peer]) -> Result<Backend> {
        if command::find_program("nft").is_some() {
            return Ok(Backend::Nft);
        }
        let needs_ipv6 = peers.iter().any(Peer::is_ipv6);
        let needs_ipv4 = peers.iter().any(|p| !p.is_ipv6());
        let have = |name: &str| command::find_program(name).is_some();
        if (!needs_ipv4 || have("iptables")) && (!needs_ipv6 || have("ip6tables")) {
            return Ok(Backend::Iptables);
        }
        Err(Error::Command {
            command: "nft".to_owned(),
            reason: "neither nft nor iptables (ip6tables for IPv6 peers) is installed in the agent's image (Debian: the nftables package)".to_owned(),
        })
    }
}

/// `nsenter -t <pid> -n <program> <args>`: the program runs in the pod's network namespace
/// (only that namespace: the binary is the agent's own).
fn in_netns(
    pid: i32,
    program: &str,
    args: &[String],
    stdin: Option<&str>,
) -> Result<command::Output> {
    let mut full = vec![
        "-t".to_owned(),
        pid.to_string(),
        "-n".to_owned(),
        "--".to_owned(),
        program.to_owned(),
    ];
    full.extend_from_slice(args);
    command::run("nsenter", &full, stdin)
}

fn in_netns_ok(pid: i32, program: &str, args: &[String], stdin: Option<&str>) -> Result<String> {
    let output = in_netns(pid, program, args, stdin)?;
    if output.success() {
        return Ok(output.stdout);
    }
    Err(Error::Command {
        command: format!(
            "nsenter -t {pid} -n {}",
            command::command_line(program, args)
        ),
        reason: format!("exit status {}: {}", output.code, output.stderr.trim()),
    })
}

fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// The peers of one family.
fn of_family(peers: &[Peer], ipv6: bool) -> Vec<Peer> {
    peers
        .iter()
        .copied()
        .filter(|p| p.is_ipv6() == ipv6)
        .collect()
}

/// The rules of fault `id` as listed in the namespace of `pid`: what keeps them from cutting
/// exactly `peers` (empty when nothing) and the packets dropped so far (nft only).
fn observe(pid: i32, id: u64, backend: Backend, peers: &[Peer]) -> Result<(Vec<String>, u64)> {
    match backend {
        Backend::Nft => {
            let listing = in_netns_ok(
                pid,
                "nft",
                &strings(&["list", "table", "inet", &nft::table_name(id)]),
                None,
            )?;
            let listing = nft::parse_listing(&listing);
            Ok((
                nft::missing(&listing, peers),
                nft::packets_dropped(&listing),
            ))
        }
        Backend::Iptables => {
            let chain = iptables::chain_name(id);
            let mut missing = Vec::new();
            for ipv6 in [false, true] {
                let family = of_family(peers, ipv6);
                let program = iptables::program(ipv6);
                let listing = in_netns_ok(pid, program, &strings(&["-w", "-S"]), None);
                if family.is_empty() {
                    // No peer of this family: only drops left from earlier peers would be
                    // wrong, and a tool that cannot list (none installed) holds none.
                    if let Ok(listing) = listing {
                        missing.extend(iptables::extra(&listing, &chain, &family));
                    }
                    continue;
                }
                let listing = listing?;
                missing.extend(iptables::missing(&listing, &chain, &family));
                missing.extend(iptables::extra(&listing, &chain, &family));
            }
            Ok((missing, 0))
        }
    }
}

/// The peers as a list for messages.
fn shown(peers: &[Peer]) -> String {
    if peers.is_empty() {
        return "no address".to_owned();
    }
    peers
        .iter()
        .map(Peer::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Installs fault `id`'s rules in the network namespace of `pid` and checks they are listed
/// back; when they are not, they are removed again. `peers` are reduced first
/// ([`reduce_peers`]). Returns the effect seen.
pub fn apply(pid: i32, id: u64, backend: Backend, peers: &[Peer]) -> Result<String> {
    let peers = &reduce_peers(peers);
    let installed = match backend {
        Backend::Nft => in_netns_ok(
            pid,
            "nft",
            &strings(&["-f", "-"]),
            Some(&nft::render(&nft::table_name(id), peers)),
        )
        .map(|_| ()),
        Backend::Iptables => (|| {
            for ipv6 in [false, true] {
                let family = of_family(peers, ipv6);
                if family.is_empty() {
                    continue;
                }
                for args in iptables::apply_commands(&iptables::chain_name(id), &family) {
                    in_netns_ok(pid, iptables::program(ipv6), &args, None)?;
                }
            }
            Ok(())
        })(),
    };
    let seen = installed.and_then(|()| observe(pid, id, backend, peers));
    let missing = match seen {
        Ok((missing, _)) if missing.is_empty() => {
            return Ok(match backend {
                Backend::Nft => format!(
                    "table inet {} listed in the network namespace of pid {pid}: input and output drop {}",
                    nft::table_name(id),
                    shown(peers)
                ),
                Backend::Iptables => format!(
                    "chain {} listed in the network namespace of pid {pid}, jumped to from INPUT and OUTPUT: drops {}",
                    iptables::chain_name(id),
                    shown(peers)
                ),
            });
        }
        Ok((missing, _)) => missing.join("; "),
        Err(error) => error.to_string(),
    };
    if let Err(error) = remove(pid, id, backend) {
        tracing::warn!(%error, fault = id, "could not remove a partition that did not take effect");
    }
    Err(Error::NotInEffect(format!(
        "the rules listed back from the network namespace of pid {pid}: {missing}"
    )))
}

/// Brings fault `id`'s rules, already in the network namespace of `pid`, to cutting exactly
/// `peers` (reduced first), and checks they are listed back so. nft: both sets rewritten in
/// one transaction; iptables: the new drops appended, then the old ones deleted (a chain for
/// a family the fault had no peer of yet is made whole). When the check fails the rules are
/// left as they are (they still cut the old peers): the caller reports it and tries again.
pub fn update(pid: i32, id: u64, backend: Backend, peers: &[Peer]) -> Result<String> {
    let peers = &reduce_peers(peers);
    match backend {
        Backend::Nft => {
            in_netns_ok(
                pid,
                "nft",
                &strings(&["-f", "-"]),
                Some(&nft::render_update(&nft::table_name(id), peers)),
            )?;
        }
        Backend::Iptables => {
            let chain = iptables::chain_name(id);
            for ipv6 in [false, true] {
                let family = of_family(peers, ipv6);
                let program = iptables::program(ipv6);
                let listing = in_netns_ok(pid, program, &strings(&["-w", "-S"]), None);
                let listing = match (listing, family.is_empty()) {
                    (Ok(listing), _) => listing,
                    // Nothing of this family to cut, and nothing of it listable to remove.
                    (Err(_), true) => continue,
                    (Err(error), false) => return Err(error),
                };
                let commands = if iptables::has_chain(&listing, &chain) {
                    iptables::update_commands(&listing, &chain, &family)
                } else if family.is_empty() {
                    Vec::new()
                } else {
                    iptables::apply_commands(&chain, &family)
                };
                for args in commands {
                    in_netns_ok(pid, program, &args, None)?;
                }
            }
        }
    }
    let (missing, _) = observe(pid, id, backend, peers)?;
    if !missing.is_empty() {
        return Err(Error::NotInEffect(format!(
            "the rules listed back from the network namespace of pid {pid} after the change of peers: {}",
            missing.join("; ")
        )));
    }
    Ok(match backend {
        Backend::Nft => format!(
            "sets of table inet {} in the network namespace of pid {pid} listed holding {}",
            nft::table_name(id),
            shown(peers)
        ),
        Backend::Iptables => format!(
            "chain {} in the network namespace of pid {pid} listed dropping {}",
            iptables::chain_name(id),
            shown(peers)
        ),
    })
}

fn remove(pid: i32, id: u64, backend: Backend) -> Result<()> {
    match backend {
        Backend::Nft => {
            if present(pid, id, backend)? {
                in_netns_ok(
                    pid,
                    "nft",
                    &strings(&["delete", "table", "inet", &nft::table_name(id)]),
                    None,
                )?;
            }
        }
        Backend::Iptables => {
            for ipv6 in [false, true] {
                let program = iptables::program(ipv6);
                if command::find_program(program).is_none() {
                    continue;
                }
                // Each part may be gone already; what is left is judged by `present`.
                for args in iptables::heal_commands(&iptables::chain_name(id)) {
                    let _ = in_netns(pid, program, &args, None)?;
                }
            }
        }
    }
    Ok(())
}

/// Whether any of fault `id`'s rules are still in the network namespace of `pid`.
pub fn present(pid: i32, id: u64, backend: Backend) -> Result<bool> {
    match backend {
        Backend::Nft => {
            let tables = in_netns_ok(pid, "nft", &strings(&["list", "tables"]), None)?;
            Ok(nft::parse_tables(&tables).contains(&nft::table_name(id)))
        }
        Backend::Iptables => {
            for ipv6 in [false, true] {
                let program = iptables::program(ipv6);
                if command::find_program(program).is_none() {
                    continue;
                }
                let listing = in_netns_ok(pid, program, &strings(&["-w", "-S"]), None)?;
                if iptables::still_present(&listing, &iptables::chain_name(id)) {
                    return Ok(true);
                }
            }
            Ok(false)
        }
    }
}

/// Removes fault `id`'s rules from the network namespace of `pid` and checks they are gone.
pub fn heal(pid: i32, id: u64, backend: Backend) -> Result<String> {
    let dropped = match backend {
        Backend::Nft if present(pid, id, backend)? => observe(pid, id, backend, &[])
            .map(|(_, dropped)| dropped)
            .ok(),
        Backend::Nft | Backend::Iptables => None,
    };
    remove(pid, id, backend)?;
    if present(pid, id, backend)? {
        return Err(Error::UndoNotObserved {
            kind: "partition".to_owned(),
            seen: format!(
                "the rules of fault {id} are still listed in the network namespace of pid {pid}"
            ),
        });
    }
    Ok(match (backend, dropped) {
        (Backend::Nft, Some(packets)) => format!(
            "table inet {} removed from the network namespace of pid {pid} and no longer listed ({packets} packets dropped while it stood)",
            nft::table_name(id)
        ),
        (Backend::Nft, None) => format!(
            "table inet {} not listed in the network namespace of pid {pid}",
            nft::table_name(id)
        ),
        (Backend::Iptables, _) => format!(
            "chain {} and its jumps removed from the network namespace of pid {pid} and no longer listed",
            iptables::chain_name(id)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_to_canonical_addresses_and_networks() {
        let shown = |text: &str| Peer::parse(text).unwrap().to_string();
        assert_eq!(shown("10.244.1.7"), "10.244.1.7");
        assert_eq!(shown("10.244.1.7/32"), "10.244.1.7");
        assert_eq!(shown("10.96.0.0/16"), "10.96.0.0/16");
        assert_eq!(shown("10.96.1.9/16"), "10.96.0.0/16");
        assert_eq!(shown("fd00:0:0:0::1"), "fd00::1");
        assert_eq!(shown("fd00::ff/64"), "fd00::/64");
        assert_eq!(
            Peer::parse("10.0.0.1").unwrap().with_prefix(),
            "10.0.0.1/32"
        );
        let error = |text: &str| Peer::parse(text).unwrap_err().to_string();
        assert!(error("10.0.0.300").contains("not an IPv4 or IPv6 address"));
        assert!(error("10.0.0.0/33").contains("not 0 to 32"));
        assert!(error("fd00::/129").contains("not 0 to 128"));
        assert!(error("10.0.0.0/x").contains("prefix \"x\""));
        assert!(error("0.0.0.0/0").contains("/0 would cut"));
        assert!(error("iad-0").contains("parse partition peer \"iad-0\""));
        assert_eq!(
            parse_peers(&["10.0.0.1".into(), " 10.0.0.1/32".into(), "10.0.0.2".into()])
                .unwrap()
                .len(),
            2
        );
        assert!(parse_peers(&[]).unwrap().is_empty());
    }

    // nft refuses overlapping elements in an interval set: a peer inside another peer's
    // network is left to that network (it is cut all the same).
    #[test]
    fn peers_covered_by_another_are_left_out() {
        let parsed =
            |list: &[&str]| -> Vec<Peer> { list.iter().map(|p| Peer::parse(p).unwrap()).collect() };
        let net = Peer::parse("10.96.0.0/16").unwrap();
        assert!(net.covers(&Peer::parse("10.96.3.4").unwrap()));
        assert!(net.covers(&Peer::parse("10.96.128.0/17").unwrap()));
        assert!(net.covers(&net));
        assert!(!net.covers(&Peer::parse("10.97.0.1").unwrap()));
        assert!(!net.covers(&Peer::parse("10.0.0.0/8").unwrap()));
        assert!(!Peer::parse("::/1")
            .unwrap()
            .covers(&Peer::parse("10.0.0.1").unwrap()));
        assert_eq!(
            reduce_peers(&parsed(&[
                "10.244.1.7",
                "10.96.3.4",
                "10.96.0.0/16",
                "fd00::1",
                "fd00::/64",
                "10.244.1.7"
            ])),
            parsed(&["10.96.0.0/16", "10.244.1.7", "fd00::/64"])
        );
        assert!(reduce_peers(&[]).is_empty());
    }
}
