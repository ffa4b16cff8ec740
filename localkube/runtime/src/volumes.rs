//! Materialising a pod's volumes, /etc/hosts and /etc/resolv.conf in the state dir.

use std::fs;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::exec::BindMount;
use super::spec::{ContainerSpec, HostPathType, PodSpec, VolumeSource};

/// The cluster DNS domain.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// Where a pod's files live: `STATE/pods/<uid>`.
pub fn pod_dir(state_dir: &Path, pod: &PodSpec) -> PathBuf {
    state_dir.join("pods").join(sanitize(&pod.uid))
}

/// Where a PersistentVolumeClaim's data lives: `STATE/pvc/<namespace>/<claim>/<claim uid>`
/// (kept when the pod is deleted, as a bound PersistentVolume). Keyed by the uid as a
/// dynamically provisioned volume is: a claim re-created under the same name gets a new,
/// empty volume, never the deleted claim's data.
pub fn pvc_dir(state_dir: &Path, namespace: &str, claim: &str, claim_uid: &str) -> PathBuf {
    state_dir
        .join("pvc")
        .join(sanitize(namespace))
        .join(sanitize(claim))
        .join(sanitize(claim_uid))
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The kubelet's group permission bits for a writable volume's files (`rwMask`).
const FS_GROUP_RW: u32 = 0o660;
/// For a read-only volume's files: configMap, secret, downwardAPI, projected (`roMask`).
const FS_GROUP_RO: u32 = 0o440;
/// Added to directories (`execMask`), with the setgid bit.
const FS_GROUP_EXEC: u32 = 0o110;
/// The setgid bit: new files in the directory inherit its group.
const SETGID: u32 = 0o2000;

/// `spec.securityContext.fsGroup` applied to a volume's tree, as the kubelet's
/// `SetVolumeOwnership` does: every entry's group becomes `gid` (symlinks not followed), files
/// gain the group bits of [`FS_GROUP_RW`] (or [`FS_GROUP_RO`] when `read_only`), directories
/// also [`FS_GROUP_EXEC`] and setgid.
pub fn set_volume_ownership(root: &Path, gid: u32, read_only: bool) -> Result<()> {
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = fs::symlink_metadata(&path).map_err(Error::io("stat volume entry", &path))?;
        std::os::unix::fs::lchown(&path, None, Some(gid))
            .map_err(Error::io("chgrp volume entry", &path))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let mut mask = if read_only { FS_GROUP_RO } else { FS_GROUP_RW };
        if meta.is_dir() {
            mask |= FS_GROUP_EXEC | SETGID;
            for entry in fs::read_dir(&path).map_err(Error::io("list volume", &path))? {
                pending.push(entry.map_err(Error::io("list volume", &path))?.path());
            }
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode | mask != mode {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode | mask))
                .map_err(Error::io("set volume mode", &path))?;
        }
    }
    Ok(())
}

/// Writes every volume of the pod (emptyDir directories, rendered files, PVC directories)
/// and the pod's hosts and resolv.conf files; with `fsGroup`, each volume is group-owned by
/// it ([`set_volume_ownership`]; hostPath volumes are left alone, as on Kubernetes).
pub fn materialize(
    state_dir: &Path,
    pod: &PodSpec,
    pod_ip: Ipv4Addr,
    dns_ip: Ipv4Addr,
) -> Result<()> {
    let dir = pod_dir(state_dir, pod);
    for volume in &pod.volumes {
        match &volume.source {
            VolumeSource::EmptyDir => {
                let path = dir.join("volumes").join(sanitize(&volume.name));
                fs::create_dir_all(&path).map_err(Error::io("create emptyDir", &path))?;
                let _ = fs::set_permissions(&path, fs::Permissions::from_mode(0o777));
                if let Some(gid) = pod.fs_group {
                    set_volume_ownership(&path, gid, false)?;
                }
            }
            VolumeSource::Files(files) => {
                let root = dir.join("volumes").join(sanitize(&volume.name));
                fs::create_dir_all(&root).map_err(Error::io("create volume", &root))?;
                for file in files {
                    let relative = Path::new(&file.path);
                    if relative.is_absolute()
                        || relative
                            .components()
                            .any(|c| matches!(c, std::path::Component::ParentDir))
                    {
                        return Err(Error::Invalid(format!(
                            "volume {} item path {:?}: it must be relative without ..",
                            volume.name, file.path
                        )));
                    }
                    let path = root.join(relative);
                    if let Some(parent) = path.parent() {
                        fs::create_dir_all(parent)
                            .map_err(Error::io("create volume dir", parent))?;
                    }
                    fs::write(&path, &file.contents)
                        .map_err(Error::io("write volume file", &path))?;
                    fs::set_permissions(&path, fs::Permissions::from_mode(file.mode))
                        .map_err(Error::io("set volume file mode", &path))?;
                }
                if let Some(gid) = pod.fs_group {
                    set_volume_ownership(&root, gid, true)?;
                }
            }
            VolumeSource::PersistentVolumeClaim {
                claim_name,
                claim_uid,
            } => {
                let path = pvc_dir(state_dir, &pod.namespace, claim_name, claim_uid);
                fs::create_dir_all(&path).map_err(Error::io("create pvc dir", &path))?;
                if let Some(gid) = pod.fs_group {
                    set_volume_ownership(&path, gid, false)?;
                }
            }
            VolumeSource::HostPath { path, kind } => {
                check_host_path(path, *kind).map_err(|message| Error::VolumeSetup {
                    volume: volume.name.clone(),
                    message,
                })?;
            }
        }
    }
    let etc = dir.join("etc");
    fs::create_dir_all(&etc).map_err(Error::io("create pod etc", &etc))?;
    let hosts = etc.join("hosts");
    fs::write(&hosts, hosts_file(pod, pod_ip)).map_err(Error::io("write hosts", &hosts))?;
    let resolv = etc.join("resolv.conf");
    fs::write(&resolv, resolv_conf(&pod.namespace, dns_ip))
        .map_err(Error::io("write resolv.conf", &resolv))?;
    for path in [&hosts, &resolv] {
        let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o644));
    }
    Ok(())
}

/// Replaces the files of a running pod's rendered volume (configMap or secret changes,
/// service-account token rotation): each file is written atomically (temporary file +
/// rename), files no longer listed are removed. Containers see the change at once, except
/// through `subPath` mounts, which (as on Kubernetes) keep the old content.
pub fn update_files(
    state_dir: &Path,
    pod: &PodSpec,
    volume: &str,
    files: &[super::spec::VolumeFile],
) -> Result<()> {
    let root = pod_dir(state_dir, pod)
        .join("volumes")
        .join(sanitize(volume));
    fs::create_dir_all(&root).map_err(Error::io("create volume", &root))?;
    let mut keep = std::collections::BTreeSet::new();
    for file in files {
        let relative = Path::new(&file.path);
        if relative.is_absolute()
            || relative
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(Error::Invalid(format!(
                "volume {volume} item path {:?}: it must be relative without ..",
                file.path
            )));
        }
        let path = root.join(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(Error::io("create volume dir", parent))?;
        }
        let temporary = path.with_file_name(format!(
            ".{}.tmp",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
        ));
        fs::write(&temporary, &file.contents)
            .map_err(Error::io("write volume file", &temporary))?;
        fs::set_permissions(&temporary, fs::Permissions::from_mode(file.mode))
            .map_err(Error::io("set volume file mode", &temporary))?;
        if let Some(gid) = pod.fs_group {
            set_volume_ownership(&temporary, gid, true)?;
        }
        fs::rename(&temporary, &path).map_err(Error::io("replace volume file", &path))?;
        keep.insert(path);
    }
    remove_unlisted(&root, &keep)?;
    match pod.fs_group {
        Some(gid) => set_volume_ownership(&root, gid, true),
        None => Ok(()),
    }
}

fn remove_unlisted(dir: &Path, keep: &std::collections::BTreeSet<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir)
        .map_err(Error::io("list volume", dir))?
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            remove_unlisted(&path, keep)?;
        } else if !keep.contains(&path) {
            fs::remove_file(&path).map_err(Error::io("remove volume file", &path))?;
        }
    }
    Ok(())
}

/// Kubelet's hostPath type check (`pkg/volume/hostpath`), before the pod's containers start:
/// `DirectoryOrCreate` and `FileOrCreate` create what is missing (0755 directories, an empty
/// 0644 file whose directory must exist); the other types check what is there. The error is
/// kubelet's message (`hostPath type check failed: /x is not a directory`). An unset type
/// checks nothing and creates a missing path as a directory, as containerd does with a bind
/// mount's missing source.
pub fn check_host_path(path: &Path, kind: HostPathType) -> std::result::Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let shown = path.display();
    let failed = |what: &str| format!("hostPath type check failed: {shown} is not {what}");
    let meta = fs::metadata(path);
    match kind {
        HostPathType::Unset => {
            if meta.is_err() {
                fs::create_dir_all(path).map_err(|e| format!("create {shown}: {e}"))?;
            }
            Ok(())
        }
        HostPathType::DirectoryOrCreate => match meta {
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => Err(failed("a directory")),
            Err(_) => {
                fs::create_dir_all(path).map_err(|e| format!("create {shown}: {e}"))?;
                fs::set_permissions(path, fs::Permissions::from_mode(0o755))
                    .map_err(|e| format!("set the mode of {shown}: {e}"))
            }
        },
        HostPathType::FileOrCreate => match meta {
            Ok(m) if m.is_file() => Ok(()),
            Ok(_) => Err(failed("a file")),
            Err(_) => {
                fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)
                    .map_err(|e| format!("create {shown}: {e}"))?;
                fs::set_permissions(path, fs::Permissions::from_mode(0o644))
                    .map_err(|e| format!("set the mode of {shown}: {e}"))
            }
        },
        HostPathType::Directory => match meta {
            Ok(m) if m.is_dir() => Ok(()),
            _ => Err(failed("a directory")),
        },
        HostPathType::File => match meta {
            Ok(m) if m.is_file() => Ok(()),
            _ => Err(failed("a file")),
        },
        HostPathType::Socket => match meta {
            Ok(m) if m.file_type().is_socket() => Ok(()),
            _ => Err(failed("a socket file")),
        },
        HostPathType::CharDevice => match meta {
            Ok(m) if m.file_type().is_char_device() => Ok(()),
            _ => Err(failed("a character device")),
        },
        HostPathType::BlockDevice => match meta {
            Ok(m) if m.file_type().is_block_device() => Ok(()),
            _ => Err(failed("a block device")),
        },
    }
}

/// The kubelet-managed /etc/hosts of a pod.
pub fn hosts_file(pod: &PodSpec, pod_ip: Ipv4Addr) -> String {
    let mut text = String::from(
        "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    );
    match &pod.subdomain {
        Some(subdomain) => text.push_str(&format!(
            "{pod_ip}\t{h}.{subdomain}.{ns}.svc.{CLUSTER_DOMAIN}\t{h}\n",
            h = pod.hostname,
            ns = pod.namespace
        )),
        None => text.push_str(&format!("{pod_ip}\t{}\n", pod.hostname)),
    }
    text
}

/// The /etc/resolv.conf of a pod in `namespace` (ClusterFirst).
pub fn resolv_conf(namespace: &str, dns_ip: Ipv4Addr) -> String {
    format!(
        "search {namespace}.svc.{CLUSTER_DOMAIN} svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}\nnameserver {dns_ip}\noptions ndots:5\n"
    )
}

/// The bind mounts of one container: its private dirs, hosts, resolv.conf, then its volume
/// mounts (parents before children).
pub fn container_mounts(
    state_dir: &Path,
    pod: &PodSpec,
    container: &ContainerSpec,
    private_dirs: &[PathBuf],
) -> Result<Vec<BindMount>> {
    let dir = pod_dir(state_dir, pod);
    let mut mounts = Vec::new();
    for (i, private) in private_dirs.iter().enumerate() {
        let source = dir
            .join("containers")
            .join(sanitize(&container.name))
            .join(format!("private-{i}"));
        fs::create_dir_all(&source).map_err(Error::io("create private dir", &source))?;
        let _ = fs::set_permissions(&source, fs::Permissions::from_mode(0o1777));
        mounts.push(BindMount {
            source,
            target: private.clone(),
            read_only: false,
        });
    }
    mounts.push(BindMount {
        source: dir.join("etc/hosts"),
        target: "/etc/hosts".into(),
        read_only: false,
    });
    mounts.push(BindMount {
        source: dir.join("etc/resolv.conf"),
        target: "/etc/resolv.conf".into(),
        read_only: false,
    });
    let mut volume_mounts = container.volume_mounts.clone();
    volume_mounts.sort_by_key(|m| Path::new(&m.mount_path).components().count());
    for mount in &volume_mounts {
        let volume = pod
            .volumes
            .iter()
            .find(|v| v.name == mount.name)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "volumeMount {} of container {}: no volume with that name",
                    mount.name, container.name
                ))
            })?;
        let root = match &volume.source {
            VolumeSource::EmptyDir | VolumeSource::Files(_) => {
                dir.join("volumes").join(sanitize(&volume.name))
            }
            VolumeSource::PersistentVolumeClaim {
                claim_name,
                claim_uid,
            } => pvc_dir(state_dir, &pod.namespace, claim_name, claim_uid),
            VolumeSource::HostPath { path, .. } => path.clone(),
        };
        let source = match &mount.sub_path {
            Some(sub) if !sub.is_empty() => {
                let path = root.join(sub);
                if !path.exists() {
                    fs::create_dir_all(&path).map_err(Error::io("create subPath", &path))?;
                }
                path
            }
            _ => root,
        };
        if !Path::new(&mount.mount_path).is_absolute() {
            return Err(Error::Invalid(format!(
                "mountPath {:?}: it must be absolute",
                mount.mount_path
            )));
        }
        mounts.push(BindMount {
            source,
            target: PathBuf::from(&mount.mount_path),
            read_only: mount.read_only,
        });
    }
    Ok(mounts)
}

/// Expands `$(VAR)` references as Kubernetes does: defined variables are replaced,
/// undefined references are kept as written, `$$` is an escaped `$`.
pub fn expand(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(value.len());
    let bytes = value.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' && i + 1 < bytes.len() {
            if bytes[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if bytes[i + 1] == b'(' {
                if let Some(end) = value[i + 2..].find(')') {
                    let name = &value[i + 2..i + 2 + end];
                    match lookup(name) {
                        Some(v) => out.push_str(&v),
                        None => out.push_str(&value[i..i + 3 + end]),
                    }
                    i += 3 + end;
                    continue;
                }
            }
        }
        let ch = value[i..].chars().next().unwrap_or('$');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // docs/design/requirements.md R004.11: "$(POD_IP):7878" expands an earlier env entry, as
    // Kubernetes does.
    #[test]
    fn expand_follows_kubernetes_rules() {
        let lookup = |name: &str| (name == "POD_IP").then(|| "10.244.0.2".to_string());
        assert_eq!(expand("$(POD_IP):7878", &lookup), "10.244.0.2:7878");
        assert_eq!(expand("$(MISSING)-x", &lookup), "$(MISSING)-x");
        assert_eq!(expand("$$(POD_IP)", &lookup), "$(POD_IP)");
        assert_eq!(expand("a$b(c", &lookup), "a$b(c");
    }

    // docs/design/localkube.md "What the in-cluster fault agent needs": hostPath types are
    // checked (or created) before the containers start, with kubelet's messages.
    #[test]
    fn host_path_types_are_checked_or_created_as_kubelet_does() {
        let dir = std::env::temp_dir().join(format!("lk-hostpath-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        fs::write(&file, "x").unwrap();
        let missing = dir.join("missing");
        assert_eq!(check_host_path(&dir, HostPathType::Directory), Ok(()));
        assert_eq!(check_host_path(&file, HostPathType::File), Ok(()));
        assert_eq!(
            check_host_path(&missing, HostPathType::Directory),
            Err(format!(
                "hostPath type check failed: {} is not a directory",
                missing.display()
            ))
        );
        assert_eq!(
            check_host_path(&dir, HostPathType::File),
            Err(format!(
                "hostPath type check failed: {} is not a file",
                dir.display()
            ))
        );
        assert_eq!(
            check_host_path(&file, HostPathType::Socket),
            Err(format!(
                "hostPath type check failed: {} is not a socket file",
                file.display()
            ))
        );
        assert!(check_host_path(&file, HostPathType::DirectoryOrCreate).is_err());
        let made = dir.join("a/b");
        assert_eq!(
            check_host_path(&made, HostPathType::DirectoryOrCreate),
            Ok(())
        );
        assert!(made.is_dir());
        let new_file = dir.join("new");
        assert_eq!(
            check_host_path(&new_file, HostPathType::FileOrCreate),
            Ok(())
        );
        assert!(new_file.is_file());
        assert!(check_host_path(&dir.join("x/y"), HostPathType::FileOrCreate).is_err());
        assert_eq!(check_host_path(&missing, HostPathType::Unset), Ok(()));
        assert!(
            missing.is_dir(),
            "an unset type creates a missing path, as containerd"
        );
        let socket = dir.join("s");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        assert_eq!(check_host_path(&socket, HostPathType::Socket), Ok(()));
        assert_eq!(HostPathType::parse("Bogus"), None);
        assert_eq!(HostPathType::parse(""), Some(HostPathType::Unset));
        fs::remove_dir_all(&dir).unwrap();
    }

    use std::os::unix::fs::MetadataExt;

    fn pod_with(volumes: Vec<super::super::spec::VolumeSpec>, fs_group: Option<u32>) -> PodSpec {
        PodSpec {
            namespace: "db".into(),
            name: "p".into(),
            uid: "uid-fs-group".into(),
            node_name: "iad".into(),
            hostname: "p".into(),
            subdomain: None,
            restart_policy: super::super::spec::RestartPolicy::Always,
            termination_grace_period: std::time::Duration::from_secs(1),
            init_containers: Vec::new(),
            containers: Vec::new(),
            volumes,
            host_network: false,
            fs_group,
        }
    }

    fn owner_and_mode(path: &Path) -> (u32, u32) {
        let meta = fs::symlink_metadata(path).expect("stat");
        (meta.gid(), meta.mode() & 0o7777)
    }

    // Kubelet volume ownership (docs/design/history.md#issue-12-part-2: the sidecar, a non-root
    // user in mysqld's group, writes its backups on a PVC): with fsGroup every volume the node
    // prepares is group-owned by it, writable volumes group-rw with setgid directories,
    // rendered files group-readable; without fsGroup nothing changes.
    #[test]
    fn fs_group_owns_the_volumes_the_node_prepares() {
        use super::super::spec::{VolumeFile, VolumeSpec};
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        const GID: u32 = 4242;
        const CLAIM_UID: &str = "6b1c0e1e-claim";
        let state = std::env::temp_dir().join(format!("lk-fsgroup-{}", std::process::id()));
        let _ = fs::remove_dir_all(&state);
        let volumes = vec![
            VolumeSpec {
                name: "scratch".into(),
                source: VolumeSource::EmptyDir,
            },
            VolumeSpec {
                name: "backups".into(),
                source: VolumeSource::PersistentVolumeClaim {
                    claim_name: "backups-p-0".into(),
                    claim_uid: CLAIM_UID.into(),
                },
            },
            VolumeSpec {
                name: "keys".into(),
                source: VolumeSource::Files(vec![VolumeFile {
                    path: "peer-key".into(),
                    contents: b"00".to_vec(),
                    mode: 0o400,
                }]),
            },
        ];
        // A claim that already holds data from an earlier pod (root's, 0644 / 0755).
        let claim = pvc_dir(&state, "db", "backups-p-0", CLAIM_UID);
        fs::create_dir_all(claim.join("old")).expect("claim");
        fs::write(claim.join("old/dump.sql"), b"--").expect("old file");
        fs::set_permissions(
            claim.join("old/dump.sql"),
            fs::Permissions::from_mode(0o644),
        )
        .expect("mode");
        fs::set_permissions(claim.join("old"), fs::Permissions::from_mode(0o755)).expect("mode");

        let plain = pod_with(volumes.clone(), None);
        materialize(&state, &plain, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST).expect("plain");
        assert_eq!(owner_and_mode(&claim.join("old/dump.sql")), (0, 0o644));
        assert_eq!(owner_and_mode(&claim.join("old")), (0, 0o755));

        let pod = pod_with(volumes, Some(GID));
        materialize(&state, &pod, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST).expect("fsGroup");
        let volume = |name: &str| pod_dir(&state, &pod).join("volumes").join(name);
        assert_eq!(owner_and_mode(&volume("scratch")), (GID, 0o2777));
        assert_eq!(owner_and_mode(&claim).0, GID);
        assert_eq!(
            owner_and_mode(&claim).1 & 0o2070,
            0o2070,
            "setgid, group rwx"
        );
        assert_eq!(owner_and_mode(&claim.join("old")), (GID, 0o2775));
        assert_eq!(owner_and_mode(&claim.join("old/dump.sql")), (GID, 0o664));
        assert_eq!(
            owner_and_mode(&volume("keys").join("peer-key")),
            (GID, 0o440)
        );
        // A file made later in a setgid directory takes its group (the kernel's rule).
        fs::write(claim.join("new"), b"x").expect("new file");
        assert_eq!(owner_and_mode(&claim.join("new")).0, GID);
        // Rotated files of a rendered volume keep the group.
        update_files(
            &state,
            &pod,
            "keys",
            &[VolumeFile {
                path: "peer-key".into(),
                contents: b"11".to_vec(),
                mode: 0o400,
            }],
        )
        .expect("update");
        assert_eq!(
            owner_and_mode(&volume("keys").join("peer-key")),
            (GID, 0o440)
        );
        let _ = fs::remove_dir_all(&state);
    }

    #[test]
    fn resolv_conf_points_at_cluster_dns() {
        let text = resolv_conf("db", Ipv4Addr::new(10, 96, 0, 10));
        assert!(text.contains("nameserver 10.96.0.10\n"));
        assert!(text.starts_with("search db.svc.cluster.local svc.cluster.local cluster.local\n"));
        assert!(text.contains("ndots:5"));
    }
}
