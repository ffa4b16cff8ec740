//! How a keepDown knows its container started again before the pod status names it: the
//! pure half of the keepDown thread ([`super::KeepDown`]), which decides from a scan of the
//! pod's processes ([`crate::procfs::ProcFs::scan`]) which of them to SIGKILL.
//!
//! The kubelet starts a killed container again at once the first time (CrashLoopBackOff only
//! delays the later starts), under a new container id, and the pod status names that id a
//! second or two later. A keepDown that killed only in the cgroups of the ids the status had
//! given it let the restarted container run for that long: a MariaDB primary kept down ran
//! its crash recovery and served its binlog to a replica, a sidecar kept down answered the
//! operator once. So at the kill the agent records, besides the container's id, what else
//! identifies its processes ([`Watch::at_kill`]), and the thread, every
//! [`super::KEEP_DOWN_INTERVAL`], kills a live process when
//!
//! - **(a) it is in one of the container's cgroups**: the id at the kill, an id the pod
//!   status gave the container since (the agent re-reads the pod about once a second), or a
//!   cgroup (b) took for the container; or
//! - **(b) it is the container started again**, which takes all of:
//!   1. **a container cgroup of the pod that is no other container's**: its cgroup is right
//!      under the cgroup of the pod of the kill (by uid), and is neither a cgroup the pod
//!      status names for another container (at the kill or since) nor one that held
//!      processes at the kill without being any container's of the status (the sandbox);
//!   2. **an executable of the container's**: its `/proc/<pid>/exe` is that of a process of
//!      the container at the kill (every process of it, the whole tree: an entrypoint
//!      wrapper running then is recorded too), and no process of another container of the
//!      pod was seen running it (at the kill or since, in the cgroups known to be theirs).
//!      A restart runs the same image's entrypoint: a wrapper shell that later execs the
//!      daemon is caught when it execs, or at once if the wrapper was running at the kill;
//!   3. **the pod's network namespace**: the one the container was in at the kill (the
//!      containers of a new sandbox have a new one);
//!   4. **every other container up**: each container the pod status lists, except those the
//!      kubelet does not run again in this sandbox (completed init containers, terminated
//!      ephemeral ones), has a live process in a cgroup of an id the status gave it, and each
//!      sandbox cgroup of the kill still has one.
//!
//! A cgroup (b) killed in is taken as one of the container's ids from then on, so (a) covers
//! whatever else starts in it.
//!
//! **Why (b) does not take another container's process.** The other container's cgroups the
//! agent knows are excluded outright (1). A process of another container in a cgroup the
//! agent does not know yet is that container started again, or one that had not started yet:
//! the kubelet starts a container's new instance only once the last one has exited, so that
//! container has no live process under any id the status gave it, and (4) holds (b) back
//! until the status names the new cgroup as that container's (and 1 excludes it). A
//! completed init container runs again only in a new sandbox, whose containers are in another
//! network namespace (3) and whose making stops the old sandbox (4). What is left is a
//! container the status has not listed at all by the last read, an ephemeral container added
//! within the last second or so; (2) stands against it alone: it would have to run an
//! executable of the killed container that no other container of the pod runs. Should the
//! status ever name a cgroup (b) took as another container's, the agent gives it back (stops
//! killing there) and says so as the keepDown's problem.
//!
//! **Limits.** (b) acts on the pod of the kill: a pod made again (a new uid) is followed by
//! (a) alone, at the pace of the pod status. While another container of the pod is not up
//! (killed as well, crash-looping, starting), (b) waits and a restart is killed once the
//! status names its id, within a second or two as before. A restart is recognised once it
//! runs a recorded executable: a wrapper that was not running at the kill runs until it
//! execs one. The `exe` link of a process in a container reads, from the agent, as the path
//! inside the container (`/usr/sbin/mariadbd`: the container's root is the root of its mount
//! namespace), so a restart matches whatever overlay it runs from; were a runtime to make it
//! read otherwise (a path naming the container's own directory), (b) would recognise nothing
//! and the keepDown would wait for the pod status, as it did before (b). A binary deleted
//! since it started (`exe` ending in ` (deleted)`, such as runc's own `runc init`) is not
//! recorded, as a restart could not run it. `comm` is recorded for messages only: it is the
//! first 15 bytes of a name any process may change.

use std::collections::{BTreeMap, BTreeSet};

use crate::cgroup::{cgroup_text_names, container_id_in_pod, ContainerId};
use crate::error::Result;
use crate::pod::PodView;
use crate::procfs::Seen;

/// Another container of the pod, as a keepDown knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sibling {
    /// Every id the pod status gave it, at the kill and since.
    pub ids: BTreeSet<String>,
    /// The kubelet does not run it again in this sandbox ([`crate::pod::ContainerView`]).
    pub finished: bool,
}

/// What a keepDown knows of the container it keeps down and of its pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    /// The container's name.
    pub container: String,
    /// Its id at the kill (a process in any other id of its is a restart's).
    pub first_id: String,
    /// Its ids: (a) kills in these.
    pub own: BTreeSet<String>,
    /// The ids of `own` that (b) took and the pod status has not named for it yet.
    pub adopted: BTreeSet<String>,
    /// The uid of the pod of the kill; `None`: (b) is off.
    pub pod_uid: Option<String>,
    /// The pod's other containers, by name.
    pub siblings: BTreeMap<String, Sibling>,
    /// Container cgroups of the pod that held processes at the kill without being any
    /// container's of the status: the sandbox.
    pub sandboxes: BTreeSet<String>,
    /// The executables of the container's processes at the kill, with a comm for messages.
    pub exes: BTreeMap<String, String>,
    /// The executables seen run by another container of the pod.
    pub other_exes: BTreeSet<String>,
    /// The container's network namespace at the kill.
    pub netns: Option<String>,
    /// Changes whenever `own` does (so a scan re-reads the cgroups it skipped).
    pub generation: u64,
}

/// A process to SIGKILL, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Its pid.
    pub pid: i32,
    /// The container id of its cgroup (one of the container's, or the one (b) takes for it).
    pub container_id: String,
    /// By (b): the container started again, its cgroup not known to be the container's yet.
    pub recognised: bool,
}

/// What [`Watch::judge`] decided on a scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judged {
    /// The processes to SIGKILL.
    pub kill: Vec<Verdict>,
    /// Processes (b) would have taken were every other container up, and why it waits.
    pub held: Option<String>,
}

/// The bare id of a status's `<runtime>://<id>`.
fn bare_id(raw: Option<&str>) -> Option<String> {
    raw.and_then(|raw| ContainerId::parse(raw).ok())
        .map(|id| id.id)
}

/// An executable path a restart could run (a deleted binary cannot be run again).
fn usable_exe(exe: Option<&String>) -> Option<&String> {
    exe.filter(|exe| !exe.is_empty() && !exe.ends_with(" (deleted)"))
}

impl Watch {
    /// A watch on the container ids `ids` alone: (a) without (b).
    pub fn known_ids(container: &str, ids: Vec<String>) -> Watch {
        Watch {
            container: container.to_owned(),
            first_id: ids.first().cloned().unwrap_or_default(),
            own: ids.into_iter().collect(),
            adopted: BTreeSet::new(),
            pod_uid: None,
            siblings: BTreeMap::new(),
            sandboxes: BTreeSet::new(),
            exes: BTreeMap::new(),
            other_exes: BTreeSet::new(),
            netns: None,
            generation: 0,
        }
    }

    /// The watch on `container` (id `id`) of the pod `view`, from the pod status the kill
    /// used and from `table`, the pod's processes scanned just before the kill (the
    /// container's own among them).
    pub fn at_kill(view: &PodView, container: &str, id: &str, table: &[Seen]) -> Watch {
        let mut watch = Watch::known_ids(container, vec![id.to_owned()]);
        watch.pod_uid = Some(view.uid.clone());
        for other in view.containers.iter().filter(|c| c.name != container) {
            let sibling = watch.siblings.entry(other.name.clone()).or_default();
            sibling.finished = other.finished;
            sibling.ids.extend(bare_id(other.container_id.as_deref()));
        }
        for seen in table.iter().filter(|seen| seen.alive) {
            let cid = container_id_in_pod(&seen.cgroup, &view.uid);
            if cgroup_text_names(&seen.cgroup, id) || cid.as_deref() == Some(id) {
                if let Some(exe) = usable_exe(seen.exe.as_ref()) {
                    watch
                        .exes
                        .entry(exe.clone())
                        .or_insert_with(|| seen.comm.clone());
                }
                if watch.netns.is_none() {
                    watch.netns.clone_from(&seen.netns);
                }
                continue;
            }
            let Some(cid) = cid else {
                continue;
            };
            if !watch.is_other(&cid) {
                watch.sandboxes.insert(cid);
            }
            watch
                .other_exes
                .extend(usable_exe(seen.exe.as_ref()).cloned());
        }
        watch
    }

    /// Whether the container cgroup `cid` is known to be another container's (or the
    /// sandbox's).
    pub fn is_other(&self, cid: &str) -> bool {
        self.sandboxes.contains(cid) || self.siblings.values().any(|s| s.ids.contains(cid))
    }

    /// The executables that recognise a restart: the container's at the kill, but those
    /// another container of the pod was seen running. None when (b) cannot recognise
    /// anything (no pod, or the container's network namespace unread at the kill).
    pub fn signature(&self) -> Vec<&str> {
        if self.pod_uid.is_none() || self.netns.is_none() {
            return Vec::new();
        }
        self.exes
            .keys()
            .filter(|exe| !self.other_exes.contains(*exe))
            .map(String::as_str)
            .collect()
    }

    /// Learns from a scan the executables the pod's other containers run.
    pub fn learn(&mut self, table: &[Seen]) {
        let Some(uid) = self.pod_uid.clone() else {
            return;
        };
        for seen in table.iter().filter(|seen| seen.alive) {
            let Some(exe) = usable_exe(seen.exe.as_ref()) else {
                continue;
            };
            let known_other = container_id_in_pod(&seen.cgroup, &uid)
                .is_some_and(|cid| !self.own.contains(&cid) && self.is_other(&cid));
            if known_other && !self.other_exes.contains(exe) {
                self.other_exes.insert(exe.clone());
            }
        }
    }

    /// Why (b) must wait (condition 4), if it must: the other containers not up and the
    /// sandboxes gone, as seen in `table`.
    pub fn others_down(&self, table: &[Seen]) -> Option<String> {
        let uid = self.pod_uid.as_deref()?;
        let live: BTreeSet<String> = table
            .iter()
            .filter(|seen| seen.alive)
            .filter_map(|seen| container_id_in_pod(&seen.cgroup, uid))
            .collect();
        let mut down: Vec<String> = self
            .siblings
            .iter()
            .filter(|(_, sibling)| !sibling.finished && sibling.ids.is_disjoint(&live))
            .map(|(name, _)| {
                format!("container {name:?} has no live process under an id the pod status gave it")
            })
            .collect();
        down.extend(
            self.sandboxes
                .iter()
                .filter(|cid| !live.contains(*cid))
                .map(|cid| format!("the sandbox cgroup {cid} of the kill has no live process")),
        );
        (!down.is_empty()).then(|| down.join("; "))
    }

    /// The container cgroup `seen` is in when it is the container started again by
    /// conditions 1 to 3 of (b) (condition 4 is the whole pod's: [`Self::others_down`]).
    pub fn restart_of(&self, seen: &Seen) -> Option<String> {
        let uid = self.pod_uid.as_deref()?;
        let cid = container_id_in_pod(&seen.cgroup, uid)?;
        if self.is_other(&cid) {
            return None;
        }
        let exe = usable_exe(seen.exe.as_ref())?;
        if !self.exes.contains_key(exe) || self.other_exes.contains(exe) {
            return None;
        }
        let netns = self.netns.as_ref()?;
        (seen.netns.as_ref() == Some(netns)).then_some(cid)
    }

    /// The processes of `table` to SIGKILL now: (a), then (b).
    pub fn judge(&self, table: &[Seen]) -> Judged {
        let mut judged = Judged::default();
        let mut recognised = Vec::new();
        for seen in table.iter().filter(|seen| seen.alive) {
            let own = self
                .own
                .iter()
                .find(|id| cgroup_text_names(&seen.cgroup, id))
                .cloned()
                .or_else(|| {
                    let uid = self.pod_uid.as_deref()?;
                    container_id_in_pod(&seen.cgroup, uid).filter(|cid| self.own.contains(cid))
                });
            if let Some(id) = own {
                judged.kill.push(Verdict {
                    pid: seen.pid,
                    container_id: id,
                    recognised: false,
                });
            } else if let Some(cid) = self.restart_of(seen) {
                recognised.push(Verdict {
                    pid: seen.pid,
                    container_id: cid,
                    recognised: true,
                });
            }
        }
        if recognised.is_empty() {
            return judged;
        }
        match self.others_down(table) {
            None => judged.kill.extend(recognised),
            Some(why) => {
                let pids: Vec<String> = recognised.iter().map(|v| v.pid.to_string()).collect();
                judged.held = Some(format!(
                    "processes {} look like container {:?} started again, but {why}: left to the pod status",
                    pids.join(", "),
                    self.container
                ));
            }
        }
        judged
    }

    /// Takes the cgroup `cid` for the container's ((b) killed in it).
    pub fn adopt(&mut self, cid: &str) {
        if self.own.insert(cid.to_owned()) {
            self.adopted.insert(cid.to_owned());
            self.generation += 1;
        }
    }

    /// Takes in the pod as the API shows it now: the container's id (as before, whatever the
    /// pod's uid: a pod made again is followed by (a)) and, for the pod of the kill, its other
    /// containers' ids. Returns the container's ids new to the watch and, when the status
    /// names a cgroup (b) took as another container's, what was given back.
    pub fn observe(&mut self, view: &PodView, agent_node: Option<&str>) -> Result<Observed> {
        let mut observed = Observed::default();
        if self.pod_uid.as_deref() == Some(view.uid.as_str()) {
            for other in view.containers.iter().filter(|c| c.name != self.container) {
                let id = bare_id(other.container_id.as_deref());
                if let Some(id) = &id {
                    if self.adopted.remove(id) {
                        self.own.remove(id);
                        self.generation += 1;
                        observed.given_back.push(format!(
                            "the agent took cgroup {id} for container {:?} started again, but the pod status names it container {:?}'s: it no longer kills there",
                            self.container, other.name
                        ));
                    }
                    self.sandboxes.remove(id);
                }
                let sibling = self.siblings.entry(other.name.clone()).or_default();
                sibling.finished = other.finished;
                sibling.ids.extend(id);
            }
        }
        let id = view.container_target(&self.container, agent_node)?.id;
        self.adopted.remove(&id);
        if self.own.insert(id.clone()) {
            self.generation += 1;
            observed.new_ids.push(id);
        }
        Ok(observed)
    }
}

/// What [`Watch::observe`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Ids of the container new to the watch.
    pub new_ids: Vec<String>,
    /// Cgroups (b) had taken that the status names for another container.
    pub given_back: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::ContainerView;

    const UID: &str = "1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11";
    const MYSQL: &str = "4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970";
    const SIDECAR: &str = "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d";
    const PAUSE: &str = "5d1e2f3a4b5c6d7e8f901a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7";
    const MYSQL_AGAIN: &str = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1";
    const SIDECAR_AGAIN: &str = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2";
    const SETUP: &str = "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3";
    const NETNS: &str = "net:[4026532281]";
    const MARIADBD: &str = "/usr/sbin/mariadbd";
    const SIDECAR_EXE: &str = "/usr/local/bin/bloodraven-sidecar";

    fn cgroup(uid: &str, cid: &str) -> String {
        format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{cid}.scope\n",
            uid.replace('-', "_")
        )
    }

    fn seen(pid: i32, cid: &str, exe: &str) -> Seen {
        Seen {
            pid,
            comm: exe.rsplit('/').next().unwrap_or_default().to_owned(),
            cgroup: cgroup(UID, cid),
            exe: Some(exe.to_owned()),
            netns: Some(NETNS.to_owned()),
            alive: true,
        }
    }

    fn container(name: &str, id: Option<&str>) -> ContainerView {
        ContainerView {
            name: name.to_owned(),
            container_id: id.map(|id| format!("containerd://{id}")),
            finished: false,
        }
    }

    fn view(containers: Vec<ContainerView>) -> PodView {
        PodView {
            namespace: "br".into(),
            name: "iad-0".into(),
            uid: UID.into(),
            node_name: Some("node-iad".into()),
            host_network: false,
            containers,
            ips: Vec::new(),
        }
    }

    /// The pod as it runs at the kill: mysql (a wrapper shell and mariadbd), the sidecar, the
    /// sandbox.
    fn at_kill() -> Watch {
        let table = vec![
            seen(100, PAUSE, "/pause"),
            seen(200, MYSQL, "/bin/bash"),
            seen(201, MYSQL, MARIADBD),
            seen(300, SIDECAR, SIDECAR_EXE),
        ];
        let pod = view(vec![
            container("mysql", Some(MYSQL)),
            container("sidecar", Some(SIDECAR)),
        ]);
        Watch::at_kill(&pod, "mysql", MYSQL, &table)
    }

    /// The pod after the kill: the sidecar and the sandbox still up.
    fn survivors() -> Vec<Seen> {
        vec![seen(100, PAUSE, "/pause"), seen(300, SIDECAR, SIDECAR_EXE)]
    }

    fn killed(watch: &Watch, table: &[Seen]) -> Vec<i32> {
        watch.judge(table).kill.iter().map(|v| v.pid).collect()
    }

    #[test]
    fn the_kill_records_the_containers_executables_its_siblings_and_its_sandbox() {
        let watch = at_kill();
        assert_eq!(watch.first_id, MYSQL);
        assert_eq!(watch.own, BTreeSet::from([MYSQL.to_owned()]));
        assert_eq!(watch.signature(), vec!["/bin/bash", MARIADBD]);
        assert_eq!(watch.exes["/bin/bash"], "bash");
        assert_eq!(
            watch.other_exes,
            BTreeSet::from(["/pause".to_owned(), SIDECAR_EXE.to_owned()])
        );
        assert_eq!(watch.sandboxes, BTreeSet::from([PAUSE.to_owned()]));
        assert_eq!(
            watch.siblings["sidecar"].ids,
            BTreeSet::from([SIDECAR.to_owned()])
        );
        assert_eq!(watch.netns.as_deref(), Some(NETNS));
    }

    // A binary deleted since it started cannot be what the container runs when started
    // again (runc's own `runc init`, from a deleted memfd, caught in the container at the
    // kill, would otherwise recognise the next container the pod starts).
    #[test]
    fn a_deleted_executable_is_not_recorded() {
        let runc = "/memfd:runc_cloned:/proc/self/exe (deleted)";
        let watch = Watch::at_kill(
            &view(vec![
                container("mysql", Some(MYSQL)),
                container("sidecar", Some(SIDECAR)),
            ]),
            "mysql",
            MYSQL,
            &[
                seen(100, PAUSE, "/pause"),
                seen(199, MYSQL, runc),
                seen(201, MYSQL, MARIADBD),
                seen(300, SIDECAR, SIDECAR_EXE),
            ],
        );
        assert_eq!(watch.signature(), vec![MARIADBD]);
        let mut table = survivors();
        table.push(seen(400, MYSQL_AGAIN, runc));
        assert_eq!(watch.judge(&table), Judged::default());
    }

    // (a): whatever runs in the container's cgroup is killed, as before: a fork that raced
    // the kill, whatever its executable.
    #[test]
    fn a_process_in_the_containers_cgroup_is_killed_whatever_it_runs() {
        let watch = at_kill();
        let mut table = survivors();
        table.push(seen(202, MYSQL, "/usr/bin/env"));
        let judged = watch.judge(&table);
        assert_eq!(
            judged.kill,
            vec![Verdict {
                pid: 202,
                container_id: MYSQL.into(),
                recognised: false
            }]
        );
        // And in an id the status gave it since, once the watch knows it.
        let mut table = survivors();
        table.push(seen(400, MYSQL_AGAIN, "/usr/bin/env"));
        assert!(killed(&watch, &table).is_empty());
        let mut later = watch.clone();
        let observed = later
            .observe(
                &view(vec![
                    container("mysql", Some(MYSQL_AGAIN)),
                    container("sidecar", Some(SIDECAR)),
                ]),
                Some("node-iad"),
            )
            .unwrap();
        assert_eq!(observed.new_ids, vec![MYSQL_AGAIN.to_owned()]);
        assert!(later.generation > watch.generation);
        assert_eq!(killed(&later, &table), vec![400]);
    }

    // (b): the container started again in a cgroup the status has not named yet, running an
    // executable of the kill, is killed; the wrapper shell is caught too (it was running at
    // the kill).
    #[test]
    fn the_container_started_again_is_killed_before_the_status_names_it() {
        let watch = at_kill();
        let mut table = survivors();
        table.push(seen(400, MYSQL_AGAIN, MARIADBD));
        table.push(seen(401, MYSQL_AGAIN, "/bin/bash"));
        let judged = watch.judge(&table);
        assert_eq!(judged.held, None);
        assert_eq!(
            judged.kill,
            vec![
                Verdict {
                    pid: 400,
                    container_id: MYSQL_AGAIN.into(),
                    recognised: true
                },
                Verdict {
                    pid: 401,
                    container_id: MYSQL_AGAIN.into(),
                    recognised: true
                },
            ]
        );
        // Once (b) killed there, the cgroup is the container's: (a) kills anything in it.
        let mut adopted = watch.clone();
        adopted.adopt(MYSQL_AGAIN);
        assert!(adopted.own.contains(MYSQL_AGAIN) && adopted.adopted.contains(MYSQL_AGAIN));
        let mut table = survivors();
        table.push(seen(402, MYSQL_AGAIN, "/usr/bin/env"));
        assert_eq!(watch.judge(&table).kill, vec![]);
        let judged = adopted.judge(&table);
        assert_eq!(judged.kill.len(), 1);
        assert!(!judged.kill[0].recognised);
        // The status naming it the container's confirms it.
        adopted
            .observe(
                &view(vec![
                    container("mysql", Some(MYSQL_AGAIN)),
                    container("sidecar", Some(SIDECAR)),
                ]),
                None,
            )
            .unwrap();
        assert!(adopted.own.contains(MYSQL_AGAIN) && adopted.adopted.is_empty());
    }

    // Rule 1: never a process outside the pod, in another container's cgroup, in the
    // sandbox's, or in the pod's own cgroup, whatever it runs.
    #[test]
    fn processes_outside_the_pod_or_in_a_known_other_cgroup_are_left_alone() {
        let mut watch = at_kill();
        // Another container running the killed one's program after the kill is a fact
        // learnt; here the watch is told only its cgroup, to show rule 1 alone holds.
        watch.other_exes.clear();
        let mut table = survivors();
        let mut elsewhere = seen(500, MYSQL_AGAIN, MARIADBD);
        elsewhere.cgroup = cgroup("2c9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11", MYSQL_AGAIN);
        let mut node = seen(501, MYSQL_AGAIN, MARIADBD);
        node.cgroup = "0::/system.slice/mariadb.service\n".into();
        let mut pod_level = seen(502, MYSQL_AGAIN, MARIADBD);
        pod_level.cgroup = format!("0::/kubepods/pod{UID}\n");
        table.extend([
            elsewhere,
            node,
            pod_level,
            seen(301, SIDECAR, MARIADBD),
            seen(101, PAUSE, MARIADBD),
        ]);
        assert_eq!(watch.judge(&table), Judged::default());
    }

    // Rule 2: the pod's other container started again (a new id the status has not named
    // yet, running its own program) is not the killed container. Its old process is left
    // alive here, so rule 4 does not hold it: rule 2 alone does.
    #[test]
    fn another_container_started_again_with_its_own_program_is_left_alone() {
        let watch = at_kill();
        let mut table = survivors();
        table.push(seen(600, SIDECAR_AGAIN, SIDECAR_EXE));
        table.push(seen(601, SIDECAR_AGAIN, "/usr/bin/mysqladmin"));
        assert_eq!(watch.judge(&table), Judged::default());
        // Without an executable, or with a deleted one, nothing is recognised.
        let mut blind = seen(602, MYSQL_AGAIN, MARIADBD);
        blind.exe = None;
        let mut deleted = seen(603, MYSQL_AGAIN, &format!("{MARIADBD} (deleted)"));
        deleted.exe = Some(format!("{MARIADBD} (deleted)"));
        let mut table = survivors();
        table.extend([blind, deleted]);
        assert_eq!(watch.judge(&table), Judged::default());
    }

    // Rule 2: an executable another container of the pod runs (at the kill, or seen since in
    // a cgroup known to be its) does not recognise the killed container.
    #[test]
    fn an_executable_another_container_runs_recognises_nothing() {
        let pod = view(vec![
            container("mysql", Some(MYSQL)),
            container("sidecar", Some(SIDECAR)),
        ]);
        // Both run bash at the kill: bash is no signature; mariadbd still is.
        let watch = Watch::at_kill(
            &pod,
            "mysql",
            MYSQL,
            &[
                seen(100, PAUSE, "/pause"),
                seen(200, MYSQL, "/bin/bash"),
                seen(201, MYSQL, MARIADBD),
                seen(300, SIDECAR, "/bin/bash"),
            ],
        );
        assert_eq!(watch.signature(), vec![MARIADBD]);
        let mut table = vec![
            seen(100, PAUSE, "/pause"),
            seen(300, SIDECAR, "/bin/bash"),
            seen(400, MYSQL_AGAIN, "/bin/bash"),
        ];
        assert_eq!(watch.judge(&table), Judged::default());
        table.push(seen(401, MYSQL_AGAIN, MARIADBD));
        assert_eq!(killed(&watch, &table), vec![401]);
        // Seen since: the sidecar execs mariadbd in its own cgroup; from then on it is no
        // signature either.
        let mut learnt = watch.clone();
        learnt.learn(&[seen(301, SIDECAR, MARIADBD)]);
        assert!(learnt.signature().is_empty());
        assert_eq!(learnt.judge(&table), Judged::default());
        // What runs in a cgroup not known to be another container's teaches nothing.
        let mut unknown = watch.clone();
        unknown.learn(&[
            seen(402, SIDECAR_AGAIN, MARIADBD),
            seen(403, MYSQL, MARIADBD),
        ]);
        assert_eq!(unknown.signature(), vec![MARIADBD]);
    }

    // Rule 3: a process in another network namespace (a container of a new sandbox) is not
    // the container started again in this one.
    #[test]
    fn a_process_in_another_network_namespace_is_not_the_restart() {
        let watch = at_kill();
        let mut table = survivors();
        let mut other_netns = seen(400, MYSQL_AGAIN, MARIADBD);
        other_netns.netns = Some("net:[4026532999]".into());
        let mut unread = seen(401, MYSQL_AGAIN, MARIADBD);
        unread.netns = None;
        table.extend([other_netns, unread]);
        assert_eq!(watch.judge(&table), Judged::default());
        // A watch that could not read the container's namespace at the kill recognises none.
        let mut blind = watch.clone();
        blind.netns = None;
        assert!(blind.signature().is_empty());
        let mut table = survivors();
        table.push(seen(402, MYSQL_AGAIN, MARIADBD));
        assert_eq!(killed(&watch, &table), vec![402]);
        assert_eq!(blind.judge(&table).kill, vec![]);
    }

    // Rule 4: while another container is not up under an id the status gave it (it died, and
    // the new cgroup may be its own coming back; or it never started), (b) waits. Here the
    // sidecar's restart runs a program of the killed container's: only rule 4 holds it.
    #[test]
    fn nothing_is_recognised_while_another_container_is_not_up() {
        let pod = view(vec![
            container("mysql", Some(MYSQL)),
            container("sidecar", Some(SIDECAR)),
        ]);
        // The sidecar started through a shell, exec'd by the kill; mysql's wrapper still ran.
        let watch = Watch::at_kill(
            &pod,
            "mysql",
            MYSQL,
            &[
                seen(100, PAUSE, "/pause"),
                seen(200, MYSQL, "/bin/sh"),
                seen(201, MYSQL, MARIADBD),
                seen(300, SIDECAR, SIDECAR_EXE),
            ],
        );
        let restarting_sidecar = vec![
            seen(100, PAUSE, "/pause"),
            seen(600, SIDECAR_AGAIN, "/bin/sh"),
        ];
        let judged = watch.judge(&restarting_sidecar);
        assert_eq!(judged.kill, vec![]);
        let held = judged.held.unwrap();
        assert!(
            held.contains("processes 600")
                && held.contains("container \"sidecar\" has no live process"),
            "{held}"
        );
        // A zombie is not up.
        let mut zombie = seen(300, SIDECAR, SIDECAR_EXE);
        zombie.alive = false;
        let mut table = vec![
            seen(100, PAUSE, "/pause"),
            zombie,
            seen(400, MYSQL_AGAIN, MARIADBD),
        ];
        assert!(watch.judge(&table).kill.is_empty());
        // Up again under the id the status gave it: (b) acts again; and the sidecar's new
        // cgroup, now named, is excluded outright.
        let mut later = watch.clone();
        later
            .observe(
                &view(vec![
                    container("mysql", Some(MYSQL)),
                    container("sidecar", Some(SIDECAR_AGAIN)),
                ]),
                None,
            )
            .unwrap();
        table.push(seen(600, SIDECAR_AGAIN, "/bin/sh"));
        assert_eq!(killed(&later, &table), vec![400]);
        // A container the status lists without an id (waiting) is not up either.
        let waiting = Watch::at_kill(
            &view(vec![
                container("mysql", Some(MYSQL)),
                container("sidecar", Some(SIDECAR)),
                container("exporter", None),
            ]),
            "mysql",
            MYSQL,
            &[
                seen(100, PAUSE, "/pause"),
                seen(201, MYSQL, MARIADBD),
                seen(300, SIDECAR, SIDECAR_EXE),
            ],
        );
        let mut table = survivors();
        table.push(seen(400, MYSQL_AGAIN, MARIADBD));
        let judged = waiting.judge(&table);
        assert!(judged.kill.is_empty());
        assert!(judged.held.unwrap().contains("\"exporter\""));
    }

    // Rule 4, its exception: a completed init container is not waited for.
    #[test]
    fn a_finished_init_container_is_not_waited_for() {
        let mut init = container("setup", Some(SETUP));
        init.finished = true;
        let watch = Watch::at_kill(
            &view(vec![
                container("mysql", Some(MYSQL)),
                container("sidecar", Some(SIDECAR)),
                init,
            ]),
            "mysql",
            MYSQL,
            &[
                seen(100, PAUSE, "/pause"),
                seen(201, MYSQL, MARIADBD),
                seen(300, SIDECAR, SIDECAR_EXE),
            ],
        );
        let mut table = survivors();
        table.push(seen(400, MYSQL_AGAIN, MARIADBD));
        assert_eq!(killed(&watch, &table), vec![400]);
    }

    // Rule 4: the sandbox of the kill gone (the pod torn down, or given a new sandbox whose
    // init containers run again) holds (b) back.
    #[test]
    fn nothing_is_recognised_once_the_sandbox_of_the_kill_is_gone() {
        let watch = at_kill();
        let table = vec![
            seen(300, SIDECAR, SIDECAR_EXE),
            seen(400, MYSQL_AGAIN, MARIADBD),
        ];
        let judged = watch.judge(&table);
        assert!(judged.kill.is_empty());
        assert!(judged
            .held
            .unwrap()
            .contains(&format!("sandbox cgroup {PAUSE}")));
    }

    // A watch without a pod (the first agent's kind) kills by id alone.
    #[test]
    fn a_watch_on_ids_alone_recognises_nothing() {
        let watch = Watch::known_ids("mysql", vec![MYSQL.to_owned()]);
        let mut table = survivors();
        table.push(seen(201, MYSQL, MARIADBD));
        table.push(seen(400, MYSQL_AGAIN, MARIADBD));
        assert_eq!(killed(&watch, &table), vec![201]);
    }

    // The safety net: should the status name a cgroup (b) took as another container's, the
    // watch gives it back and says so.
    #[test]
    fn a_cgroup_the_status_names_for_another_container_is_given_back() {
        let mut watch = at_kill();
        watch.adopt(SIDECAR_AGAIN);
        let observed = watch
            .observe(
                &view(vec![
                    container("mysql", Some(MYSQL)),
                    container("sidecar", Some(SIDECAR_AGAIN)),
                ]),
                None,
            )
            .unwrap();
        assert!(observed.new_ids.is_empty());
        assert_eq!(observed.given_back.len(), 1);
        assert!(observed.given_back[0].contains("container \"sidecar\"'s"));
        assert!(!watch.own.contains(SIDECAR_AGAIN) && watch.is_other(SIDECAR_AGAIN));
        let mut table = survivors();
        table.push(seen(600, SIDECAR_AGAIN, MARIADBD));
        assert!(watch.judge(&table).kill.is_empty());
    }

    // The pod made again (a new uid): its container's id is followed by (a), as before; its
    // other containers are not the kill's pod's.
    #[test]
    fn a_pod_made_again_is_followed_by_its_containers_id() {
        let mut watch = at_kill();
        let mut again = view(vec![
            container("mysql", Some(MYSQL_AGAIN)),
            container("sidecar", Some(SIDECAR_AGAIN)),
        ]);
        again.uid = "2c9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11".into();
        let observed = watch.observe(&again, Some("node-iad")).unwrap();
        assert_eq!(observed.new_ids, vec![MYSQL_AGAIN.to_owned()]);
        assert!(!watch.is_other(SIDECAR_AGAIN));
        let mut there = seen(400, MYSQL_AGAIN, "/usr/bin/env");
        there.cgroup = cgroup(&again.uid, MYSQL_AGAIN);
        assert_eq!(killed(&watch, &[there]), vec![400]);
        // On another node: refused, as before.
        let mut elsewhere = again.clone();
        elsewhere.node_name = Some("node-pdx".into());
        assert!(watch.observe(&elsewhere, Some("node-iad")).is_err());
    }
}
