//! Which processes belong to a container: the pure half. A container's processes are the
//! pids whose `/proc/<pid>/cgroup` names the container's own cgroup, whatever the layout:
//!
//! - cgroupfs driver: `/kubepods/burstable/pod<uid>/<id>`, `/docker/<id>`;
//! - systemd driver: `.../cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope`,
//!   `libpod-<id>.scope`;
//! - crun's sub-cgroup under the systemd driver: `.../crio-<id>.scope/container`;
//! - a path seen from another cgroup namespace: `/../../kubepods-....slice/cri-containerd-<id>.scope`.
//!
//! cgroup v1 files have one line per hierarchy (`4:memory:/kubepods/...`), v2 files a single
//! `0::/...` line; a process is the container's when any line's path names it. cri-o's
//! monitor, in `crio-conmon-<id>.scope`, is not the container's (killing it is not killing
//! the container), and neither is anything whose last component merely has the id inside
//! another word.

use crate::error::{Error, Result};

/// The shortest id the agent accepts: shorter ones could match unrelated cgroups (the
/// runtimes' ids are 64 hexadecimal digits).
pub const CONTAINER_ID_CHARS_MIN: usize = 12;

/// A container's runtime id, from `status.containerStatuses[].containerID`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContainerId {
    /// `containerd`, `cri-o`, `docker`, ...
    pub runtime: String,
    /// The id proper (64 hexadecimal digits for containerd, cri-o and docker).
    pub id: String,
}

impl ContainerId {
    /// Parses `<runtime>://<id>`.
    pub fn parse(raw: &str) -> Result<ContainerId> {
        let fail = |reason: &str| Error::ContainerId {
            raw: raw.to_owned(),
            reason: reason.to_owned(),
        };
        let (runtime, id) = raw
            .split_once("://")
            .ok_or_else(|| fail("expected <runtime>://<id>"))?;
        if runtime.is_empty() {
            return Err(fail("the runtime before :// is empty"));
        }
        check_id(id).map_err(|reason| fail(&reason))?;
        Ok(ContainerId {
            runtime: runtime.to_owned(),
            id: id.to_owned(),
        })
    }
}

impl std::fmt::Display for ContainerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.runtime, self.id)
    }
}

/// Whether `id` can safely name a cgroup: long enough, letters, digits, `-` and `_` only.
pub fn check_id(id: &str) -> std::result::Result<(), String> {
    if id.len() < CONTAINER_ID_CHARS_MIN {
        return Err(format!(
            "the id {id:?} is shorter than {CONTAINER_ID_CHARS_MIN} characters"
        ));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!("the id {id:?} has the character {bad:?}"));
    }
    Ok(())
}

/// The prefixes systemd-driven runtimes give a container's scope.
const SCOPE_PREFIXES: [&str; 4] = ["cri-containerd-", "crio-", "docker-", "libpod-"];

/// Sub-cgroups a runtime makes inside the container's own (crun's `container`).
const INNER_CGROUPS: [&str; 1] = ["container"];

/// Whether one path component is the container's cgroup.
fn component_names(component: &str, id: &str) -> bool {
    if component == id {
        return true;
    }
    let stem = component.strip_suffix(".scope").unwrap_or(component);
    SCOPE_PREFIXES
        .iter()
        .any(|prefix| stem.strip_prefix(prefix) == Some(id))
}

/// Whether a cgroup path (the third field of a `/proc/<pid>/cgroup` line) is the container's.
pub fn path_names(path: &str, id: &str) -> bool {
    let mut components = path.trim_end_matches('/').rsplit('/');
    let Some(last) = components.next() else {
        return false;
    };
    if component_names(last, id) {
        return true;
    }
    INNER_CGROUPS.contains(&last) && components.next().is_some_and(|c| component_names(c, id))
}

/// Whether a `/proc/<pid>/cgroup` text places the process in the container `id`.
pub fn cgroup_text_names(text: &str, id: &str) -> bool {
    if check_id(id).is_err() {
        return false;
    }
    text.lines().any(|line| {
        // hierarchy-id:controllers:path (the path may itself hold ':').
        let mut fields = line.splitn(3, ':');
        match (fields.next(), fields.next(), fields.next()) {
            (Some(_), Some(_), Some(path)) => path_names(path, id),
            _ => false,
        }
    })
}

/// Whether a `/proc/<pid>/cgroup` text places the process under the pod `uid`'s cgroup
/// (`pod<uid>` with the cgroupfs driver, `kubepods-...-pod<uid with _>.slice` with systemd):
/// any of its containers, the sandbox (pause) process included.
pub fn cgroup_text_in_pod(text: &str, uid: &str) -> bool {
    if check_id(uid).is_err() {
        return false;
    }
    let cgroupfs = format!("pod{uid}");
    let systemd = format!("-pod{}.slice", uid.replace('-', "_"));
    text.lines().any(|line| {
        line.splitn(3, ':').nth(2).is_some_and(|path| {
            path.split('/')
                .any(|component| component == cgroupfs || component.ends_with(&systemd))
        })
    })
}

/// The container id one component of a path names, as the runtimes name a container's own
/// cgroup: `<id>` or `<cri-containerd|crio|docker|libpod>-<id>.scope`, the id letters and
/// digits only (so cri-o's `crio-conmon-<id>.scope`, a slice or the pod's own cgroup is none).
fn container_of_component(component: &str) -> Option<&str> {
    let id = match component.strip_suffix(".scope") {
        Some(stem) => SCOPE_PREFIXES
            .iter()
            .find_map(|prefix| stem.strip_prefix(prefix))?,
        None => component,
    };
    (id.len() >= CONTAINER_ID_CHARS_MIN && id.chars().all(|c| c.is_ascii_alphanumeric()))
        .then_some(id)
}

/// The container of the pod `uid` a `/proc/<pid>/cgroup` text places the process in: the id
/// the component right below the pod's cgroup names (whatever lies below that, crun's
/// `container` included), whether or not the pod status has named that container yet.
/// `None` when no line is under the pod, when a line under the pod is in no container's
/// cgroup (the pod's own cgroup, cri-o's monitor), or when two lines (cgroup v1 hierarchies)
/// name different containers: a process the agent cannot place is never taken for a
/// container's.
pub fn container_id_in_pod(text: &str, uid: &str) -> Option<String> {
    if check_id(uid).is_err() {
        return None;
    }
    let cgroupfs = format!("pod{uid}");
    let systemd = format!("-pod{}.slice", uid.replace('-', "_"));
    let mut found: Option<&str> = None;
    for line in text.lines() {
        let Some(path) = line.splitn(3, ':').nth(2) else {
            continue;
        };
        let mut components = path.split('/');
        if !components
            .by_ref()
            .any(|component| component == cgroupfs || component.ends_with(&systemd))
        {
            continue;
        }
        let id = components.next().and_then(container_of_component)?;
        if found.is_some_and(|known| known != id) {
            return None;
        }
        found = Some(id);
    }
    found.map(str::to_owned)
}

/// The pids, among (pid, cgroup text) pairs, that are in any of the containers `ids`.
pub fn pids_in_containers<'a>(
    processes: impl IntoIterator<Item = (i32, &'a str)>,
    ids: &[String],
) -> Vec<i32> {
    let mut pids: Vec<i32> = processes
        .into_iter()
        .filter(|(_, text)| ids.iter().any(|id| cgroup_text_names(text, id)))
        .map(|(pid, _)| pid)
        .collect();
    pids.sort_unstable();
    pids
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970";
    const OTHER: &str = "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d";

    // A target pid that cannot be found is an error, never another process
    // (docs/design/style.md rule 14): the matching must find exactly the container's
    // processes in every cgroup layout a node may use.
    #[test]
    fn every_cgroup_layout_names_its_container() {
        let layouts = [
            // cgroup v1, cgroupfs driver (containerd, kubeadm defaults before systemd).
            format!(
                "12:pids:/kubepods/burstable/pod1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11/{ID}\n\
                 4:memory:/kubepods/burstable/pod1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11/{ID}\n\
                 1:name=systemd:/kubepods/burstable/pod1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11/{ID}\n"
            ),
            // cgroup v1, systemd driver, containerd.
            format!(
                "6:freezer:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b9a8a5e_0d7f_4b0e_9c1e_6e5a3e0b2c11.slice/cri-containerd-{ID}.scope\n"
            ),
            // cgroup v2, systemd driver, containerd.
            format!(
                "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b9a8a5e_0d7f_4b0e_9c1e_6e5a3e0b2c11.slice/cri-containerd-{ID}.scope\n"
            ),
            // cgroup v2 read from another cgroup namespace (the agent's own container).
            format!("0::/../../kubepods-besteffort-pod1b9a8a5e.slice/cri-containerd-{ID}.scope\n"),
            // cgroup v2, cri-o, systemd driver, runc then crun's inner cgroup.
            format!("0::/kubepods.slice/kubepods-pod1.slice/crio-{ID}.scope\n"),
            format!("0::/kubepods.slice/kubepods-pod1.slice/crio-{ID}.scope/container\n"),
            // docker (kind nodes' inner containers, cri-dockerd).
            format!("0::/system.slice/docker-{ID}.scope\n"),
            format!("8:memory:/docker/{ID}\n"),
            // podman.
            format!("0::/machine.slice/libpod-{ID}.scope\n"),
            // cgroup v2, cgroupfs driver.
            format!("0::/kubepods/besteffort/pod1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11/{ID}\n"),
            // A trailing slash.
            format!("0::/kubepods/pod1/{ID}/\n"),
        ];
        for text in &layouts {
            assert!(cgroup_text_names(text, ID), "not matched: {text}");
            assert!(
                !cgroup_text_names(text, OTHER),
                "matched another id: {text}"
            );
        }
    }

    #[test]
    fn neighbours_of_a_container_are_not_the_container() {
        let not_ours = [
            // cri-o's monitor for the container.
            format!("0::/kubepods.slice/kubepods-pod1.slice/crio-conmon-{ID}.scope\n"),
            // The pod's own cgroup, the sandbox (another id), the node, the root.
            "0::/kubepods.slice/kubepods-pod1.slice\n".to_owned(),
            format!("0::/kubepods/pod1/{OTHER}\n"),
            "0::/system.slice/kubelet.service\n".to_owned(),
            "0::/\n".to_owned(),
            "9:name=systemd:/\n8:pids:/\n".to_owned(),
            // The id inside another word, or an ancestor named after it.
            format!("0::/kubepods/pod1/x{ID}\n"),
            format!("0::/kubepods/{ID}/other\n"),
            // Malformed lines.
            format!("{ID}\n"),
            String::new(),
        ];
        for text in &not_ours {
            assert!(!cgroup_text_names(text, ID), "matched: {text}");
        }
    }

    #[test]
    fn short_or_strange_ids_match_nothing() {
        assert!(!cgroup_text_names("0::/\n", ""));
        assert!(!cgroup_text_names("0::/kubepods/abc\n", "abc"));
        assert!(!cgroup_text_names("0::/a/..\n", ".."));
    }

    #[test]
    fn pids_are_picked_from_scanned_pairs() {
        let ours = format!("0::/kubepods/pod1/{ID}\n");
        let theirs = format!("0::/kubepods/pod1/{OTHER}\n");
        let pairs = vec![
            (40, ours.as_str()),
            (7, theirs.as_str()),
            (12, ours.as_str()),
            (1, "0::/init.scope\n"),
        ];
        assert_eq!(
            pids_in_containers(pairs.clone(), &[ID.to_owned()]),
            vec![12, 40]
        );
        assert_eq!(
            pids_in_containers(pairs.clone(), &[ID.to_owned(), OTHER.to_owned()]),
            vec![7, 12, 40]
        );
        assert!(pids_in_containers(pairs, &[]).is_empty());
    }

    #[test]
    fn a_pods_processes_are_found_by_its_uid_in_both_drivers() {
        let uid = "1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11";
        let in_pod = [
            format!("4:memory:/kubepods/burstable/pod{uid}/{ID}\n"),
            format!("0::/kubepods/pod{uid}/{OTHER}\n"),
            format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b9a8a5e_0d7f_4b0e_9c1e_6e5a3e0b2c11.slice/cri-containerd-{ID}.scope\n"),
            format!("0::/kubepods.slice/kubepods-pod1b9a8a5e_0d7f_4b0e_9c1e_6e5a3e0b2c11.slice/crio-{OTHER}.scope\n"),
        ];
        for text in &in_pod {
            assert!(cgroup_text_in_pod(text, uid), "not matched: {text}");
            assert!(!cgroup_text_in_pod(
                text,
                "2c9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11"
            ));
        }
        assert!(!cgroup_text_in_pod(
            &format!("0::/kubepods/xpod{uid}/{ID}\n"),
            uid
        ));
        assert!(!cgroup_text_in_pod("0::/kubepods/pod\n", ""));
    }

    // A keepDown places a process it has never heard of (a container the kubelet started
    // again, its id not in the pod status yet) by the cgroup below the pod's, in both drivers.
    #[test]
    fn the_container_below_the_pod_is_found_without_knowing_its_id() {
        let uid = "1b9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11";
        let slice = "kubepods-burstable-pod1b9a8a5e_0d7f_4b0e_9c1e_6e5a3e0b2c11.slice";
        let placed = [
            format!("0::/kubepods/burstable/pod{uid}/{ID}\n"),
            format!("12:pids:/kubepods/pod{uid}/{ID}\n4:memory:/kubepods/pod{uid}/{ID}\n1:name=systemd:/\n"),
            format!("0::/kubepods.slice/kubepods-burstable.slice/{slice}/cri-containerd-{ID}.scope\n"),
            format!("0::/kubepods.slice/{slice}/crio-{ID}.scope/container\n"),
            format!("0::/../../{slice}/docker-{ID}.scope\n"),
            format!("0::/kubepods/pod{uid}/{ID}/nested/deeper\n"),
        ];
        for text in &placed {
            assert_eq!(
                container_id_in_pod(text, uid).as_deref(),
                Some(ID),
                "{text}"
            );
            assert_eq!(
                container_id_in_pod(text, "2c9a8a5e-0d7f-4b0e-9c1e-6e5a3e0b2c11"),
                None
            );
        }
        let unplaced = [
            // cri-o's monitor, the pod's own cgroup, a slice below it, another pod, the node.
            format!("0::/kubepods.slice/{slice}/crio-conmon-{ID}.scope\n"),
            format!("0::/kubepods/pod{uid}\n"),
            format!("0::/kubepods/pod{uid}/\n"),
            format!("0::/kubepods.slice/{slice}/sub.slice\n"),
            format!("0::/kubepods/xpod{uid}/{ID}\n"),
            "0::/system.slice/containerd.service\n".to_owned(),
            // An id too short, or with other characters.
            format!("0::/kubepods/pod{uid}/abc\n"),
            format!("0::/kubepods/pod{uid}/{ID}-x\n"),
            // cgroup v1 hierarchies that disagree, or one in the pod but in no container.
            format!("12:pids:/kubepods/pod{uid}/{ID}\n4:memory:/kubepods/pod{uid}/{OTHER}\n"),
            format!("12:pids:/kubepods/pod{uid}/{ID}\n4:memory:/kubepods/pod{uid}\n"),
            String::new(),
        ];
        for text in &unplaced {
            assert_eq!(container_id_in_pod(text, uid), None, "{text}");
        }
        assert_eq!(
            container_id_in_pod(&format!("0::/kubepods/pod/{ID}\n"), ""),
            None
        );
    }

    #[test]
    fn container_ids_parse_from_the_api_form() {
        let containerd = ContainerId::parse(&format!("containerd://{ID}")).unwrap();
        assert_eq!(containerd.runtime, "containerd");
        assert_eq!(containerd.id, ID);
        assert_eq!(containerd.to_string(), format!("containerd://{ID}"));
        assert_eq!(
            ContainerId::parse(&format!("cri-o://{ID}"))
                .unwrap()
                .runtime,
            "cri-o"
        );
        assert_eq!(
            ContainerId::parse(&format!("docker://{ID}")).unwrap().id,
            ID
        );
        let error = |raw: &str| ContainerId::parse(raw).unwrap_err().to_string();
        assert!(error(ID).contains("expected <runtime>://<id>"));
        assert!(error("containerd://").contains("shorter than 12"));
        assert!(error("containerd://abc").contains("shorter than 12"));
        assert!(error(&format!("://{ID}")).contains("runtime"));
        assert!(error("containerd://0123456789ab/../x").contains("'/'"));
    }
}
