//! Following a partition's pods for as long as it stands, the way a keepDown follows its
//! container: about once a second the agent re-reads the partition's pod and its peer pods
//! from the API, looks in `/proc` for the namespaces the pod's processes are in and for the
//! processes still holding the namespaces already cut, and works out what to do:
//!
//! - a namespace of the pod that no cut covers (the pod was deleted and recreated, so it has
//!   a new uid; or its sandbox was, so it has a new namespace) gets the fault's rules;
//! - a cut whose namespace no process of its pod holds any more is *gone* (the namespace and
//!   the rules in it went with the pod); it stays in the record, so the undo names it;
//! - a cut whose recorded process left but whose namespace another process of the pod still
//!   holds has *moved*: the agent enters it through the new process, after checking the
//!   rules are still listed there (a freed namespace's inode number is soon reused, so the
//!   same `net:[...]` may name a new namespace);
//! - when the peers' addresses changed (a peer pod came back under another IP), every cut
//!   still standing is brought to the new addresses.
//!
//! The pure half ([`desired_peers`], [`peer_diff`], [`plan`]) decides; [`look`] reads `/proc`
//! (without the agent's lock: the caller runs it on a blocking thread); the agent applies the
//! plan with [`super::apply`] and [`super::update`], each checked by listing the rules back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{reduce_peers, Peer};
use crate::error::Result;
use crate::procfs::ProcFs;

/// A network namespace a partition's rules were put in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cut {
    /// The uid of the pod whose namespace it is (a recreated pod has a new one).
    pub pod_uid: String,
    /// The namespace, as `/proc/<pid>/ns/net` reads (`net:[4026532281]`).
    pub netns: String,
    /// The process last seen holding it, entered to change or remove the rules.
    pub pid: i32,
    /// The peers its rules drop, as last listed back (reduced; empty while `pending`).
    pub peers: Vec<String>,
    /// When the agent first put (or started putting) the rules there (RFC 3339).
    pub applied_at: String,
    /// Recorded before the rules were put there, so a crash in between leaves it to the undo.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
    /// No process of its pod holds the namespace any more: it went, with the rules in it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gone: bool,
}

/// A peer named by its pod: its addresses are read from the API for as long as the partition
/// stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerPod {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// Its addresses (`status.podIPs`) as last read; kept while the pod has none (deleted, or
    /// recreated and not yet given one), so it stays cut until its new address is known.
    #[serde(default)]
    pub addresses: Vec<String>,
}

/// A peer pod after a re-read: the addresses it has now, or, when it has none or could not be
/// read (`seen` is `None` or empty), the ones it had.
pub fn refresh_peer_pod(last: &PeerPod, seen: Option<&[Peer]>) -> PeerPod {
    let addresses = match seen {
        Some(seen) if !seen.is_empty() => {
            let mut addresses: Vec<String> = seen.iter().map(Peer::to_string).collect();
            addresses.sort_unstable();
            addresses.dedup();
            addresses
        }
        _ => last.addresses.clone(),
    };
    PeerPod {
        addresses,
        ..last.clone()
    }
}

/// The peers a partition cuts now: its fixed peers and its peer pods' addresses, reduced
/// ([`reduce_peers`]). An address that does not parse (a record edited by hand) is left out.
pub fn desired_peers(fixed: &[Peer], peer_pods: &[PeerPod]) -> Vec<Peer> {
    let mut peers = fixed.to_vec();
    peers.extend(
        peer_pods
            .iter()
            .flat_map(|pod| &pod.addresses)
            .filter_map(|address| Peer::parse(address).ok()),
    );
    reduce_peers(&peers)
}

/// The peers recorded as text, parsed (what does not parse is left out: the rules are
/// rewritten to the wanted peers anyway).
pub fn parse_recorded(peers: &[String]) -> Vec<Peer> {
    reduce_peers(
        &peers
            .iter()
            .filter_map(|peer| Peer::parse(peer).ok())
            .collect::<Vec<_>>(),
    )
}

/// How a namespace's peers must change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerDiff {
    /// Peers to cut that its rules do not drop yet.
    pub added: Vec<Peer>,
    /// Addresses its rules drop that are no longer peers.
    pub removed: Vec<Peer>,
}

impl PeerDiff {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

impl std::fmt::Display for PeerDiff {
    /// `+10.244.2.9 -10.244.1.7`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let words: Vec<String> = self
            .added
            .iter()
            .map(|peer| format!("+{peer}"))
            .chain(self.removed.iter().map(|peer| format!("-{peer}")))
            .collect();
        f.write_str(&words.join(" "))
    }
}

/// What must change for rules dropping `installed` to drop `desired` instead.
pub fn peer_diff(installed: &[Peer], desired: &[Peer]) -> PeerDiff {
    PeerDiff {
        added: desired
            .iter()
            .filter(|peer| !installed.contains(peer))
            .copied()
            .collect(),
        removed: installed
            .iter()
            .filter(|peer| !desired.contains(peer))
            .copied()
            .collect(),
    }
}

/// What `/proc` shows now, read by [`look`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// The partition's pod as it is now, when it runs on this node: its uid and the network
    /// namespaces its processes are in (the lowest pid in each), the node's own left out.
    pub pod: Option<(String, Vec<(i32, String)>)>,
    /// For each recorded cut (same order): a live process of its pod in its namespace, the
    /// recorded pid when it still is; `None` when none is left (or the cut is gone already).
    pub holders: Vec<Option<i32>>,
}

/// A namespace of the pod to cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCut {
    /// The pod's uid.
    pub pod_uid: String,
    /// The process to enter.
    pub pid: i32,
    /// Its namespace.
    pub netns: String,
}

/// A cut to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Its index among the recorded cuts.
    pub index: usize,
    /// The process to enter (another than the recorded one when `moved`).
    pub pid: i32,
    /// The recorded process left the namespace; `pid` is another process of the pod in a
    /// namespace listed the same: the rules must be seen there before it counts as the same.
    pub moved: bool,
    /// How its peers change (empty when only `moved`).
    pub diff: PeerDiff,
}

/// What a follow step does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The peers every cut must drop.
    pub peers: Vec<Peer>,
    /// Namespaces of the pod no cut covers.
    pub new: Vec<NewCut>,
    /// Cuts to enter through another process or to bring to `peers`.
    pub changes: Vec<Change>,
    /// Cuts whose namespace no process of their pod holds any more (indices).
    pub gone: Vec<usize>,
}

impl Plan {
    /// Whether the rules stay as they are (no namespace to cut, none to change, none gone).
    pub fn is_empty(&self) -> bool {
        self.new.is_empty() && self.changes.is_empty() && self.gone.is_empty()
    }
}

/// Decides a follow step from the recorded cuts, the peers wanted now and what `/proc` shows.
pub fn plan(cuts: &[Cut], desired: &[Peer], seen: &Seen) -> Plan {
    let mut plan = Plan {
        peers: desired.to_vec(),
        ..Plan::default()
    };
    for (index, cut) in cuts.iter().enumerate() {
        if cut.gone {
            continue;
        }
        let Some(pid) = seen.holders.get(index).copied().flatten() else {
            plan.gone.push(index);
            continue;
        };
        let diff = peer_diff(&parse_recorded(&cut.peers), desired);
        let moved = pid != cut.pid;
        if moved || !diff.is_empty() {
            plan.changes.push(Change {
                index,
                pid,
                moved,
                diff,
            });
        }
    }
    if let Some((uid, namespaces)) = &seen.pod {
        for (pid, netns) in namespaces {
            let covered = cuts.iter().enumerate().any(|(index, cut)| {
                !cut.gone
                    && !plan.gone.contains(&index)
                    && cut.pod_uid == *uid
                    && cut.netns == *netns
            });
            if !covered {
                plan.new.push(NewCut {
                    pod_uid: uid.clone(),
                    pid: *pid,
                    netns: netns.clone(),
                });
            }
        }
    }
    plan
}

/// Reads `/proc` for a follow step: the namespaces of the pod `pod_uid` (when it runs on this
/// node) and who holds each recorded cut's namespace.
pub fn look(procfs: &ProcFs, pod_uid: Option<&str>, cuts: &[Cut]) -> Result<Seen> {
    let host = procfs.netns(1).ok();
    // pid and namespace of every live process of a pod, read once per pod.
    let mut processes: BTreeMap<String, Vec<(i32, String)>> = BTreeMap::new();
    let mut of_pod = |uid: &str| -> Result<Vec<(i32, String)>> {
        if let Some(found) = processes.get(uid) {
            return Ok(found.clone());
        }
        let found: Vec<(i32, String)> = procfs
            .pod_processes(uid)?
            .into_iter()
            .filter_map(|process| Some((process.pid, procfs.netns(process.pid).ok()?)))
            .filter(|(_, netns)| Some(netns) != host.as_ref())
            .collect();
        processes.insert(uid.to_owned(), found.clone());
        Ok(found)
    };
    let pod = match pod_uid {
        Some(uid) => {
            let mut namespaces: Vec<(i32, String)> = Vec::new();
            for (pid, netns) in of_pod(uid)? {
                if !namespaces.iter().any(|(_, known)| *known == netns) {
                    namespaces.push((pid, netns));
                }
            }
            Some((uid.to_owned(), namespaces))
        }
        None => None,
    };
    let mut holders = Vec::with_capacity(cuts.len());
    for cut in cuts {
        if cut.gone {
            holders.push(None);
            continue;
        }
        if procfs.is_alive(cut.pid) && procfs.netns(cut.pid).ok().as_deref() == Some(&cut.netns) {
            holders.push(Some(cut.pid));
            continue;
        }
        holders.push(
            of_pod(&cut.pod_uid)?
                .into_iter()
                .find(|(_, netns)| *netns == cut.netns)
                .map(|(pid, _)| pid),
        );
    }
    Ok(Seen { pod, holders })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD_UID: &str = "1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11";
    const NEW_UID: &str = "7c2f0e44-93d1-4f5a-8b6e-2d9c1a0f3e77";

    fn peers(list: &[&str]) -> Vec<Peer> {
        list.iter().map(|p| Peer::parse(p).unwrap()).collect()
    }

    fn cut(uid: &str, netns: &str, pid: i32, peers: &[&str]) -> Cut {
        Cut {
            pod_uid: uid.to_owned(),
            netns: netns.to_owned(),
            pid,
            peers: peers.iter().map(|p| (*p).to_owned()).collect(),
            applied_at: "2026-12-06T06:20:18Z".to_owned(),
            pending: false,
            gone: false,
        }
    }

    fn peer_pod(pod: &str, addresses: &[&str]) -> PeerPod {
        PeerPod {
            namespace: "br".to_owned(),
            pod: pod.to_owned(),
            addresses: addresses.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    // Nothing moved: no namespace to cut, none to change (the agent runs no nft at all).
    #[test]
    fn a_pod_and_peers_that_did_not_change_need_nothing() {
        let cuts = vec![cut(OLD_UID, "net:[4026532281]", 4242, &["10.244.1.7"])];
        let seen = Seen {
            pod: Some((
                OLD_UID.to_owned(),
                vec![(4242, "net:[4026532281]".to_owned())],
            )),
            holders: vec![Some(4242)],
        };
        let plan = plan(&cuts, &peers(&["10.244.1.7"]), &seen);
        assert!(plan.is_empty(), "{plan:?}");
    }

    // The operator deleted the pod and its StatefulSet made it again: a new uid, a new
    // namespace, which gets the rules; the old namespace is gone with the old pod.
    #[test]
    fn a_recreated_pod_is_new_and_the_old_namespace_gone() {
        let cuts = vec![cut(OLD_UID, "net:[4026532281]", 4242, &["10.244.1.7"])];
        let seen = Seen {
            pod: Some((
                NEW_UID.to_owned(),
                vec![(5100, "net:[4026532400]".to_owned())],
            )),
            holders: vec![None],
        };
        let plan = plan(&cuts, &peers(&["10.244.1.7"]), &seen);
        assert_eq!(plan.gone, vec![0]);
        assert!(plan.changes.is_empty());
        assert_eq!(
            plan.new,
            vec![NewCut {
                pod_uid: NEW_UID.to_owned(),
                pid: 5100,
                netns: "net:[4026532400]".to_owned(),
            }]
        );
        // The kernel reuses a freed namespace's inode number: the new pod's namespace may
        // read the same as the old pod's, and is still new (another uid).
        let reused = Seen {
            pod: Some((
                NEW_UID.to_owned(),
                vec![(5100, "net:[4026532281]".to_owned())],
            )),
            holders: vec![None],
        };
        assert_eq!(plan_new_pids(&cuts, &reused), vec![5100]);
        // Same uid, a new sandbox (a new namespace): new too; the old one is gone.
        let sandbox = Seen {
            pod: Some((
                OLD_UID.to_owned(),
                vec![(5200, "net:[4026532500]".to_owned())],
            )),
            holders: vec![None],
        };
        assert_eq!(plan_new_pids(&cuts, &sandbox), vec![5200]);
        // A cut gone earlier is not looked at again, and does not cover its namespace.
        let mut earlier = cuts.clone();
        earlier[0].gone = true;
        let same = Seen {
            pod: Some((
                OLD_UID.to_owned(),
                vec![(5300, "net:[4026532281]".to_owned())],
            )),
            holders: vec![None],
        };
        let again = super::plan(&earlier, &peers(&["10.244.1.7"]), &same);
        assert!(again.gone.is_empty());
        assert_eq!(again.new.len(), 1);
    }

    fn plan_new_pids(cuts: &[Cut], seen: &Seen) -> Vec<i32> {
        plan(cuts, &peers(&["10.244.1.7"]), seen)
            .new
            .iter()
            .map(|new| new.pid)
            .collect()
    }

    // The process the agent entered died (the kill fault of the same scenario) but the pod's
    // sandbox still holds the namespace: the cut is entered through it, not cut again. A pod
    // not on this node (or between deletion and recreation) adds nothing.
    #[test]
    fn a_cut_held_by_another_process_moves_and_an_absent_pod_adds_nothing() {
        let cuts = vec![cut(OLD_UID, "net:[4026532281]", 4242, &["10.244.1.7"])];
        let seen = Seen {
            pod: Some((
                OLD_UID.to_owned(),
                vec![(4100, "net:[4026532281]".to_owned())],
            )),
            holders: vec![Some(4100)],
        };
        let plan = plan(&cuts, &peers(&["10.244.1.7"]), &seen);
        assert!(plan.new.is_empty() && plan.gone.is_empty(), "{plan:?}");
        assert_eq!(
            plan.changes,
            vec![Change {
                index: 0,
                pid: 4100,
                moved: true,
                diff: PeerDiff::default(),
            }]
        );
        let away = Seen {
            pod: None,
            holders: vec![Some(4242)],
        };
        assert!(super::plan(&cuts, &peers(&["10.244.1.7"]), &away).is_empty());
    }

    // A peer pod came back under another IP: every cut still standing drops the new address
    // instead of the old; a gone one is left alone.
    #[test]
    fn a_peer_with_a_new_address_changes_every_standing_cut() {
        let mut cuts = vec![
            cut(
                OLD_UID,
                "net:[4026532281]",
                4242,
                &["10.96.0.0/16", "10.244.1.7"],
            ),
            cut(
                NEW_UID,
                "net:[4026532400]",
                5100,
                &["10.96.0.0/16", "10.244.1.7"],
            ),
        ];
        cuts[0].gone = true;
        let fixed = peers(&["10.96.0.0/16"]);
        let before = peer_pod("pdx-0", &["10.244.1.7"]);
        let now = refresh_peer_pod(&before, Some(&peers(&["10.244.2.9"])));
        assert_eq!(now.addresses, vec!["10.244.2.9"]);
        let desired = desired_peers(&fixed, &[now]);
        assert_eq!(desired, peers(&["10.96.0.0/16", "10.244.2.9"]));
        let seen = Seen {
            pod: Some((
                NEW_UID.to_owned(),
                vec![(5100, "net:[4026532400]".to_owned())],
            )),
            holders: vec![None, Some(5100)],
        };
        let plan = plan(&cuts, &desired, &seen);
        assert!(plan.new.is_empty() && plan.gone.is_empty(), "{plan:?}");
        assert_eq!(plan.changes.len(), 1);
        let change = &plan.changes[0];
        assert_eq!((change.index, change.pid, change.moved), (1, 5100, false));
        assert_eq!(change.diff.added, peers(&["10.244.2.9"]));
        assert_eq!(change.diff.removed, peers(&["10.244.1.7"]));
        assert_eq!(change.diff.to_string(), "+10.244.2.9 -10.244.1.7");
        assert_eq!(plan.peers, desired);
    }

    // Between its deletion and its new address a peer pod has none: it stays cut at its last
    // address rather than not at all. Fixed peers and pod addresses covered by them merge.
    #[test]
    fn a_peer_pod_without_an_address_keeps_its_last_one() {
        let last = peer_pod("pdx-0", &["10.244.1.7"]);
        assert_eq!(refresh_peer_pod(&last, None), last);
        assert_eq!(refresh_peer_pod(&last, Some(&[])), last);
        let both = refresh_peer_pod(&last, Some(&peers(&["fd00::7", "10.244.1.8", "fd00::7"])));
        assert_eq!(both.addresses, vec!["10.244.1.8", "fd00::7"]);
        assert_eq!(
            desired_peers(
                &peers(&["10.244.0.0/16"]),
                &[both, peer_pod("x", &["not-an-ip"])]
            ),
            peers(&["10.244.0.0/16", "fd00::7"])
        );
        assert_eq!(
            peer_diff(&peers(&["10.0.0.1"]), &peers(&["10.0.0.1"])),
            PeerDiff::default()
        );
        assert!(parse_recorded(&["10.0.0.1".into(), "junk".into()]) == peers(&["10.0.0.1"]));
    }

    // The /proc half on a fake tree: the pod's namespaces (the node's own left out, one pid
    // per namespace), a cut held by its recorded pid, one held by another process of its pod,
    // and one no process holds.
    #[test]
    fn look_finds_the_pods_namespaces_and_each_cuts_holder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let proc = |pid: i32, uid: &str, netns: &str| {
            let base = root.join(pid.to_string());
            std::fs::create_dir_all(base.join("ns")).unwrap();
            std::fs::write(
                base.join("cgroup"),
                format!("0::/kubepods/pod{uid}/0123456789abcdef\n"),
            )
            .unwrap();
            std::fs::write(base.join("stat"), format!("{pid} (p) S 1")).unwrap();
            std::os::unix::fs::symlink(netns, base.join("ns").join("net")).unwrap();
        };
        proc(1, "init", "net:[1]");
        proc(10, NEW_UID, "net:[1]");
        proc(11, NEW_UID, "net:[400]");
        proc(12, NEW_UID, "net:[400]");
        proc(20, OLD_UID, "net:[281]");
        let procfs = ProcFs::new(root);
        let cuts = vec![
            cut(OLD_UID, "net:[281]", 20, &[]),
            cut(NEW_UID, "net:[400]", 99, &[]),
            cut(NEW_UID, "net:[500]", 98, &[]),
        ];
        let seen = look(&procfs, Some(NEW_UID), &cuts).unwrap();
        assert_eq!(
            seen.pod,
            Some((NEW_UID.to_owned(), vec![(11, "net:[400]".to_owned())]))
        );
        assert_eq!(seen.holders, vec![Some(20), Some(11), None]);
        let nobody = look(&procfs, None, &[]).unwrap();
        assert_eq!(nobody, Seen::default());
    }
}
